"""Host arrays as a MemoryDesc sees them: the 1-D physical array of a desc,
and the N-D physical shape a dense, unpadded plain layout is given in.

>>> physical_shape(MemoryDesc((1, 6, 2, 3), tag="nhwc"))
(1, 2, 3, 6)
>>> dims_from_shape((1, 2, 3, 6), "nhwc")
(1, 6, 2, 3)

It imports only desc, dtypes, tags and errors: the engines, runtime.api and
runtime.memory all use it.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .desc import MemoryDesc
from ..errors import ClayoutError
from .tags import parse_tag


def physical_input(data, desc: MemoryDesc, what: str = "input") -> np.ndarray:
    """``data`` as desc's 1-D physical array, after checking dtype and size.
    A plain desc also takes its physical shape (an nhwc array of shape N,H,W,C)."""
    arr = dtypes.host_array(data, desc.dtype, what)
    got = dtypes.of_array(arr)
    if got != desc.dtype:
        raise ClayoutError(f"{what} has dtype {got.name} but its desc says {desc.dtype.name}")
    if arr.size != desc.span and not (desc.is_zero and arr.size == 0):
        raise ClayoutError(f"{what} has {arr.size} elements but {desc.describe()} needs "
                           f"{desc.span} (its physical size, padding included)")
    return arr.reshape(-1)


def physical_shape(desc: MemoryDesc) -> tuple[int, ...]:
    """Shape an array in ``desc`` is given as: its physical shape for a dense,
    unpadded plain layout (nhwc -> N,H,W,C), else 1-D."""
    if not isinstance(desc, MemoryDesc):
        raise ClayoutError(f"physical_shape takes a MemoryDesc, got {type(desc).__name__}")
    if desc.inner_blks or desc.has_padding or desc.offset0 or not desc.is_dense:
        return (desc.span,)
    return tuple(desc.dims[d] for d in desc.order)


def host_shape(side) -> tuple[int, ...]:
    """The host array an engine's conversion gives for ``side``: 1-D of
    ``span`` elements for a buffer, (height, width[, 4]) for an image."""
    return side.array_shape if side.is_image else (side.span,)


def dims_from_shape(shape, tag: str, hint: str = "dims=") -> tuple[int, ...]:
    """Logical dims of an array given in the physical shape of plain ``tag``,
    the inverse of physical_shape: an nhwc array of shape (1, 5, 7, 3) has dims
    (1, 3, 5, 7). ``hint`` names the option that gives dims instead."""
    parsed = parse_tag(tag)
    if parsed.blocks:
        raise ClayoutError(f"a {tag!r} array is 1-D (blocked layout); pass {hint} with the "
                           "logical dims")
    if len(shape) != parsed.ndims:
        raise ClayoutError(f"array of shape {tuple(shape)} has {len(shape)} dims but tag "
                           f"{tag!r} has {parsed.ndims}; pass {hint} or a matching tag")
    logical = [0] * parsed.ndims
    for pos, d in enumerate(parsed.order):
        logical[d] = shape[pos]
    return tuple(logical)
