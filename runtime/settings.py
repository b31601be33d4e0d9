"""Settings read from the environment (cache sizes, byte limits, the
specialization thresholds, the OpenCL engine's options): one reader per
kind of value, one message for a value that is not allowed. An engine reads
its settings once, when it is made (runtime.opencl.device.Options).

>>> env_int("CLAYOUT_UNSET_FOR_THIS_EXAMPLE", 7, "a count")
7
"""
from __future__ import annotations

import os

from .errors import ClayoutError


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
