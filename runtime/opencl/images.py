"""Image storage on an OpenCL device: every fact of how an ImageDesc becomes
device memory and how kernels and copies reach it, in one place.

* the format (``image_format``): CL_RGBA (4 lanes), CL_R (1 lane) or CL_RG
  (2 lanes: a single texture with C = 2) with the channel type of the image
  dtype. Three lanes (a single texture with C = 3) have no format: OpenCL
  has CL_RGB only for packed channel types (CL_UNORM_SHORT_565,
  CL_UNORM_SHORT_555, CL_UNORM_INT_101010), none of which holds a float or
  an integer element exactly, so such an image object is refused with one
  ClayoutError; a host-array conversion of it needs no image object and
  runs through its dense buffer (runtime/opencl/engine.py ``staged``). A
  format the device does not list (PoCL has no CL_RG) is refused the same
  way (``unsupported``);
* the object (``create``), refused first when over the device's limits
  (``check_fits`` with the engine's ``limits``, naming the storage,
  its size and the limit): a ``cl.Image`` of type image2d, image2d_array
  (its layers are z) or image3d; for the buffer storages (``buffer``,
  ``image_buffer``) a ``cl.Buffer`` holding the image's dense desc, which
  conversions read and write as a buffer. A kernel binds an image buffer as
  an ``image1d_buffer_t`` over that buffer (``buffer_view``, made once per
  buffer object and kept on it);
* copies between the image and host arrays or buffers: ``origin`` and
  ``region`` (what ``cl.enqueue_copy`` takes: (w, h) or (w, h, d); an
  array's z is its layer);
* kernels: the parameter (``param``), the coordinate of a pixel
  (``coord``: int2 for image2d_t, (int4)(x, y, z, 0) for image2d_array_t and
  image3d_t, int for image1d_buffer_t), a read (``read``: an
  image1d_buffer_t takes no sampler) and the pragmas a write needs
  (``pragmas``: cl_khr_3d_image_writes for image3d_t).
"""
from __future__ import annotations


import numpy as np
import pyopencl as cl

from ..algebra import dtypes
from ..algebra.catalog import check_fits
from ..cache import LRU
from ..errors import ClayoutError
from .device import read_limits
from ..algebra.dtypes_c import c_type

ORDERS = {1: "R", 2: "RG", 4: "RGBA"}
NO_RGB = ("OpenCL has a 3-channel image (CL_RGB) only for packed channel types "
          "(CL_UNORM_SHORT_565, CL_UNORM_SHORT_555, CL_UNORM_INT_101010), none of which holds "
          "its elements exactly; host arrays of it convert on every engine, a device image of "
          "it needs C = 1, 2 or 4")


def image_format(dtype, lanes: int) -> cl.ImageFormat:
    """The image format of ``lanes`` lanes (1, 2 or 4) of the image dtype."""
    dt = dtypes.image_dtype(dtype)
    if lanes not in ORDERS:
        raise ClayoutError(f"no OpenCL image format has {lanes} {dt.name} lanes: {NO_RGB}")
    return cl.ImageFormat(getattr(cl.channel_order, ORDERS[lanes]),
                          getattr(cl.channel_type, c_type(dt).channel_type))


# (context, storage name) -> the (channel order, channel type) pairs the device lists
FORMATS = LRU("OpenCL image formats", "CLAYOUT_FORMATS_CACHE", 64)


def _formats(context: cl.Context, store) -> set:
    """The (channel order, channel type) pairs ``context`` lists for the storage ``store``."""
    def ask() -> set:
        found = cl.get_supported_image_formats(
            context, cl.mem_flags.READ_WRITE, getattr(cl.mem_object_type, store.cl_object))
        return {(f.channel_order, f.channel_data_type) for f in found}
    return FORMATS.get((context.int_ptr, store.name), ask)


