"""How one box pair of a cpu plan is copied: the methods, and the choice among them.

A box pair is one strided copy between two views of the same shape. How it
is copied depends on how the two sides' memory orders disagree (``choose``,
made once when the plan is made; runtime/cpu/copy.py runs it):

``copy``          small (up to SMALL_ELEMS): one np.copyto; ``peeled copy``
                  one np.copyto per index of the destination's inner axis
                  where that run is short (a C=3 channel axis, an RGBA lane),
                  so that numpy's inner loop runs along a long axis;
``far-plane``     the destination's short inner run (channels, a 16c block, an
                  RGBA lane) is gathered from source planes far apart: big
                  tiles copied whole into a compact buffer, then written out;
``blocked``       another transpose of 1- to 8-byte items, same dtype: one ufunc
                  per block (runtime/cpu/blocked.py); a transpose of two axes
                  once neighbours merge (``coalesced``) goes by tiles instead;
``tiles``         cache-sized tiles; ``staged tiles`` through a compact buffer
                  where the destination would read the source with a far
                  stride; ``peeled tiles`` one lane at a time where its inner
                  run is short.

Where one axis is contiguous on both sides of a same-dtype pair, runs of up
to 16 bytes along it are moved as single items first (``widened``).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from . import blocked, geometry as g


@dataclass(frozen=True)
class View:
    """A strided view of a 1-D buffer: offset, shape and strides in the
    buffer's elements; ``wide`` > 1 sees runs of that many elements along the
    axis whose stride is ``wide`` as single items (an unsigned integer or
    complex of their bytes: numpy's inner loop then moves 16 bytes a step)."""
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    wide: int = 1

    def of(self, buf: np.ndarray) -> np.ndarray:
        """This view of ``buf`` (1-D, contiguous); numpy checks that it lies
        inside (the ndarray constructor: a tenth of as_strided's cost)."""
        item = buf.itemsize
        dtype = buf.dtype if self.wide == 1 else WIDE[self.wide * item]
        return np.ndarray(self.shape, dtype=dtype, buffer=buf, offset=self.offset * item,
                          strides=tuple(s * item for s in self.strides))

    def geometry(self, dtype: np.dtype) -> "Geometry":
        """Shape, byte strides and item of this view over a buffer of ``dtype``."""
        item = dtype.itemsize * self.wide
        return Geometry(self.shape, tuple(s * dtype.itemsize for s in self.strides), item,
                        dtype.str if self.wide == 1 else WIDE[item].str)


@dataclass(frozen=True)
class Geometry:
    """What a choice reads of an array (the same names as numpy's): shape,
    byte strides, item size, and the item type's name."""
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


# copies of these move bits unchanged (NaN payloads too)
WIDE = {16: np.dtype(np.complex128), 8: np.dtype(np.uint64), 4: np.dtype(np.uint32),
        2: np.dtype(np.uint16)}


@dataclass(frozen=True)
class Copy:
    """One box pair, and how it is copied: ``method`` (see the module's
    docstring), ``tile`` the tile extents (far-plane, tiles), ``axes`` the
    method's axes (far-plane: the inner one; blocked: inner and partner;
    peeled tiles: the lane), ``boxes`` the tiles as index tuples, in the
    order they are walked; ``native`` the calls of a "compiled" copy
    (runtime/cpu/compiled.py)."""
    src: View
    dst: View
    method: str
    tile: tuple[int, ...] = ()
    axes: tuple[int, ...] = ()
    boxes: tuple = ()
    native: object = None


def coalesced(s: View, d: View) -> tuple[View, View]:
    """The pair with unit axes dropped and neighbouring axes merged where
    they step alike on both sides (NHWC -> NCHW's H and W become one axis of
    H*W): fewer, longer axes, so tiles follow whole runs (a 224-wide row no
    longer cuts a tile in two)."""
    axes = sorted((i for i in range(len(d.shape)) if d.shape[i] > 1),
                  key=lambda i: (-abs(d.strides[i]), -abs(s.strides[i])))
    shape, s_st, d_st = [], [], []
    for i in axes:
        if shape and s_st[-1] == s.strides[i] * s.shape[i] \
                and d_st[-1] == d.strides[i] * d.shape[i]:
            shape[-1] *= d.shape[i]
            s_st[-1], d_st[-1] = s.strides[i], d.strides[i]
        else:
            shape.append(d.shape[i])
            s_st.append(s.strides[i])
            d_st.append(d.strides[i])
    if not shape:   # one element
        shape, s_st, d_st = [1], [1], [1]
    return (View(s.offset, tuple(shape), tuple(s_st), s.wide),
            View(d.offset, tuple(shape), tuple(d_st), d.wide))


def widened(s: View, d: View, item: int) -> tuple[View, View]:
    """Where one axis is contiguous on both sides, runs of up to 16 bytes
    along it become single items (same dtype on both sides only)."""
    axis = next((j for j in range(len(s.shape)) if s.strides[j] == 1 == d.strides[j]
                 and s.shape[j] > 1), None)
    if axis is None:
        return s, d
    k = next((k for k in (16 // item, 8 // item, 4 // item, 2 // item)
              if k > 1 and s.shape[axis] % k == 0), None)
    if k is None:
        return s, d

    def wide(v: View) -> View:
        shape, strides = list(v.shape), list(v.strides)
        shape[axis] //= k
        strides[axis] = k
        return View(v.offset, tuple(shape), tuple(strides), k)

    return wide(s), wide(d)


def choose(s: View, d: View, src_dt: np.dtype, dst_dt: np.dtype) -> Copy:
    """How the box pair (s, d) is copied (the module's docstring lists the methods)."""
    sg, dg = s.geometry(src_dt), d.geometry(dst_dt)
    if dg.size <= g.SMALL_ELEMS:
        lane = short_inner_axis(dg, sg)
        if lane is not None:  # 1x3x224x224 NCHW->NHWC f32: 270 -> 55 us
            return Copy(s, d, "peeled copy", axes=(lane,))
        return Copy(s, d, "copy")
    far = far_plane_axis(dg, sg)
    if far is not None:
        tile = tiles(dg.shape, sg.strides, dg.strides, g.FAR_READ_RUN, g.FAR_TILE_ELEMS)
        order = sorted(range(dg.ndim), key=lambda i: -abs(dg.strides[i]))
        return Copy(s, d, "far-plane", tuple(tile), (far,), tile_boxes(dg.shape, tile, order))
    axes = blocked.blockable(dg, sg)
    if axes is not None:
        merged = coalesced(s, d)
        if len(merged[1].shape) == 2:
            # a plain 2-D transpose (NHWC->NCHW once H and W merge) goes by tiles of whole
            # source rows instead (1x64x224x224 f32, 4 runs in turn: 3.9-4.9 -> 3.3-3.4 ms;
            # 512: 18.4-19.3 -> 16.1-16.6; C17: 0.77-1.20 -> 0.61-0.96; f16, s8 alike)
            return _tiled(*merged, src_dt, dst_dt)
        return Copy(s, d, "blocked", axes=axes)
    return _tiled(s, d, src_dt, dst_dt)


def _tiled(s: View, d: View, src_dt: np.dtype, dst_dt: np.dtype) -> Copy:
    """"tiles", "staged tiles" or "peeled tiles" for the pair."""
    sg, dg = s.geometry(src_dt), d.geometry(dst_dt)
    tile = tiles(dg.shape, sg.strides, dg.strides)
    order = sorted(range(dg.ndim), key=lambda i: -dg.strides[i])   # writes stream
    boxes = tile_boxes(dg.shape, tile, order)
    if needs_staging(dg, sg, tile):
        return Copy(s, d, "staged tiles", tuple(tile), (), boxes)
    peel = peelable_axis(dg, sg, tile)
    if peel is not None:
        return Copy(s, d, "peeled tiles", tuple(tile), (peel,), boxes)
    return Copy(s, d, "tiles", tuple(tile), (), boxes)


def tiles(shape, src_strides, dst_strides, read_run: int = g.READ_RUN,
          elems: int = g.TILE_ELEMS) -> list[int]:
    """Tile extents: dst's innermost axes (runs of >= WRITE_RUN elements
    written), then src's innermost axes (runs of >= ``read_run`` read), then
    dst's next axes up to ``elems``."""
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
    grow(by_dst, g.WRITE_RUN)
    grow(by_src, read_run)
    vol = math.prod(tile)
    for i in by_dst:  # widen along dst's order until the tile is big enough
        if vol >= elems:
            break
        if shape[i] > tile[i]:
            vol //= tile[i]
            tile[i] = min(shape[i], max(tile[i], -(-elems // vol)))
            vol *= tile[i]
    return tile


def tile_boxes(shape, tile, order) -> tuple[tuple[slice, ...], ...]:
    """The tiles covering ``shape``, as index tuples, the first axis of
    ``order`` outermost (so that a run of them walks memory in that order)."""
    boxes = []
    for start in itertools.product(*(range(0, shape[i], tile[i]) for i in order)):
        sl = [slice(None)] * len(shape)
        for i, st in zip(order, start):
            sl[i] = slice(st, st + tile[i])
        boxes.append(tuple(sl))
    return tuple(boxes)


def needs_staging(dg: Geometry, sg: Geometry, tile) -> bool:
    """True when dst's inner loop would read src with a long, far stride: such
    reads alias in the L1 cache (power-of-two plane strides), so the tile is
    first copied into a compact buffer in src's order."""
    axes = [i for i in range(dg.ndim) if tile[i] > 1]
    if not axes:
        return False
    inner = min(axes, key=lambda i: dg.strides[i])
    return tile[inner] >= g.STAGE_RUN and abs(sg.strides[inner]) >= g.PLANE_BYTES


def peelable_axis(dg: Geometry, sg: Geometry, tile) -> int | None:
    """dst's innermost axis when it is short (<= LANE_RUN, e.g. the RGBA lane)
    and not contiguous in src: copying it one index at a time lets numpy's
    inner loop run along a long axis instead of 4-element runs."""
    axes = [i for i in range(dg.ndim) if tile[i] > 1]
    if len(axes) < 2:
        return None
    inner = min(axes, key=lambda i: dg.strides[i])
    if tile[inner] <= g.LANE_RUN and abs(sg.strides[inner]) != sg.itemsize:
        return inner
    return None


def short_inner_axis(dg: Geometry, sg: Geometry) -> int | None:
    """dst's innermost axis when numpy's copy would loop along it with runs
    of at most LANE_RUN elements: it is that short, some other axis is
    longer, and it does not merge with the next axis out on both sides (a
    contiguous NCHW plane copied as one run merges; the 3 channels of NHWC
    gathered from NCHW, or 3 of an image's 4 lanes, do not); else None."""
    axes = sorted((i for i in range(dg.ndim) if dg.shape[i] > 1), key=lambda i: abs(dg.strides[i]))
    if len(axes) < 2:
        return None
    inner, nxt = axes[0], axes[1]
    if dg.shape[inner] > g.LANE_RUN or dg.shape[nxt] <= dg.shape[inner]:
        return None
    merges = all(v.strides[nxt] == v.strides[inner] * dg.shape[inner] for v in (dg, sg))
    return None if merges else inner


def far_plane_axis(dg: Geometry, sg: Geometry) -> int | None:
    """dst's innermost axis when it is short (<= SHORT_RUN elements: channels,
    a 16c block, an RGBA lane) and its elements lie planes apart in src (>=
    PLANE_BYTES), with some other axis nearer in src; else None."""
    axes = [i for i in range(dg.ndim) if dg.shape[i] > 1]
    if len(axes) < 2:
        return None
    inner = min(axes, key=lambda i: abs(dg.strides[i]))
    near = min(axes, key=lambda i: abs(sg.strides[i]))
    if dg.shape[inner] <= g.SHORT_RUN and abs(sg.strides[inner]) >= g.PLANE_BYTES \
            and near != inner:
        return inner
    return None
