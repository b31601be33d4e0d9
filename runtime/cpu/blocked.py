"""Cache-blocked transposing copies (the cpu plan's "blocked" method).

``np.copyto`` always iterates in the destination's memory order, so a
transpose reads the source with a long stride for a whole destination row,
and the lines it touches do not stay in L1 between passes. A ufunc, though,
iterates its operands in the order of the array's axes whenever the operands
disagree on a better one (numpy's iterator only reorders two axes when every
operand asks for it). So one ``np.positive`` over an unsigned-integer view
whose axes are (outer blocks..., partner block, inner block) walks the copy
block by block: the inner axis is the one contiguous on one side, the partner
axis the one contiguous on the other, and each block's lines stay in L1.
Unsigned integers make it a bit-exact copy of any dtype of 1, 2, 4 or 8 bytes.
"""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import geometry as g

_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}


def unsigned(dtype) -> np.dtype:
    """The unsigned integer of dtype's size: np.positive of it copies bits."""
    return _UINT[np.dtype(dtype).itemsize]


def blockable(dst_v: np.ndarray, src_v: np.ndarray) -> tuple[int, int] | None:
    """(inner axis, partner axis) when the copy is a transpose worth blocking:
    same dtype of 1, 2, 4 or 8 bytes, and the two sides contiguous along
    different axes; else None."""
    if dst_v.dtype != src_v.dtype or dst_v.itemsize not in _UINT:
        return None
    axes = [i for i in range(dst_v.ndim) if dst_v.shape[i] > 1]
    if len(axes) < 2:
        return None
    a_dst = min(axes, key=lambda i: abs(dst_v.strides[i]))
    a_src = min(axes, key=lambda i: abs(src_v.strides[i]))
    if a_dst == a_src:
        return None  # copyto's own inner loop is already a contiguous run on both sides
    # the longer of the two contiguous axes runs innermost (ties: the destination's)
    inner, partner = (a_src, a_dst) if src_v.shape[a_src] > dst_v.shape[a_dst] else (a_dst, a_src)
    far = max(abs(dst_v.strides[inner]), abs(src_v.strides[inner]))
    if far >= g.ALIAS_BYTES and far % g.ALIAS_BYTES == 0:
        return None  # a pass's lines would share 4 of L1's 64 sets: staged tiles do better
    return inner, partner


def block_sizes(dst_v, src_v, inner: int, partner: int, tile_elems: int) -> tuple[int, int]:
    """Inner block: as many elements as keep one pass's lines of the strided
    side within L1_BYTES (between tile_elems/512 and tile_elems/64: at
    TILE_ELEMS 1<<16, 128 to 1024); partner block: up to tile_elems/8 in all."""
    far = max(abs(dst_v.strides[inner]), abs(src_v.strides[inner]))
    hi = max(1, tile_elems // 64)
    lo = max(1, hi // 8)
    n_inner = min(dst_v.shape[inner], max(lo, min(hi, g.L1_BYTES // far)))
    n_partner = min(dst_v.shape[partner], max(1, (tile_elems // 8) // n_inner))
    return n_inner, n_partner


def _pieces(n: int, b: int):
    """[0, n) as whole blocks of b, then the remainder as one block."""
    whole = n - n % b
    if whole:
        yield 0, whole, b
    if whole < n:
        yield whole, n, n - whole


def _blocked(arr: np.ndarray, inner: int, partner: int, b_inner: int, b_partner: int,
             order) -> np.ndarray:
    """``arr`` as (outer blocks in ``order``..., partner block, inner block)."""
    shape, strides = [], []
    for i in order:
        b = b_inner if i == inner else b_partner if i == partner else 1
        if arr.shape[i] // b > 1:
            shape.append(arr.shape[i] // b)
            strides.append(arr.strides[i] * b)
    shape += [b_partner, b_inner]
    strides += [arr.strides[partner], arr.strides[inner]]
    return as_strided(arr, tuple(shape), tuple(strides))


def _chunks(d: np.ndarray, s: np.ndarray, parts: int):
    """Cut along the leading (outer) axes into about ``parts`` pieces, in order."""
    if parts <= 1 or d.ndim <= 2:
        return [(d, s)]
    n = d.shape[0]
    if n >= parts:
        bounds = [n * k // parts for k in range(parts + 1)]
        return [(d[a:b], s[a:b]) for a, b in zip(bounds, bounds[1:]) if a < b]
    return [c for k in range(n) for c in _chunks(d[k], s[k], -(-parts // n))]


def loop_order(dst_v: np.ndarray, inner: int, partner: int) -> list[int]:
    """The axes as one unblocked ``np.positive`` should walk them (transpose
    both sides by it): the rest in the destination's order, then partner, then
    inner. For copies into a buffer already in cache, where whole runs over
    the source matter more than L1 blocks."""
    rest = sorted((i for i in range(dst_v.ndim) if i not in (inner, partner)),
                  key=lambda i: -abs(dst_v.strides[i]))
    return rest + [partner, inner]


def jobs(dst_v: np.ndarray, src_v: np.ndarray, inner: int, partner: int, tile_elems: int,
         parts: int):
    """(dst, src) unsigned views whose ``np.positive(src, out=dst)`` calls
    together make the copy, block by block; about ``parts`` of them."""
    u = _UINT[dst_v.itemsize]
    dst_v, src_v = dst_v.view(u), src_v.view(u)
    b_inner, b_partner = block_sizes(dst_v, src_v, inner, partner, tile_elems)
    block = {inner: b_inner, partner: b_partner}
    # outer blocks follow the destination's memory order, so writes stream
    order = sorted(range(dst_v.ndim), key=lambda i: -abs(dst_v.strides[i]) * block.get(i, 1))
    out = []
    for (i0, i1, bi), (p0, p1, bp) in itertools.product(
            _pieces(dst_v.shape[inner], b_inner), _pieces(dst_v.shape[partner], b_partner)):
        sl = [slice(None)] * dst_v.ndim
        sl[inner], sl[partner] = slice(i0, i1), slice(p0, p1)
        d, s = dst_v[tuple(sl)], src_v[tuple(sl)]
        share = max(1, parts * d.size // dst_v.size)
        out += _chunks(_blocked(d, inner, partner, bi, bp, order),
                       _blocked(s, inner, partner, bi, bp, order), share)
    return out
