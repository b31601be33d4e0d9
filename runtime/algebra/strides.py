"""How a MemoryDesc's numbers are made from what its caller gives: the
padded dims, strides, order and inner blocks of a tag (oneDNN's walk),
strides given by the caller (checked not to overlap), and the halo sizes.

>>> from_tag("nChw16c", (2, 17, 3, 4), (2, 17, 3, 4))[:2]
((2, 32, 3, 4), (384, 192, 64, 16))
"""
from __future__ import annotations

import math

from .checks import as_ints, round_up
from ..errors import ClayoutError
from .tags import Tag, parse_tag


def from_tag(tag, dims, extent):
    """(padded dims, strides, order, inner blocks, their dims) of ``tag``
    (None: plain row-major) over the halo-padded ``extent``. The running
    stride starts at the product of the inner blocks and walks the outer
    dims innermost first; a zero dim leaves it unchanged."""
    nd = len(dims)
    parsed = parse_tag(tag) if tag is not None else Tag(nd, tuple(range(nd)), ())
    if parsed.ndims != nd:
        raise ClayoutError(f"tag {tag!r} describes {parsed.ndims} dims but dims {dims} "
                           f"have {nd}")
    blk = [1] * nd
    for d, size in parsed.blocks:
        blk[d] *= size
    padded = tuple(round_up(e, b) for e, b in zip(extent, blk))
    strides = [0] * nd
    running = math.prod(size for _, size in parsed.blocks)
    for d in reversed(parsed.order):
        strides[d] = running
        if padded[d]:
            running *= padded[d] // blk[d]
    return (padded, tuple(strides), parsed.order, tuple(size for _, size in parsed.blocks),
            tuple(d for d, _ in parsed.blocks))


def from_strides(strides, dims, extent):
    """(padded dims, strides, order) of strides the caller gives: no
    blocking, the order by stride, and no two elements at one offset."""
    nd = len(dims)
    strides = list(as_ints(strides, "strides"))
    if len(strides) != nd or min(strides) < 0:
        raise ClayoutError(f"strides {tuple(strides)} must be {nd} non-negative "
                           f"integers for dims {dims}")
    order = tuple(sorted(range(nd), key=lambda d: (-strides[d], d)))
    _check_no_overlap(dims, extent, strides)
    return extent, tuple(strides), order


def halo_sizes(halo, nd) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(lower, upper) halo sizes of ``halo`` (None: none) for ``nd`` dims."""
    if halo is None:
        return (0,) * nd, (0,) * nd
    try:
        lower, upper = halo
    except (TypeError, ValueError):
        raise ClayoutError(f"halo {halo!r}: expected (lower, upper), each {nd} sizes") from None
    lower, upper = as_ints(lower, "halo lower"), as_ints(upper, "halo upper")
    if len(lower) != nd or len(upper) != nd or min(lower + upper) < 0:
        raise ClayoutError(f"halo {halo!r}: expected (lower, upper), each {nd} "
                           "non-negative sizes")
    return lower, upper


def _check_no_overlap(dims, extent, strides) -> None:
    if 0 in dims:
        return
    span = 1
    for d in sorted(range(len(dims)), key=lambda d: (strides[d], d)):
        if extent[d] == 1:
            continue
        if strides[d] < span:
            raise ClayoutError(
                f"strides {tuple(strides)} for dims {tuple(dims)} make elements overlap: "
                f"dim {d} has stride {strides[d]} but the dims inside it span {span} elements")
        span = strides[d] * extent[d]
