"""What a GPU's memory system makes of a kernel's accesses, from a trace.

A traced kernel (runtime/opencl/trace.py) is run a few work-groups at a time
(runtime/opencl/trace_run.py); here its records become the figures Nsight
Compute reports, warp by warp, against a GPU record's facts
(runtime/opencl/gpus.py). A *request* is one instruction of one warp (32
consecutive local ids) at one access site: the k-th time each of its work
items reaches that site. For each:

* global loads and stores: the 32-byte sectors the request touches;
  efficiency = bytes requested (each byte once: lanes reading one word
  ask for its 4 bytes) / bytes moved in whole sectors, counted as
  written and as a compiler emits it: an access wider than the alignment it
  may assume (a vloadN/vstoreN on a scalar pointer: the element's) is split
  into accesses of that alignment, each its own request;
* active lanes: the work items of the warp that take part;
* local memory: wavefronts, the passes 32 banks of 4 bytes need (one per
  distinct word in the busiest bank);
* image reads and writes: the rows and pixels one request touches.

Kernel-wide figures weigh each traced group by the groups it stands for;
``occupancy`` and ``waves`` follow from the group size, the local memory it
holds and the record's residency limits.

>>> from runtime.opencl.gpus import GPUS                       # doctest: +SKIP
>>> f = model_move(MemoryDesc((1, 64, 512, 512), tag="nchw"),
...                MemoryDesc((1, 64, 512, 512), tag="nhwc"), GPUS["h100"], base)  # doctest: +SKIP
>>> f.stores.efficiency_as_emitted                              # doctest: +SKIP
1.0
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .trace import Site, unpack_pixel


@dataclass(frozen=True)
class Traffic:
    """Global loads or stores of a kernel: ``efficiency`` (bytes requested /
    bytes moved in sectors, as written), ``efficiency_as_emitted`` (with
    element-aligned vectors split), ``sectors_per_request`` (as written) and
    the requests per warp-group as written and as emitted; None where the
    kernel has no such access."""
    efficiency: float | None = None
    efficiency_as_emitted: float | None = None
    sectors_per_request: float | None = None
    requests: float = 0.0
    requests_as_emitted: float = 0.0


@dataclass(frozen=True)
class SiteFigures:
    """One site's figures (weighted means over its requests)."""
    site: Site
    requests: float
    active_lanes: float
    efficiency: float | None = None
    efficiency_as_emitted: float | None = None
    sectors_per_request: float | None = None
    wavefronts_per_request: float | None = None
    rows_per_request: float | None = None
    pixels_per_request: float | None = None


@dataclass(frozen=True)
class Figures:
    """A kernel's figures on one GPU record (module docstring)."""
    gpu: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    groups: int
    loads: Traffic
    stores: Traffic
    active_lanes: float | None
    local_wavefronts_per_request: float | None
    occupancy: float
    waves: float
    image_rows_per_warp: float | None
    image_pixels_per_warp: float | None
    sites: tuple[SiteFigures, ...]
    complete: bool                     # every work item's records were kept

    def of_copy(self, read: int, written: int) -> float:
        """The fraction of the device's own copy speed this traffic predicts,
        for a move reading ``read`` and writing ``written`` bytes: a copy
        moves both once; the kernel moves the reads over the loads'
        efficiency and the writes over the stores' as emitted (image writes,
        which no figure here prices yet, as a copy's)."""
        loads = self.loads.efficiency or 1.0
        stores = self.stores.efficiency_as_emitted or 1.0
        return (read + written) / (read / loads + written / stores)

    def summary(self) -> dict:
        """The figures as JSON-ready values (``clayout kernel --access --json``)."""
        def r(x):
            return None if x is None else round(float(x), 4)
        out = {"global_size": list(self.global_size), "local_size": list(self.local_size),
               "groups": self.groups,
               "loads": {"efficiency": r(self.loads.efficiency),
                         "efficiency_as_emitted": r(self.loads.efficiency_as_emitted),
                         "sectors_per_request": r(self.loads.sectors_per_request)},
               "stores": {"efficiency": r(self.stores.efficiency),
                          "efficiency_as_emitted": r(self.stores.efficiency_as_emitted),
                          "sectors_per_request": r(self.stores.sectors_per_request)},
               "active_lanes": r(self.active_lanes),
               "local_wavefronts_per_request": r(self.local_wavefronts_per_request),
               "occupancy": r(self.occupancy), "waves": r(self.waves),
               "image_rows_per_warp": r(self.image_rows_per_warp),
               "image_pixels_per_warp": r(self.image_pixels_per_warp)}
        out["sites"] = [{"site": s.site.id, "kind": s.site.kind, "space": s.site.space,
                         "form": s.site.form, "bytes": s.site.bytes, "align": s.site.align,
                         **{k: r(v) for k, v in asdict(s).items()
                            if k != "site" and v is not None}} for s in self.sites]
        return out


