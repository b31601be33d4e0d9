"""The public conversions: reorder, to_image, from_image (docs/engines.md).

These are the three doors; each turns its arguments into the conversion's
two sides (a MemoryDesc for a buffer, an ImageDesc for an image), checks the
input fully (dtype, size, dims, layout, image limits) before any work, and
hands the conversion to one engine's ``convert`` (host arrays) or to
runtime.memory (Memory objects, which stay on their engine).
"""
from __future__ import annotations

import numpy as np

from . import engine as engines
from . import memory
from .algebra import dtypes
from .algebra.catalog import check_fits, image_layout
from .algebra.checks import as_ints
from .algebra.desc import MemoryDesc
from .algebra.hostarray import dims_from_shape, physical_input, physical_shape
from .algebra.layout import ImageDesc
from .algebra.tiles import plan_of, tile_plan
from .cache import LRU
from .errors import ClayoutError
from .limits import check_host_bytes
from .memory import Memory


# The two sides of a call on host arrays, one object per (dims, dtype, tag) or
# (layout, dims, dtype): a frame converted call after call builds no desc and
# re-derives none of a desc's numbers (1x3x224x224 to_image: 120 -> 60 us a call).
SIDES = LRU("host call sides", "CLAYOUT_SIDES_CACHE", 1024)


def _tagged(dims, dtype, tag) -> MemoryDesc:
    """MemoryDesc(dims, dtype, tag=tag), the same object for the same arguments."""
    dims = (dims,) if isinstance(dims, int) else as_ints(dims, "dims")
    return SIDES.get(("desc", dims, dtypes.dtype(dtype), tag),
                     lambda: MemoryDesc(dims, dtype, tag=tag))


def _image_side(layout, dims, dtype) -> ImageDesc:
    """ImageDesc(layout, dims, dtype), the same object for the same arguments."""
    dims = as_ints(dims, "dims")
    return SIDES.get(("image", layout, dims, dtypes.image_dtype(dtype)),
                     lambda: ImageDesc(layout, dims, dtype))


def _held(data) -> bool:
    """True when ``data`` already has one of clayout's dtypes (any byte order)."""
    try:
        dtypes.of_array(np.asarray(data))
        return True
    except ClayoutError:
        return False


def host_out(out, shape, dtype: dtypes.DType, source: np.ndarray, what: str) -> np.ndarray:
    """``out`` when a result of ``shape`` and ``dtype`` can be written into it
    in place: a writable, C-contiguous numpy array of exactly that shape and
    dtype, not overlapping ``source`` (the engines read the input while they
    write the output). ``what`` names the call in the message."""
    def want() -> str:   # the message, made only for a refusal (a call's cost counts)
        return (f"a writable, C-contiguous {dtype.name} ({dtype.np}) numpy array of shape "
                f"{tuple(shape)}")
    if not isinstance(out, np.ndarray):
        raise ClayoutError(f"{what}: out= must be {want()}; got {type(out).__name__}")
    flags = out.flags
    if out.shape != tuple(shape) or out.dtype != dtype.np or not flags.c_contiguous \
            or not flags.writeable:
        wrong = [f"shape {out.shape}"] if out.shape != tuple(shape) else []
        wrong += [f"dtype {out.dtype}"] if out.dtype != dtype.np else []
        wrong += [] if flags.c_contiguous else ["a layout that is not C-contiguous"]
        wrong += [] if flags.writeable else ["read-only"]
        raise ClayoutError(f"{what}: out= must be {want()}; got one with {', '.join(wrong)}")
    if np.may_share_memory(out, source):
        raise ClayoutError(f"{what}: out= overlaps the input; a conversion does not run in "
                           "place (pass a separate array)")
    return out


def _no_host_out(out, what: str, where: str) -> None:
    if out is not None:
        raise ClayoutError(f"{what} of a Memory: out= takes a numpy array and goes with a host "
                           f"array input; to write into a Memory pass it as {where}")


