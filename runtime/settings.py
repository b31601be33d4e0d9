"""Settings read from the environment (cache sizes, byte limits, the
specialization thresholds, the OpenCL engine's options): one reader per
kind of value, one message for a value that is not allowed. An engine reads
its settings once, when it is made (runtime.opencl.device.EngineOptions); what a
call needs (the default engine, the host memory limit) is read once per
process through ``setting`` and kept until ``refresh()`` (the command line
refreshes at each command; a test that changes the environment, through
the suite's monkeypatch). No call reads the environment.

>>> env_int("CLAYOUT_UNSET_FOR_THIS_EXAMPLE", 7, "a count")
7
"""
from __future__ import annotations

import os
import threading

from .errors import ClayoutError

_READ: dict = {}
_ON_REFRESH: list = []
_LOCK = threading.Lock()


def setting(name: str):
    """Environment variable ``name`` as it was when first asked for (None
    where unset), kept until ``refresh()``."""
    try:
        return _READ[name]
    except KeyError:
        value = os.environ.get(name)
        with _LOCK:
            _READ[name] = value
        return value


def on_refresh(forget) -> None:
    """Call ``forget()`` at every ``refresh()`` (a value derived from settings)."""
    _ON_REFRESH.append(forget)


def refresh() -> None:
    """Read the settings again at their next use (and forget what was
    derived from them: the host memory limit, the doors' prepared calls)."""
    with _LOCK:
        _READ.clear()
    for forget in _ON_REFRESH:
        forget()


def env_int(name: str, default, what: str, minimum: int | None = None):
    """The integer in environment variable ``name``, else ``default``. A value
    that is not an integer (or is below ``minimum``) is a ClayoutError:
    ``NAME='value' is not WHAT``."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or (minimum is not None and number < minimum):
        raise ClayoutError(f"{name}={value!r} is not {what}") from None
    return number


def env_choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    """The value of environment variable ``name`` (lower case, spaces
    stripped), one of ``allowed``, else ``default``; anything else is a
    ClayoutError naming what is allowed."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    found = value.strip().lower()
    if found not in allowed:
        raise ClayoutError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return found
