"""What a kernel binds for an accessor's tensor (``Accessor.args``,
runtime/opencl/accessor.py), checked here: a wrong object is one
ClayoutError naming what it got and what it takes, not an INVALID_VALUE
from the driver, nor a kernel that reads another shape's memory (an
accessor's dims are in its text or its arguments, never in the object).

It takes

* a ``runtime.Memory`` on an OpenCL engine whose side (layout, dims, dtype;
  a MemoryDesc by its equality) is the accessor's. A Winograd layout's
  Memory holds what its accessor reads (the placement of the transform's
  output), so it is compared by that;
* or the device object itself: a ``cl.Image`` of the image's type, size and
  format; a ``cl.Buffer`` of at least its bytes for a buffer (a MemoryDesc)
  or a buffer storage (``buffer``, ``image_buffer``); for an image buffer
  also its ``image1d_buffer_t`` view (a ``cl.Image`` of that type, width
  and format).

An image buffer's ``cl.Buffer`` is bound as its ``image1d_buffer_t`` view
(runtime/opencl/images.py ``buffer_view``), everything else as it is.
"""
from __future__ import annotations

import pyopencl as cl

from ..errors import ClayoutError
from . import images


def device_object(name: str, side, storage):
    """The object a kernel binds for ``side`` (the side of accessor
    ``name``) held in ``storage``: a Memory or a pyopencl object (module
    docstring)."""
    what = f"accessor {name!r} of {side.describe()}"
    if _is_memory(storage):
        obj = _held(storage, side, what)
    else:
        why = _mismatch(storage, side)
        if why:
            raise ClayoutError(f"{what} takes a runtime.Memory of it or its device object: {why}")
        obj = storage
    return images.bound(obj, side) if side.is_image else obj


def _is_memory(obj) -> bool:
    """A runtime.Memory, known by what it holds (a side, its engine, its
    storage): the opencl package stands below runtime.memory and does not import it."""
    return all(hasattr(obj, a) for a in ("side", "engine", "storage"))


def _held(mem, side, what: str):
    """The device object of ``mem``, which must hold ``side`` on a device."""
    if mem.engine.domain == "host":
        raise ClayoutError(f"{what} takes a Memory on an OpenCL engine; got {mem!r}, whose "
                           "storage is a host array (make it with engine='opencl')")
    held = mem.side.stored() if mem.side.is_image else mem.side
    if held != side:
        raise ClayoutError(f"{what} takes a Memory of that side (layout, dims and dtype); got "
                           f"{mem.side.describe()}: build the accessor from the Memory's "
                           "side (runtime.accessor(mem.side, ...))")
    if mem.storage is None:
        raise ClayoutError(f"{what}: {mem!r} holds no elements, so no device memory to bind")
    return mem.storage


def _mismatch(obj, side) -> str | None:
    """Why the pyopencl object ``obj`` cannot hold ``side``, or None."""
    if isinstance(obj, cl.Image) and side.is_image and side.storage.buffer_view:
        return _not_its_view(obj, side)
    if side.is_image:
        return images.matches(obj, side)
    need = side.span_bytes
    if not isinstance(obj, cl.Buffer):
        return f"a buffer takes a cl.Buffer (of at least {need} bytes), got {type(obj).__name__}"
    if obj.size < need:
        return f"cl.Buffer of {obj.size} bytes is too small for it: it needs {need} bytes"
    return None


def _not_its_view(obj: cl.Image, side) -> str | None:
    """Why the cl.Image ``obj`` is not an image1d_buffer_t view of ``side``, or None."""
    fmt = images.image_format(side.dtype, side.lanes)
    if obj.type == cl.mem_object_type.IMAGE1D_BUFFER and obj.width == side.width and \
            obj.format == fmt:
        return None
    return (f"cl.Image {cl.mem_object_type.to_string(obj.type)} of width {obj.width} "
            f"{obj.format} is not its image1d_buffer_t view (an IMAGE1D_BUFFER of width "
            f"{side.width} {fmt}); pass its cl.Buffer")


__all__ = ["device_object"]