def unsupported(context: cl.Context, image) -> str | None:
    """Why ``context`` cannot hold the ImageDesc ``image`` as an image object
    (no such format, or the device does not list it), or None when it can
    (always None for the ``buffer`` storage, a plain buffer)."""
    if not image.storage.image_object:
        return None
    store, what = image.storage, image.describe()
    if image.lanes not in ORDERS:
        return f"{what} has {image.lanes} lanes per pixel: {NO_RGB}"
    fmt = image_format(image.dtype, image.lanes)
    if (fmt.channel_order, fmt.channel_data_type) not in _formats(context, store):
        names = sorted({cl.channel_order.to_string(o) for o, t in _formats(context, store)
                        if t == fmt.channel_data_type and o in
                        (cl.channel_order.R, cl.channel_order.RG, cl.channel_order.RGBA)})
        device = context.devices[0].name.strip()
        return (f"{what} needs a CL_{ORDERS[image.lanes]} {c_type(image.dtype).channel_type} "
                f"{store.name}, which {device} does not support (its channel orders of that type: "
                f"{', '.join(names) or 'none'}); host arrays of it still convert")
    return None


def create(context: cl.Context, image, limits, flags=cl.mem_flags.READ_WRITE,
           hostbuf: np.ndarray | None = None):
    """Device memory for the ImageDesc ``image``: a ``cl.Image`` (image2d,
    image2d_array, image3d) or, for the buffer storages, a ``cl.Buffer`` of
    its dense desc; refused before allocation when over ``limits`` (a
    storage.Limits, or a 2-D (width, height)) or of a format the device
    lacks."""
    check_fits(image, limits)
    mf = cl.mem_flags
    if image.storage.on_buffer:
        if hostbuf is not None:
            return cl.Buffer(context, flags | mf.COPY_HOST_PTR,
                             hostbuf=np.ascontiguousarray(hostbuf).reshape(-1))
        return cl.Buffer(context, flags, size=max(1, image.nbytes))
    why = unsupported(context, image)
    if why:
        raise ClayoutError(why)
    fmt = image_format(image.dtype, image.lanes)
    is_array = image.storage.array
    if hostbuf is not None:
        return cl.create_image(context, flags | mf.COPY_HOST_PTR, fmt, shape=image.shape,
                               is_array=is_array, hostbuf=np.ascontiguousarray(hostbuf))
    return cl.create_image(context, flags, fmt, shape=image.shape, is_array=is_array)


def _object_shape(obj) -> tuple[int, ...]:
    kind = obj.type
    if kind == cl.mem_object_type.IMAGE2D_ARRAY:
        return obj.width, obj.height, obj.array_size
    if kind == cl.mem_object_type.IMAGE3D:
        return obj.width, obj.height, obj.depth
    if kind in (cl.mem_object_type.IMAGE1D, cl.mem_object_type.IMAGE1D_BUFFER):
        return (obj.width,)
    return obj.width, obj.height


def matches(obj, image) -> str | None:
    """Why the caller's ``cl.Buffer`` / ``cl.Image`` cannot hold ``image``, or
    None when it can: a buffer storage takes a ``cl.Buffer`` of at least the
    image's bytes; an image storage a ``cl.Image`` of its type, size and format."""
    store = image.storage
    what = f"layout {image.layout.name!r} for dims {image.dims}"
    if store.on_buffer:
        if not isinstance(obj, cl.Buffer):
            return (f"{what} is a {store.name}: it takes a cl.Buffer (of at least "
                    f"{image.nbytes} bytes), got {type(obj).__name__}")
        if obj.size < image.nbytes:
            return (f"cl.Buffer of {obj.size} bytes is too small for {image.describe()}: "
                    f"it needs {image.nbytes} bytes")
        return None
    kind = getattr(cl.mem_object_type, store.cl_object)
    expected = f"a {'x'.join(map(str, image.shape))} {store.name} {ORDERS.get(image.lanes)} " \
               f"{c_type(image.dtype).channel_type}"
    if not isinstance(obj, cl.Image):
        return f"{what} takes a cl.Image ({expected}), got {type(obj).__name__}"
    got_kind = cl.mem_object_type.to_string(obj.type)
    shape = _object_shape(obj)
    if obj.type != kind or shape != image.shape or \
            obj.format != image_format(image.dtype, image.lanes):
        return (f"cl.Image {got_kind} {'x'.join(map(str, shape))} {obj.format} does not match "
                f"{what}: expected {expected}")
    return None


def origin(image) -> tuple[int, ...]:
    """The first pixel, as enqueue_copy's ``origin`` (an array's z is its first layer)."""
    return (0,) * image.storage.ndim


