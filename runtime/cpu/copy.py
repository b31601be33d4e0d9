"""Running one planned copy (runtime/cpu/plan.py ``Copy``) over the worker pool.

Each method of the plan has its runner here; nothing is chosen here: the
plan says which method, which tiles and which axes. numpy releases the GIL
while it copies, so the tiles of one copy run on the engine's one worker
pool (runtime/cpu/pool.py) in parallel, as a compiled copy's parts do (any
number of callers share it).
"""
from __future__ import annotations

import math

import numpy as np

from . import blocked, compiled, geometry as g, rows
from ..algebra import dtypes
from .methods import Copy
from .pool import run_all, split


def zero(flat: np.ndarray) -> None:
    """Zero a contiguous array as bytes: a memset (numpy fills a float32
    array element by element, 2x slower: 3.2 MB in 142 us, as bytes 64 us)."""
    flat.view(np.uint8).fill(0)


def putter(dtype: dtypes.DType):
    """``put(dst, src)``: copy src into dst, converting to ``dtype`` by the
    rules of runtime.algebra.dtypes when the two differ."""
    def put(d, s):
        np.copyto(d, s if s.dtype == d.dtype else dtypes.convert(s, dtype))
    return put


def run(c: Copy, src_buf: np.ndarray, dst_buf: np.ndarray, dtype: dtypes.DType) -> None:
    """Copy ``c.src`` of src_buf into ``c.dst`` of dst_buf (converted to
    ``dtype``) the way ``c.method`` says."""
    if c.method == "compiled":
        compiled.run(c, src_buf, dst_buf)
        return
    s, d, put = c.src.of(src_buf), c.dst.of(dst_buf), putter(dtype)
    if c.method == "copy":
        put(d, s)
    elif c.method == "peeled copy":
        _put_by_lane(put, d, s, c.axes[0])
    elif c.method == "far-plane":
        _far_plane(c, d, s, put)
    elif c.method == "blocked":
        parts = blocked.jobs(d, s, *c.axes, g.TILE_ELEMS, 4 * g.THREADS)
        run_all([lambda d=d, s=s: np.positive(s, out=d) for d, s in parts])
    else:
        _tiles(c, d, s, put)


def run_rows(src_buf, dst_buf, pair, offset0: int, span: int, dtype: dtypes.DType) -> None:
    """The rows path: the pair and the zeros around it, row block by row block."""
    rows.copy_rows(src_buf, pair[0], dst_buf, pair[1], offset0, span, putter(dtype), run_all,
                   g.THREADS)


def _compact(tmp: np.ndarray, shape, cut: int, pitch: int) -> np.ndarray:
    """``tmp`` seen as an array of ``shape`` whose axes from ``cut`` on are
    packed into rows of ``pitch`` elements (the pitch pads each row against
    L1 aliasing)."""
    n_rows, run = math.prod(shape[:cut]), math.prod(shape[cut:])
    return tmp[:n_rows * pitch].reshape(n_rows, pitch)[:, :run].reshape(shape)


def _put_by_lane(put, d: np.ndarray, s: np.ndarray, axis: int) -> None:
    """``put`` one index of ``axis`` at a time: numpy's inner loop then runs
    along a long axis instead of the short lane."""
    for k in range(d.shape[axis]):
        at = (slice(None),) * axis + (k,)
        put(d[at], s[at])


def _tiles(c: Copy, dst_v: np.ndarray, src_v: np.ndarray, put) -> None:
    """"tiles", "staged tiles", "peeled tiles": the plan's tiles, in the
    plan's order, each copied whole, or first staged into a compact buffer
    in the source's order, or one lane at a time."""
    nd = dst_v.ndim
    stage = c.method == "staged tiles"
    peel = c.axes[0] if c.method == "peeled tiles" else None
    src_order = sorted(range(nd), key=lambda i: -abs(src_v.strides[i]))
    back = np.argsort(src_order)
    staged = [c.tile[i] for i in src_order]
    elems = math.prod(staged[:-1]) * rows.row_pitch(staged[-1], src_v.itemsize)

    def work(chunk):
        tmp = np.empty(elems, dtype=src_v.dtype) if stage else None
        for box in chunk:
            s, d = src_v[box], dst_v[box]
            if stage:
                sh = [s.shape[i] for i in src_order]
                buf = _compact(tmp, sh, nd - 1, rows.row_pitch(sh[-1], s.itemsize))
                np.copyto(buf, s.transpose(src_order))
                s = buf.transpose(back)
            if peel is None:
                put(d, s)
            else:
                _put_by_lane(put, d, s, peel)

    split(work, list(c.boxes))


def _odd_lines(n: int, itemsize: int) -> int:
    """``n`` elements rounded up to an odd number of cache lines (of whole
    elements): a stride of that many lines visits every L1 set."""
    per = max(1, g.LINE_BYTES // itemsize)
    lines = -(-n // per)
    return (lines + (lines % 2 == 0)) * per


def _far_plane(c: Copy, dst_v: np.ndarray, src_v: np.ndarray, put) -> None:
    """"far-plane": a transpose whose destination runs are short and gathered
    from far source planes (NCHW->NHWC, ->nChw16c, ->in_out_channel). Big
    tiles (long runs read) are first copied whole into a compact buffer in
    the source's order, padded so that the inner axis steps an odd number of
    cache lines, and written from there in the destination's order (one copy
    per lane when the inner run is <= LANE_RUN)."""
    nd = dst_v.ndim
    src_order = sorted(range(nd), key=lambda i: -abs(src_v.strides[i]))
    dst_order = sorted(range(nd), key=lambda i: -abs(dst_v.strides[i]))
    back = np.argsort(src_order)
    p = src_order.index(c.axes[0])
    shape = [c.tile[i] for i in src_order]
    pitch = _odd_lines(math.prod(shape[p + 1:]), src_v.itemsize)

    def work(chunk):
        tmp = np.empty(math.prod(shape[:p + 1]) * pitch, dtype=src_v.dtype)
        for box in chunk:
            s, d = src_v[box], dst_v[box]
            staged = _compact(tmp, [s.shape[i] for i in src_order], p + 1, pitch)
            np.copyto(staged, s.transpose(src_order))
            a = staged.transpose(back).transpose(dst_order)
            d = d.transpose(dst_order)
            if d.shape[-1] > g.LANE_RUN:
                put(d, a)
            else:
                _put_by_lane(put, d, a, nd - 1)

    split(work, list(c.boxes))
