"""Baked programs built off the calling thread.

A conversion that turns hot (runtime/opencl/plan.py's rule: at least
``HOT_BYTES``, converted more than the engine's specialize count) gets a
program with its numbers baked in. Building it takes 30-250 ms, which on the
calling thread would land inside one frame of a steady loop; so the build is
handed to one worker thread, the move keeps running its generic program
(the same bits) until the baked one is built and cached, and the next call
after that runs it. Nothing waits for a bake but ``settle()`` (tests, and
a tool that wants the baked program now). Python's own exit waits for a
build in progress (concurrent.futures joins its workers), so no build is
cut off inside a driver.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clayout-bake")
_PENDING: set[Future] = set()
_LOCK = threading.Lock()
STATS = {"baked": 0, "failed": 0}


def later(make, build, swap) -> None:
    """On the worker thread: ``kernel = make()`` (render the baked kernel),
    ``build(kernel)`` (build and cache its program), then ``swap(kernel)``
    (the move runs it from then on). A failure leaves the move on its
    generic program (the same bits), counted in ``STATS``."""
    def job():
        try:
            kernel = make()
            build(kernel)
        except Exception:  # noqa: BLE001 - the generic program keeps serving the move
            with _LOCK:
                STATS["failed"] += 1
            return
        swap(kernel)
        with _LOCK:
            STATS["baked"] += 1
    future = _WORKER.submit(job)
    with _LOCK:
        _PENDING.add(future)
    future.add_done_callback(_forget)


def _forget(future: Future) -> None:
    with _LOCK:
        _PENDING.discard(future)


def settle() -> None:
    """Wait until every bake handed over so far has been built and swapped in."""
    with _LOCK:
        waiting = list(_PENDING)
    for future in waiting:
        future.result()


def in_progress() -> int:
    with _LOCK:
        return len(_PENDING)
