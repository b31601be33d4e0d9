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
    check_shape(arr.shape, desc, what)   # an N-D array: its shape says more than its size
    if arr.size != desc.span and not (desc.is_zero and arr.size == 0):
        raise ClayoutError(f"{what} has {arr.size} elements but {desc.describe()} needs "
                           f"{desc.span} (its physical size, padding included)")
    return arr.reshape(-1)


def check_shape(shape, desc: MemoryDesc, what: str = "input") -> None:
    """Refuse an N-D ``shape`` that is not desc's physical shape: a 1-D array
    is desc's physical elements in order (any desc), an N-D one must be the
    physical shape itself (an nhwc array is (N, H, W, C)), so that an NCHW-shaped
    array of the same size is never read as NHWC elements."""
    if len(shape) <= 1:
        return
    want = physical_shape(desc)
    if tuple(shape) == want:
        return
    takes = (f"an array of its physical shape {want} or a 1-D array of its {desc.span} "
             "physical elements" if len(want) > 1 else
             f"a 1-D array of its {desc.span} physical elements (it is blocked, padded or "
             "strided)")
    raise ClayoutError(f"{what} of shape {tuple(shape)} does not match {desc.describe()}: it "
                       f"takes {takes}; a shape that only matches in size is refused")


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


def nonzero_padding(flat: np.ndarray, desc: MemoryDesc) -> int | None:
    """The offset (elements from the buffer start) of the first element of
    desc's block padding (the tail of a blocked dim: an image's padding lanes)
    in the 1-D array ``flat`` whose bits are not all zero; None when every
    padding element is 0. Only the tails are read: one strided slice per
    padded index of each padded dim, so an image whose C needs one lane of
    padding in four reads a quarter of its elements.

    >>> d = MemoryDesc((1, 3, 1, 1), tag="nChw4c")
    >>> nonzero_padding(np.array([1, 2, 3, 0], np.float32), d) is None
    True
    >>> nonzero_padding(np.array([1, 2, 3, 7], np.float32), d)
    3
    """
    if desc.is_zero or not desc.has_padding:
        return None
    size = desc.dtype.itemsize
    bits = np.ascontiguousarray(flat).reshape(-1).view(f"u{size}")
    axes = desc.axes
    # the desc's physical axes over the buffer (the ndarray constructor: a tenth of as_strided)
    view = np.ndarray([a.size for a in axes], bits.dtype, bits, desc.offset0 * size,
                      [a.stride * size for a in axes])
    for d, (dim, padded) in enumerate(zip(desc.dims, desc.padded_dims)):
        for p in range(dim, padded):   # each index of the dim's zero tail
            where = tuple(p // a.div % a.size if a.dim == d else slice(None) for a in axes)
            part = view[where]
            if part.size and part.max():   # max: vectorized where any() is not
                rest = [a for a in axes if a.dim != d]
                first = np.unravel_index(int(np.flatnonzero(part)[0]), part.shape)
                fixed = sum(p // a.div % a.size * a.stride for a in axes if a.dim == d)
                return desc.offset0 + fixed + sum(int(i) * a.stride for i, a in zip(first, rest))
    return None
