"""Cache-sized tiles for the cpu engine's copies (runtime.cpu), spread over
one shared thread pool (numpy releases the GIL while it copies).

A box pair of a reorder is one strided copy. Small ones are a single
``np.copyto``; bigger ones are cut into tiles, and the way a tile is copied
depends on how its two sides' memory orders disagree:

- a destination whose short inner run (channels, a 16c block, an RGBA lane)
  is gathered from source planes far apart: big tiles, first copied whole
  (long source runs) into a compact buffer padded against L1 aliasing, then
  written from it in the destination's order (``_copy_far_inner``);
- another transpose of 1- to 8-byte items: walked block by block by one
  ufunc per piece (runtime.cpu_blocked);
- else ``np.copyto`` per tile, staged through a compact buffer where the
  destination's inner loop would read with a long stride, or one lane at a
  time where the destination's inner run is a short lane.
"""
from __future__ import annotations

import itertools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import blocked as cpu_blocked
from . import rows as cpu_rows
from ..algebra import dtypes

TILE_ELEMS = 1 << 16        # elements per tile: src + dst tiles stay in L2
SMALL_ELEMS = 1 << 19       # up to this (2 MiB of f32), one copy: no tiles, no threads
THREADS = max(1, min(8, os.cpu_count() or 1))

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()  # first calls from many threads share one pool


def pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(THREADS, thread_name_prefix="clayout-cpu")
        return _POOL


