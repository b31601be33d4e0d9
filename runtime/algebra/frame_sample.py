"""A frame's stages (runtime/algebra/frame.py) evaluated on the host in
float32: the one host evaluation the cpu engine uses (the reference
evaluates the formulas in float64 on its own, runtime/reference/frame.py).
It runs in the calling thread, in bands of rows: sharing the bands out to
the cpu engine's two threads measured slower (3.8 against 3.4 ms at
1280x720 NV21 -> 320x320: each numpy step is too short for two threads to
share the interpreter lock well), and callers converting frames from
several threads each get a core of their own.

Every operation is the one the OpenCL kernel does (runtime/opencl/frame.py)
in the same order, each product and sum rounded to float32, so the two give
the same bits: the colour of each tap (``rgb_at``), then the taps along x
(runtime/algebra/frame_axis.py's table), then along y, then
(p·scale - mean)·(1/std).

>>> from runtime.algebra.frame import frame_plan
>>> p = frame_plan((4, 4), "gray", size=(2, 2), resize="nearest")
>>> sample(p, np.arange(16, dtype=np.uint8).reshape(4, 4))[0]
array([[ 0.,  2.],
       [ 8., 10.]], dtype=float32)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cache import memoized
from .frame import SampleAxis, FramePlan


@dataclass(frozen=True)
class _Planes:
    """A frame array seen as its planes: ``pixels`` (h, w[, bytes]) for a
    packed format; for YUV ``y`` and the chroma at half size, ``pairs``
    (h/2, w/2, 2) for NV12/NV21 (U and V side by side, gathered together),
    ``u`` and ``v`` for I420."""
    pixels: np.ndarray | None = None
    y: np.ndarray | None = None
    u: np.ndarray | None = None
    v: np.ndarray | None = None
    pairs: np.ndarray | None = None


def planes(plan: FramePlan, frame: np.ndarray) -> _Planes:
    fmt, h, w = plan.format, plan.height, plan.width
    if not fmt.is_yuv:
        return _Planes(pixels=frame.reshape(h, w, fmt.bytes))
    luma = frame[:h]
    if fmt.chroma == "planes":
        flat, q = frame.reshape(-1), (h // 2) * (w // 2)
        u = flat[h * w:h * w + q].reshape(h // 2, w // 2)
        return _Planes(y=luma, u=u, v=flat[h * w + q:h * w + 2 * q].reshape(h // 2, w // 2))
    return _Planes(y=luma, pairs=frame[h:].reshape(h // 2, w // 2, 2))


def _centred(values: np.ndarray, zero: int, k: np.float32 | None, floor: bool = False
             ) -> np.ndarray:
    """k·(values - zero) in float32, as the kernel computes it: values - zero
    (at least 0 with ``floor``) is exact in float32, then one rounded product
    (none where k is None)."""
    f = values.astype(np.float32)
    f -= np.float32(zero)
    if floor:
        np.maximum(f, 0, out=f)
    if k is not None:
        f *= k
    return f


def rgb_at(plan: FramePlan, p: _Planes, ys: np.ndarray, xs: np.ndarray, wanted) -> dict:
    """{RGB component: float32 array (len(ys), len(xs))} of the frame at
    rows ``ys`` x columns ``xs``, for the components in ``wanted``, each
    clamped to [0, 255]. YUV: R = ky(Y - y0) + rv(V - 128), G = (ky(Y - y0)
    + gv(V - 128)) + gu(U - 128), B = ky(Y - y0) + bu(U - 128), float32.
    Whole rows are gathered first, then the columns (3x faster in numpy
    than one 2-D fancy index)."""
    if p.pixels is not None:
        px = np.take(p.pixels[ys], xs, axis=1)
        return {k: px[..., plan.format.rgb[k]].astype(np.float32) for k in wanted}
    k = plan.yuv.f32()
    ty = _centred(np.take(p.y[ys], xs, axis=1), plan.yuv.y0, k["ky"], floor=True)
    cy, cx = ys // 2, xs // 2   # YUV: C = 3, all three components wanted
    if p.pairs is not None:   # one gather for both: U and V sit side by side
        both = np.take(p.pairs[cy], cx, axis=1)
        iu = 0 if plan.format.chroma == "uv" else 1
        u, v = both[..., iu], both[..., 1 - iu]
    else:
        u, v = np.take(p.u[cy], cx, axis=1), np.take(p.v[cy], cx, axis=1)
    u, v = _centred(u, 128, None), _centred(v, 128, None)   # U - 128, V - 128: exact
    out = {}
    for c in wanted:
        if c == 0:
            value = ty + v * k["rv"]
        elif c == 1:
            value = ty + v * k["gv"]
            value += u * k["gu"]
        else:
            value = ty + u * k["bu"]
        out[c] = np.clip(value, 0, 255, out=value)
    return out


def sample_rows(plan: FramePlan, p: _Planes, out: np.ndarray, first: int, stop: int) -> None:
    """Write rows [first, stop) of the scaled region (the output rows
    y.pad + first ...) of ``out`` (C, H, W) float32 from the frame's planes
    ``p``: colour, sample and normalize in float32, every operation in the
    documented order (the OpenCL kernel's, so the two give the same bits).
    Each source pixel a tap reads is colour-converted once (the same value
    whichever output reads it), then each needed source row is blended
    along x (tap 0 first), then the rows along y (tap 0 first)."""
    xf, xw = _axis_table(plan.x)
    yf, yw = _axis_table(plan.y)
    yf, yw = yf[first:stop], yw[first:stop]
    # the frame columns and rows the taps read: tap k of output d reads first + k,
    # clamped to the crop's last pixel
    xs = np.minimum(xf[:, None] + np.arange(xw.shape[1]), plan.x.length - 1) + plan.x.start
    ys = np.minimum(yf[:, None] + np.arange(yw.shape[1]), plan.y.length - 1) + plan.y.start
    cols, col_at = np.unique(xs, return_inverse=True)
    rows, row_at = np.unique(ys, return_inverse=True)
    col_at, row_at = col_at.reshape(xs.shape), row_at.reshape(ys.shape)
    wanted = sorted(set(plan.source))
    rgb = rgb_at(plan, p, rows, cols, wanted)
    x0, y0, sw = plan.x.pad, plan.y.pad, plan.x.scaled
    scale = plan.scale32
    for c, k in enumerate(plan.source):
        t = rgb[k]
        along_x = t[:, col_at[:, 0]] * xw[:, 0]
        for kx in range(1, xw.shape[1]):
            along_x += t[:, col_at[:, kx]] * xw[:, kx]
        v = along_x[row_at[:, 0]] * yw[:, 0:1]
        for ky in range(1, yw.shape[1]):
            v += along_x[row_at[:, ky]] * yw[:, ky:ky + 1]
        if scale != 1:
            v *= scale
        v -= plan.mean32[c]
        v *= plan.inv_std[c]
        out[c, y0 + first:y0 + stop, x0:x0 + sw] = v


def fill_border(plan: FramePlan, out: np.ndarray) -> None:
    """The letterbox's border of ``out`` (C, H, W): the normalized fill."""
    if not plan.has_border:
        return
    fill = plan.fill_values()
    x, y = plan.x, plan.y
    for c in range(plan.channels):
        out[c, :y.pad] = fill[c]
        out[c, y.pad + y.scaled:] = fill[c]
        out[c, y.pad:y.pad + y.scaled, :x.pad] = fill[c]
        out[c, y.pad:y.pad + y.scaled, x.pad + x.scaled:] = fill[c]


@memoized("frame sample taps", "CLAYOUT_FRAME_CACHE", 256)
def _axis_table(axis: SampleAxis):
    """``axis.table()``, computed once per axis."""
    return axis.table()


def sample(plan: FramePlan, frame: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The model input (C, H, W) float32 of ``frame`` (an array of
    ``plan.shape``): the three stages on the host, band by band."""
    if out is None:
        out = np.empty(plan.dims[1:], np.float32)
    fill_border(plan, out)
    p = planes(plan, frame)
    for first, stop in bands(plan):
        sample_rows(plan, p, out, first, stop)
    return out


def bands(plan: FramePlan) -> list[tuple[int, int]]:
    """The scaled region's rows cut into bands whose float32 temporaries (a
    band's rows by the x taps) stay near 100 KiB, in the cache: at
    1280x720 NV21 -> 320x320 a call took 5.8 ms in one band, 3.9 ms in bands
    of 40 rows (20-row bands pay more in numpy calls than they save)."""
    rows = max(1, 25600 // (plan.x.taps * plan.x.scaled))
    return [(a, min(a + rows, plan.y.scaled)) for a in range(0, plan.y.scaled, rows)]
