"""Built programs, cached per (context, source, kernel name), least recently used first out.

The rendered source is the exact key: two conversions share a program iff
their kernels are the same text, and a program belongs to one context. With
generic kernels (runtime.opencl.plan) a text stands for a whole conversion
family, so a model's hundred weights need a handful of programs. The cache
holds at most ``CLAYOUT_PROGRAM_CACHE`` programs (default 256; set
``PROGRAMS.size`` to change it at run time: runtime/cache.py); ``clear_cache()``
empties it and the plan cache. PoCL also caches binaries on disk (``POCL_CACHE_DIR``), so a
cold build of a known source in a new process is cheap too.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import warnings

import numpy as np
import pyopencl as cl

from ..cache import LRU
from . import plan
from .render import KERNEL_NAME

PROGRAMS = LRU("OpenCL programs", "CLAYOUT_PROGRAM_CACHE", 256)
# programs built (by the calling threads, by the bake worker: runtime/opencl/baking.py),
# cache hits, build time
STATS = {"builds": 0, "builds_in_background": 0, "hits": 0, "seconds": 0.0}
_STATS_LOCK = threading.Lock()


def _build(context: cl.Context, source: str, name: str):
    start = time.perf_counter()
    program = build(context, source)
    with _STATS_LOCK:
        STATS["builds"] += 1
        STATS["seconds"] += time.perf_counter() - start
        if threading.current_thread().name.startswith("clayout-bake"):
            STATS["builds_in_background"] += 1
    # keep the context alive with its kernel: int_ptr must not be reused
    return context, getattr(program, name)


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


def kernel(context: cl.Context, source: str, name: str = KERNEL_NAME) -> cl.Kernel:
    """The kernel ``name`` (default: the conversion kernel) of ``source``
    built for ``context`` (cached)."""
    key = (context.int_ptr, source, name)
    hit = PROGRAMS.peek(key)
    if hit is not None:
        with _STATS_LOCK:
            STATS["hits"] += 1
        return hit[1]
    return PROGRAMS.get(key, lambda: _build(context, source, name))[1]


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
