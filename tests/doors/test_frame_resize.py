"""The reference engine's frame resize rules beyond bilinear and nearest
(docs/frames.md, "Sample (resize)"): ``resize="area"`` (OpenCV's
INTER_AREA: the box average shrinking, its zoom rule where an axis
enlarges), ``antialias=True`` (PIL's BILINEAR: a triangle widened to L/S
pixels when shrinking) and ``scale=`` (normalize is (p·scale - mean)/std).

Checked against OpenCV and PIL on photo-like frames (a smooth picture plus
noise): their u8 results within one pixel unit, and their float results
(no rounding in the library) within 1e-4, which pins the weights; and by
hand-computed examples.
"""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime.reference.frame import frame_values
from conftest import needs

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/frame_taps.py", "runtime/reference/frame.py",
           "runtime/algebra/frame.py", "runtime/cli/frame.py", "runtime/opencl/frame.py")

cv2 = needs("cv2")
Image = needs("PIL.Image")


def photo(w, h, gray=False, seed=0):
    """A u8 picture of (h, w, 3) (or (h, w) gray): slow colour gradients
    plus noise, like a camera's photo of a textured scene."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = [128 + 90 * np.sin(x / w * 3.1 + c) * np.cos(y / h * 2.3 - c)
              for c in (0.0, 1.3, 2.6)]
    img = np.stack(planes, -1) + rng.normal(0, 25, (h, w, 3))
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(img[..., 1]) if gray else img


def ref(img, size, **kw):
    """from_frame on the reference engine, (C, H, W) float64."""
    fmt = "gray" if img.ndim == 2 else "rgb"
    out = runtime.from_frame(img, "nchw", format=fmt, size=size, engine="reference", **kw)
    assert out.shape == (1, 1 if img.ndim == 2 else 3, size[1], size[0]), out.shape
    return np.asarray(out[0], dtype=np.float64)


def chw(a):
    """A library's (H, W[, 3]) result as (C, H, W) float64."""
    a = np.asarray(a, dtype=np.float64)
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def cv_area(img, size):
    return chw(cv2.resize(img, size, interpolation=cv2.INTER_AREA))


def pil_bilinear(img, size):
    return chw(np.asarray(Image.fromarray(img).resize(size, Image.BILINEAR)))


def pil_bilinear_float(img, size):
    """PIL's BILINEAR on each channel as a float image ("F" mode: no u8
    rounding between its two passes nor at the end)."""
    planes = img[None] if img.ndim == 2 else img.transpose(2, 0, 1)
    return np.stack([np.asarray(Image.fromarray(p.astype(np.float32)).resize(size, Image.BILINEAR))
                     for p in planes]).astype(np.float64)


SHRINK = [((97, 65), (31, 17)),       # odd, non-integer factors
          ((1280, 720), (224, 224)),  # a camera frame to a classifier input
          ((64, 64), (16, 16)),       # integer factors (OpenCV's fast path)
          ((40, 40), (40, 17))]       # one axis kept (a copy), one shrunk
ENLARGE = [((17, 13), (40, 30)),      # both axes enlarge
           ((40, 13), (40, 30))]      # one kept, one enlarged
MIXED = [((40, 13), (17, 30)),        # x shrinks, y enlarges
         ((13, 40), (30, 17))]        # x enlarges, y shrinks
IDS = lambda case: f"{case[0][0]}x{case[0][1]}-{case[1][0]}x{case[1][1]}"  # noqa: E731


# -- area against OpenCV's INTER_AREA -----------------------------------------------------------
@pytest.mark.parametrize("gray", [False, True], ids=["rgb", "gray"])
@pytest.mark.parametrize("case", SHRINK + ENLARGE + MIXED + [((1001, 3), (1000, 3))], ids=IDS)
def test_area_matches_opencv_u8(case, gray):
    (w, h), size = case
    img = photo(w, h, gray)
    diff = np.abs(ref(img, size, resize="area") - cv_area(img, size)).max()
    # OpenCV rounds to u8 (0.5) and enlarges in 11-bit fixed point (measured: 0.50
    # shrinking, 0.75 enlarging or mixed)
    assert diff <= 1.0, diff


