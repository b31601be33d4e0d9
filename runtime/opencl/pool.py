"""Device memory kept for reuse: a conversion of host arrays leases the
buffers and images it needs and gives them back when it is done, so that
in the steady state a repeated conversion makes no OpenCL memory object.

Creating a device buffer per call costs more than the copy it serves on a
discrete GPU (four times the copy in vortex's measurements; clayout's own
64 MiB host round trip on an H100 spent 32 of its 46.7 ms there). A free
object waits under its key (a buffer: its size class and flags; an image:
its storage, format, extent and flags); the free objects together hold at
most ``bound`` bytes, the least recently returned released first. A lease
is exclusive: one call's object is never another's until it is given back.

>>> pool = Pool(1 << 20)
>>> with pool.lease(("buffer", 4096), 4096, lambda: bytearray(4096)) as a:
...     pass
>>> with pool.lease(("buffer", 4096), 4096, lambda: bytearray(4096)) as b:
...     b is a
True
>>> pool.stats()["made"], pool.stats()["reused"]
(1, 1)
"""
from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to its size class: four classes per power of
    two (at most 25% more), whole 4 KiB pages below 32 KiB, so that a sweep
    of sizes shares few objects."""
    nbytes = max(1, int(nbytes))
    if nbytes <= 32768:
        return -(-nbytes // 4096) * 4096
    step = 1 << (nbytes.bit_length() - 3)
    return -(-nbytes // step) * step


class Pool:
    """Free device memory objects by key, bounded in bytes; thread-safe."""

    def __init__(self, bound: int):
        self.bound = max(0, int(bound))
        self._free: OrderedDict = OrderedDict()   # (key, serial) -> (object, bytes)
        self._serial = 0
        self._lock = threading.Lock()
        self._counts = {"made": 0, "reused": 0, "released": 0}

    def take(self, key, nbytes: int, make):
        """A free object of ``key``, else ``make()`` (a new one of ``nbytes``)."""
        with self._lock:
            for slot in self._free:
                if slot[0] == key:
                    obj, _ = self._free.pop(slot)
                    self._counts["reused"] += 1
                    return obj
            self._counts["made"] += 1
        return make()

    def give(self, key, obj, nbytes: int) -> None:
        """``obj`` free again under ``key``; over the bound, the least
        recently returned objects are released (an object over the bound by
        itself is released at once)."""
        with self._lock:
            self._serial += 1
            self._free[(key, self._serial)] = (obj, int(nbytes))
            held = sum(b for _, b in self._free.values())
            while held > self.bound and self._free:
                _, (old, size) = self._free.popitem(last=False)
                held -= size
                self._counts["released"] += 1
                _release(old)

    @contextlib.contextmanager
    def lease(self, key, nbytes: int, make):
        """An object of ``key`` for the time of a ``with`` block, given back after."""
        obj = self.take(key, nbytes, make)
        try:
            yield obj
        finally:
            self.give(key, obj, nbytes)

    def clear(self) -> None:
        """Release every free object (the engine closing, or memory short)."""
        with self._lock:
            free, self._free = list(self._free.values()), OrderedDict()
            self._counts["released"] += len(free)
        for obj, _ in free:
            _release(obj)

    def stats(self) -> dict:
        """{"objects", "bytes" (free ones), "bound", "made", "reused", "released"}."""
        with self._lock:
            return {"objects": len(self._free),
                    "bytes": sum(b for _, b in self._free.values()), "bound": self.bound,
                    **self._counts}


def _release(obj) -> None:
    """Release an OpenCL memory object now rather than when it is collected."""
    release = getattr(obj, "release", None)
    if release is not None:
        try:
            release()
        except Exception:  # noqa: BLE001 - an object already released is no error here
            pass
