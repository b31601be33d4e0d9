"""Whole numbers from user input, checked once: dims, strides, offsets and
indices arrive as lists, tuples, numpy integers or (by mistake) strings, and
every constructor of the algebra turns them into tuples of ints here, with
one message naming what was wrong.

>>> as_ints([1, 64, 3, 3], "dims")
(1, 64, 3, 3)
>>> as_ints("1322", "dims")
Traceback (most recent call last):
...
runtime.errors.ClayoutError: dims must be a sequence of integers, got '1322'
"""
from __future__ import annotations

import numpy as np

from ..errors import ClayoutError


def as_ints(values, what: str) -> tuple[int, ...]:
    """``values`` as a tuple of ints, or a ClayoutError naming ``what`` (a
    string is refused: '1322' is not the dims 1,3,2,2; 2.5 is not a size)."""
    if type(values) is tuple and all(type(v) is int for v in values):
        return values   # already so (the common case, called on every conversion)
    try:
        if isinstance(values, (str, bytes)):
            raise TypeError(what)
        out = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise ClayoutError(f"{what} must be a sequence of integers, got {values!r}") from None
    if any(int(v) != v or isinstance(v, (bool, np.bool_)) for v in values):
        raise ClayoutError(f"{what} must be integers, got {values!r}"
                           + (" (True and False are not numbers here)"
                              if any(isinstance(v, (bool, np.bool_)) for v in values) else ""))
    return out


def round_up(x: int, b: int) -> int:
    """``x`` rounded up to a multiple of ``b``."""
    return -(-x // b) * b


def desc_fields(new: dict, max_dims: int) -> dict:
    """The fields of a MemoryDesc given to ``replace``, as ints, checked for
    structure: every per-dim field one non-negative integer per dim,
    ``order`` a permutation of the dims, each inner block naming a dim with a
    size of at least 1, offset0 >= 0, and each padded dim holding its dim
    with the halo. What the strides address is the caller's to get right."""
    dims = as_ints(new["dims"], "replace: dims")
    nd = len(dims)
    if not 1 <= nd <= max_dims:
        raise ClayoutError(f"replace: dims {dims}: expected 1 to {max_dims} sizes")
    out = dict(new)
    for name in ("dims", "padded_dims", "strides", "halo_lower", "halo_upper"):
        values = as_ints(new[name], f"replace: {name}")
        if len(values) != nd or min(values) < 0:
            raise ClayoutError(f"replace: {name} {values} must be {nd} non-negative "
                               "integers, one per dim")
        out[name] = values
    blks = as_ints(new["inner_blks"], "replace: inner_blks")
    idxs = as_ints(new["inner_idxs"], "replace: inner_idxs")
    if len(blks) != len(idxs) or any(b < 1 for b in blks) or any(not 0 <= i < nd for i in idxs):
        raise ClayoutError(f"replace: inner_blks {blks} and inner_idxs {idxs} must pair "
                           f"block sizes of at least 1 with dims 0..{nd - 1}")
    out["inner_blks"], out["inner_idxs"] = blks, idxs
    out["order"] = as_ints(new["order"], "replace: order")
    if sorted(out["order"]) != list(range(nd)):
        raise ClayoutError(f"replace: order {out['order']} is not a permutation of {nd} dims")
    (out["offset0"],) = as_ints((new["offset0"],), "replace: offset0")
    if out["offset0"] < 0:
        raise ClayoutError(f"replace: offset0 {out['offset0']} must be >= 0")
    lower, upper, padded = out["halo_lower"], out["halo_upper"], out["padded_dims"]
    short = [d for d in range(nd) if padded[d] < lower[d] + dims[d] + upper[d]]
    if short:
        raise ClayoutError(f"replace: padded_dims {padded} do not hold dims {dims} with "
                           f"the halo {lower}/{upper} (dim {short[0]})")
    return out
