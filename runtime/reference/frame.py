"""The float64 reference of frame preprocessing: a u8 camera frame (packed
RGB/BGR/RGBA/BGRA/gray, or YUV 4:2:0 NV12/NV21/I420) to a normalized model
input (C, H, W), evaluated element by element from the formulas in
docs/frames.md.

Every output element is computed on its own from index arrays: its source
coordinates, the colour of each tap, the interpolation weights and the
normalization. Nothing is separable or shared with the fast paths, every
value stays float64 and nothing is rounded. It is slow and obvious on
purpose; the fast paths are checked against it.
"""
from __future__ import annotations

import numpy as np

PACKED = ("rgb", "bgr", "rgba", "bgra", "gray")
YUV420 = ("nv12", "nv21", "i420")
YUV_MATRICES = ("bt601", "bt601-full", "bt709")


def yuv_to_rgb(y, u, v, yuv="bt601"):
    """R, G, B (float64, stacked first: shape (3, *y.shape)) of luma y and
    chroma u (Cb), v (Cr), each clamped to [0, 255] and not rounded.

    ``bt601``: BT.601 limited range with OpenCV's 20-bit fixed-point
    constants (the YUV2RGB_NV21/NV12/I420 conversions), divided exactly.
    The limited ranges take Y - 16 as 0 below 16 (luma under black is
    black), as OpenCV does.
    ``bt601-full``: full range (JPEG/JFIF, ITU-T T.871).
    ``bt709``: BT.709 limited range (Kr = 0.2126, Kb = 0.0722, luma scaled
    by 255/219 and chroma by 255/224), each rounded to six decimals.
    """
    y = np.asarray(y, dtype=np.float64)
    if yuv != "bt601-full":   # limited range: luma below black counts as black, as OpenCV
        y = np.maximum(y, 16.0)
    u = np.asarray(u, dtype=np.float64) - 128.0
    v = np.asarray(v, dtype=np.float64) - 128.0
    if yuv == "bt601":
        yy = 1220542.0 * (y - 16.0)
        r = (yy + 1673527.0 * v) / 2.0 ** 20
        g = (yy - 852492.0 * v - 409993.0 * u) / 2.0 ** 20
        b = (yy + 2116026.0 * u) / 2.0 ** 20
    elif yuv == "bt601-full":
        r = y + 1.402 * v
        g = y - 0.344136 * u - 0.714136 * v
        b = y + 1.772 * u
    elif yuv == "bt709":
        yy = 1.164384 * (y - 16.0)       # 255/219 = 1.1643836
        r = yy + 1.792741 * v
        g = yy - 0.213249 * u - 0.532909 * v
        b = yy + 2.112402 * u
    else:
        raise AssertionError(f"unknown yuv matrix {yuv!r}")
    return np.clip(np.stack([r, g, b]), 0.0, 255.0)


