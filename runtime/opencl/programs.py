"""Built programs, cached per (context, source, kernel name), bounded in bytes.

The rendered source is the exact key: two conversions share a program iff
their kernels are the same text, and a program belongs to one context. With
generic kernels (runtime.opencl.plan) a text stands for a whole conversion
family, so a model's hundred weights need a handful of programs.

A built program holds megabytes of the driver's memory (measured: 4.3 MiB
each on PoCL 3.1, 3.2 MiB on Intel's CPU runtime, once launched), so the
cache is bounded in bytes: each program weighs ``PROGRAM_BYTES`` plus its
source and binary, ``CLAYOUT_PROGRAM_CACHE_BYTES`` of them together (512 MiB
by default: about 120 programs, twice what four threads of mixed calls on
random shapes use: tools/soak.py held 105), and at most
``CLAYOUT_PROGRAM_CACHE`` (256) of them. Eviction is for a process whose
families keep changing: on PoCL a program given up does not give its
memory back (a soak whose cache held half its working set rebuilt ten
programs a second and grew to 581 MiB, against 447 MiB with room for all). When it is full, what goes first is what is cheapest to build
again on a calling thread (runtime/cache.py): a baked program, built in the
background (runtime/opencl/baking.py) and replaced meanwhile by its
generic one, costs a calling thread nothing (it counts a quarter of its
build time: the build still takes a core); a generic one costs its build
time. ``clear_cache()`` empties it and the plan cache. PoCL also caches
binaries on disk (``POCL_CACHE_DIR``), so a cold build of a known source in
a new process is cheap too.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from ..cache import LRU
from . import plan
from .render import KERNEL_NAME

# what one built program holds beyond its source and binary: the driver's compiled
# kernels (measured once launched: 4.3 MiB a program on PoCL 3.1, 3.2 on Intel's CPU runtime)
PROGRAM_BYTES = 4 << 20
PROGRAM_BUDGET = 512 << 20
# what rebuilding a program costs, in the cache's units: 1 + its build seconds on a calling
# thread (a build the loop waits for; its length breaks ties), a quarter of that off it: a
# baked program, whose generic one serves meanwhile (it still takes a core; not zero, or a
# new baked program would be the first to go from a full cache)
OFF_THREAD = 0.25


@dataclass(frozen=True)
class Built:
    """One cached program's kernel, with what its entry weighs and costs."""
    context: cl.Context     # kept alive with its kernel: int_ptr must not be reused
    kernel: cl.Kernel
    nbytes: int             # what it holds, as weighed
    cost: float             # what building it again costs (1 + seconds; OFF_THREAD of it off
    #                         the calling thread)


PROGRAMS = LRU("OpenCL programs", "CLAYOUT_PROGRAM_CACHE", 256,
               weigh=lambda b: b.nbytes, budget=PROGRAM_BUDGET, cost=lambda b: b.cost)
# programs built (by the calling threads, by the bake worker: runtime/opencl/baking.py),
# cache hits, build time
STATS = {"builds": 0, "builds_in_background": 0, "hits": 0, "seconds": 0.0}
_STATS_LOCK = threading.Lock()


def _build(context: cl.Context, source: str, name: str, background: bool) -> Built:
    start = time.perf_counter()
    program = build(context, source)
    seconds = time.perf_counter() - start
    in_background = threading.current_thread().name.startswith("clayout-bake")
    with _STATS_LOCK:
        STATS["builds"] += 1
        STATS["seconds"] += seconds
        if in_background:
            STATS["builds_in_background"] += 1
    try:
        binary = sum(program.get_info(cl.program_info.BINARY_SIZES))
    except cl.Error:
        binary = 0
    return Built(context, getattr(program, name), PROGRAM_BYTES + len(source) + binary,
                 (1.0 + seconds) * (OFF_THREAD if background or in_background else 1.0))


# warnings.catch_warnings swaps the process's filters: two threads building at once would
# restore each other's, and a build log would escape as a CompilerWarning; one at a time
_QUIET = threading.Lock()


def build(context: cl.Context, source: str, options=()) -> cl.Program:
    """``source`` built for ``context``, quietly: a driver's build log on a
    successful build (Intel's CPU runtime reports each kernel's vectorization;
    pyopencl turns a non-empty log into a CompilerWarning) is shown only with
    CLAYOUT_DEBUG=1 (on stderr); a failed build raises as always. Builds run
    one at a time (each program is built once; the cache serves the rest)."""
    with _QUIET, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", cl.CompilerWarning)
        program = cl.Program(context, source).build(options=list(options))
    if os.environ.get("CLAYOUT_DEBUG"):
        for w in said:
            print(f"clayout: OpenCL build log: {w.message}", file=sys.stderr)
    for w in said:   # anything else is the caller's to see
        if not issubclass(w.category, cl.CompilerWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return program


def kernel(context: cl.Context, source: str, name: str = KERNEL_NAME,
           background: bool = False) -> cl.Kernel:
    """The kernel ``name`` (default: the conversion kernel) of ``source``
    built for ``context`` (cached). ``background``: a program that is
    rebuilt off the calling thread when it is gone (a baked one), the first
    to go when the cache is full."""
    key = (context.int_ptr, source, name)
    hit = PROGRAMS.peek(key)
    if hit is not None:
        with _STATS_LOCK:
            STATS["hits"] += 1
        return hit.kernel
    return PROGRAMS.get(key, lambda: _build(context, source, name, background)).kernel


def cached(context: cl.Context, source: str, name: str = KERNEL_NAME) -> bool:
    """Whether the program of ``source`` is built for ``context`` and held."""
    return (context.int_ptr, source, name) in PROGRAMS


def baked_in_use(context: cl.Context, baked: str, generic: str, name: str = KERNEL_NAME) -> bool:
    """Whether the baked program of ``baked`` is still held; if so, the
    generic program of ``generic`` (its fallback) counts as used too, so a
    full cache gives up baked programs before the generic ones they fall
    back to (a gone generic one is built again on a calling thread)."""
    if (context.int_ptr, baked, name) not in PROGRAMS:
        return False
    PROGRAMS.peek((context.int_ptr, generic, name))
    return True


def set_args(knl: cl.Kernel, args) -> None:
    """``knl.set_args(*args)``, its scalar types told to pyopencl on the first
    call (a kernel's text fixes them): pyopencl then packs each scalar at once,
    where an untyped numpy scalar costs ~16 us (a generic kernel's 28 sizes and
    magic numbers: 450 us a launch, 7 us typed). The caller holds the launch
    lock (the kernel object is shared)."""
    if not getattr(knl, "_clayout_typed", False):
        knl.set_scalar_arg_dtypes([a.dtype if isinstance(a, np.generic) else None for a in args])
        knl._clayout_typed = True
    knl.set_args(*args)


def cached_count() -> int:
    return len(PROGRAMS)


def clear_cache() -> None:
    """Forget every built program (and the planned kernels that feed them)."""
    PROGRAMS.clear()
    plan.clear_cache()
