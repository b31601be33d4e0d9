"""The cpu engine's plan of one reorder: made once per pair of descs, cached,
and applied cheaply (runtime/cpu/engine.py). Every choice the engine makes is
here, as data: which box is copied how (``Copy.method``), how the zero padding
is written (``Plan.padding``), and the plan's one-word summary ``Plan.method``.

1. *shared digits* (``_shared_digits``): per logical dim, the block divisors of
   both sides are merged into one chain (16c and 8c give digits c//16,
   (c//8)%2, c%8), so that the two physical layouts become two strided views
   of the same shape;
2. *boxes*: the logical range of every dim is cut into boxes of whole digits
   (a tail such as C=17 in 16c blocks is its own box), one box pair each;
3. *methods*: each pair is one copy between strided views, its method
   chosen by how the two sides' memory orders disagree (runtime/cpu/methods.py:
   copy, far-plane, blocked, tiles, staged tiles, peeled tiles);

4. *padding*: block tails (zero) and halos (the fill) as boxes of their own;
   a dense destination's zeros are written with one memset, or, where one
   copy's rows tile it (``rows``), together with the data, row block by row
   block (runtime/cpu/rows.py). A pair whose blocks do not chain, or whose
   dims differ, goes ``via`` a plain logical intermediate (two plans, made
   with it: ``steps``).

A plan is of one path: its compiled copies call one library. Plans are
cached by both descs and by that library (its file, "" for the numpy path),
so engines on different paths never share a plan, and an engine looks its
plan up once per reorder.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from . import compiled, geometry as g, rows
from ..algebra.desc import MemoryDesc
from ..cache import LRU
from .methods import Copy, View, choose, widened


@dataclass(frozen=True)
class Plan:
    """``copies`` move the data; ``fills`` are the destination's padding
    boxes; ``padding`` says how its zeros are written when the destination
    is not known to be zero already: "rows" (the one box pair ``rows`` and
    the zeros around it in one pass), "memset", "boxes" (its zero fills), or
    "none" (it has no zero padding). ``via``: the plain intermediate of a
    two-step plan (no copies of its own), ``steps`` the plans of its two
    steps (src -> via, via -> dst)."""
    copies: tuple[Copy, ...]
    fills: tuple[tuple[View, str], ...]   # dst views to fill: "zero" | "halo"
    padding: str
    via: MemoryDesc | None = None
    rows: tuple[View, View] | None = None
    steps: tuple = ()

    @property
    def method(self) -> str:
        """The plan in one word: "via" (two steps), "rows" (data and zeros
        in one pass), else the method of its largest copy ("none" without any)."""
        if self.via is not None:
            return "via"
        if self.padding == "rows":
            return "rows"
        if not self.copies:
            return "none"
        return max(self.copies, key=lambda c: math.prod(c.dst.shape)).method


PLANS = LRU("cpu plans", "CLAYOUT_CPU_PLAN_CACHE", 256)


def plan(src: MemoryDesc, dst: MemoryDesc, lib) -> Plan:
    """The plan of src -> dst (same dims) on library ``lib`` (a
    runtime.cpu.native.Library: compiled moves where it is loaded, else
    numpy), cached by the exact fields of both sides (descs equal under
    oneDNN's rules may differ in unit strides and order) and by the library."""
    key = (src, dst, src.strides, src.order, dst.strides, dst.order, lib.path)
    return PLANS.get(key, lambda: _build(src, dst, lib))


# -- boxes ----------------------------------------------------------------------------------
def _interval_boxes(lo: int, hi: int, divs: tuple[int, ...]):
    """Cut [lo, hi) into boxes of mixed-radix digits; ``divs`` ascending with
    divs[0] == 1, the last one the outer digit. Yields per-digit (start, stop)
    ranges, outer digit first. [1, 6) over divs (1, 4) gives ((0, 1), (1, 4))
    and ((1, 2), (0, 2))."""
    if lo >= hi:
        return
    if len(divs) == 1:
        yield ((lo, hi),)
        return
    top, lower = divs[-1], divs[:-1]
    whole = tuple((0, divs[i + 1] // divs[i]) for i in reversed(range(len(lower))))
    first, last = -(-lo // top), hi // top      # whole outer digits: [first, last)
    head_end = min(hi, first * top)
    pieces = [(lo, head_end)] if lo < head_end else []
    if first < last:
        yield ((first, last),) + whole
    tail_start = max(last * top, head_end)
    if tail_start < hi:
        pieces.append((tail_start, hi))
    for plo, phi in pieces:  # each lies inside one outer digit
        base = plo // top
        for sub in _interval_boxes(plo - base * top, phi - base * top, lower):
            yield ((base, base + 1),) + sub


def _digit_axes(desc: MemoryDesc, d: int):
    """The axes of dim d that carry a digit: a unit inner block (1a) is always
    0 and would tie with another axis's div, so it is left out."""
    return [a for a in desc.axes if a.dim == d and (a.outer or a.size > 1)]


def _shared_digits(src: MemoryDesc, dst: MemoryDesc, d: int):
    """Digits of dim d shared by both sides: (base, divisors, src strides, dst
    strides, src shift, dst shift), or None when the blockings do not chain."""
    sides = (src, dst)
    axes = [_digit_axes(side, d) for side in sides]
    is_blocked = [len(ax) > 1 or ax[0].div != 1 for ax in axes]
    lows = [side.halo_lower[d] for side in sides]
    if all(is_blocked) and lows[0] != lows[1]:
        return None
    divs = sorted({a.div for ax, b in zip(axes, is_blocked) if b for a in ax} | {1})
    if any(hi % lo for lo, hi in zip(divs, divs[1:])):
        return None
    base = lows[1] if is_blocked[1] else lows[0] if is_blocked[0] else 0
    strides, shifts = [], []
    for ax, b, low in zip(axes, is_blocked, lows):
        if not b:
            s = ax[0].stride
            strides.append(tuple(s * u for u in divs))
            shifts.append((low - base) * s)
            continue
        per = []
        for u in divs:
            a = next(a for a in ax if a.div <= u and u % a.div == 0
                     and (a.outer or u < a.div * a.size))
            per.append(a.stride * (u // a.div))
        strides.append(tuple(per))
        shifts.append(0)
    return base, tuple(divs), strides[0], strides[1], shifts[0], shifts[1]


def _dst_views(dst: MemoryDesc, region):
    """Views of dst over ``region`` (per dim: list of (lo, hi) halo-padded index
    intervals), using dst's own digits."""
    per_dim = []
    for d in range(dst.ndims):
        ax = sorted(_digit_axes(dst, d), key=lambda a: a.div)
        divs = tuple(a.div for a in ax)
        boxes = [b for lo, hi in region[d] for b in _interval_boxes(lo, hi, divs)]
        per_dim.append([(b, tuple(a.stride for a in reversed(ax))) for b in boxes])
    for combo in itertools.product(*per_dim):
        offset, shape, strides = dst.offset0, [], []
        for box, st in combo:
            for (start, stop), s in zip(box, st):
                offset += start * s
                shape.append(stop - start)
                strides.append(s)
        yield View(offset, tuple(shape), tuple(strides))


def _pairs(src: MemoryDesc, dst: MemoryDesc, shared) -> list[tuple[View, View]]:
    per_dim = []
    for d, (base, divs, s_str, d_str, s_shift, d_shift) in enumerate(shared):
        boxes = list(_interval_boxes(base, base + src.dims[d], divs))
        per_dim.append([(box, s_str[::-1], d_str[::-1], s_shift, d_shift) for box in boxes])
    pairs = []
    for combo in itertools.product(*per_dim):
        s_off, d_off = src.offset0, dst.offset0
        shape, s_st, d_st = [], [], []
        for box, ss, ds, s_shift, d_shift in combo:
            s_off += s_shift
            d_off += d_shift
            for (start, stop), a, b in zip(box, ss, ds):
                s_off += start * a
                d_off += start * b
                shape.append(stop - start)
                s_st.append(a)
                d_st.append(b)
        if math.prod(shape):
            pairs.append((View(s_off, tuple(shape), tuple(s_st)),
                          View(d_off, tuple(shape), tuple(d_st))))
    return pairs


def _fills(dst: MemoryDesc) -> list[tuple[View, str]]:
    """Halo (fill value) inside the extent; block tails (zero) win everywhere,
    including where a halo row meets a block tail: the tail is always zero."""
    fills = []
    inside = [[(lo, lo + n)] for lo, n in zip(dst.halo_lower, dst.dims)]
    extent = [[(0, e)] for e in dst.extent]
    full = [[(0, p)] for p in dst.padded_dims]
    for d in range(dst.ndims):
        lo, n = dst.halo_lower[d], dst.dims[d]
        halo = [(a, b) for a, b in ((0, lo), (lo + n, dst.extent[d])) if a < b]
        if halo:
            region = inside[:d] + [halo] + extent[d + 1:]
            fills.extend((v, "halo") for v in _dst_views(dst, region) if math.prod(v.shape))
    for d in range(dst.ndims):
        if dst.extent[d] < dst.padded_dims[d]:
            region = full[:d] + [[(dst.extent[d], dst.padded_dims[d])]] + full[d + 1:]
            fills.extend((v, "zero") for v in _dst_views(dst, region) if math.prod(v.shape))
    return fills


def _tail(d: View, zeros: list[View]):
    """(index in ``zeros``, axis, length) of the zero box that continues d
    along one axis (a block tail right after d's run: the same strides and
    shape but along that axis, starting where d's run ends), else None."""
    for k, z in enumerate(zeros):
        if z.strides != d.strides or len(z.shape) != len(d.shape):
            continue
        differ = [i for i in range(len(d.shape)) if z.shape[i] != d.shape[i]]
        axes = differ or range(len(d.shape))
        for a in axes:
            if all(z.shape[i] == d.shape[i] for i in range(len(d.shape)) if i != a) \
                    and z.offset == d.offset + d.shape[a] * d.strides[a]:
                return k, a, z.shape[a]
    return None


def _copy(s: View, d: View, src_dt, dst_dt, lib, zeros: list[View]) -> Copy:
    """How one box pair is copied: compiled where ``lib`` is loaded and the
    moves apply (taking with it the zero box of ``zeros`` that continues d,
    removed from that list once written), else by numpy."""
    if lib.dll is not None:
        tail = _tail(d, zeros)
        made = compiled.choose(s, d, src_dt, dst_dt, lib, tail and tail[1:])
        if made is not None:
            if made.native.zeros:
                del zeros[tail[0]]
            return made
    if src_dt == dst_dt:
        s, d = widened(s, d, dst_dt.itemsize)
    return choose(s, d, src_dt.np, dst_dt.np)


def _build(src: MemoryDesc, dst: MemoryDesc, lib) -> Plan:
    shared = [_shared_digits(src, dst, d) for d in range(src.ndims)]
    if any(r is None for r in shared):
        via = MemoryDesc(src.dims, dst.dtype)
        return Plan((), (), "none", via=via, steps=(_build(src, via, lib), _build(via, dst, lib)))
    pairs = _pairs(src, dst, shared)
    fills = _fills(dst)
    zeros = [v for v, what in fills if what == "zero"]
    copies = tuple(_copy(s, d, src.dtype, dst.dtype, lib, zeros) for s, d in pairs)
    # a compiled copy writes the zero box that continues its rows (a block tail)
    fills = [(v, what) for v, what in fills if what == "halo" or v in zeros]
    padding, by_rows = "none", None
    if any(what == "zero" for _, what in fills):
        padding = "boxes"
        if dst.is_dense:
            one = lib.dll is None and len(pairs) == 1 and \
                math.prod(pairs[0][1].shape) > g.SMALL_ELEMS
            by_rows = pairs[0] if one and rows.row_axes(pairs[0][1], dst.offset0, dst.span) \
                else None
            padding = "rows" if by_rows else "memset"
    return Plan(copies, tuple(fills), padding, rows=by_rows)
