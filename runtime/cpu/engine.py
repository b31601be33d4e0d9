"""The cpu engine: numpy fast path (docs/engines.md).

A reorder is planned once per (src desc, dst desc) and applied cheaply:

1. *shared digits* (``_shared_digits``): per logical dim, the block divisors of
   both sides are merged into one chain (16c and 8c give digits c//16,
   (c//8)%2, c%8), so that the two physical layouts become two strided views
   of the same shape;
2. *boxes*: the logical range of every dim is cut into boxes of whole digits
   (a tail such as C=17 in 16c blocks is its own box);
3. *apply*: each box pair is one copy between ``as_strided`` views
   (``_as_wide_items``), cut into cache-sized tiles spread over threads by
   runtime.cpu_tiles, which picks how each tile is copied.

Padding of the destination (block tails: zero; halo: the fill value) is
written the same way, box by box, so nothing outside the desc's footprint is
touched; where one box pair's rows tile a dense destination, its zeros and
data go out together, row block by row block (runtime.cpu_rows). A pair
whose blocks do not form a chain, or whose dims differ by a logical reshape,
goes through a plain logical intermediate (two copies).

Threads: plans are frozen and their cache is thread-safe; the worker pool is
made once and shared, so any number of callers may convert at once.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import rows as cpu_rows
from . import tiles as cpu_tiles
from ..algebra import dtypes
from ..cache import LRU
from ..algebra.desc import MemoryDesc



@dataclass(frozen=True)
class View:
    """A strided view: element offset, shape and element strides."""
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def of(self, buf: np.ndarray) -> np.ndarray:
        item = buf.itemsize
        return as_strided(buf[self.offset:], self.shape, tuple(s * item for s in self.strides))


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
    blocked = [len(ax) > 1 or ax[0].div != 1 for ax in axes]
    lows = [side.halo_lower[d] for side in sides]
    if all(blocked) and lows[0] != lows[1]:
        return None
    divs = sorted({a.div for ax, b in zip(axes, blocked) if b for a in ax} | {1})
    if any(hi % lo for lo, hi in zip(divs, divs[1:])):
        return None
    base = lows[1] if blocked[1] else lows[0] if blocked[0] else 0
    strides, shifts = [], []
    for ax, side, is_blocked, low in zip(axes, sides, blocked, lows):
        if not is_blocked:
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


@dataclass(frozen=True)
class Plan:
    pairs: tuple[tuple[View, View], ...]          # (src view, dst view) per box
    fills: tuple[tuple[View, str], ...]           # dst views to fill: "zero" | "halo"


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


def plan(src: MemoryDesc, dst: MemoryDesc) -> Plan | None:
    """The copy plan of src -> dst (same dims), or None when it needs an
    intermediate; cached by the exact fields of both sides (descs equal
    under oneDNN's rules may differ in unit strides and order)."""
    key = (src, dst, src.strides, src.order, dst.strides, dst.order)
    return PLANS.get(key, lambda: _build_plan(src, dst))


PLANS = LRU("cpu plans", "CLAYOUT_CPU_PLAN_CACHE", 256)


def _build_plan(src: MemoryDesc, dst: MemoryDesc) -> Plan | None:
    shared = [_shared_digits(src, dst, d) for d in range(src.ndims)]
    if any(r is None for r in shared):
        return None
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
    # halo (fill value) inside the extent; block tails (zero) win everywhere,
    # including where a halo row meets a block tail: the tail is always zero
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
    return Plan(tuple(pairs), tuple(fills))


def fill_value(desc: MemoryDesc, what: str):
    if what == "zero":
        return desc.dtype.np.type(0)
    return dtypes.convert(np.array([desc.fill], dtype=np.float32), desc.dtype)[0]


_WIDE = {16: np.dtype(np.complex128), 8: np.dtype(np.uint64), 4: np.dtype(np.uint32),
         2: np.dtype(np.uint16)}  # copies of these move bits unchanged (NaN payloads too)


def _as_wide_items(src_buf, s: View, dst_buf, d: View):
    """Both views as arrays; where one axis is contiguous on both sides, runs
    of up to 16 bytes along it become single items (numpy's inner loop then
    moves 16 bytes per step instead of 4)."""
    item = dst_buf.itemsize
    axis = next((j for j in range(len(s.shape)) if s.strides[j] == 1 == d.strides[j]
                 and s.shape[j] > 1), None)
    if src_buf.dtype != dst_buf.dtype or axis is None:
        return s.of(src_buf), d.of(dst_buf)
    k = next((k for k in (16 // item, 8 // item, 4 // item, 2 // item)
              if k > 1 and s.shape[axis] % k == 0), None)
    if k is None:
        return s.of(src_buf), d.of(dst_buf)
    wide = _WIDE[k * item]

    def make(buf, v: View):
        shape = list(v.shape)
        strides = [st * item for st in v.strides]
        shape[axis] //= k
        strides[axis] = k * item
        return np.ndarray(tuple(shape), dtype=wide, buffer=buf, offset=v.offset * item,
                          strides=tuple(strides))

    return make(src_buf, s), make(dst_buf, d)


def reorder_into(src_buf: np.ndarray, src: MemoryDesc, dst_buf: np.ndarray, dst: MemoryDesc,
                 threads: bool = True, zeroed: bool = False) -> None:
    """Write the reorder of ``src_buf`` (src's physical elements) into
    ``dst_buf`` (dst's), touching only dst's footprint. ``zeroed`` says dst_buf
    is known to be all zero already (a fresh array)."""
    if src.is_zero or dst.is_zero:
        return
    p = plan(src, dst)
    if p is None:  # via a plain logical intermediate
        plain = MemoryDesc(src.dims, dst.dtype)
        tmp = np.empty(plain.span, dtype=dst.dtype.np)
        reorder_into(src_buf, src, tmp, plain, threads)
        reorder_into(tmp, plain, dst_buf, dst, threads, zeroed)
        return
    zero_fills = [v for v, what in p.fills if what == "zero"]
    pairs = p.pairs
    if zero_fills and dst.is_dense and not zeroed:
        rows = _zero_in_rows(src_buf, dst_buf, dst, pairs, threads)
        if rows:  # the pair and the zeros around it written in one pass
            pairs = ()
        else:
            dst_buf[dst.offset0:dst.span] = 0   # one memset instead of many thin tail boxes
        zeroed = True
    for s, d in pairs:
        s_arr, d_arr = _as_wide_items(src_buf, s, dst_buf, d)
        cpu_tiles.copy(d_arr, s_arr, dst.dtype, threads)
    # halo boxes after the data (the two never overlap): the row path zeroes whole rows
    for view, what in p.fills:
        if what == "halo" or not zeroed:
            np.copyto(view.of(dst_buf), fill_value(dst, what))


def _zero_in_rows(src_buf, dst_buf, dst: MemoryDesc, pairs, threads: bool) -> bool:
    """The one pair, and zeros in the rest of dst, through cache-sized row
    blocks (runtime.cpu_rows) when its rows tile dst; False when they do not."""
    if len(pairs) != 1 or not threads or math.prod(pairs[0][1].shape) <= cpu_tiles.SMALL_ELEMS:
        return False

    def put(into, src):
        np.copyto(into, src if src.dtype == into.dtype else dtypes.convert(src, dst.dtype))

    return cpu_rows.copy_rows(src_buf, pairs[0][0], dst_buf, pairs[0][1], dst.offset0, dst.span,
                              put, cpu_tiles.run_all, cpu_tiles.THREADS)


def reorder(data: np.ndarray, src: MemoryDesc, dst: MemoryDesc, out=None) -> np.ndarray:
    """A 1-D physical array of dst holding ``data`` (src's physical elements),
    as if fresh: everything outside dst's footprint zero. ``out``: the array to
    write (dst.span elements, contiguous), whatever it held; else a new one."""
    # gaps and offset0 lie outside the footprint reorder_into writes
    zero = src.is_zero or dst.is_zero or not dst.is_dense or bool(dst.offset0)
    if out is not None:
        flat = out.reshape(-1)
        if zero:
            flat[...] = 0
    else:
        # a new array starts from zeros (np.zeros maps zero pages lazily) where
        # the copy also leaves block tails only zero-filled
        p = None if zero else plan(src, dst)
        zero = zero or (p is not None and any(what == "zero" for _, what in p.fills))
        out = flat = (np.zeros if zero else np.empty)(dst.span, dtype=dst.dtype.np)
    reorder_into(np.asarray(data).reshape(-1), src, flat, dst, zeroed=zero)
    return out
