"""One engine per caller's context (``engine_of``): every Memory made on
the caller's device objects gets the one engine of their context, or of
(context, queue) when the caller gives a queue, so that their conversions,
reads and writes go through one queue in order and a warning said once per
engine (``Memory.from_buffer``'s copy) is said once. The process-wide
engine is ``register``-ed as the engine of its context and queue; an
engine the caller constructs is never registered and stays the caller's.
"""
from __future__ import annotations

import atexit
import threading
import weakref

from ..cache import LRU

# key (context.int_ptr, queue.int_ptr or None for the engine's own queue) -> engine. Weak: an
# engine lives while a Memory (or RECENT, or the caller) holds it, and it holds its context and
# queue, so no key's address is reused while its entry lives. RECENT keeps the last few after
# their last Memory is gone: a Memory made per frame finds the same engine (and queue).
_ENGINES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_ENGINES_LOCK = threading.Lock()
RECENT = LRU("OpenCL engines", "CLAYOUT_ENGINE_CACHE", 16)


def _key(context, queue) -> tuple:
    return context.int_ptr, None if queue is None else queue.int_ptr


def register(engine):
    """``engine`` becomes the engine of its context and of its queue (the
    process-wide engine); returned."""
    with _ENGINES_LOCK:
        _ENGINES[_key(engine.context, None)] = _ENGINES[_key(engine.context, engine.queue)] = \
            engine
    return engine


def engine_of(context, queue, make):
    """The one engine of ``context`` (with a queue of its own; ``queue``
    None) or of (context, queue): the registered one, else ``make(context=,
    queue=)``, registered. Thread-safe: two threads asking at once get one."""
    key = _key(context, queue)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = make(context=context, queue=queue)
    RECENT.get(key, lambda: engine)
    return engine


# every engine made, to wait for at exit: PoCL 3.1 crashes (a segfault, or an LLVM
# error) when the interpreter exits while a kernel it just built still runs, as a
# Memory conversion enqueued without waiting can leave it (4 exits in 6 measured)
_ALL: weakref.WeakSet = weakref.WeakSet()
_ALL_LOCK = threading.Lock()   # not _ENGINES_LOCK: engine_of makes engines while holding that


def track(engine):
    """``engine`` is waited for at exit (``finish_all``); returned."""
    with _ALL_LOCK:
        _ALL.add(engine)
    return engine


@atexit.register
def finish_all() -> None:
    """Wait for every live engine's queue (at exit: nothing is left running)."""
    with _ALL_LOCK:
        engines = list(_ALL)
    for engine in engines:
        try:
            engine.queue.finish()
        except Exception:   # noqa: BLE001 - at exit a dead queue is no reason to fail
            pass


def live() -> list:
    """Every engine of this process still alive (made by clayout or the caller)."""
    with _ALL_LOCK:
        return list(_ALL)

