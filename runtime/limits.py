"""How much host memory one result may take, checked before it is allocated.

A desc's numbers (strides, offset0, halo, dims) or a file's header can ask
for terabytes; numpy would answer with a MemoryError from deep inside (or,
worse, start filling pages). Every path that allocates a host result from
such numbers calls ``check_host_bytes`` first. The limit is the machine's
physical memory, or ``CLAYOUT_MAX_BYTES`` when set (a smaller budget for a
service that shares the machine).

>>> check_host_bytes(1024, "a test array")        # fine: returns the count
1024
"""
from __future__ import annotations

import os

from .errors import ClayoutError
from .settings import env_int, on_refresh, setting


_LIMIT: list = []   # the limit, once read (runtime.settings.refresh forgets it)


def host_limit() -> int:
    """Bytes one host result may take: $CLAYOUT_MAX_BYTES, else physical
    memory; read once (runtime/settings.py), not per call."""
    if _LIMIT:
        return _LIMIT[0]
    if setting("CLAYOUT_MAX_BYTES"):   # set and not empty
        limit = env_int("CLAYOUT_MAX_BYTES", None, "a byte count")
    else:
        try:
            limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            limit = 1 << 40
    _LIMIT[:] = [limit]
    return limit


on_refresh(_LIMIT.clear)


def human(nbytes: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{nbytes} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{nbytes} bytes"


def check_host_bytes(nbytes: int, what: str,
                     hint: str = "check its dims, strides, offset0 and halo") -> int:
    """``nbytes`` when a host array of that size may be allocated, else a
    ClayoutError naming ``what``, its size and the limit (then ``hint``)."""
    limit = host_limit()
    if nbytes > limit:
        exact = "" if human(nbytes).endswith(" bytes") else f" ({nbytes} bytes)"
        raise ClayoutError(f"{what} needs {human(nbytes)}{exact}, over the host "
                           f"memory limit of {human(limit)} (physical memory, or "
                           f"CLAYOUT_MAX_BYTES); {hint}")
    return nbytes
