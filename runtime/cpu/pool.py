"""The cpu engine's one worker pool: its threads run the parallel parts of
both paths, numpy's tiles and blocks and the compiled library's parts (a
move's parts, a frame's bands, read_output's rows).

A numpy job is a list of Python calls (``run_all``). The caller takes calls
itself and returns when every call has returned; up to THREADS - 1 pool
threads take the others, each call claimed once (a counter), so a caller
that finds the threads busy, or slow to wake, runs its calls alone and
never waits for a thread that has not begun. numpy releases the GIL while
it copies, so the calls run in parallel.

A compiled job runs in the library (templates/cpu_common.c:
``clayout_parallel``): its parts are claimed there by the caller and by the
pool threads that serve the library (``clayout_serve``), all in C with the
GIL released, so that no thread needs the GIL to start a part. ``serve``
sends pool threads to the library where fewer than THREADS - 1 serve it; a
thread that has served spins CLAYOUT_CPU_SPIN_US for the next job (a
sleeping thread took 50-90 us to wake on a 2-vCPU VM, a tenth of a
224x224x64 transpose), and comes back to Python at once when a numpy job
is posted. Any number of callers may run jobs at once; a forked child,
which has none of its parent's threads, starts a pool of its own.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from . import geometry as g

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()  # first calls from many threads share one pool; and _SENT
_SENT = [0]                    # serve calls sent to the pool that have not begun
_POSTED = ctypes.c_int64(0)    # the last numpy job's number: serving threads watch it
_POSTED_AT = ctypes.addressof(_POSTED)
_NUMBERS = itertools.count(1)  # each numpy job's own number (next() is atomic under the GIL)


def _forget_after_fork() -> None:
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK, _SENT[0] = None, threading.Lock(), 0


os.register_at_fork(after_in_child=_forget_after_fork)


def pool() -> ThreadPoolExecutor:
    """The pool's threads: THREADS - 1 of them, the caller being the last."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(1, g.THREADS - 1), thread_name_prefix="clayout-cpu")
        return _POOL


def run_all(calls) -> list:
    """Run ``calls`` (functions of no arguments) on the caller's thread and the
    pool's; their results, in order."""
    n = len(calls)
    if g.THREADS == 1 or n <= 1:
        return [c() for c in calls]
    results, errors = [None] * n, []
    claim = itertools.count()

    def take():
        while (i := next(claim)) < n:
            try:
                results[i] = calls[i]()
            except BaseException as exc:   # raised again by the caller
                errors.append(exc)

    _POSTED.value = next(_NUMBERS)    # threads serving a library come back for it
    futures = [pool().submit(take) for _ in range(min(n, g.THREADS) - 1)]
    take()
    for f in futures:
        if not f.cancel():        # begun: wait for its calls; not begun: nothing left
            f.result()
    if errors:
        raise errors[0]
    return results


def split(work, items) -> None:
    """``work`` over ``items`` cut into THREADS consecutive parts, run on the pool."""
    per = -(-len(items) // g.THREADS)
    run_all([lambda part=items[i:i + per]: work(part) for i in range(0, len(items), per)])


def serve(lib) -> None:
    """Before a compiled job of ``lib`` (a loaded library): send pool threads
    to serve it where fewer than THREADS - 1 do or are on their way."""
    if g.THREADS == 1 or lib.serving.value + _SENT[0] >= g.THREADS - 1:
        return
    executor, serve_fn = pool(), lib.function("clayout_serve")

    def served():
        with _POOL_LOCK:
            _SENT[0] -= 1
        serve_fn(_POSTED_AT, g.SPIN_NS)

    with _POOL_LOCK:
        missing = g.THREADS - 1 - lib.serving.value - _SENT[0]
        _SENT[0] += max(0, missing)
    for _ in range(missing):
        executor.submit(served)
