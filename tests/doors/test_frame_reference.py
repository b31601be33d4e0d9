"""Checks of the float64 frame-preprocessing reference (runtime/reference/frame.py)
on its own: against OpenCV's u8 chain (cvtColor -> crop -> resize -> paste)
within 2 pixel units, and against small cases worked out by hand."""
import itertools

import numpy as np
import pytest

from runtime.reference.frame import frame_values, yuv_to_rgb

from conftest import needs

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/frame_axis.py", "runtime/reference/__init__.py",
           "runtime/reference/frame.py", "runtime/algebra/frame.py", "runtime/cli/frame.py",
           "runtime/opencl/frame.py")

cv2 = needs("cv2")

MEAN = (123.675, 116.28, 103.53)        # ImageNet, per channel
STD = (58.395, 57.12, 57.375)
PLAIN = dict(mean=(0.0,) * 3, std=(1.0,) * 3, fill=(0.0,) * 3, order="rgb")
PLAIN1 = dict(mean=(0.0,), std=(1.0,), fill=(0.0,), order="rgb")

YUV = ("nv12", "nv21", "i420")
CV_TO_RGB = {"rgb": None, "bgr": cv2.COLOR_BGR2RGB, "rgba": cv2.COLOR_RGBA2RGB,
             "bgra": cv2.COLOR_BGRA2RGB, "gray": None, "gray1": None,
             "nv12": cv2.COLOR_YUV2RGB_NV12, "nv21": cv2.COLOR_YUV2RGB_NV21,
             "i420": cv2.COLOR_YUV2RGB_I420}
CV_INTERP = {"bilinear": cv2.INTER_LINEAR, "nearest": cv2.INTER_NEAREST}


