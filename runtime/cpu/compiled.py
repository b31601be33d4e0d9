"""A box pair of a cpu plan as a call of the compiled moves (runtime/cpu/native.py).

``choose`` turns the pair (two strided views of one shape) into the box the C
functions walk, once, when the plan is made:

1. neighbouring axes that step alike on both sides merge, unit axes go
   (``methods.coalesced``); for a copy of unchanged bits, an axis contiguous on
   both sides and at most 16 bytes long (an RGBA pixel's lanes) becomes the
   element itself;
2. Q is the axis the destination runs along, P the one the source runs along
   (else the destination's next), the other axes outside them in the
   destination's order, so that writes stream;
3. tiles of TP x TQ elements: a tile of each side fits in half of L1; a zero
   box of the destination that continues Q's run (a block tail) is written
   with each row; whole lines are streamed past the caches for a big copy;
4. the box is cut into one part per worker along the axis with the largest
   destination stride.

``run`` checks that both buffers hold the parts' extents, then makes one
call, or one call of ``clayout_parallel`` that runs the parts on the
caller's thread and the engine's worker pool (runtime/cpu/pool.py: its
threads serve the library in C; ctypes releases the GIL).
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from . import geometry as g, native
from .methods import Copy, View, coalesced
from .pool import serve

BLOCK = 16                   # the widest square block the library transposes
BOX_WORDS = native.BOX.itemsize // 8   # int64 words of a packed box (_pack)
PART_WORDS = 2 + BOX_WORDS            # a part in Native.blob: two offsets, then its box


@dataclass(frozen=True)
class Part:
    """One call: byte offsets into the two buffers and the packed box
    (int64: nd, TP, TQ, zeros after each row, TW, NT, shape, source strides,
    destination strides; templates/cpu_move.c.mako says what each means)."""
    src_offset: int
    dst_offset: int
    box: bytes


@dataclass(frozen=True)
class Native:
    """A compiled copy: the function, its parts, and the bytes each buffer
    must hold (the parts' furthest element, plus one); ``zeros``: the
    destination's block-tail elements written after each row (0: none)."""
    function: str
    parts: tuple[Part, ...]
    src_end: int
    dst_end: int
    src_item: int
    dst_item: int
    zeros: int = 0
    blob: bytes = b""    # every part as PART_WORDS int64: source offset, destination offset, box
    call: object = field(default=None, compare=False)      # the family's ctypes function
    library: object = field(default=None, compare=False)   # the native.Library it is of


def _order(shape, ss, ds):
    """Axes as (outer..., P, Q): Q the destination's unit axis, P the source's
    (or the destination's next), the rest by the destination's stride, largest first."""
    axes = list(range(len(shape)))
    q = min(axes, key=lambda i: (ds[i], ss[i]))
    rest = [i for i in axes if i != q]
    if not rest:
        return [q]
    p_src = min(rest, key=lambda i: ss[i])
    p = p_src if ss[p_src] < ss[q] else min(rest, key=lambda i: ds[i])
    outer = sorted((i for i in rest if i != p), key=lambda i: -ds[i])
    return outer + [p, q]


def _tiles(n_p: int, n_q: int, item: int) -> tuple[int, int]:
    """TP x TQ: Q up to 64 elements, P as many as keep a tile in half of L1."""
    tq = max(1, min(n_q, 64))
    tp = max(BLOCK, (g.L1_BYTES // 2) // (tq * item) // BLOCK * BLOCK)
    return min(n_p, tp), tq


def _pack(shape, ss, ds, tp, tq, zq, tw, nt) -> bytes:
    """One box (native.BOX, the C struct clayout_box) as bytes."""
    box = np.zeros((), native.BOX)
    box["nd"], box["tp"], box["tq"], box["zq"], box["tw"], box["nt"] = \
        len(shape), tp, tq, zq, tw, nt
    for name, values in (("shape", shape), ("ss", ss), ("ds", ds)):
        box[name][:len(values)] = values
    return box.tobytes()


def _group(shape, ds) -> int:
    """TW: P's rows in groups that fill L1 in the destination, where
    an outer axis steps inside P's destination stride (0: no groups)."""
    if not any(st < ds[-2] for n, st in zip(shape[:-2], ds[:-2]) if n > 1):
        return 0
    return max(BLOCK, g.L1_BYTES // max(1, ds[-2]) // BLOCK * BLOCK)


def _split(shape, ss, ds, pieces: int):
    """[(src offset, dst offset, shape)] cutting into ``pieces`` the axis
    (an outer one or P) with the largest destination stride among those at
    least that long: the parts then write apart (at most the line where two
    meet is shared, each writing its own bytes)."""
    axes = [i for i in range(len(shape) - 1) if shape[i] >= pieces] or [len(shape) - 2]
    axis = max(axes, key=lambda i: ds[i])
    n = shape[axis]
    step = BLOCK if axis == len(shape) - 2 else 1
    bounds = sorted({min(n, -(-n * k // pieces) // step * step) for k in range(pieces + 1)} | {n})
    out = []
    for a, b in zip(bounds, bounds[1:]):
        if a < b:
            part = list(shape)
            part[axis] = b - a
            out.append((a * ss[axis], a * ds[axis], tuple(part)))
    return out


def _fold_lanes(s: View, d: View, itemsize: int):
    """(s, d, element bytes): an axis contiguous on both sides whose run is
    one of the library's move sizes (an RGBA pixel's lanes, a C = 3 pixel)
    taken into the element."""
    for j, n in enumerate(s.shape):
        if s.strides[j] == 1 == d.strides[j] and n * itemsize in native.MOVE_TYPES and n > 1:
            def drop(v: View) -> View:
                return View(v.offset, v.shape[:j] + v.shape[j + 1:],
                            v.strides[:j] + v.strides[j + 1:])
            return drop(s), drop(d), n * itemsize
    return s, d, itemsize


def choose(s: View, d: View, src_dt, dst_dt, lib: native.Library, tail=None) -> Copy | None:
    """The pair as a "compiled" Copy calling ``lib`` (a loaded library), or
    None where the compiled moves do not apply (a negative stride, more axes
    than a box holds). ``tail``: (axis, zeros): the destination has that many
    zero elements after d's run along that axis (a block tail); the copy
    writes them where the axis becomes Q unmerged (``Native.zeros`` says
    whether it did)."""
    if min(s.strides + d.strides, default=0) < 0:
        return None
    same = src_dt == dst_dt
    axis, zeros = tail or (0, 0)
    step, run = (d.strides[axis], d.shape[axis]) if zeros else (0, 0)
    lane = s.strides[axis] if zeros else 0
    s, d = coalesced(s, d)
    if run == 1:   # a tail after one lane: that unit axis stays, innermost, to carry it
        s, d = (View(v.offset, v.shape + (1,), v.strides + (st,))
                for v, st in ((s, lane), (d, step)))
    item_s, item_d = src_dt.itemsize, dst_dt.itemsize
    item = item_s
    if same and not zeros:
        s, d, item = _fold_lanes(s, d, item_s)
    if len(s.shape) > native.MAX_AXES:
        return None
    ss = [st * item_s for st in s.strides]
    ds = [st * item_d for st in d.strides]
    order = _order(s.shape, ss, ds) if s.shape else []
    shape = [s.shape[i] for i in order]
    ss, ds = [ss[i] for i in order], [ds[i] for i in order]
    while len(shape) < 2:
        shape, ss, ds = [1] + shape, [0] + ss, [0] + ds
    # the tail follows Q's run only where Q is that unit axis, unmerged
    zq = zeros if zeros and ds[-1] == step * item_d and shape[-1] == run else 0
    tp, tq = _tiles(shape[-2], shape[-1], item)
    pieces = g.THREADS if math.prod(shape) * item > g.SMALL_BYTES else 1
    stream = int(math.prod(shape) * (item if same else item_d) > g.STREAM_BYTES)
    parts = tuple(Part(s.offset * item_s + so, d.offset * item_d + do,
                       _pack(sh, ss, ds, tp, tq, zq, _group(sh, ds), stream))
                  for so, do, sh in _split(shape, ss, ds, pieces))
    ends = [sum((n - 1) * st for n, st in zip(shape, side)) for side in (ss, ds)]
    fn = native.move_name(item) if same else native.convert_name(src_dt.name, dst_dt.name)
    out_item = item if same else item_d
    blob = b"".join(np.array([p.src_offset, p.dst_offset], np.int64).tobytes() + p.box
                    for p in parts)
    return Copy(s, d, "compiled", native=Native(
        fn, parts, s.offset * item_s + ends[0] + item,
        d.offset * item_d + ends[1] + out_item + zq * ds[-1], item_s, item_d, zq,
        blob, lib.function(fn), lib))


def _base(buf: np.ndarray, item: int, end: int, side: str) -> int:
    if buf.itemsize != item or not buf.flags.c_contiguous or buf.nbytes < end:
        raise ValueError(f"the {side} buffer ({buf.dtype}, {buf.nbytes} bytes) does not hold "
                         f"the compiled copy's {end} bytes of {item}-byte elements")
    return address(buf)


def one_call(p):
    """(function, source offset, destination offset, box) where the cpu
    plan ``p`` is one compiled call that writes the destination whole (no
    intermediate, no fill, one part); else None. The caller holds buffers
    of the plan's sides (a prepared call checked them)."""
    if p.via is not None or p.fills or p.padding != "none" or len(p.copies) != 1:
        return None
    n = p.copies[0].native
    if n is None or len(n.parts) != 1:
        return None
    part = n.parts[0]
    return n.call, part.src_offset, part.dst_offset, part.box


_BYTE = ctypes.c_byte


def address(buf: np.ndarray) -> int:
    """The address of a contiguous array's first byte: through ctypes'
    buffer protocol where the array is writable (a third of ``.ctypes.data``'s
    cost, which a small conversion feels), else ``.ctypes.data``."""
    try:
        return ctypes.addressof(_BYTE.from_buffer(buf))
    except (TypeError, ValueError):   # read-only, or no bytes
        return buf.ctypes.data


def run(c: Copy, src_buf: np.ndarray, dst_buf: np.ndarray) -> None:
    """Make the compiled copy ``c`` from src_buf into dst_buf (1-D arrays of
    the plan's two dtypes): one part on this thread, more on the worker pool
    (templates/cpu_common.c: clayout_parallel)."""
    n = c.native
    src = _base(src_buf, n.src_item, n.src_end, "source")
    dst = _base(dst_buf, n.dst_item, n.dst_end, "destination")
    if len(n.parts) == 1:
        p = n.parts[0]
        n.call(src + p.src_offset, dst + p.dst_offset, p.box)
        return
    serve(n.library)
    n.library.function("clayout_parallel")(ctypes.cast(n.call, ctypes.c_void_p), src, dst,
                                           n.blob, PART_WORDS, len(n.parts), g.THREADS)