@pytest.mark.parametrize("case", SHRINK + ENLARGE + MIXED, ids=IDS)
def test_area_weights_match_opencv_float(case):
    """On a float image OpenCV does not round: its INTER_AREA agrees with the
    reference to float32 precision (measured: under 4e-5), so the rules are
    the same, not only close."""
    (w, h), size = case
    img = photo(w, h, gray=True)
    cv = cv2.resize(img.astype(np.float64), size, interpolation=cv2.INTER_AREA)
    assert np.abs(ref(img, size, resize="area")[0] - cv).max() <= 1e-4


def test_area_keeps_the_slivers_opencv_drops():
    """1001 -> 1000: output 0 spans [0, 1.001): pixel 0 whole and a sliver
    1/1000 of pixel 1; the reference weighs them 1000/1001 and 1/1001 (exact
    box), OpenCV leaves a piece under 1e-3 out (its weights then sum to
    1000/1001)."""
    img = photo(1001, 2, gray=True)
    got = frame_values(img, "gray", crop=(0, 0, 1001, 2), size=(1000, 2), fit="stretch",
                       fill=(0.0,), resize="area", mean=(0.0,), std=(1.0,), order="rgb")[0]
    p0, p1 = img[:, 0].astype(np.float64), img[:, 1].astype(np.float64)
    np.testing.assert_allclose(got[:, 0], (1000 * p0 + p1) / 1001, rtol=0, atol=1e-12)
    cv = cv2.resize(img.astype(np.float64), (1000, 2), interpolation=cv2.INTER_AREA)
    # OpenCV's own deviation, at most a quarter of a pixel unit
    assert np.abs(got - cv).max() <= 0.26


# -- antialias against PIL's BILINEAR ----------------------------------------------------------
@pytest.mark.parametrize("gray", [False, True], ids=["rgb", "gray"])
@pytest.mark.parametrize("case", SHRINK + [((1001, 3), (1000, 3))], ids=IDS)
def test_antialias_matches_pil_u8(case, gray):
    (w, h), size = case
    img = photo(w, h, gray)
    diff = np.abs(ref(img, size, antialias=True) - pil_bilinear(img, size)).max()
    # PIL rounds to u8 after each pass (measured: up to 0.91)
    assert diff <= 1.0, diff


@pytest.mark.parametrize("case", SHRINK, ids=IDS)
def test_antialias_weights_match_pil_float(case):
    (w, h), size = case
    img = photo(w, h)
    got = ref(img, size, antialias=True)
    assert np.abs(got - pil_bilinear_float(img, size)).max() <= 1e-4
    # and it is not plain bilinear: shrinking, the two differ by tens of units
    assert np.abs(got - ref(img, size)).max() > 5


@pytest.mark.parametrize("case", ENLARGE + [((40, 40), (40, 40))], ids=IDS)
def test_antialias_enlarging_is_plain_bilinear(case):
    (w, h), size = case
    img = photo(w, h)
    for fit in ("stretch", "letterbox"):
        aa = ref(img, size, antialias=True, fit=fit)
        assert np.array_equal(aa, ref(img, size, fit=fit))


def test_antialias_mixed_widens_only_the_shrinking_axis():
    """40x13 -> 17x30: x shrinks (triangle), y enlarges (plain bilinear).
    Along y the result is OpenCV's bilinear of the x-antialiased rows."""
    img = photo(40, 13, gray=True)
    rows = ref(img, (17, 13), antialias=True)[0]           # x only (y kept)
    both = ref(img, (17, 30), antialias=True)[0]
    want = cv2.resize(rows, (17, 30), interpolation=cv2.INTER_LINEAR)
    assert np.abs(both - want).max() <= 1e-3


# -- worked examples, computed by hand -----------------------------------------------------------
ROW = np.array([[10, 20, 30, 40, 50, 60]], np.uint8)


def test_worked_area_shrink_means_three_pixels():
    # 6 -> 2: spans [0, 3) and [3, 6), weights 1/3 each
    assert ref(ROW, (2, 1), resize="area").tolist() == [[[20.0, 50.0]]]
    # 6 -> 4: spans of 1.5 pixels, [0, 1.5) ... [4.5, 6): (10 + 20/2)/1.5,
    # (20/2 + 30)/1.5, (40 + 50/2)/1.5, (50/2 + 60)/1.5
    np.testing.assert_allclose(ref(ROW, (4, 1), resize="area")[0, 0],
                               [20 / 1.5, 40 / 1.5, 65 / 1.5, 85 / 1.5], rtol=0, atol=1e-5)