# -- frames ---------------------------------------------------------------------------------
def _smooth(rng, h, w, lo, hi):
    """A few random low-frequency waves in [lo, hi] with a little noise, u8."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    v = np.zeros((h, w))
    for _ in range(3):
        fx, fy = rng.uniform(-0.3, 0.3, 2)
        v += rng.uniform(0.5, 1.0) * np.sin(fx * xx + fy * yy + rng.uniform(0, 6.3))
    v = (v - v.min()) / (v.max() - v.min() + 1e-9)
    v = lo + (hi - lo) * v + rng.normal(0, 2, (h, w))
    return np.clip(np.rint(v), lo, hi).astype(np.uint8)


def _plane(rng, h, w, content, lo=0, hi=255):
    if content == "smooth":
        return _smooth(rng, h, w, lo, hi)
    return rng.integers(lo, hi + 1, (h, w), dtype=np.uint8)


def _yuv_frame(fmt, y, u, v):
    """Lay out planes Y (h, w), U, V (h/2, w/2) as an (h*3/2, w) frame."""
    h, w = y.shape
    if fmt == "i420":
        chroma = np.concatenate([u.reshape(-1), v.reshape(-1)])
    else:
        pair = (u, v) if fmt == "nv12" else (v, u)
        chroma = np.stack(pair, axis=-1).reshape(-1)
    return np.concatenate([y.reshape(-1), chroma]).reshape(h * 3 // 2, w)


def make_frame(fmt, w, h, content, seed):
    rng = np.random.default_rng(seed)
    if fmt in YUV:
        # Luma is kept at 16 and above: OpenCV's YUV->RGB floors Y-16 at 0
        # (it treats Y < 16 as 16, which is off the documented formula by up
        # to ~19 levels), so noise there would differ for that reason alone.
        y = _plane(rng, h, w, content, lo=16)
        u = _plane(rng, h // 2, w // 2, content)
        v = _plane(rng, h // 2, w // 2, content)
        return _yuv_frame(fmt, y, u, v)
    if fmt == "gray":
        return _plane(rng, h, w, content)
    if fmt == "gray1":
        return _plane(rng, h, w, content)[..., None]
    n = 4 if fmt in ("rgba", "bgra") else 3
    return np.stack([_plane(rng, h, w, content) for _ in range(n)], axis=-1)


# -- the OpenCV chain -----------------------------------------------------------------------
def letterbox_geometry(cw, ch, W, H):
    r = min(W / cw, H / ch)
    sw, sh = round(cw * r), round(ch * r)
    return sw, sh, (W - sw) // 2, (H - sh) // 2


def cv_chain(frame, fmt, crop, size, fit, fill_rgb, resize):
    """(C, H, W) float64 pixel values in R, G, B order (or gray), from u8 OpenCV."""
    code = CV_TO_RGB[fmt]
    img = frame if code is None else cv2.cvtColor(frame, code)
    if img.ndim == 2:
        img = img[..., None]
    cx, cy, cw, ch = crop
    img = np.ascontiguousarray(img[cy:cy + ch, cx:cx + cw])
    W, H = size
    sw, sh, px, py = (W, H, 0, 0) if fit == "stretch" else letterbox_geometry(cw, ch, W, H)
    res = cv2.resize(img, (sw, sh), interpolation=CV_INTERP[resize])
    res = res.reshape(sh, sw, -1).astype(np.float64)
    canvas = np.empty((H, W, res.shape[2]), dtype=np.float64)
    canvas[...] = np.asarray(fill_rgb, dtype=np.float64)
    canvas[py:py + sh, px:px + sw] = res
    return canvas.transpose(2, 0, 1)


def _fmt(fmt):
    return "gray" if fmt == "gray1" else fmt


def ref_pixels(frame, fmt, crop, size, fit, fill, resize, order):
    """The reference with ImageNet mean/std, mapped back to pixel units (out*std
    + mean) and to R, G, B order, so it compares with the u8 chain."""
    C = 1 if _fmt(fmt) == "gray" else 3
    mean, std = MEAN[:C], STD[:C]
    out = frame_values(frame, _fmt(fmt), crop=crop, size=size, fit=fit, fill=fill[:C],
                       resize=resize, mean=mean, std=std, order=order)
    assert out.shape == (C, size[1], size[0]) and out.dtype == np.float64
    pix = out * np.asarray(std)[:, None, None] + np.asarray(mean)[:, None, None]
    return pix[::-1] if (C == 3 and order == "bgr") else pix


# (frame w, h, crop): odd offsets and odd (prime) crop sizes. OpenCV needs an
# even width for 4:2:0, so the yuv frames are 98 x 66 rather than 97 x 66.
PACKED_CASES = [(97, 65, (3, 5, 61, 41))]
YUV_CASES = [(98, 66, (3, 5, 61, 41)), (34, 18, (1, 3, 29, 13))]
STRETCH = [(33, 17), (64, 48), None]      # None: the crop's own size
LETTERBOX = [(33, 17), (64, 64), (40, 17), (20, 30)]   # bars on both axes, odd and even
FILL = (114.0, 30.0, 250.0)               # output channel order


@pytest.mark.parametrize("content", ["smooth", "noise"])
@pytest.mark.parametrize("resize", ["bilinear", "nearest"])
@pytest.mark.parametrize("fmt", ["rgb", "bgr", "rgba", "bgra", "gray", "gray1",
                                 "nv12", "nv21", "i420"])
def test_matches_opencv_chain(fmt, resize, content):
    cases = YUV_CASES if fmt in YUV else PACKED_CASES
    seed = sum(map(ord, fmt + resize + content))
    C = 1 if _fmt(fmt) == "gray" else 3
    # bilinear: OpenCV blends u8 with fixed-point weights and rounds (about 1.2
    # at most seen here). Nearest copies source pixels: exact for packed frames,
    # and within OpenCV's rounding of the converted colour (0.5) for yuv. These
    # crop sides are prime, so d*cw/sw never lands on an integer, where OpenCV's
    # floor(d * (1/(sw/cw))) can fall one pixel short of the exact floor.
    # (+1e-9: out*std + mean gives the pixel back only up to float rounding.)
    tol = 2.0 if resize == "bilinear" else (0.5 if fmt in YUV else 0.0) + 1e-9
    for w, h, crop in cases:
        frame = make_frame(fmt, w, h, content, seed)
        runs = [(size or crop[2:], "stretch") for size in STRETCH]
        runs += [(size, "letterbox") for size in LETTERBOX]
        for (size, fit), order in itertools.product(runs, ("rgb", "bgr")):
            # fill is given per output channel; the u8 chain paints R, G, B
            fill_rgb = FILL[:C][::-1] if (C == 3 and order == "bgr") else FILL[:C]
            want = cv_chain(frame, fmt, crop, size, fit, fill_rgb, resize)
            got = ref_pixels(frame, fmt, crop, size, fit, FILL, resize, order)
            err = np.abs(got - want).max()
            assert err <= tol, (fmt, (w, h), crop, size, fit, order, err)


def test_opencv_comparison_can_fail():
    """The comparison sees a one-pixel shift of the crop (so a 2-unit bound is
    not vacuous on these frames)."""
    frame = make_frame("rgb", 97, 65, "smooth", 1)
    want = cv_chain(frame, "rgb", (4, 5, 61, 41), (33, 17), "stretch", (0,) * 3, "bilinear")
    got = ref_pixels(frame, "rgb", (3, 5, 61, 41), (33, 17), "stretch", FILL, "bilinear", "rgb")
    assert np.abs(got - want).max() > 2.0


# -- exact small cases ----------------------------------------------------------------------
def _clamp(x):
    return min(max(x, 0.0), 255.0)


def test_nv21_2x2_by_hand():
    # Y = [[16, 100], [200, 235]], one chroma sample V = 200, U = 60 (NV21: V first)
    frame = np.array([[16, 100], [200, 235], [200, 60]], dtype=np.uint8)
    out = frame_values(frame, "nv21", crop=(0, 0, 2, 2), size=(2, 2), fit="stretch",
                       resize="bilinear", **PLAIN)
    # numerators of the BT.601 formula over 2**20, worked out per pixel:
    # V-128 = 72, U-128 = -68; 1220542*(Y-16) = 0, 102525528, 224579728, 267298698
    R = [[120493944, 223019472], [345073672, 387792642]]
    G = [[-33499900, 69025628], [191079828, 233798798]]
    B = [[-143889768, -41364240], [80689960, 123408930]]
    want = np.array([[[_clamp(n / 2 ** 20) for n in row] for row in P] for P in (R, G, B)])
    assert np.array_equal(out, want)
    assert out[0, 0, 1] == 223019472 / 2 ** 20 and out[1, 1, 0] == 191079828 / 2 ** 20
    assert out[2, 0, 0] == 0.0 and out[0, 1, 1] == 255.0            # clamped


def test_luma_below_black_is_black_as_opencv():
    # Limited range: Y - 16 is taken as 0 below 16, as OpenCV's YUV2RGB does
    # (R = 203 here, not the 184.07 of the bare formula); full range has no floor.
    frame = np.array([[0, 0], [0, 0], [255, 128]], dtype=np.uint8)   # NV21: V=255, U=128
    out = frame_values(frame, "nv21", crop=(0, 0, 2, 2), size=(2, 2), fit="stretch",
                       resize="nearest", **PLAIN)
    assert out[0, 0, 0] == 1673527 * 127 / 2 ** 20    # 202.69
    assert out[1, 0, 0] == 0.0 and out[2, 0, 0] == 0.0
    assert cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV21)[0, 0, 0] == round(out[0, 0, 0])
    full = frame_values(frame, "nv21", crop=(0, 0, 2, 2), size=(2, 2), fit="stretch",
                        resize="nearest", yuv="bt601-full", **PLAIN)
    assert full[0, 0, 0] == 1.402 * 127


def test_chroma_layouts_and_siting():
    """nv12 / nv21 / i420 read U and V from their own places, and the pixel
    (x, y) uses the chroma sample (x//2, y//2)."""
    rng = np.random.default_rng(7)
    y = rng.integers(16, 236, (4, 6), dtype=np.uint8)
    u = rng.integers(0, 256, (2, 3), dtype=np.uint8)
    v = rng.integers(0, 256, (2, 3), dtype=np.uint8)
    want = np.empty((3, 4, 6))
    for yy in range(4):
        for xx in range(6):
            want[:, yy, xx] = yuv_to_rgb(y[yy, xx], u[yy // 2, xx // 2], v[yy // 2, xx // 2])
    for fmt, frame in [("nv12", np.concatenate([y.ravel(), np.stack([u, v], -1).ravel()])),
                       ("nv21", np.concatenate([y.ravel(), np.stack([v, u], -1).ravel()])),
                       ("i420", np.concatenate([y.ravel(), u.ravel(), v.ravel()]))]:
        out = frame_values(frame.reshape(6, 6), fmt, crop=(0, 0, 6, 4), size=(6, 4),
                           fit="stretch", resize="bilinear", **PLAIN)
        assert np.array_equal(out, want), fmt


@pytest.mark.parametrize("fmt", ["rgb", "bgr", "rgba", "bgra", "gray", "nv12", "nv21", "i420"])
@pytest.mark.parametrize("resize", ["bilinear", "nearest"])
def test_identity_resize_returns_converted_pixels(fmt, resize):
    w, h, crop = (98, 66, (3, 5, 61, 41)) if fmt in YUV else (97, 65, (3, 5, 61, 41))
    frame = make_frame(fmt, w, h, "noise", 3)
    cx, cy, cw, ch = crop
    if fmt in YUV:
        # converted by the helper on planes laid out here, chroma repeated 2x2
        flat = frame.reshape(-1)
        Y = flat[:h * w].reshape(h, w)
        q = (h // 2) * (w // 2)
        if fmt == "i420":
            U, V = flat[h * w:h * w + q].reshape(h // 2, -1), flat[h * w + q:].reshape(h // 2, -1)
        else:
            uv = flat[h * w:].reshape(h // 2, w // 2, 2)
            U, V = (uv[..., 0], uv[..., 1]) if fmt == "nv12" else (uv[..., 1], uv[..., 0])
        up = lambda p: p.repeat(2, 0).repeat(2, 1)        # noqa: E731
        full = yuv_to_rgb(Y, up(U), up(V))
    elif fmt == "gray":
        full = frame[None].astype(np.float64)
    else:
        idx = [0, 1, 2] if fmt in ("rgb", "rgba") else [2, 1, 0]
        full = frame[..., idx].transpose(2, 0, 1).astype(np.float64)
    want = full[:, cy:cy + ch, cx:cx + cw]
    plain = PLAIN1 if fmt == "gray" else PLAIN
    out = frame_values(frame, fmt, crop=crop, size=(cw, ch), fit="stretch", resize=resize,
                       **plain)
    assert np.array_equal(out, want)


def test_yuv_helper_clamps_and_is_exact():
    rgb = yuv_to_rgb(np.array([100.0]), np.array([60.0]), np.array([200.0]))
    assert rgb.shape == (3, 1)
    assert rgb[0, 0] == 223019472 / 2 ** 20 and rgb[1, 0] == 69025628 / 2 ** 20
    assert rgb[2, 0] == 0.0
    for m in ("bt601", "bt601-full", "bt709"):
        grey = yuv_to_rgb(np.array([235.0, 255.0]), np.array([128.0] * 2),
                          np.array([128.0] * 2), m)
        assert np.all(grey[:, 1] == 255.0) and np.all(grey[:, 0] == grey[0, 0])


def _coefficients(m):
    """(y, r_v, g_u, g_v, b_u) of one matrix, read back by unit steps from a
    point where nothing clamps."""
    base = yuv_to_rgb(128.0, 128.0, 128.0, m)
    dy = yuv_to_rgb(129.0, 128.0, 128.0, m) - base
    du = yuv_to_rgb(128.0, 129.0, 128.0, m) - base
    dv = yuv_to_rgb(128.0, 128.0, 129.0, m) - base
    assert du[0] == 0 and dv[2] == 0 and dy[0] == dy[1] == dy[2]
    return np.array([dy[0], dv[0], -du[1], -dv[1], du[2]])


def _from_kr_kb(kr, kb, ys, cs):
    kg = 1 - kr - kb
    return np.array([ys, 2 * (1 - kr) * cs, 2 * (1 - kb) * kb / kg * cs,
                     2 * (1 - kr) * kr / kg * cs, 2 * (1 - kb) * cs])


def test_matrices_against_their_definitions():
    # BT.709 limited: Kr, Kb = 0.2126, 0.0722; luma 255/219, chroma 255/224; six decimals
    bt709 = _from_kr_kb(0.2126, 0.0722, 255 / 219, 255 / 224)
    assert np.abs(_coefficients("bt709") - bt709).max() < 5.1e-7
    # full range (JFIF / T.871): Kr, Kb = 0.299, 0.114, no scaling
    full = _from_kr_kb(0.299, 0.114, 1.0, 1.0)
    assert np.abs(_coefficients("bt601-full") - full).max() < 5.1e-7
    # OpenCV's BT.601 limited: 1.164, 1.596, 0.391, 0.813, 2.018 in 20-bit fixed point
    cv601 = np.array([1.164, 1.596, 0.391, 0.813, 2.018])
    assert np.abs(_coefficients("bt601") - cv601).max() < 2 ** -20
    assert np.abs(cv601 - _from_kr_kb(0.299, 0.114, 255 / 219, 255 / 224)).max() < 1e-3


def test_nearest_4_to_3_by_hand():
    row = np.array([[10, 20, 30, 40]], dtype=np.uint8)
    out = frame_values(row, "gray", crop=(0, 0, 4, 1), size=(3, 1), fit="stretch",
                       resize="nearest", **PLAIN1)
    assert out[0, 0].tolist() == [10.0, 20.0, 30.0]     # floor(d*4/3) = 0, 1, 2


def test_nearest_is_the_exact_floor():
    # d*cw/sw landing on an integer: d=17, 6/34 -> column 3 exactly. (OpenCV
    # takes column 2 here: it multiplies by 1/(34/6) in double, 2.999...)
    row = (np.arange(6, dtype=np.uint8) * 10)[None]
    out = frame_values(row, "gray", crop=(0, 0, 6, 1), size=(34, 1), fit="stretch",
                       resize="nearest", **PLAIN1)
    assert out[0, 0, 17] == 30.0
    assert out[0, 0].tolist() == [10.0 * (d * 6 // 34) for d in range(34)]


def test_bilinear_4_to_3_by_hand():
    row = np.array([[10, 20, 30, 40]] * 2, dtype=np.uint8)
    out = frame_values(row, "gray", crop=(0, 0, 4, 2), size=(3, 2), fit="stretch",
                       resize="bilinear", **PLAIN1)
    # s = (d + 0.5)*4/3 - 0.5 = 1/6, 3/2, 17/6
    assert np.allclose(out[0, 0], [10 + 10 / 6, 25.0, 30 + 10 * 5 / 6], rtol=0, atol=1e-12)
    # past the ends: one column only (s < 0 upscaling, s >= cw-1)
    up = frame_values(row, "gray", crop=(0, 0, 4, 2), size=(8, 2), fit="stretch",
                      resize="bilinear", **PLAIN1)
    # s = (d + 0.5)/2 - 0.5 = -0.25, 0.25, ..., 3.25
    assert np.allclose(up[0, 0], [10, 12.5, 17.5, 22.5, 27.5, 32.5, 37.5, 40], rtol=0, atol=1e-12)


def test_letterbox_6x4_into_8x8():
    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    crop = (2, 1, 6, 4)
    kw = dict(crop=crop, resize="bilinear", mean=(0.0,) * 3, std=(1.0,) * 3, order="rgb")
    out = frame_values(frame, "rgb", size=(8, 8), fit="letterbox", fill=(1.0, 2.0, 3.0), **kw)
    # r = min(8/6, 8/4) = 4/3: sw = 8, sh = round(5.333) = 5, px = 0, py = (8-5)//2 = 1
    for row in (0, 6, 7):
        assert np.all(out[:, row] == np.array([1.0, 2.0, 3.0])[:, None]), row
    inner = frame_values(frame, "rgb", size=(8, 5), fit="stretch", fill=(0.0,) * 3, **kw)
    assert np.array_equal(out[:, 1:6], inner)
    # the other way round: 4x6 into 8x8 -> sw = 5, sh = 8, px = 1: fill columns 0, 6, 7
    crop = (2, 0, 4, 6)
    kw["crop"] = crop
    out = frame_values(frame, "rgb", size=(8, 8), fit="letterbox", fill=(1.0, 2.0, 3.0), **kw)
    for col in (0, 6, 7):
        assert np.all(out[:, :, col] == np.array([1.0, 2.0, 3.0])[:, None]), col
    inner = frame_values(frame, "rgb", size=(5, 8), fit="stretch", fill=(0.0,) * 3, **kw)
    assert np.array_equal(out[:, :, 1:6], inner)


# -- normalization and channel order --------------------------------------------------------
@pytest.mark.parametrize("fit", ["stretch", "letterbox"])
def test_mean_std_order(fit):
    frame = make_frame("bgra", 40, 30, "noise", 5)
    kw = dict(crop=(1, 2, 33, 21), size=(24, 24), fit=fit, resize="bilinear")
    fill = (5.0, 6.0, 7.0)
    pix = frame_values(frame, "bgra", fill=fill, mean=(0.0,) * 3, std=(1.0,) * 3,
                       order="rgb", **kw)
    m, s = np.array(MEAN)[:, None, None], np.array(STD)[:, None, None]
    rgb = frame_values(frame, "bgra", fill=fill, mean=MEAN, std=STD, order="rgb", **kw)
    assert np.allclose(rgb, (pix - m) / s, rtol=0, atol=1e-12)
    # bgr: channel 0 is B; mean/std/fill index the output channels
    bgr = frame_values(frame, "bgra", fill=fill[::-1], mean=MEAN, std=STD, order="bgr", **kw)
    assert np.allclose(bgr, (pix[::-1] - m) / s, rtol=0, atol=1e-12)
    assert not np.allclose(bgr, rgb)
    # channel 0 of the rgb output is the frame's channel 2 (R of a bgra frame)
    if fit == "stretch":
        nearest = frame_values(frame, "bgra", fill=fill, mean=(0.0,) * 3, std=(1.0,) * 3,
                               order="rgb", **{**kw, "resize": "nearest"})
        sx = np.minimum(np.arange(24) * 33 // 24, 32) + 1
        sy = np.minimum(np.arange(24) * 21 // 24, 20) + 2
        assert np.array_equal(nearest[0], frame[sy[:, None], sx[None, :], 2])


def test_gray_ignores_order():
    frame = make_frame("gray", 30, 20, "noise", 9)
    kw = dict(crop=(1, 1, 27, 17), size=(16, 12), fit="letterbox", fill=(9.0,),
              resize="bilinear", mean=(100.0,), std=(50.0,))
    a = frame_values(frame, "gray", order="rgb", **kw)
    b = frame_values(frame, "gray", order="bgr", **kw)
    c = frame_values(frame[..., None], "gray", order="rgb", **kw)
    assert a.shape == (1, 12, 16) and np.array_equal(a, b) and np.array_equal(a, c)
