"""Host arrays at a door beyond the plain ones: ``out=`` checked
(``host_out``), and the pitched form of a 2-D image (docs/engines.md, "Row
pitch").

A 2-D image over a pitched buffer (cl_khr_image2d_from_buffer, as Apache
TVM, tinygrad and Arm Compute Library make them) starts each row
``row_pitch`` bytes after the previous one. Its host form is the image
array widened to ``row_pitch // pixel_bytes`` pixels a row, the columns past
the width zero: ``array.tobytes()`` is what the device buffer holds.
``row_pitch`` is in bytes everywhere (to_image, from_image,
Memory.from_buffer, image_pitch), as clCreateImage's ``image_row_pitch``.

>>> side = ImageDesc(image_layout("in_out_channel"), (1, 5, 2, 3))   # 6x2 RGBA f32
>>> pitch_pixels(side, 128, "to_image"), pitched_shape(side, 8)
(8, (2, 8, 4))
>>> image_pitch("in_out_channel", (1, 5, 2, 3), device=16)   # 6 px up to 16 px of 16 bytes
256
"""
from __future__ import annotations

import numpy as np

from . import engine as engines
from .algebra import dtypes
from .algebra.catalog import image_layout
from .algebra.checks import as_ints, round_up
from .algebra.layout import ImageDesc
from .contract import Engine
from .errors import ClayoutError


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


# -- row pitch ------------------------------------------------------------------------------
def pixel_bytes(side: ImageDesc) -> int:
    """Bytes of one pixel of ``side``: its lanes times the dtype's size."""
    return side.lanes * side.dtype.itemsize


def pitch_pixels(side: ImageDesc, row_pitch, what: str) -> int:
    """``row_pitch`` (bytes from one row of the 2-D image ``side`` to the
    next) in pixels, or one ClayoutError naming the value, the row's bytes
    and what is allowed: a whole number of bytes, a multiple of the pixel's
    bytes, at least a row's; a layout on image2d storage."""
    if not side.storage.views_buffer:
        raise ClayoutError(f"{what}: row_pitch={row_pitch!r}, but row_pitch applies to layouts "
                           f"on image2d storage (a 2-D image over a pitched buffer); layout "
                           f"{side.layout.name!r} is on {side.storage.name} storage: leave "
                           "row_pitch out")
    pixel = pixel_bytes(side)
    row = side.width * pixel
    allowed = f"allowed: a multiple of {pixel} bytes >= {row}"
    if isinstance(row_pitch, (bool, np.bool_)) or not isinstance(row_pitch, (int, np.integer)):
        raise ClayoutError(f"{what}: row_pitch={row_pitch!r} is not a whole number of bytes; "
                           f"a row of {side.describe()} is {row} bytes ({side.width} pixels of "
                           f"{pixel} bytes); {allowed}")
    pitch = int(row_pitch)
    if pitch < row:
        raise ClayoutError(f"{what}: row_pitch {pitch} bytes is shorter than a row of "
                           f"{side.describe()}: {row} bytes ({side.width} pixels of {pixel} "
                           f"bytes); {allowed}")
    if pitch % pixel:
        raise ClayoutError(f"{what}: row_pitch {pitch} bytes is not a whole number of pixels "
                           f"of {pixel} bytes ({side.lanes} x {side.dtype.name}; a row of "
                           f"{side.describe()} is {row} bytes); {allowed}, e.g. "
                           f"{round_up(pitch, pixel)}")
    return pitch // pixel


def pitched_shape(side: ImageDesc, pitch: int) -> tuple[int, ...]:
    """The host array of ``side`` with rows ``pitch`` pixels long:
    (height, pitch[, lanes])."""
    return (side.height, pitch) + side.array_shape[2:]


def pitched(image: np.ndarray, pitch: int, out: np.ndarray | None = None) -> np.ndarray:
    """``image`` (height, width[, lanes]) with each row widened to ``pitch``
    pixels by zero pixels; written into ``out`` (that shape) when given."""
    width = image.shape[1]
    if out is None:
        out = np.zeros((image.shape[0], pitch) + image.shape[2:], image.dtype)
    else:
        out[:, width:] = 0
    out[:, :width] = image
    return out


def unpitched(arr: np.ndarray, side: ImageDesc, pitch: int, what: str) -> np.ndarray:
    """The image ``side`` read from its pitched host form ``arr``: (height,
    pitch[, lanes]), or 1-D of as many elements (a flat copy of the device
    buffer in the image's dtype); the columns past the width are not read.
    Returns the (height, width[, lanes]) array, C-contiguous."""
    shape = pitched_shape(side, pitch)
    if arr.ndim == 1 and arr.size == int(np.prod(shape)):
        arr = arr.reshape(shape)
    if arr.shape != shape:
        raise ClayoutError(f"{what}: image of shape {arr.shape} is not {side.describe()} at a "
                           f"row pitch of {pitch * pixel_bytes(side)} bytes: expected {shape} "
                           f"(height, row_pitch // {pixel_bytes(side)} pixels[, lanes]) or "
                           f"1-D of {int(np.prod(shape))} elements")
    return np.ascontiguousarray(arr[:, :side.width])


def image_pitch(layout, dims, dtype="f32", device=None) -> int:
    """The row pitch in bytes a device needs for the 2-D image of ``layout``
    at ``dims`` over a buffer: the row's bytes rounded up to the device's
    CL_DEVICE_IMAGE_PITCH_ALIGNMENT, which OpenCL gives in pixels (so
    ``align * pixel_bytes`` bytes). ``device``: None (the default opencl
    engine's device where there is one, else no alignment), an engine, a
    pyopencl Device, or the alignment in pixels as an int (0: none)."""
    side = ImageDesc(image_layout(layout), as_ints(dims, "dims"), dtype)
    if not side.storage.views_buffer:
        raise ClayoutError(f"image_pitch: layout {side.layout.name!r} is on "
                           f"{side.storage.name} storage; a row pitch applies to layouts on "
                           "image2d storage (a 2-D image over a buffer)")
    return round_up(side.width, max(1, pitch_alignment(device))) * pixel_bytes(side)


def pitch_alignment(device) -> int:
    """CL_DEVICE_IMAGE_PITCH_ALIGNMENT in pixels of ``device`` (see
    image_pitch); 0 where there is none."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, (bool, np.bool_)):
        if device < 0:
            raise ClayoutError(f"image_pitch: device={device}: an alignment in pixels is >= 0 "
                               "(0: none)")
        return int(device)
    if device is None:
        return engines.get("opencl").pitch_alignment() if engines.opencl_available() else 0
    if isinstance(device, Engine) or (isinstance(device, str) and device in engines.NAMES):
        return engines.get(device).pitch_alignment()
    if engines.is_device_object(device):
        return engines.device_pitch_alignment(device)
    raise ClayoutError(f"image_pitch: device={device!r}; allowed: None (the default opencl "
                       "engine's device, if any), an engine or its name, a pyopencl Device, "
                       "or an int alignment in pixels")


__all__ = ["host_out", "pixel_bytes", "pitch_pixels", "pitched_shape", "pitched", "unpitched",
           "image_pitch", "pitch_alignment"]
