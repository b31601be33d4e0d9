"""The public API: input conventions, and one clear ClayoutError
(one line, naming what was wrong and what is allowed) for each bad input."""
import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime import ClayoutError, MemoryDesc, engine, from_image, reorder, to_image
from runtime.cpu.engine import CpuEngine

from strategies import assert_same_bits

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/api.py",)

ENGINES = ("cpu", "reference")


def error(fn, *args, **kwargs) -> str:
    with pytest.raises(ClayoutError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert isinstance(info.value, ValueError)
    return msg


# -- conventions ---------------------------------------------------------------------------
@pytest.mark.parametrize("eng", ENGINES)
def test_plain_input_in_physical_shape(eng):
    nchw = np.arange(2 * 5 * 3 * 4, dtype=np.float32).reshape(2, 5, 3, 4)
    nhwc = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
    a = to_image(nchw, "in_out_channel", engine=eng)
    b = to_image(nhwc, "in_out_channel", src="nhwc", engine=eng)
    assert a.shape == (2 * 3, 2 * 4, 4)
    assert_same_bits(a, b)
    back = from_image(a, "in_out_channel", (2, 5, 3, 4), dst="nhwc", engine=eng)
    assert back.shape == (2, 3, 4, 5)
    assert_same_bits(back, nhwc)


@pytest.mark.parametrize("eng", ENGINES)
def test_blocked_input_is_1d_with_dims(eng):
    dims = (2, 5, 3, 4)
    nchw = np.arange(120, dtype=np.float32).reshape(dims)
    blocked = reorder(nchw, MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nChw4c"),
                      engine=eng)
    assert blocked.ndim == 1 and blocked.size == 2 * 8 * 12
    img = to_image(blocked, "in_out_channel", src="nChw4c", dims=dims, engine=eng)
    assert_same_bits(img, to_image(nchw, "in_out_channel", engine=eng))
    back = from_image(img, "in_out_channel", dims, dst="nChw16c", engine=eng)
    assert back.ndim == 1
    assert_same_bits(back, reorder(nchw, MemoryDesc(dims, tag="nchw"),
                                   MemoryDesc(dims, tag="nChw16c"), engine=eng))


@pytest.mark.parametrize("eng", ENGINES)
def test_dtype_arguments(eng):
    x = np.array([[0.5, 1.5, 2.5, 300.0, -3.0]], np.float32)  # (N, C) activation
    img = to_image(x, "in_out_channel", dtype="s8", engine=eng)
    assert img.dtype == np.int8 and img.shape == (1, 2, 4)
    assert img.reshape(-1)[:5].tolist() == [0, 2, 2, 127, -3]
    back = from_image(img, "in_out_channel", (1, 5), dtype="bf16", engine=eng)
    assert back.dtype == ml_dtypes.bfloat16 and back.shape == (1, 5)
    assert back.astype(np.float32).tolist() == [[0, 2, 2, 127, -3]]
    assert from_image(img, "in_out_channel", (1, 5), engine=eng).dtype == np.int8
    out = reorder(x.reshape(-1), MemoryDesc((5,), "f32"), MemoryDesc((5,), "u8"), engine=eng)
    assert out.dtype == np.uint8 and out.tolist() == [0, 2, 2, 255, 0]


def test_zero_volume_api():
    x = np.zeros((0, 5, 8, 8), np.float32)
    for eng in ENGINES:
        out = reorder(x, MemoryDesc(x.shape, tag="nchw"), MemoryDesc(x.shape, tag="nChw8c"),
                      engine=eng)
        assert out.size == 0
        img = to_image(x, "in_out_channel", engine=eng)
        assert img.shape == (0, 16, 4)
        assert from_image(img, "in_out_channel", x.shape, engine=eng).shape == x.shape


def test_default_engine_is_cpu(monkeypatch):
    monkeypatch.delenv("CLAYOUT_ENGINE", raising=False)
    assert engine.get().name == "cpu"
    assert engine.get("reference").name == "reference"


# -- errors --------------------------------------------------------------------------------
X = np.zeros((1, 3, 2, 2), np.float32)


def test_malformed_tag():
    assert "character 2" in error(MemoryDesc, (1, 3, 2, 2), tag="aBcd")
    assert "'abcz'" in error(to_image, X, "in_out_channel", src="abcz")
    img = to_image(X, "in_out_channel")
    assert "character 5" in error(from_image, img, "in_out_channel", X.shape, dst="abcd1")


def test_tag_dims_rank_mismatch():
    msg = error(MemoryDesc, (2, 3), tag="nchw")
    assert "'nchw' describes 4 dims" in msg and "(2, 3)" in msg
    msg = error(to_image, np.zeros((3, 2, 2), np.float32), "in_out_channel")
    assert "has 3 dims but tag 'nchw' has 4" in msg and "dims=" in msg
    msg = error(to_image, X, "in_out_channel", src="ncw")
    assert "'ncw'" in msg
    msg = error(to_image, X.reshape(-1), "in_out_channel", src="nChw4c", dims=(1, 3, 4))
    assert "4 dims" in msg
    msg = error(from_image, to_image(X, "in_out_channel"), "in_out_channel", (1, 3, 2))
    assert "N,C,H,W" in msg


def test_blocked_input_needs_dims():
    msg = error(to_image, np.zeros(16, np.float32), "in_out_channel", src="nChw4c")
    assert "1-D" in msg and "dims=" in msg


def test_data_size_mismatch():
    d = MemoryDesc((2, 3), tag="ab")
    msg = error(reorder, np.zeros(5, np.float32), d, MemoryDesc((2, 3), tag="ba"))
    assert "5 elements" in msg and "needs 6" in msg
    blocked = MemoryDesc((1, 3, 2, 2), tag="nChw4c")
    msg = error(reorder, np.zeros(12, np.float32), blocked, MemoryDesc((1, 3, 2, 2)))
    assert "12 elements" in msg and "needs 16" in msg and "padding" in msg
    msg = error(to_image, np.zeros(12, np.float32), "in_out_channel", src="nChw4c",
                dims=(1, 3, 2, 2))
    assert "needs 16" in msg


def test_wrong_dtype_of_data():
    d = MemoryDesc((2, 3), "f32")
    msg = error(reorder, np.zeros(6, np.float16), d, d)
    assert "f16" in msg and "f32" in msg
    msg = error(to_image, X.astype(np.float64), "in_out_channel")
    assert "float64" in msg and "allowed" in msg and "dtype=" in msg


def test_float64_is_rounded_once_to_the_dtype_asked_for():
    # reorder: dst_desc names the dtype produced; to_image: dtype= names the image's
    d = MemoryDesc((2, 3), "f32")
    wide = np.array([1 + 2.0 ** -30, 0.1, -2.5, 1e40, np.nan, 3.0])
    with np.errstate(over="ignore"):   # 1e40 becomes inf: the expected value
        want = wide.astype(np.float32)
    assert np.array_equal(reorder(wide, d, d), want, equal_nan=True)
    s8 = MemoryDesc((2, 3), "s8")
    assert reorder(wide, d, s8).tolist() == [1, 0, -2, 127, 0, 3]
    img = to_image(X.astype(np.float64), "in_out_channel", dtype="f16")
    assert np.array_equal(img, to_image(X.astype(np.float16), "in_out_channel"))
    big_endian = X.astype(">f4")
    assert np.array_equal(to_image(big_endian, "in_out_channel"), to_image(X, "in_out_channel"))


def test_bf16_image_refused():
    msg = error(to_image, X, "in_out_channel", dtype="bf16")
    assert "bf16" in msg and "f32, f16, s32, s8, u8" in msg
    img = to_image(X, "in_out_channel").astype(ml_dtypes.bfloat16)
    msg = error(from_image, img, "in_out_channel", X.shape)
    assert "bf16" in msg and "allowed image dtypes" in msg
    # a bf16 buffer is fine, and converts to an allowed image dtype
    xb = X.astype(ml_dtypes.bfloat16)
    assert to_image(xb, "in_out_channel", dtype="f32").dtype == np.float32
    assert to_image(xb, "in_out_channel", dtype="f16").dtype == np.float16


class LimitedEngine(CpuEngine):
    """The cpu engine with device limits, as an OpenCL engine has."""
    name = "limited"
    limits = runtime.Limits.of((8, 8))


def test_image_over_limits():
    eng = LimitedEngine()
    small = np.zeros((1, 8, 2, 4), np.float32)      # in_out_channel 8x2: fits
    assert to_image(small, "in_out_channel", engine=eng).shape == (2, 8, 4)
    big = np.zeros((1, 8, 2, 5), np.float32)        # 10x2
    msg = error(to_image, big, "in_out_channel", engine=eng)
    for word in ("'in_out_channel'", "10x2", "8x8", "(1, 8, 2, 5)", "layouts that fit",
                 "texture_2d (5x4)"):
        assert word in msg, (word, msg)


def test_refused_reshape_and_submemory():
    d = MemoryDesc((2, 8, 3, 4), tag="aBcd8b")
    assert "blocked" in error(d.reshape, (2, 96))
    assert "volumes differ" in error(d.reshape, (2, 95))
    assert "multiple of its block 8" in error(d.submemory, (2, 4, 3, 4), (0, 4, 0, 0))
    assert "outside" in error(d.submemory, (2, 8, 3, 5), (0, 0, 0, 0))


def test_unknown_layout():
    msg = error(to_image, X, "in_out_chanel")
    assert "'in_out_chanel'" in msg and "in_out_channel" in msg and "TAG:ROWS" in msg
    msg = error(from_image, np.zeros((2, 1, 4), np.float32), "bogus", X.shape)
    assert "'bogus'" in msg


def test_wrong_image_shape():
    img = to_image(X, "in_out_channel")
    msg = error(from_image, img[:, :, :3], "in_out_channel", X.shape)
    assert "(2, 2, 3)" in msg and "expected (2, 2, 4)" in msg
    msg = error(from_image, img, "in_out_channel", (1, 5, 2, 2))
    assert "expected (2, 4, 4)" in msg
    msg = error(from_image, img.reshape(-1), "in_out_channel", X.shape)
    assert "expected (2, 2, 4)" in msg


def test_unknown_engine():
    for fn, args in ((to_image, (X, "in_out_channel")),
                     (reorder, (X, MemoryDesc(X.shape), MemoryDesc(X.shape, tag="nhwc")))):
        msg = error(fn, *args, engine="gpu")
        assert "'gpu'" in msg and "auto, cpu, opencl, reference" in msg
    img = to_image(X, "in_out_channel")
    assert "'gpu'" in error(from_image, img, "in_out_channel", X.shape, engine="gpu")


def test_reorder_dims_differ_and_bad_descs():
    msg = error(reorder, X, MemoryDesc(X.shape), MemoryDesc((1, 3, 4)))
    assert "dims differ" in msg and "reshape" in msg
    assert "MemoryDesc" in error(reorder, X, "nchw", "nhwc")


def test_unsupported_dtype_name():
    msg = error(to_image, X, "in_out_channel", dtype="f64")
    assert "'f64'" in msg and "allowed" in msg


def test_error_is_the_one_project_type():
    assert issubclass(ClayoutError, ValueError)
    assert runtime.ClayoutError is ClayoutError
