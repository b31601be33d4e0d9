"""Data types (docs/dtypes.md): runtime.algebra.dtypes.convert against independent oracles.

The main oracle rounds the exact rational value of each input (Python's
fractions) to the destination format by IEEE round-to-nearest-even with
subnormals and overflow to inf; ml_dtypes and numpy casts cross-check the
float -> float paths. NaN becomes the destination's canonical quiet NaN
(runtime.algebra.dtypes.CANONICAL_NAN, the implementation's documented choice).
"""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import ClayoutError, convert
from runtime.algebra.dtypes import CANONICAL_NAN, NAMES, dtype, image_dtype

from conftest import bits
from strategies import NP, SETTINGS, assert_same_bits, fill

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/__init__.py", "runtime/algebra/dtypes.py",
           "runtime/algebra/dtypes_c.py")

FORMAT = {"f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}
FLOATS = tuple(FORMAT)
INTS = ("s32", "s8", "u8")


def round_to_format(v: Fraction, name: str) -> float:
    """Nearest-even rounding of the exact value ``v`` into float format ``name``."""
    p, emin, emax = FORMAT[name]
    if v == 0:
        return 0.0
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    assert Fraction(2) ** e <= a < Fraction(2) ** (e + 1)
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    r = round(a / ulp) * ulp  # Fraction.__round__: half to even
    largest = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    out = float("inf") if r > largest else float(r)
    return -out if v < 0 else out


def exact_value(x):
    """The exact value of one numpy scalar: Fraction, or 'nan' / +-inf floats."""
    if isinstance(x, (np.integer, int)):
        return Fraction(int(x))
    f = float(np.float64(np.float32(x)) if x.dtype == NP["bf16"] else np.float64(x))
    if np.isnan(f) or np.isinf(f):
        return f
    return Fraction(f)


def oracle_one(x, src: str, dst: str):
    """The bits ``x`` (a numpy scalar of ``src``) must convert to, as a 1-element array."""
    dt = NP[dst]
    if src == dst:
        return np.array([x], dt)
    v = exact_value(x)
    if dst in FLOATS:
        if isinstance(v, float) and np.isnan(v):
            return np.array([CANONICAL_NAN[dst]], bits(np.zeros(1, dt)).dtype).view(dt)
        if isinstance(v, float):  # inf
            return np.array([v], np.float64).astype(dt)
        out = round_to_format(v, dst)
        if out == 0 and (v < 0 or (v == 0 and np.signbit(float(x)) if src in FLOATS else False)):
            out = -0.0
        return np.array([out], np.float64).astype(dt)
    info = np.iinfo(dt)
    if isinstance(v, float):
        n = 0 if np.isnan(v) else (info.max if v > 0 else info.min)
    else:
        n = min(max(round(v), info.min), info.max)  # round: half to even
    return np.array([n], dt)


def oracle(xs, src, dst):
    if xs.size == 0:
        return np.zeros(0, NP[dst])
    return np.concatenate([oracle_one(x, src, dst) for x in xs])


PAIRS = [(s, d) for s in NAMES for d in NAMES]


@pytest.mark.parametrize("src, dst", PAIRS)
def test_every_pair_against_fractions(src, dst):
    xs = np.concatenate([fill(src, 120, 1, "special"), fill(src, 120, 2, "bits"),
                         fill(src, 40, 3, "small")])
    assert_same_bits(convert(xs, dst), oracle(xs, src, dst), f"{src}->{dst}")


@SETTINGS
@given(src=st.sampled_from(NAMES), dst=st.sampled_from(NAMES), seed=st.integers(0, 2 ** 32 - 1))
def test_random_pairs_against_fractions(src, dst, seed):
    xs = fill(src, 64, seed, "mixed")
    assert_same_bits(convert(xs, dst), oracle(xs, src, dst), f"{src}->{dst}")


def test_shapes_kept_and_same_dtype_is_bitwise():
    x = fill("f32", 24, 4, "bits").reshape(2, 3, 4)   # NaN payloads included
    assert convert(x, "f32") is x or np.array_equal(bits(convert(x, "f32")), bits(x))
    for dst in NAMES:
        assert convert(x, dst).shape == (2, 3, 4)
    assert convert(np.zeros((0, 3), np.int8), "bf16").shape == (0, 3)


@pytest.mark.parametrize("src", ["f32", "f16"])
def test_float_to_bf16_matches_ml_dtypes(src):
    x = fill(src, 4000, 7, "mixed")
    ok = ~np.isnan(x.astype(np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(np.float32).astype(ml_dtypes.bfloat16)  # RNE, subnormals kept
    assert_same_bits(convert(x, "bf16")[ok], want[ok])


@pytest.mark.parametrize("src", ["f32", "bf16"])
def test_float_to_f16_matches_numpy(src):
    x = fill(src, 4000, 8, "mixed")
    ok = ~np.isnan(x.astype(np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(np.float32).astype(np.float16)
    assert_same_bits(convert(x, "f16")[ok], want[ok])


def u32(*v):
    return np.array(v, np.uint32).view(np.float32)


@pytest.mark.parametrize("x_bits, want_bits, what", [
    (0x3F808000, 0x3F80, "tie rounds down to even"),
    (0x3F818000, 0x3F82, "tie rounds up to even"),
    (0x3F808001, 0x3F81, "above the tie"),
    (0x7F7FFFFF, 0x7F80, "f32 max overflows to inf"),
    (0xFF7FFFFF, 0xFF80, "-max overflows to -inf"),
    (0x7F7F7FFF, 0x7F7F, "just below the overflow tie"),
    (0x7F7F8000, 0x7F80, "the overflow tie goes to inf"),
    (0x00000001, 0x0000, "smallest f32 subnormal rounds to zero"),
    (0x00008000, 0x0000, "subnormal tie to even (zero)"),
    (0x00018000, 0x0002, "subnormal tie to even (up)"),
    (0x00010000, 0x0001, "bf16 smallest subnormal kept"),
    (0x80010000, 0x8001, "negative subnormal kept"),
    (0x80000000, 0x8000, "-0.0"),
    (0xFFC00001, 0x7FC0, "NaN canonical"),
    (0x7F800001, 0x7FC0, "signalling NaN canonical"),
    (0x7F800000, 0x7F80, "inf"),
])
def test_f32_to_bf16_cases(x_bits, want_bits, what):
    got = convert(u32(x_bits), "bf16").view(np.uint16)[0]
    assert got == want_bits, what


@pytest.mark.parametrize("value, want_bits", [
    (65520.0, 0x7C00), (65519.0, 0x7BFF), (-65520.0, 0xFC00), (65504.0, 0x7BFF),
    (2.0 ** -24, 0x0001), (2.0 ** -25, 0x0000), (3 * 2.0 ** -25, 0x0002),
    (1 + 2.0 ** -11, 0x3C00), (1 + 3 * 2.0 ** -11, 0x3C02), (float("nan"), 0x7E00),
    (-0.0, 0x8000), (3.4e38, 0x7C00),
])
def test_f32_to_f16_cases(value, want_bits):
    assert convert(np.array([value], np.float32), "f16").view(np.uint16)[0] == want_bits


FLOAT_TO_INT = [
    # value, s32, s8, u8
    (0.5, 0, 0, 0), (1.5, 2, 2, 2), (2.5, 2, 2, 2), (-2.5, -2, -2, 0), (-0.5, 0, 0, 0),
    (127.5, 128, 127, 128), (126.5, 126, 126, 126), (-128.5, -128, -128, 0),
    (255.5, 256, 127, 255), (254.5, 254, 127, 254), (-129.0, -129, -128, 0),
    (3e9, 2147483647, 127, 255), (-3e9, -2147483648, -128, 0),
    (2147483520.0, 2147483520, 127, 255), (2147483648.0, 2147483647, 127, 255),
    (-2147483648.0, -2147483648, -128, 0), (-2147483904.0, -2147483648, -128, 0),
    (3.4e38, 2147483647, 127, 255), (float("inf"), 2147483647, 127, 255),
    (float("-inf"), -2147483648, -128, 0), (float("nan"), 0, 0, 0), (-0.0, 0, 0, 0),
    (1e-45, 0, 0, 0), (16777217.0, 16777216, 127, 255),
]


def _held_exactly(src, value) -> bool:
    with np.errstate(over="ignore"):
        x = np.array([value], np.float32).astype(NP[src])
    return src == "f32" or float(x[0]) == value or np.isnan(value)


@pytest.mark.parametrize("src, value, s32, s8, u8", [
    (src, *row) for src in FLOATS for row in FLOAT_TO_INT if _held_exactly(src, row[0])])
def test_float_to_int_cases(src, value, s32, s8, u8):
    with np.errstate(over="ignore"):
        x = np.array([value], np.float32).astype(NP[src])
    for dst, want in (("s32", s32), ("s8", s8), ("u8", u8)):
        got = convert(x, dst)
        assert got.dtype == NP[dst] and int(got[0]) == want, (src, value, dst)


@pytest.mark.parametrize("value, dst, want", [
    (16777217, "f32", 16777216.0), (16777219, "f32", 16777220.0),
    (16777217, "bf16", 16777216.0),
    # a single rounding: via f32 (ties twice) it would give 2**24
    (2 ** 24 + 2 ** 16 + 1, "bf16", 2.0 ** 24 + 2 ** 17),
    (2147483647, "bf16", 2.0 ** 31), (2147483647, "f32", 2.0 ** 31),
    (-2147483648, "bf16", -(2.0 ** 31)), (2139095040, "bf16", 2139095040.0),
    (65519, "f16", 65504.0), (65520, "f16", float("inf")), (-70000, "f16", float("-inf")),
    (2049, "f16", 2048.0), (2051, "f16", 2052.0), (257, "bf16", 256.0), (259, "bf16", 260.0),
])
def test_int_to_float_single_rounding(value, dst, want):
    got = convert(np.array([value], np.int32), dst)
    assert float(got[0]) == want


@pytest.mark.parametrize("src, value, dst, want", [
    ("s32", 300, "s8", 127), ("s32", -300, "s8", -128), ("s32", 300, "u8", 255),
    ("s32", -1, "u8", 0), ("u8", 255, "s8", 127), ("u8", 200, "s32", 200),
    ("s8", -1, "u8", 0), ("s8", -128, "s32", -128), ("s32", 2147483647, "u8", 255),
])
def test_int_to_int_saturates(src, value, dst, want):
    assert int(convert(np.array([value], NP[src]), dst)[0]) == want


def test_dtype_names_and_errors():
    assert dtype("float32") is dtype("f32") is dtype(np.float32)
    assert dtype(ml_dtypes.bfloat16).name == "bf16"
    with pytest.raises(ClayoutError, match="allowed: f32, f16, bf16, s32, s8, u8"):
        dtype("f64")
    with pytest.raises(ClayoutError, match="allowed"):
        dtype(np.float64)
    with pytest.raises(ClayoutError, match="bf16"):
        image_dtype("bf16")
    with pytest.raises(ClayoutError, match="unsupported array dtype"):
        convert(np.zeros(3, np.float64), "f32")
