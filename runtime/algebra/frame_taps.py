"""A frame's sample stage and numbers packed into one float32 array, the
form the compiled paths read them in (the OpenCL frame kernel,
runtime/opencl/frame.py, and the cpu engine's compiled frames): ``HEADER``
words first, then per axis one row per output index.

The header: the frame's width and height, per axis the letterbox's pad,
the scaled size, the crop's last pixel (frame coordinates), the taps K and
the word where the axis' table starts; the YUV luma offset; scale; per
output channel (three words, the last repeated for one channel) mean,
1/std and the normalized fill; the YUV matrix (0 for a packed format).
Integers are stored as their int32 bits. An axis' row for output index d
is its first source pixel (frame coordinates, int32 bits) and its K
weights (runtime/algebra/frame_axis.py's table).

>>> from runtime.algebra.frame import frame_plan
>>> t = tables(frame_plan((4, 4), "gray", size=(2, 2)))
>>> t[:2].view(np.int32).tolist(), t.size == len(HEADER) + 2 * 3 + 2 * 3
([4, 4], True)
"""
from __future__ import annotations

import numpy as np

from ..cache import memoized
from .frame import FramePlan

# the header of the taps buffer: (name, integer) in word order
HEADER = (("fw", True), ("fh", True),
          ("x_pad", True), ("x_scaled", True), ("x_last", True), ("x_k", True), ("x_at", True),
          ("y_pad", True), ("y_scaled", True), ("y_last", True), ("y_k", True), ("y_at", True),
          ("y0", True), ("scale", False),
          ("mean0", False), ("mean1", False), ("mean2", False),
          ("inv0", False), ("inv1", False), ("inv2", False),
          ("fill0", False), ("fill1", False), ("fill2", False),
          ("ky", False), ("rv", False), ("gv", False), ("gu", False), ("bu", False))
WORD = {name: i for i, (name, _) in enumerate(HEADER)}


def header(plan: FramePlan) -> dict:
    """The header's values of ``plan`` (ints, and float32 numbers)."""
    values = {"fw": plan.width, "fh": plan.height, "scale": plan.scale32,
              "y0": plan.yuv.y0 if plan.yuv is not None else 0}
    at = len(HEADER)
    for axis in (plan.x, plan.y):
        p = axis.name
        values.update({f"{p}_pad": axis.pad, f"{p}_scaled": axis.scaled,
                       f"{p}_last": axis.start + axis.length - 1, f"{p}_k": axis.taps,
                       f"{p}_at": at})
        at += axis.scaled * (axis.taps + 1)
    fills = plan.fill_values()
    for c in range(3):
        k = min(c, plan.channels - 1)
        values.update({f"mean{c}": plan.mean32[k], f"inv{c}": plan.inv_std[k],
                       f"fill{c}": fills[k]})
    matrix = plan.yuv.f32() if plan.yuv is not None else {}
    for name in ("ky", "rv", "gv", "gu", "bu"):
        values[name] = matrix.get(name, np.float32(0))
    return values


@memoized("frame tap tables", "CLAYOUT_FRAME_CACHE", 64)
def tables(plan: FramePlan) -> np.ndarray:
    """The taps buffer's contents for ``plan``: the header, then per axis
    one row of (first source pixel, as int32 bits; K weights) per output
    index (float32 words)."""
    values = header(plan)
    head = np.empty(len(HEADER), np.float32)
    for i, (name, integer) in enumerate(HEADER):
        if integer:
            head[i] = np.int32(values[name]).view(np.float32)
        else:
            head[i] = np.float32(values[name])
    parts = [head]
    for axis in (plan.x, plan.y):
        first, weights = axis.table()
        rows = np.empty((axis.scaled, axis.taps + 1), np.float32)
        rows[:, 0] = (first + axis.start).astype(np.int32).view(np.float32)
        rows[:, 1:] = weights
        parts.append(rows.reshape(-1))
    return np.concatenate(parts)



__all__ = ["HEADER", "WORD", "header", "tables"]