def region(image) -> tuple[int, ...]:
    """The whole image, as enqueue_copy's ``region``: (w, h) or (w, h, depth or layers)."""
    return image.shape


def param(image, name: str, access: str) -> str:
    """The kernel parameter of ``image`` read (``access="read"``) or written:
    an image type, or the buffer storage's ``__global`` pointer."""
    if not image.storage.image_object:   # the buffer storage: a pointer to its pixels
        const = "const " if access == "read" else ""
        return f"__global {const}{image.dtype.cl_scalar} *{name}"
    return f"__{'read' if access == 'read' else 'write'}_only {image.storage.c_type} {name}"


def coord(image, coords) -> str:
    """The coordinate of pixel ``coords`` ((x, y), (x, y, z) or (x,), C
    expressions) as read_image*/write_image* take it."""
    ndim = image.storage.ndim   # OpenCL takes 3 coordinates as an int4
    if ndim == 1:
        return f"(int)({coords[0]})"
    vector = "int2" if ndim == 2 else "int4"
    return f"({vector})({', '.join(map(str, coords[:ndim]))}{', 0' if ndim == 3 else ''})"


def sampled(image) -> bool:
    """True when a read of ``image`` takes a sampler (not an image1d_buffer_t)."""
    return image.storage.sampled


def read(image, function: str, name: str, sampler: str, coords, wrap=None) -> str:
    """The read_image* call of pixel ``coords`` (its coordinate passed
    through ``wrap``: the access trace's, runtime/opencl/trace.py)."""
    at = coord(image, coords) if wrap is None else wrap(coord(image, coords))
    if sampled(image):
        return f"{function}({name}, {sampler}, {at})"
    return f"{function}({name}, {at})"


def pragmas(image, access: str) -> tuple[str, ...]:
    """Extension pragmas a kernel using ``image`` this way needs (OpenCL C 1.2
    writes an image3d_t only under cl_khr_3d_image_writes)."""
    extension = image.storage.write_extension
    if access != "read" and extension:
        return (f"#pragma OPENCL EXTENSION {extension} : enable",)
    return ()


def bound(storage, image):
    """What a kernel binds for the ImageDesc ``image`` held in ``storage``:
    an image buffer's ``cl.Buffer`` as its ``image1d_buffer_t`` view
    (``buffer_view``), anything else as it is."""
    if image.storage.buffer_view and isinstance(storage, cl.Buffer):
        return buffer_view(storage, image)
    return storage


def buffer_view(buffer: cl.Buffer, image) -> cl.Image:
    """The ``image1d_buffer_t`` over ``buffer`` (the memory of the
    image_buffer ImageDesc ``image``) that a kernel binds; made once per
    buffer object and format and kept on it. One ClayoutError says why the
    device cannot make it (no image buffers, too many pixels, no such
    format)."""
    fmt = image_format(image.dtype, image.lanes)
    views = getattr(buffer, "_clayout_views", None)
    key = (fmt.channel_order, fmt.channel_data_type, image.width)
    if views is not None and key in views:
        return views[key]
    dev = buffer.context.devices[0]
    limits = read_limits(dev)
    what = f"an image1d_buffer_t view of {image.describe()}"
    if not dev.image_support or limits.image_buffer == 0:
        raise ClayoutError(f"{what}: {dev.name.strip()} has no image buffers "
                           "(OpenCL 1.2 image1d_buffer_t); read it as a buffer (layout "
                           "tflite_buffer)")
    why = limits.refusal(image)
    if why:
        raise ClayoutError(f"{what}: {why}")
    why = matches(buffer, image)
    if why:
        raise ClayoutError(f"{what}: {why}")
    why = unsupported(buffer.context, image)
    if why:
        raise ClayoutError(why)
    mf = cl.mem_flags
    access = buffer.flags & (mf.READ_WRITE | mf.READ_ONLY | mf.WRITE_ONLY) or mf.READ_WRITE
    view = cl.create_image(buffer.context, access, fmt, shape=(image.width,), buffer=buffer)
    # the view keeps its buffer alive (PoCL does not retain it: a view whose
    # buffer was released read freed memory); the cycle is the collector's
    view._clayout_buffer = buffer
    if views is None:
        views = {}
        buffer._clayout_views = views
    views[key] = view
    return view
