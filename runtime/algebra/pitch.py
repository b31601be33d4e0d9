"""The pitched host form of a 2-D image (docs/engines.md, "Row pitch").

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
"""
from __future__ import annotations

import numpy as np

from .catalog import image_layout  # noqa: F401  (the doctest uses it)
from .checks import round_up
from .layout import ImageDesc
from ..errors import ClayoutError


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
    pixel = side.pixel_bytes
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
                           f"row pitch of {pitch * side.pixel_bytes} bytes: expected {shape} "
                           f"(height, row_pitch // {side.pixel_bytes} pixels[, lanes]) or "
                           f"1-D of {int(np.prod(shape))} elements")
    return np.ascontiguousarray(arr[:, :side.width])


__all__ = ["pitch_pixels", "pitched_shape", "pitched", "unpitched"]
