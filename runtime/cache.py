"""Bounded caches: every cache clayout keeps is an ``LRU`` registered here.

Each holds at most ``size`` entries (least recently used first out), keyed by
exactly what changes its value, and is safe to use from many threads. Its
size comes from an environment variable when set, and can be changed at run
time (``cache.size = n``); ``clear_all()`` empties every one. The caches and
their defaults are listed in docs/engines.md ("Caches").

>>> plans = LRU("example", "CLAYOUT_EXAMPLE_CACHE", 2)
>>> [plans.get(k, lambda: k * 10) for k in (1, 2, 1, 3)]
[10, 20, 10, 30]
>>> sorted(plans.keys()), len(plans)           # 2 was the least recently used
([1, 3], 2)
>>> del REGISTRY["example"]
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
    that sets its size, ``default`` the size without it."""

    def __init__(self, name: str, env: str, default: int):
        self.name, self.env, self.default = name, env, default
        self._size = cache_size(env, default)
        self._data: OrderedDict = OrderedDict()
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

    def _trim(self) -> None:
        while len(self._data) > self._size:
            self._data.popitem(last=False)

    def peek(self, key):
        """The value of ``key`` (now most recently used), or None."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def get(self, key, make):
        """The value of ``key``, made by ``make()`` and kept when missing.
        ``make`` runs outside the lock: two threads missing the same key at
        once may both make it (the same value), one is kept."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = make()
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            self._trim()
        return value

    def keys(self) -> list:
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<clayout cache {self.name!r}: {len(self)} of {self.size} (${self.env})>"


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
