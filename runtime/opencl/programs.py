"""Built programs, cached per (context, source).

The rendered source is the exact key: two conversions share a program iff
their kernels are the same text, and a program belongs to one context.
PoCL also caches binaries on disk (``POCL_CACHE_DIR``), so a cold build of a
known source in a new process is cheap too.
"""
from __future__ import annotations

import threading

import pyopencl as cl

from .kernels import KERNEL_NAME

_BUILT: dict = {}
_LOCK = threading.Lock()
STATS = {"builds": 0, "hits": 0}


def kernel(context: cl.Context, source: str) -> cl.Kernel:
    """The conversion kernel of ``source`` built for ``context`` (cached)."""
    key = (context.int_ptr, source)
    with _LOCK:
        entry = _BUILT.get(key)
        if entry is not None:
            STATS["hits"] += 1
            return entry[1]
    program = cl.Program(context, source).build()
    built = getattr(program, KERNEL_NAME)
    with _LOCK:
        STATS["builds"] += 1
        # keep the context alive with its kernel: int_ptr must not be reused
        _BUILT[key] = (context, built)
    return built


def cached_count() -> int:
    return len(_BUILT)


def clear_cache() -> None:
    """Forget every built program (and the planned kernels that feed them)."""
    from . import kernels
    with _LOCK:
        _BUILT.clear()
    kernels.clear_cache()