def test_worked_area_zoom():
    # 3 -> 4: d=0 f=frac(1 - 4/3) -> 0: pixel 0; d=1 sx=0, f=2 - 4/3 = 2/3;
    # d=2 sx=1, f=3 - 8/3 = 1/3; d=3 sx=2 = L-1: the last pixel
    row = np.array([[0, 30, 90]], np.uint8)
    np.testing.assert_allclose(ref(row, (4, 1), resize="area")[0, 0],
                               [0, 30 * 2 / 3, 30 * 2 / 3 + 90 / 3, 90], rtol=0, atol=1e-5)
    # 2 -> 5: 10, 10, (10 + 60)/2, 60, 60
    two = np.array([[10, 60]], np.uint8)
    assert ref(two, (5, 1), resize="area").tolist() == [[[10, 10, 35, 60, 60]]]


def test_worked_area_mixed_uses_the_zoom_rule_on_the_shrinking_axis():
    # 6x1 -> 2x3: y enlarges, so x (6 -> 2) is not averaged: d=0 sx=0,
    # f = 1 - 2/6 = 2/3: 10/3 + 2·20/3; d=1 sx=3, f = 2 - 4/3 = 2/3: 40/3 + 2·50/3
    got = ref(ROW, (2, 3), resize="area")[0]
    np.testing.assert_allclose(got, [[50 / 3, 140 / 3]] * 3, rtol=0, atol=1e-5)


def test_worked_antialias():
    # 6 -> 2: c = 1.5, support 3: pixels 0..3 weigh 2/3, 1, 2/3, 1/3 of 8/3:
    # 0.25, 0.375, 0.25, 0.125 -> 2.5 + 7.5 + 7.5 + 5 = 22.5, and 47.5 mirrored
    assert ref(ROW, (2, 1), antialias=True).tolist() == [[[22.5, 47.5]]]
    # plain bilinear reads two pixels only: s = 1 -> 20, s = 4 -> 50
    assert ref(ROW, (2, 1)).tolist() == [[[20.0, 50.0]]]


def test_worked_scale():
    px = np.array([[0, 255]], np.uint8)
    got = ref(px, (2, 1), scale=1 / 255, mean=0.5, std=0.25)
    np.testing.assert_allclose(got, [[[-2.0, 2.0]]], rtol=0, atol=1e-6)


# -- scale ------------------------------------------------------------------------------------
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.mark.parametrize("kw", [dict(), dict(resize="area"), dict(antialias=True),
                                dict(resize="nearest")], ids=["bilinear", "area", "aa", "nearest"])
def test_scale_normalizes_the_scaled_pixels(kw):
    img = photo(97, 65)
    raw = ref(img, (31, 17), **kw)
    got = ref(img, (31, 17), scale=1 / 255, mean=MEAN, std=STD, **kw)
    want = (raw / 255 - np.array(MEAN)[:, None, None]) / np.array(STD)[:, None, None]
    assert np.abs(got - want).max() <= 1e-6


def test_scale_letterbox_fill():
    img = photo(97, 65)
    fill = (114, 0, 255)
    raw = ref(img, (64, 64), fit="letterbox", fill=fill)
    got = ref(img, (64, 64), fit="letterbox", fill=fill, scale=1 / 255, mean=MEAN, std=STD)
    mean, std = np.array(MEAN)[:, None, None], np.array(STD)[:, None, None]
    assert np.abs(got - (raw / 255 - mean) / std).max() <= 1e-6
    # the border rows (97x65 -> 64x43 at row 10): (fill·scale - mean)/std
    border = (np.array(fill) / 255 - np.array(MEAN)) / np.array(STD)
    for y in (0, 9, 53, 63):
        np.testing.assert_allclose(got[:, y, :], np.repeat(border[:, None], 64, 1),
                                   rtol=0, atol=1e-6)
    assert not np.allclose(got[:, 10, :], border[:, None], atol=1e-3)


def test_scale_in_float64():
    """frame_values itself: (p·scale - mean)/std with no float32 rounding."""
    img = photo(9, 7)
    kw = dict(crop=(0, 0, 9, 7), size=(4, 3), fit="stretch", fill=(0.0,) * 3,
              resize="area", order="rgb")
    raw = frame_values(img, "rgb", mean=(0.0,) * 3, std=(1.0,) * 3, **kw)
    got = frame_values(img, "rgb", mean=MEAN, std=STD, scale=1 / 255, **kw)
    want = (raw * (1 / 255) - np.array(MEAN)[:, None, None]) / np.array(STD)[:, None, None]
    assert np.abs(got - want).max() <= 1e-12
