"""The machine the cpu engine runs on, read from the operating system: the
data caches each core sees and the cores this process may use.

Linux says both in sysfs (``/sys/devices/system/cpu/cpu0/cache/index*``:
level, type, size, the CPUs sharing it) and in the scheduler's affinity mask;
glibc's ``os.sysconf`` names are a second source where sysfs is missing.
What neither says falls back to the values the engine was first tuned on
(``FALLBACK``: 32 KiB L1d, 1 MiB L2, 32 MiB L3), and ``Machine.source`` says
where each figure came from (``clayout devices`` prints it).

>>> m = Machine(l1d=48 << 10, l2=2 << 20, l3=None, cores=2, line=64, source="example")
>>> m.l3_bytes == FALLBACK.l3, m.describe().split(";")[0]
(True, 'L1d 48 KiB, L2 2 MiB, L3 32 MiB (assumed)')
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..cache import memoized


@dataclass(frozen=True)
class Machine:
    """Per-core cache sizes in bytes (None: not said by the OS), the cores
    this process may run on, the cache line, and where the figures came from."""
    l1d: int | None
    l2: int | None
    l3: int | None
    cores: int
    line: int
    source: str

    @property
    def l1d_bytes(self) -> int:
        return self.l1d or FALLBACK.l1d

    @property
    def l2_bytes(self) -> int:
        return self.l2 or FALLBACK.l2

    @property
    def l3_bytes(self) -> int:
        return self.l3 or FALLBACK.l3

    def describe(self) -> str:
        def size(v, fallback):
            shown = v or fallback
            text = f"{shown >> 20} MiB" if shown >= 1 << 20 else f"{shown >> 10} KiB"
            return text if v else text + " (assumed)"
        return (f"L1d {size(self.l1d, FALLBACK.l1d)}, L2 {size(self.l2, FALLBACK.l2)}, "
                f"L3 {size(self.l3, FALLBACK.l3)}; {self.cores} core(s); "
                f"{self.line}-byte lines; from {self.source}")


FALLBACK = Machine(l1d=32 << 10, l2=1 << 20, l3=32 << 20, cores=1, line=64,
                   source="the tuning machine's values")

SYSFS = "/sys/devices/system/cpu/cpu0/cache"


def parse_size(text: str) -> int | None:
    """sysfs's size ("48K", "2048K", "32M", "1G") in bytes; None if unreadable."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def from_sysfs(root: str = SYSFS) -> dict:
    """{"l1d", "l2", "l3", "line"} as sysfs gives them for cpu0 (absent keys: not said)."""
    found = {}
    try:
        entries = sorted(e for e in os.listdir(root) if e.startswith("index"))
    except OSError:
        return found
    for e in entries:
        level, kind, size, line = (_read(os.path.join(root, e, f))
                                   for f in ("level", "type", "size", "coherency_line_size"))
        if level is None or kind is None or size is None:
            continue
        kind, bytes_ = kind.strip(), parse_size(size)
        key = {"1": "l1d" if kind == "Data" else None, "2": "l2", "3": "l3"}.get(level.strip())
        if key and bytes_ and kind in ("Data", "Unified"):
            found[key] = bytes_
            if line and line.strip().isdigit():
                found.setdefault("line", int(line))
    return found


def from_sysconf() -> dict:
    """The same from glibc's sysconf names, where this Python has them."""
    names = {"l1d": "SC_LEVEL1_DCACHE_SIZE", "l2": "SC_LEVEL2_CACHE_SIZE",
             "l3": "SC_LEVEL3_CACHE_SIZE", "line": "SC_LEVEL1_DCACHE_LINESIZE"}
    found = {}
    for key, name in names.items():
        try:
            value = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if value > 0:
            found[key] = value
    return found


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask), else os.cpu_count()."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@memoized("the machine's caches", "CLAYOUT_MACHINE_CACHE", 1)
def machine() -> Machine:
    """This machine: sysfs first, then sysconf, then FALLBACK, figure by figure."""
    sysfs, conf = from_sysfs(), from_sysconf()
    picked = {k: sysfs.get(k) or conf.get(k) for k in ("l1d", "l2", "l3", "line")}
    sources = [name for name, got in (("sysfs", sysfs), ("sysconf", conf))
               if any(picked[k] == got.get(k) for k in picked if picked[k])]
    return Machine(picked["l1d"], picked["l2"], picked["l3"], usable_cores(),
                   picked["line"] or FALLBACK.line, " and ".join(sources) or "nowhere (assumed)")
