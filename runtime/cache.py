"""Bounded caches: every cache clayout keeps is an ``LRU`` registered here.

Each holds at most ``size`` entries, keyed by exactly what changes its
value, and is safe to use from many threads; a cache whose entries hold
much (a built program: megabytes of the driver's memory) is also bounded in
bytes (``budget``, each entry weighed by ``weigh``). What goes first is the
least recently used entry, or, in a cache given a ``cost`` (the seconds a
calling thread would wait to make an entry again), the one that is
cheapest to make again, recency breaking ties and ageing the rest
(GreedyDual: an entry's credit is the cache's floor when it was last used
plus its cost; the least credit goes, and the floor rises to it), so a full
program cache gives up baked programs (rebuilt off the calling thread)
before generic ones (rebuilt on it). Sizes come from environment variables
when set, and can be changed at run time (``cache.size = n``,
``cache.budget = bytes``); ``clear_all()`` empties every one. The caches and
their bounds are listed in docs/engines.md ("Caches").

>>> plans = LRU("example", "CLAYOUT_EXAMPLE_CACHE", 2)
>>> [plans.get(k, lambda: k * 10) for k in (1, 2, 1, 3)]
[10, 20, 10, 30]
>>> sorted(plans.keys()), len(plans)           # 2 was the least recently used
([1, 3], 2)
>>> del REGISTRY["example"]
>>> texts = LRU("example texts", "CLAYOUT_EXAMPLE_CACHE", 10, weigh=len, budget=8)
>>> [texts.get(k, lambda: k) for k in ("abcd", "efgh", "ij")][-1], texts.keys(), texts.bytes
('ij', ['efgh', 'ij'], 6)
>>> del REGISTRY["example texts"]
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict

from .settings import env_int

REGISTRY: dict[str, "LRU"] = {}


def cache_size(env: str, default: int) -> int:
    """``default``, or the count in the environment variable ``env``."""
    return env_int(env, default, "a count of cache entries (0 or more)", minimum=0)


class LRU:
    """A bounded, thread-safe cache: least recently used entries go first.
    ``name`` is what it holds (for messages and docs), ``env`` the variable
    that sets its size, ``default`` the size without it. ``weigh(value)``:
    the bytes an entry holds, bounded together by ``budget`` (the variable
    ``env`` + ``_BYTES`` sets it); ``cost(value)``: what making the entry
    again costs (module docstring), None: plain recency."""

    def __init__(self, name: str, env: str, default: int, weigh=None, budget: int | None = None,
                 cost=None):
        self.name, self.env, self.default = name, env, default
        self._size = cache_size(env, default)
        self._weigh, self._cost = weigh, cost
        self._budget = None if weigh is None else env_int(
            env + "_BYTES", budget, "a byte count (0 or more)", minimum=0)
        self._data: OrderedDict = OrderedDict()
        self._weights: dict = {}
        self._credit: dict = {}
        self._floor = 0.0
        self._bytes = 0
        self._lock = threading.Lock()
        REGISTRY[name] = self

    @property
    def size(self) -> int:
        return self._size

    @size.setter
    def size(self, value: int) -> None:
        with self._lock:
            self._size = max(0, int(value))
            self._trim()

    @property
    def budget(self) -> int | None:
        """The most bytes its entries hold together (None: bounded in entries only)."""
        return self._budget

    @budget.setter
    def budget(self, value: int) -> None:
        with self._lock:
            self._budget = max(0, int(value))
            self._trim()

    @property
    def bytes(self) -> int:
        """The bytes its entries hold, as weighed (0 when not weighed)."""
        return self._bytes

    def _over(self) -> bool:
        return len(self._data) > self._size or (
            self._budget is not None and self._bytes > self._budget and bool(self._data))

    def _trim(self) -> None:
        while self._over():
            if self._cost is None:
                key = next(iter(self._data))
            else:   # the least credit; among equals the least recently used (the first)
                key = min(self._data, key=self._credit.__getitem__)
                self._floor = max(self._floor, self._credit[key])
            self._drop(key)

    def _drop(self, key) -> None:
        del self._data[key]
        self._bytes -= self._weights.pop(key, 0)
        self._credit.pop(key, None)

    def _used(self, key, value) -> None:
        self._data.move_to_end(key)
        if self._cost is not None:
            self._credit[key] = self._floor + float(self._cost(value))

    def peek(self, key):
        """The value of ``key`` (now most recently used), or None."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._used(key, value)
            return value

    def __contains__(self, key) -> bool:
        """Whether ``key`` is held (its recency unchanged)."""
        with self._lock:
            return key in self._data

    def get(self, key, make):
        """The value of ``key``, made by ``make()`` and kept when missing.
        ``make`` runs outside the lock: two threads missing the same key at
        once may both make it (the same value), one is kept."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._used(key, value)
                return value
        value = make()
        weight = int(self._weigh(value)) if self._weigh is not None else 0
        with self._lock:
            if key in self._data:
                self._drop(key)
            self._data[key] = value
            self._weights[key] = weight
            self._bytes += weight
            self._used(key, value)
            self._trim()
        return value

    def keys(self) -> list:
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._weights.clear()
            self._credit.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        held = f", {self._bytes} of {self._budget} bytes" if self._budget is not None else ""
        return f"<clayout cache {self.name!r}: {len(self)} of {self.size}{held} (${self.env})>"


def memoized(name: str, env: str, default: int):
    """A decorator: the function's results kept in a registered ``LRU`` named
    ``name`` (its size from ``env``, else ``default``), keyed by the
    arguments; the function gets the cache as ``.cache``. A call that raises
    keeps nothing.

    >>> @memoized("example squares", "CLAYOUT_EXAMPLE_CACHE", 4)
    ... def square(x):
    ...     return x * x
    >>> square(3), len(square.cache)
    (9, 1)
    >>> del REGISTRY["example squares"]
    """
    def wrap(fn):
        lru = LRU(name, env, default)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            key = args + tuple(sorted(kwargs.items())) if kwargs else args
            return lru.get(key, lambda: fn(*args, **kwargs))
        call.cache = lru
        return call
    return wrap


def clear_all() -> None:
    """Empty every cache (built OpenCL programs included)."""
    for lru in list(REGISTRY.values()):
        lru.clear()
