"""The order of clayout's commands on a device, by events: every command
the OpenCL engine enqueues names the memory objects it reads and writes,
waits for the commands it must follow, and is recorded on those objects.

* a command that **reads** an object waits for the last command that wrote it;
* a command that **writes** one waits for that write and for every read since.

The record lives on the memory object itself (a ``cl.Buffer`` or
``cl.Image``), so whatever reaches the object sees it: two Memory objects
over one buffer, two engines (two queues) on one context, and the next
lease of a pooled buffer, whose commands wait for the last lease's without
any host wait. On an in-order queue the waits change nothing; on an
out-of-order queue they are the only order there is, and independent
conversions still run in any order. The caller's own commands are ordered
by the ``wait_for=`` a door takes and the event it gives back
(``Memory.event``, ``Pending.event``): clayout cannot see them.

>>> after(reads=(), writes=(buf,))          # doctest: +SKIP
[]
"""
from __future__ import annotations

import threading

import pyopencl as cl

ATTR = "_clayout_access"
_LOCK = threading.Lock()
COMPLETE = cl.command_execution_status.COMPLETE
PRUNE_AT = 8   # reads kept on an object before the finished ones are dropped


class Access:
    """What is pending on one memory object: its last write, the reads since."""
    __slots__ = ("write", "reads")

    def __init__(self):
        self.write: cl.Event | None = None
        self.reads: list[cl.Event] = []


HOLDER = cl.MemoryObjectHolder


def after(reads=(), writes=(), wait_for=None) -> list:
    """The events a command reading ``reads`` and writing ``writes`` (memory
    objects; anything else, a host array, is skipped) waits for, with the
    caller's ``wait_for``."""
    wait = [e for e in wait_for if e is not None] if wait_for else []
    with _LOCK:
        for obj in reads:
            a = getattr(obj, ATTR, None) if isinstance(obj, HOLDER) else None
            if a is not None and a.write is not None:
                wait.append(a.write)
        for obj in writes:
            a = getattr(obj, ATTR, None) if isinstance(obj, HOLDER) else None
            if a is not None:
                if a.write is not None:
                    wait.append(a.write)
                wait.extend(a.reads)
    return wait


def done(event, reads=(), writes=()):
    """Record ``event`` (a command's, or None for no command) as the last
    write of ``writes`` and a read of ``reads``; returns ``event``. What is
    recorded is a plain handle: a NannyEvent (a copy from a host array)
    holds the array alive until waited for, and a record kept on a pooled
    buffer must not hold a caller's array (a pinned one would never be
    freed); the array outlives the copy by the call's own wait."""
    if event is None:
        return None
    recorded = cl.Event.from_int_ptr(event.int_ptr) if isinstance(event, cl.NannyEvent) \
        else event
    with _LOCK:
        for obj in writes:
            if isinstance(obj, HOLDER):
                a = _access(obj)
                a.write, a.reads = recorded, []
        for obj in reads:
            if isinstance(obj, HOLDER):
                a = _access(obj)
                if len(a.reads) >= PRUNE_AT:   # finished reads order nothing any more
                    a.reads = [e for e in a.reads if e.command_execution_status != COMPLETE]
                a.reads.append(recorded)
    return event


def _access(obj) -> Access:
    """The record kept on the memory object ``obj`` (made at its first command)."""
    a = getattr(obj, ATTR, None)
    if a is None:
        a = Access()
        setattr(obj, ATTR, a)
    return a


def last_write(obj):
    """The event of the last command clayout enqueued that writes ``obj``
    (None: none, or not a memory object)."""
    a = getattr(obj, ATTR, None) if isinstance(obj, HOLDER) else None
    return None if a is None else a.write


def complete(event) -> bool:
    """Whether the command of ``event`` has finished (None: no command)."""
    return event is None or event.command_execution_status == COMPLETE


def pending(obj) -> list:
    """Every recorded command on ``obj`` (its last write and the reads since)."""
    return after(writes=(obj,))
