"""The public conversions: reorder, to_image, from_image (docs/engines.md).

Each validates its input fully (dtype, size, dims, layout, image limits)
before any work, then hands host arrays to an engine. Memory objects are
handled by runtime.memory and stay on their engine.
"""
from __future__ import annotations

import numpy as np

from .algebra import dtypes
from . import engine as engines
from .algebra.desc import MemoryDesc, _ints
from .errors import ClayoutError
from .algebra.hostarray import dims_from_shape, physical_input, physical_shape
from .algebra.layout import image_layout
from .limits import check_host_bytes
from .memory import Memory, from_image_memory, reorder_memory, to_image_memory
from .algebra.tiles import from_image_tiles, plan_of, to_image_tiles



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
    want = (f"a writable, C-contiguous {dtype.name} ({dtype.np}) numpy array of shape "
            f"{tuple(shape)}")
    if not isinstance(out, np.ndarray):
        raise ClayoutError(f"{what}: out= must be {want}; got {type(out).__name__}")
    wrong = [f"shape {out.shape}"] if out.shape != tuple(shape) else []
    wrong += [f"dtype {out.dtype}"] if out.dtype != dtype.np else []
    wrong += [] if out.flags.c_contiguous else ["not C-contiguous"]
    wrong += [] if out.flags.writeable else ["read-only"]
    if wrong:
        raise ClayoutError(f"{what}: out= must be {want}; got one with {', '.join(wrong)}")
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
        if src_desc is not None and src_desc != data.desc:
            raise ClayoutError(f"reorder of a Memory in {data.desc.describe()}: src_desc "
                               f"{src_desc.describe()} does not describe it; pass None or its desc")
        return reorder_memory(data, dst_desc, engine)
    if not isinstance(src_desc, MemoryDesc) or not isinstance(dst_desc, MemoryDesc):
        raise ClayoutError("reorder takes MemoryDesc objects for src_desc and dst_desc")
    if src_desc.dims != dst_desc.dims:
        raise ClayoutError(f"reorder from {src_desc.describe()} to {dst_desc.describe()}: "
                           "dims differ; use "
                           "desc.reshape() for a logical reshape")
    if not _held(data):   # float64, int64, a list: rounded once, straight to dst's dtype
        data = dtypes.host_array(data, dst_desc.dtype, "reorder input")
        src_desc = src_desc.with_dtype(dst_desc.dtype)
    flat = physical_input(data, src_desc)
    if out is not None:
        host_out(out, (dst_desc.span,), dst_desc.dtype, flat, "reorder")
    else:
        check_host_bytes(dst_desc.span * dst_desc.dtype.itemsize,
                         f"reorder output {dst_desc.describe()}")
    return engines.get(engine).reorder(flat, src_desc, dst_desc, out=out)


def to_image(array, layout, src=None, dtype=None, engine=None, dims=None, out=None,
             max_image=None):
    """Place a tensor onto an image; returns (height, width, 4), or
    (height, width) for one-channel layouts, of the image dtype.
    With ``max_image=(W, H)`` an image over that limit comes as a tuple of
    tiles instead (the rule: runtime.tiles), which from_image accepts.

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
        if out is not None and not isinstance(out, Memory):
            raise ClayoutError(f"to_image of a Memory: out= takes an image Memory, got "
                               f"{type(out).__name__}; a numpy out= goes with a host array input")
        return to_image_memory(array, layout, dtype, engine, out=out)
    if isinstance(out, Memory):
        raise ClayoutError("to_image: an image Memory as out= goes with a Memory input; "
                           "a host array input takes a numpy array as out=")
    arr = dtypes.host_array(array, dtypes.image_dtype(dtype) if dtype is not None else None,
                            "to_image input")  # other numeric types: rounded once to the image's
    src_dt = dtypes.of_array(arr)
    img_dt = dtypes.image_dtype(dtype if dtype is not None else src_dt)
    tag = src or layout.default_tag(arr.ndim if dims is None else len(dims))
    desc = MemoryDesc(dims if dims is not None else dims_from_shape(arr.shape, tag), src_dt,
                      tag=tag)
    layout.logical_dims(desc.dims)  # checks rank against the layout
    if out is None:
        check_host_bytes(layout.desc(desc.dims, img_dt).size,
                         f"the {layout.name} image of dims {desc.dims}")
    eng = engines.get(engine)
    if max_image is not None:
        if out is not None:
            raise ClayoutError("to_image: out= and max_image= do not go together (tiles are "
                               "new arrays); pass one of them")
        return to_image_tiles(eng, physical_input(arr, desc), layout, desc, img_dt, max_image)
    limits = getattr(eng, "image_limits", None)
    if limits is not None:
        layout.check_fits(desc.dims, *limits)
    flat = physical_input(arr, desc)
    if out is not None:
        host_out(out, layout.array_shape(desc.dims), img_dt, flat, "to_image")
    return eng.to_image(flat, layout, desc, img_dt, out=out)


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
        return from_image_memory(image, layout, dims, dst, dtype, engine)
    if isinstance(image, tuple):
        if out is not None:
            raise ClayoutError("from_image: out= goes with one image array, not a tuple of tiles")
        eng = engines.get(engine)
        plan = plan_of(layout, dims, image)
        if plan.split:
            return from_image_tiles(eng, image, plan, dims, dst, dtype)
        image, engine = image[0], eng   # within the limit: the one tile is the image
    arr = np.asarray(image)
    if not _held(arr) and dtype is not None:  # a float64 image: rounded once to the output's
        arr = dtypes.host_array(arr, dtypes.image_dtype(dtype), "from_image input")
    img_dt = dtypes.image_dtype(dtypes.of_array(arr))
    dims = _ints(dims, "dims")
    layout.logical_dims(dims)
    want = layout.array_shape(dims)
    if arr.shape != want:
        raise ClayoutError(f"image of shape {arr.shape} does not match layout {layout.name!r} "
                           f"for dims {dims}: expected {want} (height, width[, 4])")
    out_dt = dtypes.dtype(dtype if dtype is not None else img_dt)
    desc = MemoryDesc(dims, out_dt, tag=dst or layout.default_tag(len(dims)))
    if out is None:
        check_host_bytes(desc.span * desc.dtype.itemsize, f"from_image output {desc.describe()}")
    if out is not None:
        host_out(out, physical_shape(desc), desc.dtype, arr, "from_image")
        engines.get(engine).from_image(arr, layout, desc, out=out.reshape(-1))
        return out
    return engines.get(engine).from_image(arr, layout, desc).reshape(physical_shape(desc))
