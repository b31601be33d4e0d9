"""DESIGN §1.2's worked values, reproduced exactly."""
import pytest

from runtime import ClayoutError, MemoryDesc


@pytest.mark.parametrize("tag, dims, padded, strides", [
    ("nChw16c", (2, 17, 3, 4), (2, 32, 3, 4), (384, 192, 64, 16)),
    ("nChw8c", (2, 17, 3, 4), (2, 24, 3, 4), (288, 96, 32, 8)),
    ("OIhw16i16o", (20, 30, 3, 3), (32, 32, 3, 3), (4608, 2304, 768, 256)),
])
def test_strides(tag, dims, padded, strides):
    desc = MemoryDesc(dims, tag=tag)
    assert desc.padded_dims == padded
    assert desc.strides == strides


def test_size_nchw16n16c():
    assert MemoryDesc((32, 64, 3, 3), tag="NChw16n16c").size == 73728


def test_offset_walk():
    desc = MemoryDesc((2, 17, 3, 4), tag="nChw16c")
    assert desc.offset((1, 16, 2, 3)) == 384 + 192 + 2 * 64 + 3 * 16


@pytest.mark.parametrize("dims, tag, new, want", [
    ((1, 15, 12), "aBc8b", (1, 15, 3, 4), "aBcd8b"),
    ((3, 4, 5, 6), "ABcd16b16a", (1, 3, 4, 5, 6), "aBCde16c16b"),
])
def test_reshape_gtest_cases(dims, tag, new, want):
    assert MemoryDesc(dims, tag=tag).reshape(new) == MemoryDesc(new, tag=want)


def test_reshape_refused():
    with pytest.raises(ClayoutError, match="blocked"):
        MemoryDesc((2, 8, 3, 4), tag="aBcd8b").reshape((2, 96))


def test_permute_axes_gtest_case():
    got = MemoryDesc((2, 15, 3, 4), tag="ABcd16b16a").permute_axes((1, 0, 2, 3))
    assert got == MemoryDesc((15, 2, 3, 4), tag="BAcd16a16b")