def reorder(data, src_desc: MemoryDesc, dst_desc: MemoryDesc, engine=None, out=None):
    """Reorder ``data`` (physical, in ``src_desc``) into ``dst_desc``; returns
    dst's 1-D physical array (dtype from ``dst_desc``). ``out``: a writable,
    C-contiguous array of that shape and dtype to write it into (its old
    contents do not matter: padding and gaps come out zero as in a new array);
    it is returned.

    With a ``runtime.Memory`` as ``data`` the conversion stays on its engine
    and returns a Memory: ``dst_desc`` is a MemoryDesc (a new Memory) or a
    Memory to write into, and ``src_desc`` may be None (the Memory's own desc
    is used; a different one is refused).

    >>> src = MemoryDesc((1, 3, 2, 2), tag="nchw")
    >>> reorder(np.arange(12, dtype=np.float32), src, MemoryDesc((1, 3, 2, 2), tag="nhwc"))[:6]
    array([0., 4., 8., 1., 5., 9.], dtype=float32)
    >>> frame = np.empty(12, np.float32)     # reused call after call: no new array
    >>> reorder(np.arange(12, dtype=np.float32), src, MemoryDesc((1, 3, 2, 2), tag="nhwc"),
    ...         out=frame) is frame
    True
    """
    if isinstance(data, Memory):
        _no_host_out(out, "reorder", "dst_desc")
        if data.is_image:
            raise ClayoutError(f"reorder takes a buffer Memory; {data!r} is an image: use "
                               "from_image")
        if src_desc is not None and src_desc != data.desc:
            raise ClayoutError(f"reorder of a Memory in {data.desc.describe()}: src_desc "
                               f"{src_desc.describe()} does not describe it; pass None or its desc")
        if not isinstance(dst_desc, (Memory, MemoryDesc)):
            raise ClayoutError("reorder of a Memory takes a MemoryDesc or a buffer Memory as "
                               f"dst_desc, got {type(dst_desc).__name__}")
        return memory.convert(data, dst_desc, engine)
    if not isinstance(src_desc, MemoryDesc) or not isinstance(dst_desc, MemoryDesc):
        raise ClayoutError("reorder takes MemoryDesc objects for src_desc and dst_desc")
    if src_desc.dims != dst_desc.dims:
        raise ClayoutError(f"reorder from {src_desc.describe()} to {dst_desc.describe()}: "
                           "dims differ; use desc.reshape() for a logical reshape")
    if not _held(data):   # float64, int64, a list: rounded once, straight to dst's dtype
        data = dtypes.host_array(data, dst_desc.dtype, "reorder input")
        src_desc = src_desc.with_dtype(dst_desc.dtype)
    flat = physical_input(data, src_desc)
    if out is not None:
        host_out(out, (dst_desc.span,), dst_desc.dtype, flat, "reorder")
    else:
        check_host_bytes(dst_desc.span * dst_desc.dtype.itemsize,
                         f"reorder output {dst_desc.describe()}")
    return engines.get(engine).convert(src_desc, dst_desc, flat, out)


def to_image(array, layout, src=None, dtype=None, engine=None, dims=None, out=None,
             max_image=None):
    """Place a tensor onto an image; returns (height, width, 4), or
    (height, width) for one-channel layouts, of the image dtype.
    With ``max_image=(W, H)`` an image over that limit comes as a tuple of
    tiles instead (the rule: runtime.algebra.tiles), which from_image accepts.

    ``src`` is the tag of ``array`` (default nchw / oihw / mihw / x by the
    layout's kind); a plain-tagged array comes in its physical shape, a
    blocked one 1-D with ``dims``. ``dtype`` is the image's (default: the
    array's). ``engine`` as in reorder; ``out`` as in reorder (the image's
    shape and dtype). A buffer ``runtime.Memory`` as ``array`` gives an image
    Memory on the same engine (``out``: an image Memory to write into).
    """
    layout = image_layout(layout)
    if isinstance(array, Memory):
        if max_image is not None:
            raise ClayoutError("max_image= goes with a host array; a Memory image is one image")
        if array.is_image:
            raise ClayoutError(f"to_image takes a buffer Memory; {array!r} is an image")
        if out is not None:
            if not isinstance(out, Memory):
                raise ClayoutError(f"to_image of a Memory: out= takes an image Memory, got "
                                   f"{type(out).__name__}; a numpy out= goes with a host array "
                                   "input")
            return memory.convert(array, out, engine)
        image = ImageDesc(layout, array.dims, dtype or array.dtype)
        return memory.convert(array, image, engine)
    if isinstance(out, Memory):
        raise ClayoutError("to_image: an image Memory as out= goes with a Memory input; "
                           "a host array input takes a numpy array as out=")
    arr = dtypes.host_array(array, dtypes.image_dtype(dtype) if dtype is not None else None,
                            "to_image input")  # other numeric types: rounded once to the image's
    src_dt = dtypes.of_array(arr)
    tag = src or layout.default_tag(arr.ndim if dims is None else len(dims))
    desc = _tagged(dims if dims is not None else dims_from_shape(arr.shape, tag), src_dt, tag)
    image = _image_side(layout, desc.dims, dtype if dtype is not None else src_dt)
    if out is None:
        check_host_bytes(image.nbytes, f"the {layout.name} image of dims {desc.dims}")
    eng = engines.get(engine)
    if max_image is not None:
        if out is not None:
            raise ClayoutError("to_image: out= and max_image= do not go together (tiles are "
                               "new arrays); pass one of them")
        plan = tile_plan(layout, desc.dims, max_image)
        _check_device_limit(eng, plan.max_image)
        flat = physical_input(arr, desc)
        if not plan.split:
            return eng.convert(desc, image, flat)
        return eng.to_tiles(desc, image, flat, plan)
    check_fits(image, eng.storage_limits or eng.image_limits)
    flat = physical_input(arr, desc)
    if out is not None:
        host_out(out, image.array_shape, image.dtype, flat, "to_image")
    return eng.convert(desc, image, flat, out)


