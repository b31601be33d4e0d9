"""``runtime.prepare``: a conversion planned once from what does not change
between frames, then called with the data (docs/engines.md, "Prepared
conversions"). Each function takes the ordinary door's keywords with the
input's shape and dtype in place of the input, checks them as the door
would (one ClayoutError), and returns a ``Prepared``
(runtime/doors/prepared_call.py): ``conv(x)``, ``conv(x, out=...)``,
``conv(x, wait=False)``, ``conv(x, wait_for=[...])``. The same call takes a
``Memory`` holding its input's side on its engine's device (the result is
then a Memory, ``out=`` a Memory).

>>> conv = to_image((1, 3, 2, 2), "f32", "in_out_channel", engine="cpu")
>>> conv
<clayout prepared to_image: f32 1x3x2x2 abcd -> in_out_channel 1x3x2x2 f32 (image 2x2 RGBA) on cpu>
>>> conv(np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2))[0, 1]
array([1., 5., 9., 0.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..algebra import dtypes
from ..algebra.checks import as_ints
from ..algebra.desc import MemoryDesc
from ..errors import ClayoutError
from .parse import parse_from_frame, parse_from_image, parse_reorder, parse_to_image
from .prepared_call import Prepared
from .read_output import prepare_read_output as read_output


def _stand_in(shape, dtype, what: str) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` the parse checks in place of the
    input (zero pages, never written: nothing of it is kept)."""
    shape = (shape,) if isinstance(shape, int) else as_ints(shape, f"{what}: shape")
    try:
        dt = dtypes.dtype(dtype).np if isinstance(dtype, str) else np.dtype(dtype)
    except TypeError:
        raise ClayoutError(f"{what}: input dtype {dtype!r}; allowed: a clayout dtype name "
                           f"({', '.join(dtypes.NAMES)}) or a numpy dtype") from None
    return np.zeros(shape, dt)


def to_image(shape, input_dtype, layout, src=None, dtype=None, engine=None, dims=None,
             max_image=None, row_pitch=None) -> Prepared:
    """``runtime.to_image`` of arrays of ``shape`` and ``input_dtype``
    (``dtype`` is the image's, as there)."""
    x = _stand_in(shape, input_dtype, "prepare.to_image")
    call = parse_to_image(x, layout, src, dtype, engine, dims, None, max_image, row_pitch)
    return Prepared("to_image", call, x.shape, x.dtype)


def from_image(image_shape, input_dtype, layout, dims, dst=None, dtype=None, engine=None,
               check_padding=True, row_pitch=None) -> Prepared:
    """``runtime.from_image`` of image arrays of ``image_shape`` and
    ``input_dtype`` (``dtype`` is the buffer's, as there); the padding lanes
    of every image are checked unless ``check_padding=False``."""
    x = _stand_in(image_shape, input_dtype, "prepare.from_image")
    call = parse_from_image(x, layout, dims, dst, dtype, engine, None, check_padding,
                            row_pitch)
    padding = call.src if check_padding and call.src.memory.has_padding else None
    return Prepared("from_image", call, x.shape, x.dtype, padding)


def reorder(src_desc: MemoryDesc, dst_desc: MemoryDesc, engine=None) -> Prepared:
    """``runtime.reorder`` of arrays in ``src_desc``: 1-D (its physical
    elements) or, for a dense plain desc, its physical shape."""
    if not isinstance(src_desc, MemoryDesc):
        raise ClayoutError("prepare.reorder takes MemoryDesc objects for src_desc and dst_desc")
    x = _stand_in((src_desc.span,), src_desc.dtype.np, "prepare.reorder")
    call = parse_reorder(x, src_desc, dst_desc, engine)
    return Prepared("reorder", call, x.shape, x.dtype, physical=src_desc)


def from_frame(frame_shape, layout, *, format, size=None, crop=None, fit="stretch", fill=0,
               resize="bilinear", mean=0.0, std=1.0, order="rgb", yuv=None, dtype="f32",
               engine=None, antialias=False, scale=1.0) -> Prepared:
    """``runtime.from_frame`` of u8 frames of ``frame_shape``."""
    x = _stand_in(frame_shape, np.uint8, "prepare.from_frame")
    call = parse_from_frame(x, layout, format=format, size=size, crop=crop, fit=fit, fill=fill,
                            resize=resize, mean=mean, std=std, order=order, yuv=yuv,
                            dtype=dtype, engine=engine, antialias=antialias, scale=scale)
    return Prepared("from_frame", call, x.shape, x.dtype)


__all__ = ["to_image", "from_image", "reorder", "from_frame", "read_output", "Prepared"]