def figures(run, sites, gpu, local_bytes: int = 0) -> Figures:
    """The figures of ``run`` (a trace_run.Run of a kernel whose accesses are
    ``sites``) on the GPU record ``gpu``."""
    acc = {s.id: _Tally() for s in sites}
    for group in run.traced:
        for site_id, lanes, at in _requests(group, gpu.warp):
            site = sites[site_id]
            acc[site_id].add(site, lanes, at, group.weight, gpu)
    per_site = tuple(acc[s.id].figures(s, gpu.warp) for s in sites if acc[s.id].requests)
    total = {k: _Tally() for k in ("load", "store")}
    lanes = [0.0, 0.0]
    local = [0.0, 0.0]
    image = [0.0, 0.0, 0.0]
    for s in sites:
        t = acc[s.id]
        if not t.requests:
            continue
        lanes[0] += t.lanes
        lanes[1] += t.requests * gpu.warp
        if s.space == "global":
            total[s.kind].merge(t)
        elif s.space == "local":
            local[0] += t.wavefronts
            local[1] += t.requests
        elif s.kind == "store":
            image[0] += t.rows
            image[1] += t.pixels
            image[2] += t.requests
    items = run.items
    return Figures(
        gpu.name, run.launch, run.local, run.groups,
        total["load"].traffic(), total["store"].traffic(),
        lanes[0] / lanes[1] if lanes[1] else None,
        local[0] / local[1] if local[1] else None,
        gpu.occupancy(items, local_bytes), gpu.waves(run.groups, items, local_bytes),
        image[0] / image[2] if image[2] else None, image[1] / image[2] if image[2] else None,
        per_site, all(g.kept_all for g in run.traced))


def _requests(group, warp: int):
    """(site, lanes, indices) of each request of ``group``: records of one
    site and warp, each work item's k-th at that site."""
    if not len(group.item):
        return
    order = np.lexsort((np.arange(len(group.item)), group.site, group.item))
    item, site, at = group.item[order], group.site[order], group.at[order]
    start = np.r_[True, (item[1:] != item[:-1]) | (site[1:] != site[:-1])]
    first = np.maximum.accumulate(np.where(start, np.arange(len(item)), 0))
    nth = np.arange(len(item)) - first
    key = np.lexsort((item, nth, item // warp, site))
    site_k, warp_k, nth_k = site[key], (item // warp)[key], nth[key]
    edge = np.r_[True, (site_k[1:] != site_k[:-1]) | (warp_k[1:] != warp_k[:-1]) |
                 (nth_k[1:] != nth_k[:-1])]
    bounds = np.r_[np.flatnonzero(edge), len(key)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        rows = key[a:b]
        yield int(site_k[a]), int(len(np.unique(item[rows]))), at[rows]


class _Tally:
    """Weighted sums over one site's requests (or a kind's, merged)."""

    def __init__(self):
        self.requests = self.emitted = self.lanes = 0.0
        self.asked = self.moved = self.moved_emitted = self.sectors = 0.0
        self.wavefronts = self.rows = self.pixels = 0.0

    def add(self, site: Site, lanes: int, at: np.ndarray, weight: int, gpu) -> None:
        self.requests += weight
        self.lanes += weight * lanes
        if site.space == "image":
            x, y, z = unpack_pixel(at.astype(np.uint64))
            self.rows += weight * len(set(zip(y.tolist(), z.tolist())))
            self.pixels += weight * len(set(zip(x.tolist(), y.tolist(), z.tolist())))
            return
        start = (at + site.shift) * site.item
        if site.space == "local":
            self.wavefronts += weight * _wavefronts(start, site.bytes, gpu)
            return
        sectors = _sectors(start, site.bytes, gpu.sector)
        self.asked += weight * _distinct_bytes(start, site.bytes)
        self.moved += weight * sectors * gpu.sector
        self.sectors += weight * sectors
        width = emitted_width(site, gpu)
        for piece in range(0, site.bytes, width):
            self.emitted += weight
            self.moved_emitted += weight * _sectors(start + piece, width, gpu.sector) * gpu.sector

    def merge(self, other: "_Tally") -> None:
        for k, v in vars(other).items():
            setattr(self, k, getattr(self, k) + v)

    def traffic(self) -> Traffic:
        if not self.requests:
            return Traffic()
        return Traffic(self.asked / self.moved, self.asked / self.moved_emitted,
                       self.sectors / self.requests, self.requests, self.emitted)

    def figures(self, site: Site, warp: int) -> SiteFigures:
        n = self.requests
        if site.space == "global":
            t = self.traffic()
            return SiteFigures(site, n, self.lanes / (n * warp), t.efficiency,
                               t.efficiency_as_emitted, t.sectors_per_request)
        if site.space == "local":
            return SiteFigures(site, n, self.lanes / (n * warp),
                               wavefronts_per_request=self.wavefronts / n)
        return SiteFigures(site, n, self.lanes / (n * warp), rows_per_request=self.rows / n,
                           pixels_per_request=self.pixels / n)


def emitted_width(site: Site, gpu) -> int:
    """Bytes of each access a compiler emits for ``site``: the whole vector
    where its alignment is known and it fits one instruction, else pieces of
    the alignment it may assume (no narrower than an element)."""
    if site.align >= site.bytes and site.bytes <= gpu.access_bytes:
        return site.bytes
    return max(site.item, min(site.align, gpu.access_bytes))


def _distinct_bytes(start: np.ndarray, size: int) -> int:
    """Bytes a request asks for, each once (lanes reading one word: 4 bytes)."""
    return len(np.unique(start[:, None] + np.arange(size)[None, :]))


def _sectors(start: np.ndarray, size: int, sector: int) -> int:
    first, last = start // sector, (start + size - 1) // sector
    if size <= sector:
        return len(np.unique(np.r_[first, last]))
    spans = [np.arange(a, b + 1) for a, b in zip(first.tolist(), last.tolist())]
    return len(np.unique(np.concatenate(spans)))


def _wavefronts(start: np.ndarray, size: int, gpu) -> int:
    words = np.unique(np.concatenate([start // gpu.bank_bytes + k for k in
                                      range(max(1, -(-size // gpu.bank_bytes)))]))
    busiest = np.bincount(words % gpu.banks).max()
    return int(max(busiest, -(-len(words) // gpu.banks)))