def _check_device_limit(engine, max_image) -> None:
    limits = engine.image_limits
    if limits is not None and (max_image[0] > limits[0] or max_image[1] > limits[1]):
        raise ClayoutError(f"max_image {max_image[0]}x{max_image[1]} is over the "
                           f"device's image limit {limits[0]}x{limits[1]}; give at most that")


def from_image(image, layout, dims, dst=None, dtype=None, engine=None, out=None):
    """Read a tensor back from an image array (height, width, 4) (or
    (height, width)); returns the buffer in tag ``dst`` (default nchw /
    oihw / ...), in its physical shape when plain, else 1-D; ``dtype`` is the
    buffer's (default: the image's); ``out`` as in reorder (the returned
    shape and dtype). A tuple of tiles from ``to_image(..., max_image=...)``
    is accepted in place of the image."""
    layout = image_layout(layout)
    if isinstance(image, Memory):
        _no_host_out(out, "from_image", "dst")
        return _from_image_memory(image, layout, dims, dst, dtype, engine)
    if isinstance(image, tuple):
        if out is not None:
            raise ClayoutError("from_image: out= goes with one image array, not a tuple of tiles")
        eng = engines.get(engine)
        plan = plan_of(layout, dims, image)
        if plan.split:
            dims = as_ints(dims, "dims")
            side = ImageDesc(layout, dims, dtypes.of_array(image[0]))
            desc = MemoryDesc(dims, dtype if dtype is not None else side.dtype,
                              tag=dst or layout.default_tag(len(dims)))
            return eng.from_tiles(side, image, plan, desc).reshape(physical_shape(desc))
        image, engine = image[0], eng   # within the limit: the one tile is the image
    arr = np.asarray(image)
    if not _held(arr) and dtype is not None:  # a float64 image: rounded once to the output's
        arr = dtypes.host_array(arr, dtypes.image_dtype(dtype), "from_image input")
    img_dt = dtypes.image_dtype(dtypes.of_array(arr))
    dims = as_ints(dims, "dims")
    side = _image_side(layout, dims, img_dt)
    if arr.shape != side.array_shape:
        raise ClayoutError(f"image of shape {arr.shape} does not match layout {layout.name!r} "
                           f"for dims {dims}: expected {side.array_shape} "
                           f"({side.storage.host_form}[, lanes])")
    desc = _tagged(dims, dtype if dtype is not None else side.dtype,
                   dst or layout.default_tag(len(dims)))
    if out is None:
        check_host_bytes(desc.span * desc.dtype.itemsize, f"from_image output {desc.describe()}")
    else:
        host_out(out, physical_shape(desc), desc.dtype, arr, "from_image")
        engines.get(engine).convert(side, desc, arr, out.reshape(-1))
        return out
    return engines.get(engine).convert(side, desc, arr).reshape(physical_shape(desc))


def _from_image_memory(mem: Memory, layout, dims, dst, dtype, engine) -> Memory:
    """An image Memory read back into a buffer: ``dst`` is a tag (default by
    the layout's kind), a MemoryDesc, or a Memory to write into."""
    dims = as_ints(dims, "dims")
    if not mem.is_image or mem.layout.name != layout.name or \
            layout.logical_dims(dims) != mem.dims:
        raise ClayoutError(f"{mem!r} is not an image of layout {layout.name!r} with dims "
                           f"{tuple(dims)}")
    if isinstance(dst, (Memory, MemoryDesc)):
        return memory.convert(mem, dst, engine)
    tag = dst or layout.default_tag(len(dims))
    return memory.convert(mem, MemoryDesc(dims, dtype or mem.dtype.name, tag=tag), engine)


__all__ = ["reorder", "to_image", "from_image", "host_out"]
