"""The float64 reference of frame preprocessing: a u8 camera frame (packed
RGB/BGR/RGBA/BGRA/gray, or YUV 4:2:0 NV12/NV21/I420) to a normalized model
input (C, H, W), evaluated element by element from the formulas in
docs/frames.md.

Along each axis, every output offset d gets its taps (source index, weight)
from the method's definition, in exact fractions (``Fraction``) turned into
float64 once: OpenCV's INTER_LINEAR / INTER_NEAREST / INTER_AREA (the box
average shrinking, its zoom rule enlarging) and the antialiased bilinear
of PIL (a triangle widened to L/S pixels). Then every output element is
computed on its own from index arrays: the colour of each of its taps
(converted and clamped first), blended along x, then along y, and the
normalization (p·scale - mean)/std. Nothing is shared with the fast paths
(runtime/algebra/frame_axis.py), every value stays float64 and nothing is
rounded. It is slow and obvious on purpose; the fast paths are checked
against it.
"""
from __future__ import annotations

import math
from fractions import Fraction

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


# -- the taps of one output offset d along an axis of L source pixels scaled to S --------------
# each a list of (source index in the crop, weight), the weights summing to 1

def _linear(d, L, S):
    """OpenCV INTER_LINEAR: s = (d + 0.5)·L/S - 0.5; before the first centre
    or past the last, the edge pixel alone; else ⌊s⌋ and ⌊s⌋ + 1."""
    s = (d + 0.5) * (L / S) - 0.5
    if s < 0:
        return [(0, 1.0)]
    if s >= L - 1:
        return [(L - 1, 1.0)]
    i = math.floor(s)
    f = s - i
    return [(i, 1 - f), (i + 1, f)]


def _copy(d, L, S):
    """L = S: the pixel itself (every method)."""
    return [(d, 1.0)]


def _nearest(d, L, S):
    """INTER_NEAREST, the exact floor: min(⌊d·L/S⌋, L - 1)."""
    return [(min(d * L // S, L - 1), 1.0)]


def _box(d, L, S):
    """INTER_AREA shrinking: the mean over the span [d·L/S, (d + 1)·L/S),
    each pixel [i, i + 1) weighing its overlap with the span over the span's
    length L/S (exact fractions)."""
    lo, hi = Fraction(d * L, S), Fraction((d + 1) * L, S)
    taps = []
    for i in range(math.floor(lo), math.ceil(hi)):
        overlap = min(hi, Fraction(i + 1)) - max(lo, Fraction(i))
        if overlap > 0:
            taps.append((i, float(overlap / (hi - lo))))
    return taps


def _zoom(d, L, S):
    """INTER_AREA where an axis enlarges (OpenCV then uses it on both axes):
    sx = ⌊d·L/S⌋, f = (d + 1) - (sx + 1)·S/L, 0 if that is not positive, else
    its fractional part; sx and sx + 1 weigh 1 - f and f; the last pixel alone
    from sx = L - 1 on."""
    sx = d * L // S
    if sx >= L - 1:
        return [(L - 1, 1.0)]
    f = Fraction(d + 1) - Fraction((sx + 1) * S, L)
    f = Fraction(0) if f <= 0 else f - math.floor(f)
    return [(sx, float(1 - f)), (sx + 1, float(f))]


def _triangle(d, L, S):
    """Antialiased bilinear shrinking (PIL's BILINEAR): the triangle of
    half-width L/S source pixels centred on c = (d + 0.5)·L/S; pixel i weighs
    max(0, 1 - |i + 0.5 - c|·S/L), normalized over the pixels of the crop."""
    c, half = Fraction((2 * d + 1) * L, 2 * S), Fraction(L, S)
    raw = []
    for i in range(max(0, math.floor(c - half) - 1), min(L, math.ceil(c + half) + 1)):
        w = 1 - abs(Fraction(2 * i + 1, 2) - c) / half
        if w > 0:
            raw.append((i, w))
    total = sum(w for _, w in raw)
    return [(i, float(w / total)) for i, w in raw]


def _axis_taps(resize, antialias, L, S, zoom):
    """(index, weight): (S, K) int64 and float64 arrays, the taps of every
    offset along the axis (padded with weight 0). ``zoom``: area's zoom rule
    (some axis enlarges)."""
    if L == S:
        rule = _copy
    elif resize == "nearest":
        rule = _nearest
    elif resize == "area":
        rule = _zoom if zoom else _box
    elif antialias and L > S:
        rule = _triangle
    else:
        assert resize == "bilinear", resize
        rule = _linear
    taps = [rule(d, L, S) for d in range(S)]
    k = max(len(t) for t in taps)
    index = np.array([[i for i, _ in t] + [t[0][0]] * (k - len(t)) for t in taps], np.int64)
    weight = np.array([[w for _, w in t] + [0.0] * (k - len(t)) for t in taps], np.float64)
    assert (index >= 0).all() and (index < L).all(), (L, S)
    return index, weight


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
                 yuv: str = "bt601", antialias: bool = False,
                 scale: float = 1.0) -> np.ndarray:
    """(C, H, W) float64; arguments already validated by the caller."""
    assert frame.dtype == np.uint8, frame.dtype
    assert fmt in PACKED + YUV420, fmt
    assert yuv in YUV_MATRICES, yuv
    assert resize in ("bilinear", "nearest", "area"), resize
    assert not antialias or resize == "bilinear", (resize, antialias)
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

    # the taps of each axis; area's zoom rule holds on both axes if one enlarges
    zoom = cw < sw or ch < sh
    xi, xw = _axis_taps(resize, antialias, cw, sw, zoom)
    yi, yw = _axis_taps(resize, antialias, ch, sh, zoom)
    # each tap is colour-converted (and clamped) before the blend: along x (the
    # taps of a source row at once, shape (C, Kx, n)), then along y, row by row
    xs, wx = cx + xi[dx].T, xw[dx].T        # (Kx, n): each element's x taps
    p = 0.0
    for ky in range(yi.shape[1]):
        ys = np.broadcast_to(cy + yi[dy, ky], xs.shape)
        row = (wx * _source(frame, fmt, xs, ys, yuv)).sum(axis=1)
        p = p + yw[dy, ky] * row

    if C == 3 and order == "bgr":
        p = p[::-1]
    else:
        assert C == 1 or order == "rgb", order

    # pixel values (fill outside the resized crop), then (p·scale - mean)/std per channel
    pix = np.empty((C, H, W), dtype=np.float64)
    for c in range(C):
        pix[c][~inside] = float(fill[c])
        pix[c][inside] = p[c]
    mean_ = np.asarray(mean, dtype=np.float64)[:, None, None]
    std_ = np.asarray(std, dtype=np.float64)[:, None, None]
    return (pix * float(scale) - mean_) / std_
