"""The frame formats and the colour stage's matrices (docs/frames.md):
how a u8 frame array of each format is laid out, and YUV -> RGB.

>>> FORMATS["nv21"].size_of((1080, 1280)), FORMATS["nv21"].shape(720, 1280)
((720, 1280), (1080, 1280))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ClayoutError


# -- the formats ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FrameFormat:
    """One frame format: ``family`` packed (h, w, ``bytes``) or (h, w) for
    gray, or yuv420 (the (h*3/2, w) array: Y plane, then chroma);
    ``rgb``: the packed channel of R, G and B (gray: its one channel);
    ``chroma``: yuv420's arrangement, ``"uv"`` / ``"vu"`` interleaved
    (NV12 / NV21) or ``"planes"`` (I420: the U plane, then the V plane)."""
    name: str
    family: str
    bytes: int = 1
    rgb: tuple[int, ...] = (0,)
    chroma: str = ""

    @property
    def is_yuv(self) -> bool:
        return self.family == "yuv420"

    @property
    def channels(self) -> int:
        """C of the model input: 1 for gray, else 3."""
        return 1 if self.name == "gray" else 3

    @property
    def shape_text(self) -> str:
        if self.is_yuv:
            return "(h*3/2, w) with h and w even"
        return "(h, w) or (h, w, 1)" if self.bytes == 1 else f"(h, w, {self.bytes})"

    def size_of(self, shape) -> tuple[int, int]:
        """(h, w) of a frame array of ``shape``, or a ClayoutError naming the shape allowed."""
        shape = tuple(int(s) for s in shape)
        if self.is_yuv:
            # (h*3/2, w) of an even h: the height a multiple of 3 (h = 2/3 of it)
            if len(shape) == 2 and shape[0] % 3 == 0 and shape[1] % 2 == 0 and min(shape) > 0:
                return shape[0] * 2 // 3, shape[1]
        elif self.bytes == 1:
            if len(shape) == 2 or (len(shape) == 3 and shape[2] == 1):
                return shape[0], shape[1]
        elif len(shape) == 3 and shape[2] == self.bytes:
            return shape[0], shape[1]
        why = ""
        if self.is_yuv and len(shape) == 2:
            why = f" (its height {shape[0]} is not h*3/2 of an even h)" if shape[0] % 3 else \
                f" (its width {shape[1]} is odd)" if shape[1] % 2 else ""
        raise ClayoutError(f"frame of shape {shape} does not fit format {self.name}: a "
                           f"{self.name} frame is a u8 array {self.shape_text}{why}")

    def shape(self, height: int, width: int) -> tuple[int, ...]:
        """The array shape of a frame of (height, width) pixels."""
        if self.is_yuv:
            return (height * 3 // 2, width)
        return (height, width) if self.bytes == 1 else (height, width, self.bytes)


FORMATS = {f.name: f for f in (
    FrameFormat("rgb", "packed", 3, (0, 1, 2)),
    FrameFormat("bgr", "packed", 3, (2, 1, 0)),
    FrameFormat("rgba", "packed", 4, (0, 1, 2)),
    FrameFormat("bgra", "packed", 4, (2, 1, 0)),
    FrameFormat("gray", "packed", 1, (0,)),
    FrameFormat("nv12", "yuv420", chroma="uv"),
    FrameFormat("nv21", "yuv420", chroma="vu"),
    FrameFormat("i420", "yuv420", chroma="planes"),
)}


def frame_format(name) -> FrameFormat:
    if isinstance(name, FrameFormat):
        return name
    if not isinstance(name, str) or name not in FORMATS:
        raise ClayoutError(f"unknown frame format {name!r}; formats: {', '.join(FORMATS)}")
    return FORMATS[name]


# -- colour: YUV to RGB -----------------------------------------------------------------------
@dataclass(frozen=True)
class YUV:
    """A YUV -> RGB matrix: with y = max(Y - y0, 0) (luma below black is
    black, as OpenCV), R = ky·y + rv(V - 128), G = ky·y + gv(V - 128) +
    gu(U - 128), B = ky·y + bu(U - 128), each clamped to [0, 255]. ``f32``
    gives the numbers as the float32 stage uses them; the float32 stage
    evaluates G as ((ky·y + gv·v) + gu·u), each product and sum rounded to
    float32."""
    name: str
    y0: int
    ky: float
    rv: float
    gv: float
    gu: float
    bu: float
    text: str

    def f32(self) -> dict[str, np.float32]:
        return {k: np.float32(getattr(self, k)) for k in ("ky", "rv", "gv", "gu", "bu")}


_Q = 2.0 ** -20
YUVS = {m.name: m for m in (
    # OpenCV's integer constants for COLOR_YUV2RGB_NV21/NV12/I420, over 2**20
    YUV("bt601", 16, 1220542 * _Q, 1673527 * _Q, -852492 * _Q, -409993 * _Q, 2116026 * _Q,
        "BT.601 limited range (video: Y in 16..235), as OpenCV's COLOR_YUV2RGB_*"),
    YUV("bt601-full", 0, 1.0, 1.402, -0.714136, -0.344136, 1.772,
        "BT.601 full range (JPEG/JFIF: Y in 0..255)"),
    YUV("bt709", 16, 1.164384, 1.792741, -0.532909, -0.213249, 2.112402,
        "BT.709 limited range (HD video)"),
)}


def yuv_matrix(name) -> YUV:
    if not isinstance(name, str) or name not in YUVS:
        raise ClayoutError(f"unknown yuv= {name!r}; allowed: {', '.join(YUVS)}")
    return YUVS[name]


__all__ = ["FrameFormat", "FORMATS", "frame_format", "YUV", "YUVS", "yuv_matrix"]
