"""Host arrays as a MemoryDesc sees them: the 1-D physical array of a desc,
and the N-D physical shape a dense, unpadded plain layout is given in.

>>> physical_shape(MemoryDesc((1, 6, 2, 3), tag="nhwc"))
(1, 2, 3, 6)
>>> dims_from_shape((1, 2, 3, 6), "nhwc")
(1, 6, 2, 3)

It imports only desc, dtypes, tags, errors and the cache module: the engines, runtime.api and
runtime.memory all use it.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from ..cache import memoized
from .desc import MemoryDesc
from ..errors import ClayoutError
from .tags import parse_tag


def physical_input(data, desc: MemoryDesc, what: str = "input") -> np.ndarray:
    """``data`` as desc's 1-D physical array, after checking dtype and size:
    C-contiguous and aligned, copied once where the caller's array is not (a
    strided or negative-stride view, a misaligned buffer). A plain desc also
    takes its physical shape (an nhwc array of shape N,H,W,C)."""
    return _compact(_checked(data, desc, what))


def host_input(data, desc: MemoryDesc, what: str = "input",
               views: bool = False) -> tuple[np.ndarray, MemoryDesc]:
    """(the 1-D array an engine reads, the desc it reads it through) for
    ``data`` held in ``desc``, after physical_input's checks. A contiguous,
    aligned array is taken as it is. With ``views`` (an engine that reads
    host arrays through strides: runtime/contract.py ``reads_views``) a view
    of a plain tensor is read in place through a strided desc (``view_desc``);
    anything else is copied once into a contiguous array.

    >>> x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, :, ::2]
    >>> flat, d = host_input(x, MemoryDesc((2, 3, 2)), views=True)
    >>> d.strides, flat.size, bool(np.shares_memory(flat, x))
    ((12, 4, 2), 23, True)
    """
    arr = _checked(data, desc, what)
    if _compact_already(arr):
        return arr.reshape(-1), desc
    viewed = view_desc(arr, desc) if views else None
    if viewed is None:
        return _compact(arr), desc
    return viewed


def view_desc(arr: np.ndarray, desc: MemoryDesc) -> tuple[np.ndarray, MemoryDesc] | None:
    """``arr`` (a strided view holding ``desc``'s elements: desc's physical
    shape, or 1-D) as (a 1-D contiguous read-only window of its memory, from
    its first element to its last; a plain strided desc addressing the view's
    elements in that window); None where no such desc exists: a blocked or
    halo desc, a negative, zero or misaligned stride. The window holds every
    element the desc addresses, and may be shorter than the desc's span
    (oneDNN's size counts the outermost dim's whole stride, which can reach
    past the memory a view lives in): an engine reads the elements, never
    the span."""
    item = arr.itemsize
    if arr.ndim == 1:   # element i at i * k: desc's offsets scaled by k
        linear = desc.linear_strides()
        step = arr.strides[0]
        if linear is None or step <= 0 or step % item:
            return None
        k = step // item
        strides, offset0 = [s * k for s in linear], desc.offset0 * k
    else:               # desc's physical shape: physical axis p is logical dim order[p]
        if any(s <= 0 or s % item for s, n in zip(arr.strides, arr.shape) if n > 1):
            return None
        strides, offset0 = [0] * desc.ndims, 0
        for p, d in enumerate(desc.order):
            strides[d] = arr.strides[p] // item if arr.shape[p] > 1 else 0
    if arr.__array_interface__["data"][0] % item:
        return None
    try:
        viewed = MemoryDesc(desc.dims, desc.dtype, strides=strides, offset0=offset0)
    except ClayoutError:   # elements that overlap (a broadcast): copied instead
        return None
    last = offset0 + sum((n - 1) * s for n, s in zip(desc.dims, strides))
    window = np.lib.stride_tricks.as_strided(arr, (last + 1,), (item,), writeable=False)
    return window, viewed


def _checked(data, desc: MemoryDesc, what: str) -> np.ndarray:
    """``data`` as an array of desc's dtype, its shape and size checked."""
    arr = dtypes.host_array(data, desc.dtype, what)
    got = dtypes.of_array(arr)
    if got != desc.dtype:
        raise ClayoutError(f"{what} has dtype {got.name} but its desc says {desc.dtype.name}")
    check_shape(arr.shape, desc, what)   # an N-D array: its shape says more than its size
    if arr.size != desc.span and not (desc.is_zero and arr.size == 0):
        raise ClayoutError(f"{what} has {arr.size} elements but {desc.describe()} needs "
                           f"{desc.span} (its physical size, padding included)")
    return arr


def _compact_already(arr: np.ndarray) -> bool:
    return arr.flags.c_contiguous and arr.flags.aligned


def _compact(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a 1-D C-contiguous, aligned array: itself where it is one
    (reshaped), else one copy."""
    if _compact_already(arr):
        return arr.reshape(-1)
    return np.require(arr, requirements=("C", "A")).reshape(-1)


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
    padding element is 0. Only the tails are read: one strided view per
    padded index of each padded dim (planned once per desc: ``padding_tails``), so
    an image whose C needs one lane of padding in four reads a quarter of
    its elements.

    >>> d = MemoryDesc((1, 3, 1, 1), tag="nChw4c")
    >>> nonzero_padding(np.array([1, 2, 3, 0], np.float32), d) is None
    True
    >>> nonzero_padding(np.array([1, 2, 3, 7], np.float32), d)
    3
    """
    return first_nonzero(flat, padding_tails(desc))


def first_nonzero(flat: np.ndarray, tails) -> int | None:
    """nonzero_padding with the tails planned (``padding_tails(desc)``): a
    prepared call plans them once."""
    bits = np.ascontiguousarray(flat).reshape(-1).view(f"u{flat.itemsize}")
    for offset, shape, strides, elements in tails:
        part = np.ndarray(shape, bits.dtype, bits, offset, strides)
        if part.size and part.max():   # max: vectorized where any() is not
            first = np.unravel_index(int(np.flatnonzero(part)[0]), part.shape)
            return offset // bits.itemsize + sum(int(i) * e for i, e in zip(first, elements))
    return None


@memoized("padding tails", "CLAYOUT_TAILS_CACHE", 256)
def padding_tails(desc: MemoryDesc) -> tuple:
    """(byte offset, shape, byte strides, element strides) of each padded
    index's view over desc's buffer: the tails nonzero_padding reads; none
    for a desc without padding, or of no elements (its buffer holds none)."""
    if desc.is_zero or not desc.has_padding:
        return ()
    size = desc.dtype.itemsize
    axes = desc.axes
    tails = []
    for d, (dim, padded) in enumerate(zip(desc.dims, desc.padded_dims)):
        rest = [a for a in axes if a.dim != d]
        for p in range(dim, padded):   # each index of the dim's zero tail
            fixed = desc.offset0 + sum(p // a.div % a.size * a.stride for a in axes if a.dim == d)
            tails.append((fixed * size, tuple(a.size for a in rest),
                          tuple(a.stride * size for a in rest), tuple(a.stride for a in rest)))
    return tuple(tails)
