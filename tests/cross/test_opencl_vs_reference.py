"""The opencl engine against runtime.reference, bit for bit.

Kernel builds cost ~0.5 s each on PoCL, so the shapes come from small fixed
sets and hypothesis is derandomized: the number of distinct programs a run
builds stays bounded: about 440 for this file in the thorough tier, about
190 in ci (the named layouts run a covering set, test_buffer_pairs a
fraction of the profile's examples).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import bits, from_img, tiered, to_img
from runtime import IMAGE_LAYOUTS, MemoryDesc
from strategies import MOVED, scaled
from runtime import engine as engines
from runtime.algebra.dtypes import IMAGE_NAMES, NAMES

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/dtypes.py", "runtime/algebra/dtypes_c.py", "runtime/opencl/cell.py",
           "runtime/reference/__init__.py")

REF = engines.get("reference")
# 70 examples in the thorough tier (the count before tiers), 29 in ci
FEW = scaled(7 / 12, settings(deadline=None, derandomize=True,
                              suppress_health_check=list(HealthCheck)))

SPECIAL = np.array([0.0, -0.0, 0.25, 0.5, 1.5, 2.5, -2.5, 127.5, -128.5, 128.5, 255.5, 256.0,
                    65504.0, 65519.0, 65520.0, -65520.0, 3.4e38, -3.4e38, np.nan, -np.nan,
                    np.inf, -np.inf, 1e-45, -1e-45, 1e-40, 6e-8, 5.96e-8, 2.98e-8, 1e-39,
                    1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
                    2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 16777217.0,
                    0.49999997, -0.5, -1.5, 3.5, 1e10, 6.1e-5, 6.09e-5, -3e-5], np.float64)
SPECIAL_INTS = np.array([0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 65504, 65519, 65520,
                         16777216, 16777217, 16842753, 2147483647, -2147483648, 2147483520,
                         -2147483647, 33554435, -33554435], np.int64)
QUIET_F16_NAN = None  # see _values


def _values(dt, n, seed=0, keep_snan=True) -> np.ndarray:
    """``n`` values of dtype ``dt``: the specials first, then random bits."""
    from runtime.algebra.dtypes import dtype
    d = dtype(dt)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, n * d.itemsize, dtype=np.uint8).view(d.np).copy()
    if d.is_float:
        with np.errstate(over="ignore"):
            special = SPECIAL.astype(np.float32).astype(d.np)
        if d.name == "f32":
            special = np.concatenate([special, np.array([0x7fc00001, 0xff800001, 0x00000001,
                                                         0x807fffff], np.uint32).view(np.float32)])
    else:
        info = np.iinfo(d.np)
        special = np.clip(SPECIAL_INTS, info.min, info.max).astype(d.np)
    raw[:min(n, special.size)] = special[:n]
    if d.name == "f16" and not keep_snan:
        # signalling f16 NaNs: the device's half-image path quiets them (0x7c01 -> 0x7e01)
        b = raw.view(np.uint16)
        snan = ((b & 0x7c00) == 0x7c00) & ((b & 0x3ff) != 0) & ((b & 0x200) == 0)
        b[snan] |= 0x200
    return raw


# -- every dtype pair, with ties, saturation, NaN, inf, subnormals, -0.0 ----------------
@pytest.mark.parametrize("src", NAMES)
@pytest.mark.parametrize("dst", NAMES)
def test_dtype_pairs(cl_engine, src, dst):
    s, d = MemoryDesc((600,), src), MemoryDesc((600,), dst)
    x = _values(src, 600)
    assert np.array_equal(bits(cl_engine.convert(s, d, x)), bits(REF.convert(s, d, x)))


@pytest.mark.parametrize("image_dtype", IMAGE_NAMES)
@pytest.mark.parametrize("other", ["same", "f32", "bf16"])
def test_image_dtypes(cl_image_engine, image_dtype, other):
    """Each image channel type written and read, from/to its own dtype and others."""
    layout = IMAGE_LAYOUTS["argument"]
    buf = image_dtype if other == "same" else other
    x = _values(buf, 601, keep_snan=False)
    s = MemoryDesc((601,), buf)
    img = to_img(cl_image_engine, x, layout, s, image_dtype)
    assert np.array_equal(bits(img), bits(to_img(REF, x, layout, s, image_dtype)))
    pixels = _values(image_dtype, img.size, seed=1, keep_snan=False).reshape(img.shape)
    got = from_img(cl_image_engine, pixels, layout, s)
    assert np.array_equal(bits(got), bits(from_img(REF, pixels, layout, s)))


@pytest.mark.parametrize("direction", ["write", "read"])
def test_signalling_f16_nan_is_quieted_only_by_direct_image_access(cl_image_engine, direction):
    """The documented exception (docs/engines.md), both directions: a
    signalling f16 NaN moved into or out of an RGBA half image with direct
    access comes back quiet, sign and payload kept; staged access keeps its
    bits, as the host engines and every buffer move do."""
    raw = np.array([0x7c01, 0xfc01, 0x7e01, 0x3c00, 0x7d55, 0, 0, 0], np.uint16)
    quiet = raw | np.where(((raw & 0x7c00) == 0x7c00) & ((raw & 0x3ff) != 0), 0x200, 0)
    values = raw.view(np.float16)
    layout, s = IMAGE_LAYOUTS["argument"], MemoryDesc((8,), "f16")
    if direction == "write":
        got = to_img(cl_image_engine, values, layout, s, "f16").reshape(-1)
    else:
        got = from_img(cl_image_engine, values.reshape(1, 2, 4), layout, s)
    assert bits(REF.convert(s, s, values)).tolist() == raw.tolist()
    want = raw if cl_image_engine.device.options.image_access == "staged" else quiet
    assert bits(got).tolist() == want.tolist()


# -- every named layout x image dtype x both directions ---------------------------------
ACT_DIMS = [(1, 17, 3, 5), (2, 5, 3, 3), (1, 3, 5, 1), (2, 1, 2, 3), (3, 4)]
FILTER_DIMS = [(17, 5, 3, 3), (5, 3, 1, 1), (3, 1, 3, 5), (4, 17, 1, 3)]
SRC_TAGS = {4: ["nchw", "nhwc", "nChw8c", "chwn", "ABcd4a4b"], 2: ["nc", "cn"], 1: ["a"]}
BUF_DTYPES = ["f32", "f16", "s8", "u8", "s32", "bf16"]
CASES = [(name, dt, i) for i, (name, dt) in enumerate(
    (n, d) for n in sorted(MOVED) for d in IMAGE_NAMES)]
# The covering set (every tier): every layout in f32 images with both image
# accesses, and every image dtype on the layouts that take the dtype paths:
# in_out_channel (4 lanes of a 2-D image), image_2d_weights_c1_b_fyx (one
# channel, CL_R: f16 staged even with direct access), tflite_single_texture_2d
# (C lanes: CL_R / CL_RGBA, and C = 3 with no format: staged) and tflite_buffer
# (a buffer storage: the dtype in the buffer kernel), with direct access (a
# staged access converts into the image's dense buffer as a buffer kernel
# does, then copies its bytes: every image dtype staged is test_image_dtypes').
# Index math does not depend on the image dtype, nor a dtype's conversion on
# the layout beyond those paths (every dtype pair is test_image_dtypes' and
# test_dtype_pairs'). The f32 cases carry the richest dims (C = 17 over 5
# slices, tails) and every buffer dtype; the dtype rows every source tag. The
# grid's other 120 tests run in the thorough tier.
DTYPE_PATHS = ("in_out_channel", "image_2d_weights_c1_b_fyx", "tflite_single_texture_2d",
               "tflite_buffer")


def _named_covered(case) -> bool:
    access, name, image_dtype, i = case
    return image_dtype == "f32" or (name in DTYPE_PATHS and access == "direct")


def _case(name, i):
    layout = IMAGE_LAYOUTS[name]
    if layout.kind == "argument":
        dims = [(17,), (4,), (1,), (6,)][i % 4]
    elif layout.kind == "activation":
        dims = ACT_DIMS[i % len(ACT_DIMS)]
        if layout.lanes == 0:   # a single texture: C <= 4 in one texel
            dims = (dims[0], min(dims[1], 4)) + dims[2:]
    else:
        dims = FILTER_DIMS[i % len(FILTER_DIMS)]
    tags = SRC_TAGS[len(dims)]
    return layout, dims, tags[i % len(tags)], BUF_DTYPES[i % len(BUF_DTYPES)]


@pytest.mark.slow
@pytest.mark.parametrize("cl_image_engine, name, image_dtype, i", tiered(
    [(access, *case) for access in ("direct", "staged") for case in CASES], _named_covered,
    ids=lambda case: "-".join(map(str, case))), indirect=["cl_image_engine"])
def test_named_layouts_both_directions(cl_image_engine, name, image_dtype, i):
    layout, dims, tag, buf_dt = _case(name, i)
    src = MemoryDesc(dims, buf_dt, tag=tag)
    x = _values(buf_dt, src.span, seed=i, keep_snan=False)
    img = to_img(cl_image_engine, x, layout, src, image_dtype)
    want = to_img(REF, x, layout, src, image_dtype)
    assert img.shape == want.shape and np.array_equal(bits(img), bits(want))
    dst = MemoryDesc(dims, buf_dt, tag=SRC_TAGS[len(dims)][(i + 1) % len(SRC_TAGS[len(dims)])])
    pixels = _values(image_dtype, want.size, seed=i + 1, keep_snan=False).reshape(want.shape)
    got = from_img(cl_image_engine, pixels, layout, dst)
    assert np.array_equal(bits(got), bits(from_img(REF, pixels, layout, dst)))


@pytest.mark.parametrize("name", ["in_out_channel", "conv2d_filter", "argument"])
def test_zero_volume_images(cl_image_engine, name):
    layout = IMAGE_LAYOUTS[name]
    dims = (0,) if layout.ndims == 1 else (0, 5, 3, 3)
    src = MemoryDesc(dims)
    img = to_img(cl_image_engine, np.zeros(0, np.float32), layout, src, "f32")
    assert img.shape == to_img(REF, np.zeros(0, np.float32), layout, src, "f32").shape
    assert from_img(cl_image_engine, img, layout, src).size == 0


# -- buffer tag pairs -------------------------------------------------------------------
DIMS4 = [(2, 17, 3, 5), (1, 3, 5, 1), (3, 5, 2, 3), (2, 0, 3, 3), (4, 16, 1, 2)]
TAGS4 = ["abcd", "acdb", "bcda", "cdba", "bacd", "aBcd4b", "aBcd8b", "aBcd16b", "ABcd16a16b",
         "ABcd8b16a2b", "BAcd16a16b", "Acdb16a", "aBcd16b:strided", "submemory", "halo"]
PAIRS = [("f32", "f32"), ("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f32"),
         ("s8", "s8"), ("u8", "f32"), ("f32", "s8"), ("s32", "bf16"), ("f16", "f16"),
         ("bf16", "bf16"), ("s32", "s32")]


def _desc(kind, dims, dt):
    if kind == "aBcd16b:strided":   # user strides with gaps and an offset0
        n, c, h, w = dims
        return MemoryDesc(dims, dt, strides=(c * h * (w + 2) + 3, h * (w + 2), w + 2, 1),
                          offset0=5)
    if kind == "submemory":
        parent = MemoryDesc((dims[0], dims[1] + 16, dims[2], dims[3]), dt, tag="aBcd16b")
        return parent.submemory(dims, (0, 16, 0, 0))
    if kind == "halo":
        return MemoryDesc(dims, dt, tag="aBcd8b", halo=((0, 1, 2, 0), (0, 2, 1, 1)), fill=1.5)
    return MemoryDesc(dims, dt, tag=kind)


@pytest.mark.slow
@FEW
@given(st.sampled_from(DIMS4), st.sampled_from(TAGS4), st.sampled_from(TAGS4),
       st.sampled_from(PAIRS))
def test_buffer_pairs(cl_engine, dims, src_tag, dst_tag, pair):
    """Buffer reorders drawn from DIMS4 x TAGS4 x TAGS4 x PAIRS (derandomized:
    the same draws each run), bit for bit against the reference: 70 draws in
    the thorough tier, 29 in ci (``FEW``); each dtype pair alone is
    test_dtype_pairs' in every tier."""
    src, dst = _desc(src_tag, dims, pair[0]), _desc(dst_tag, dims, pair[1])
    x = _values(pair[0], src.span, seed=len(src_tag))
    assert np.array_equal(bits(cl_engine.convert(src, dst, x)), bits(REF.convert(src, dst, x)))


@pytest.mark.parametrize("src_tag, dst_tag, dims", [
    ("ab", "AB16b16a", (17, 33)), ("abc", "aCB16b16c", (3, 17, 33)),
    ("abcde", "aBCde16c16b", (2, 17, 5, 3, 1)), ("abcd", "ABcd4b16a4b", (17, 9, 1, 3)),
    ("a", "A16a", (33,)), ("acdb", "aBcd16b", (1, 32, 4, 4))])
def test_more_ranks_and_blocks(cl_engine, src_tag, dst_tag, dims):
    src, dst = MemoryDesc(dims, tag=src_tag), MemoryDesc(dims, tag=dst_tag)
    x = _values("f32", src.span, seed=3)
    for a, b in ((src, dst), (dst, src)):
        y = x if a is src else REF.convert(src, dst, x)
        assert np.array_equal(bits(cl_engine.convert(a, b, y)), bits(REF.convert(a, b, y)))