def _yuv_planes(frame, fmt):
    """Y (h, w) and the chroma planes U, V (h/2, w/2) of a 4:2:0 frame."""
    rows, w = frame.shape
    h = rows * 2 // 3
    assert rows == h * 3 // 2 and h % 2 == 0 and w % 2 == 0, frame.shape
    flat = frame.reshape(-1)
    luma = flat[:h * w].reshape(h, w)
    q = (h // 2) * (w // 2)
    if fmt == "i420":
        u = flat[h * w:h * w + q].reshape(h // 2, w // 2)
        v = flat[h * w + q:h * w + 2 * q].reshape(h // 2, w // 2)
    else:
        uv = flat[h * w:].reshape(h // 2, w // 2, 2)
        first, second = uv[..., 0], uv[..., 1]
        u, v = (first, second) if fmt == "nv12" else (second, first)
    return luma, u, v


def _source(frame, fmt, xs, ys, yuv):
    """The source pixel at frame coordinates (xs, ys) (integer arrays of one
    shape): (3, *shape) R, G, B, or (1, *shape) for gray; float64."""
    if fmt in YUV420:
        luma, u, v = _yuv_planes(frame, fmt)
        return yuv_to_rgb(luma[ys, xs], u[ys // 2, xs // 2], v[ys // 2, xs // 2], yuv)
    if fmt == "gray":
        plane = frame if frame.ndim == 2 else frame[..., 0]
        return plane[ys, xs].astype(np.float64)[None]
    # packed colour: channels in array order, alpha (if any) dropped
    r, g, b = (0, 1, 2) if fmt in ("rgb", "rgba") else (2, 1, 0)
    return np.stack([frame[ys, xs, k] for k in (r, g, b)]).astype(np.float64)


def _bilinear_taps(d, n_src, n_dst):
    """OpenCV INTER_LINEAR along one axis: for output offsets d, the two
    source indices (of the crop) and the weight of the second."""
    s = (d + 0.5) * (n_src / n_dst) - 0.5
    i0 = np.floor(s)
    a = s - i0
    low = s < 0                 # before the first centre: column 0 only
    high = s >= n_src - 1       # past the last centre: the last column only
    i0 = np.where(low, 0.0, np.where(high, n_src - 1.0, i0))
    a = np.where(low | high, 0.0, a)
    i1 = np.where(low | high, i0, i0 + 1.0)
    return i0.astype(np.int64), i1.astype(np.int64), a


def _scaled_region(crop, size, fit):
    """(sw, sh, px, py): the size and position of the resized crop."""
    _, _, cw, ch = crop
    W, H = size
    if fit == "stretch":
        return W, H, 0, 0
    assert fit == "letterbox", fit
    r = min(W / cw, H / ch)
    # at least one pixel: a sliver whose scaled side rounds to 0 still shows
    sw, sh = max(1, round(cw * r)), max(1, round(ch * r))
    return sw, sh, (W - sw) // 2, (H - sh) // 2


def frame_values(frame: np.ndarray, fmt: str, *, crop: tuple[int, int, int, int],
                 size: tuple[int, int], fit: str, fill: tuple[float, ...], resize: str,
                 mean: tuple[float, ...], std: tuple[float, ...], order: str,
                 yuv: str = "bt601") -> np.ndarray:
    """(C, H, W) float64; arguments already validated by the caller."""
    assert frame.dtype == np.uint8, frame.dtype
    assert fmt in PACKED + YUV420, fmt
    assert yuv in YUV_MATRICES, yuv
    C = 1 if fmt == "gray" else 3
    assert len(mean) == len(std) == len(fill) == C, (mean, std, fill)
    cx, cy, cw, ch = crop
    W, H = size
    sw, sh, px, py = _scaled_region(crop, size, fit)
    assert sw >= 1 and sh >= 1, (sw, sh)

    # every output pixel, and which of them the resized crop covers
    X, Y = np.meshgrid(np.arange(W), np.arange(H))
    inside = (X >= px) & (X < px + sw) & (Y >= py) & (Y < py + sh)
    dx, dy = X[inside] - px, Y[inside] - py

    if resize == "nearest":
        sx = np.minimum(dx * cw // sw, cw - 1)     # exact integer floor
        sy = np.minimum(dy * ch // sh, ch - 1)
        p = _source(frame, fmt, cx + sx, cy + sy, yuv)
    else:
        assert resize == "bilinear", resize
        x0, x1, ax = _bilinear_taps(dx, cw, sw)
        y0, y1, ay = _bilinear_taps(dy, ch, sh)
        # each tap is colour-converted (and clamped) before the blend
        p00 = _source(frame, fmt, cx + x0, cy + y0, yuv)
        p10 = _source(frame, fmt, cx + x1, cy + y0, yuv)
        p01 = _source(frame, fmt, cx + x0, cy + y1, yuv)
        p11 = _source(frame, fmt, cx + x1, cy + y1, yuv)
        p = ((1 - ay) * ((1 - ax) * p00 + ax * p10)
             + ay * ((1 - ax) * p01 + ax * p11))

    if C == 3 and order == "bgr":
        p = p[::-1]
    else:
        assert C == 1 or order == "rgb", order

    # pixel values (fill outside the resized crop), then normalize per channel
    pix = np.empty((C, H, W), dtype=np.float64)
    for c in range(C):
        pix[c][~inside] = float(fill[c])
        pix[c][inside] = p[c]
    mean_ = np.asarray(mean, dtype=np.float64)[:, None, None]
    std_ = np.asarray(std, dtype=np.float64)[:, None, None]
    return (pix - mean_) / std_