def _tiles(shape, src_strides, dst_strides, src_run: int = 1024, elems: int | None = None):
    """Tile extents: dst's innermost axes (runs of >= 64 elements written), then
    src's innermost axes (runs of >= ``src_run`` elements read), then dst's
    next axes up to ``elems`` (default TILE_ELEMS)."""
    elems = TILE_ELEMS if elems is None else elems
    n = len(shape)
    tile = [1] * n

    def grow(order, target):
        vol = 1
        for i in order:
            if vol >= target:
                break
            if shape[i] > 1:
                tile[i] = max(tile[i], min(shape[i], -(-target // vol)))
                vol *= tile[i]

    by_dst = sorted(range(n), key=lambda i: dst_strides[i])
    by_src = sorted(range(n), key=lambda i: src_strides[i])
    grow(by_dst, 64)
    grow(by_src, src_run)
    vol = math.prod(tile)
    for i in by_dst:  # widen along dst's order until the tile is big enough
        if vol >= elems:
            break
        if shape[i] > tile[i]:
            vol //= tile[i]
            tile[i] = min(shape[i], max(tile[i], -(-elems // vol)))
            vol *= tile[i]
    return tile


def _tile_boxes(shape, tile, order) -> list[tuple[slice, ...]]:
    """The tiles covering ``shape``, as index tuples, the first axis of
    ``order`` outermost (so that a run of them walks memory in that order)."""
    boxes = []
    for start in itertools.product(*(range(0, shape[i], tile[i]) for i in order)):
        sl = [slice(None)] * len(shape)
        for i, st in zip(order, start):
            sl[i] = slice(st, st + tile[i])
        boxes.append(tuple(sl))
    return boxes


def _needs_staging(dst_v: np.ndarray, src_v: np.ndarray, tile) -> bool:
    """True when dst's inner loop would read src with a long, far stride: such
    reads alias in the L1 cache (power-of-two plane strides), so the tile is
    first copied into a compact buffer in src's order."""
    axes = [i for i in range(dst_v.ndim) if tile[i] > 1]
    if not axes:
        return False
    inner = min(axes, key=lambda i: dst_v.strides[i])
    return tile[inner] >= 32 and abs(src_v.strides[inner]) >= 4096


def _peelable_inner_axis(dst_v: np.ndarray, src_v: np.ndarray, tile) -> int | None:
    """dst's innermost axis when it is short (<= 8, e.g. the RGBA lane) and not
    contiguous in src: copying it one index at a time lets numpy's inner loop
    run along a long axis instead of 4-element runs."""
    axes = [i for i in range(dst_v.ndim) if tile[i] > 1]
    if len(axes) < 2:
        return None
    inner = min(axes, key=lambda i: dst_v.strides[i])
    if tile[inner] <= 8 and abs(src_v.strides[inner]) != src_v.itemsize:
        return inner
    return None


def _staged_elems(tile, src_order, itemsize: int) -> int:
    shape = [tile[i] for i in src_order]
    return math.prod(shape[:-1]) * cpu_rows.row_pitch(shape[-1], itemsize)


def _compact(tmp: np.ndarray, shape, cut: int, pitch: int) -> np.ndarray:
    """``tmp`` seen as an array of ``shape`` whose axes from ``cut`` on are
    packed into rows of ``pitch`` elements (the pitch pads each row against
    L1 aliasing)."""
    rows, run = math.prod(shape[:cut]), math.prod(shape[cut:])
    return tmp[:rows * pitch].reshape(rows, pitch)[:, :run].reshape(shape)


def _put_by_lane(put, d: np.ndarray, s: np.ndarray, axis: int) -> None:
    """``put`` one index of ``axis`` at a time: numpy's inner loop then runs
    along a long axis instead of the short lane."""
    for k in range(d.shape[axis]):
        at = (slice(None),) * axis + (k,)
        put(d[at], s[at])


def copy(dst_v: np.ndarray, src_v: np.ndarray, dtype: dtypes.DType, threads: bool):
    """``src_v`` into ``dst_v`` (converted to ``dtype``): one copy when small,
    else cache-sized tiles (staged or peeled when that helps) over the pool."""
    def put(d, s):
        np.copyto(d, s if s.dtype == d.dtype else dtypes.convert(s, dtype))

    if dst_v.size <= SMALL_ELEMS or not threads:
        put(dst_v, src_v)
        return
    far = _far_inner_axis(dst_v, src_v)
    if far is not None:
        _copy_far_inner(dst_v, src_v, far, put)
        return
    axes = cpu_blocked.blockable(dst_v, src_v)
    if axes is not None:  # 1x64x512x512 f32 NHWC->NCHW: one ufunc per block of 128-1024
        parts = cpu_blocked.jobs(dst_v, src_v, *axes, TILE_ELEMS, 4 * THREADS)
        run_all([lambda d=d, s=s: np.positive(s, out=d) for d, s in parts])
        return
    nd = dst_v.ndim
    tile = _tiles(dst_v.shape, src_v.strides, dst_v.strides)
    stage = _needs_staging(dst_v, src_v, tile)
    peel = None if stage else _peelable_inner_axis(dst_v, src_v, tile)
    src_order = sorted(range(nd), key=lambda i: -abs(src_v.strides[i]))
    back = np.argsort(src_order)
    # outer iteration follows dst's memory order so writes stream
    order = sorted(range(nd), key=lambda i: -dst_v.strides[i])
    boxes = _tile_boxes(dst_v.shape, tile, order)

    def work(chunk):
        tmp = np.empty(_staged_elems(tile, src_order, src_v.itemsize), dtype=src_v.dtype) \
            if stage else None
        for box in chunk:
            s, d = src_v[box], dst_v[box]
            if stage:
                sh = [s.shape[i] for i in src_order]
                buf = _compact(tmp, sh, nd - 1, cpu_rows.row_pitch(sh[-1], s.itemsize))
                np.copyto(buf, s.transpose(src_order))
                s = buf.transpose(back)
            if peel is None:
                put(d, s)
            else:
                _put_by_lane(put, d, s, peel)

    split(work, boxes)


def _far_inner_axis(dst_v: np.ndarray, src_v: np.ndarray) -> int | None:
    """dst's innermost axis when it is short (<= 64 elements: channels, a
    16c block, an RGBA lane) and its elements lie planes apart in src (>= 4
    KiB), with some other axis nearer in src; else None."""
    axes = [i for i in range(dst_v.ndim) if dst_v.shape[i] > 1]
    if len(axes) < 2:
        return None
    inner = min(axes, key=lambda i: abs(dst_v.strides[i]))
    near = min(axes, key=lambda i: abs(src_v.strides[i]))
    if dst_v.shape[inner] <= 64 and abs(src_v.strides[inner]) >= 4096 and near != inner:
        return inner
    return None


def _odd_lines(n: int, itemsize: int) -> int:
    """``n`` elements rounded up to an odd number of 64-byte lines (of whole
    elements): a stride of that many lines visits every L1 set."""
    per = max(1, 64 // itemsize)
    lines = -(-n // per)
    return (lines + (lines % 2 == 0)) * per


def _copy_far_inner(dst_v: np.ndarray, src_v: np.ndarray, inner: int, put) -> None:
    """Transpose whose destination runs are short and gathered from far
    source planes (NCHW->NHWC, ->nChw16c, ->in_out_channel): big tiles (long
    runs read, ~TILE_ELEMS * 8 elements) are first copied whole into a
    compact buffer in the source's order, padded so that ``inner`` steps an
    odd number of cache lines, and written from there in the destination's
    order (one copy per lane when the inner run is <= 8). 1x64x512x512 f32
    NCHW->NHWC: 7.4 -> 6.3 ms on 2 threads."""
    nd = dst_v.ndim
    tile = _tiles(dst_v.shape, src_v.strides, dst_v.strides,
                  src_run=TILE_ELEMS // 8, elems=TILE_ELEMS * 8)
    src_order = sorted(range(nd), key=lambda i: -abs(src_v.strides[i]))
    dst_order = sorted(range(nd), key=lambda i: -abs(dst_v.strides[i]))
    back = np.argsort(src_order)
    p = src_order.index(inner)
    shape = [tile[i] for i in src_order]
    pitch = _odd_lines(math.prod(shape[p + 1:]), src_v.itemsize)
    boxes = _tile_boxes(dst_v.shape, tile, dst_order)

    def work(chunk):
        tmp = np.empty(math.prod(shape[:p + 1]) * pitch, dtype=src_v.dtype)
        for box in chunk:
            s, d = src_v[box], dst_v[box]
            staged = _compact(tmp, [s.shape[i] for i in src_order], p + 1, pitch)
            np.copyto(staged, s.transpose(src_order))
            a = staged.transpose(back).transpose(dst_order)
            d = d.transpose(dst_order)
            if d.shape[-1] > 8:
                put(d, a)
            else:
                _put_by_lane(put, d, a, nd - 1)

    split(work, boxes)


def split(work, items) -> None:
    """``work`` over ``items`` cut into THREADS consecutive parts, on the pool."""
    if THREADS == 1 or len(items) == 1:
        work(items)
        return
    per = -(-len(items) // THREADS)
    for f in [pool().submit(work, items[i:i + per]) for i in range(0, len(items), per)]:
        f.result()


def run_all(calls) -> None:
    """Run the calls over the pool (in order of submission: the pool takes
    them first come, first served) and wait for all."""
    if THREADS == 1 or len(calls) == 1:
        for c in calls:
            c()
        return
    for f in [pool().submit(c) for c in calls]:
        f.result()
