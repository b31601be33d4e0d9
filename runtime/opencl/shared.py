"""Zero-copy import: the caller's ``cl.Buffer`` as the storage of an image
side (``runtime.memory.Memory.from_buffer``), the rules the engine's
DeviceMemory (runtime/opencl/memory.py) applies.

* A layout on a buffer storage (``buffer``, ``image_buffer``: the image's
  dense desc in a ``cl.Buffer``) holds the caller's buffer itself.
* The buffer's rows are ``row_pitch`` pixels apart; by default dense (the
  row's own pixels), on every device. A buffer too small for height rows at
  that pitch is refused (ClayoutError).
* A 2-D image layout, where the device has ``cl_khr_image2d_from_buffer``
  (core in OpenCL 2.x), the pitch is a multiple of
  CL_DEVICE_IMAGE_PITCH_ALIGNMENT and the buffer's start (``buffer_address``)
  a multiple of CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT (both in pixels, as
  the spec says): a ``cl.Image`` made over the buffer (the buffer in the
  image descriptor of clCreateImage), a view.
* Elsewhere (no such extension, as on PoCL; a pitch or start off the
  device's alignment; an array or 3-D image storage): a new image, the
  buffer's bytes copied into it on the device, and the reason, which the
  caller is told once per engine and reason. A reason names the device and
  its alignment, never a call's own numbers (pitch, address): one warning
  per kind of copy, not one per tensor shape.

The decisions (``buffer_pitch``, ``misaligned``) are functions of the
device's numbers alone, so that they are tested without such a device.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from dataclasses import dataclass

import pyopencl as cl

from ..algebra.catalog import check_fits
from ..errors import ClayoutError
from . import images

mf = cl.mem_flags
EXTENSION = "cl_khr_image2d_from_buffer"
# device info queries pyopencl has no names for (OpenCL 2.0 / the extension)
PITCH_ALIGNMENT = 0x104A          # CL_DEVICE_IMAGE_PITCH_ALIGNMENT, pixels
BASE_ADDRESS_ALIGNMENT = 0x104B   # CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT, pixels


@dataclass(frozen=True)
class BufferView:
    """What ``view_buffer`` made: ``storage`` (the caller's buffer, an image
    over it, or a new image holding a copy), ``reason`` why it is a copy
    (None: no copy), ``first``: the first time this engine copies for this
    reason (the caller tells the user then), ``row_pitch`` in bytes, the
    pitch the image was read at (None for a buffer storage)."""
    storage: object
    reason: str | None
    first: bool
    row_pitch: int | None


def buffer_pitch(side, nbytes: int, row_pitch) -> int:
    """The row pitch in pixels of the 2-D image ``side`` read from a buffer
    of ``nbytes`` bytes: ``row_pitch`` (pixels from one row to the next, the
    caller's bytes already checked by runtime.algebra.pitch.pitch_pixels: a whole
    number of pixels >= the width), None: dense rows, the width. A buffer
    too small for the image's rows at that pitch is a ClayoutError (in
    bytes, the unit the caller used)."""
    pixel = side.pixel_bytes
    pitch = side.width if row_pitch is None else row_pitch
    rows = side.height * side.depth
    need = pitch * rows * pixel
    if nbytes < need:
        raise ClayoutError(f"cl.Buffer of {nbytes} bytes is too small for {side.describe()} "
                           f"at a row pitch of {pitch * pixel} bytes: it needs {need} bytes "
                           f"({rows} rows of {pitch} pixels of {pixel} bytes)")
    return pitch


def misaligned(side, pitch: int, pitch_align: int, base_align: int, address: int | None,
               device: str) -> str | None:
    """Why a device that views buffers as 2-D images (its ``pitch_align``
    and ``base_align`` in pixels, 0 for none) cannot view the buffer of
    ``side`` at ``pitch`` pixels starting at ``address`` (None: the
    driver's own allocation, aligned by it); None: it can. The reason has
    no per-call number, so that it is told once per engine."""
    pixel = side.pixel_bytes
    wrong = []
    if pitch_align > 1 and pitch % pitch_align:
        wrong.append(f"the row pitch (row_pitch=, else the row's own bytes) is not a multiple "
                     f"of {device}'s CL_DEVICE_IMAGE_PITCH_ALIGNMENT, {pitch_align} pixels "
                     "(runtime.image_pitch gives one that is)")
    if base_align > 1 and address is not None and address % (base_align * pixel):
        wrong.append(f"the buffer's start (a USE_HOST_PTR host array or a sub-buffer's "
                     f"origin) is not a multiple of {device}'s "
                     f"CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT, {base_align} pixels")
    return "; and ".join(wrong) or None


def buffer_address(buffer: cl.Buffer) -> int | None:
    """What the base-address alignment applies to: the host memory of a
    USE_HOST_PTR buffer, the origin of a sub-buffer; None for the driver's
    own allocation (aligned by the driver)."""
    if buffer.flags & mf.USE_HOST_PTR:
        return int(buffer.get_host_array((1,), "u1").ctypes.data)
    if buffer.associated_memobject is not None:
        return int(buffer.offset)
    return None


def image_from_buffer_refusal(device) -> str | None:
    """Why ``device`` (a runtime.opencl.device.Device) cannot view a buffer
    as a 2-D image (None: it can)."""
    if EXTENSION in device.extensions or device.cl_device.version.startswith("OpenCL 2."):
        if device.alignments is None:
            return (f"{device.name}'s CL_DEVICE_IMAGE_PITCH_ALIGNMENT could not be read, so a "
                    "2-D image over the buffer could not be checked")
        return None
    return f"{device.name} has no {EXTENSION} (a 2-D image over a buffer)"


def view_buffer(memory, side, buffer, row_pitch=None) -> BufferView:
    """The storage of ``side`` (an ImageDesc) on the caller's ``buffer``
    (see the module docstring), made through ``memory`` (the engine's
    runtime.opencl.memory.DeviceMemory); ``row_pitch`` in pixels (Memory
    turned the caller's bytes into pixels), None for dense rows. ``first``
    is left False: the engine says whether it told that reason before."""
    device = memory.device
    if not isinstance(buffer, cl.Buffer):
        raise ClayoutError(f"Memory.from_buffer takes a pyopencl Buffer, got "
                           f"{type(buffer).__name__}")
    if buffer.context != device.context:
        raise ClayoutError(f"the cl.Buffer belongs to another context than the engine's "
                           f"({device.name}); pass engine=None or an engine on its context")
    if side.is_zero:   # nothing to hold, as a Memory of no elements
        return BufferView(None, None, False, None)
    check_fits(side, device.limits)
    if side.storage.on_buffer:
        _no_pitch(side, row_pitch)
        wrong = images.matches(buffer, side)
        if wrong:
            raise ClayoutError(wrong)
        return BufferView(buffer, None, False, None)
    if not side.storage.views_buffer:
        _no_pitch(side, row_pitch)
    pitch = buffer_pitch(side, buffer.size, row_pitch)    # too small: refused
    row_bytes = pitch * side.pixel_bytes
    if side.storage.views_buffer:
        why = image_from_buffer_refusal(device)
        if why is None:
            why = misaligned(side, pitch, *device.alignments, buffer_address(buffer),
                             device.name)
        if why is None:
            return BufferView(_image_over(memory, side, buffer, pitch), None, False, row_bytes)
    else:
        why = (f"layout {side.layout.name!r} is on {side.storage.name} storage; only a 2-D "
               "image can view a buffer")
    reason = f"{why}: the buffer's bytes were copied into a new image"
    return BufferView(_image_copy(memory, side, buffer, pitch), reason, False, row_bytes)


def _image_over(memory, side, buffer, pitch: int) -> cl.Image:
    why = images.unsupported(memory.context, side)
    if why:
        raise ClayoutError(why)
    desc = cl.ImageDescriptor()
    desc.image_type = cl.mem_object_type.IMAGE2D
    desc.shape = (side.width, side.height)
    desc.pitches = (pitch * side.pixel_bytes,)
    desc.buffer = buffer
    memory._count("images")
    # flags 0: the image takes the buffer's own access flags
    return cl.Image(memory.context, 0, images.image_format(side.dtype, side.lanes), desc=desc)


def _image_copy(memory, side, buffer, pitch: int) -> cl.Image:
    """A new image holding the buffer's pixels, copied on the device (a
    pitched buffer is first made dense by a rectangle copy). A
    sub-buffer is read as its parent from the sub-buffer's origin: PoCL
    3.1 crashes (SIGSEGV) copying from a sub-buffer into an image or by
    a rectangle, while a copy from the parent at an offset is plain."""
    image = memory.image(side)
    source, start, wait = buffer, 0, None
    queue = memory.queue
    if buffer.associated_memobject is not None:   # no sub-buffer of a sub-buffer in OpenCL
        source, start = buffer.associated_memobject, int(buffer.offset)
    if pitch != side.width:
        row = side.width * side.pixel_bytes
        dense = memory.buffer(row * side.height)
        wait = [cl.enqueue_copy(queue, dense, source, src_origin=(start, 0),
                                dst_origin=(0, 0), region=(row, side.height),
                                src_pitches=(pitch * side.pixel_bytes,),
                                dst_pitches=(row,))]
        source, start = dense, 0
    event = cl.enqueue_copy(queue, image, source, offset=start,
                            origin=images.origin(side), region=images.region(side),
                            wait_for=wait)
    if not memory.device.in_order:   # the copy is part of making the Memory
        event.wait()
    return image


def _no_pitch(side, row_pitch) -> None:
    if row_pitch is not None:
        raise ClayoutError(f"row_pitch applies to layouts on image2d storage; layout "
                           f"{side.layout.name!r} is on {side.storage.name} storage")


def device_pitch_alignment(device: cl.Device) -> int:
    """CL_DEVICE_IMAGE_PITCH_ALIGNMENT of ``device`` in pixels (0: none or unreadable)."""
    found = alignments(device)
    return 0 if found is None else found[0]


def alignments(device: cl.Device) -> tuple[int, int] | None:
    """CL_DEVICE_IMAGE_PITCH_ALIGNMENT and _BASE_ADDRESS_ALIGNMENT of
    ``device``, read through the OpenCL library pyopencl uses (pyopencl has
    no names for them); None where that fails."""
    names = [getattr(cl.device_info, n, None) for n in ("IMAGE_PITCH_ALIGNMENT",
                                                         "IMAGE_BASE_ADDRESS_ALIGNMENT")]
    if None not in names:
        return tuple(int(device.get_info(n)) for n in names)
    lib = _library()
    if lib is None:
        return None
    out = []
    for param in (PITCH_ALIGNMENT, BASE_ADDRESS_ALIGNMENT):
        value = ctypes.c_uint32(0)
        rc = lib.clGetDeviceInfo(ctypes.c_void_p(device.int_ptr), ctypes.c_uint32(param),
                                 ctypes.c_size_t(4), ctypes.byref(value), None)
        if rc != 0:
            return None
        out.append(int(value.value))
    return tuple(out)


def _library():
    """The OpenCL ICD loader: the one bundled with pyopencl, else the system's."""
    here = os.path.join(os.path.dirname(cl.__file__), ".libs")
    for path in sorted(glob.glob(os.path.join(here, "libOpenCL*"))) + \
            [ctypes.util.find_library("OpenCL")]:
        if path:
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None
