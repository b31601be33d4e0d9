"""The fast path (engine 'cpu') against the reference, bit for bit.

Every property draws descs from a family (plain tags in any order, single-
and double-blocked tags, user strides with gaps and offset0, submemory,
halo-padded), dtypes from every pair, and values hitting ties, saturation,
NaN payloads and subnormals. Source buffers carry garbage in their padding:
neither path may read it, and both must write zero block tails, the halo
fill, and zero gaps.
"""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import runtime
from runtime import MemoryDesc, cpu, engine, reference
from runtime.image import NAMED

from strategies import (FEW, SETTINGS, any_descs, assert_same_bits, dtype_names, fill,
                        fill_modes, halo_descs, image_dtype_names, seeds, small_dims,
                        strided_descs, submemory_descs, tagged_descs, tags)

REF = engine.get("reference")
CPU = engine.get("cpu")


def both_reorder(data, src, dst):
    want = REF.reorder(data, src, dst)
    got = CPU.reorder(data, src, dst)
    assert_same_bits(got, want, f"reorder {src} -> {dst}")
    return got


# -- reorder ------------------------------------------------------------------------
@SETTINGS
@given(src=any_descs(), dst_dt=dtype_names, seed=seeds, mode=fill_modes, data=st.data())
def test_reorder_any_family(src, dst_dt, seed, mode, data):
    dst = data.draw(any_descs(dtype=dst_dt, dims=src.dims), label="dst")
    x = fill(src.dtype.name, src.span, seed, mode)
    both_reorder(x, src, dst)


@SETTINGS
@given(data=st.data(), src_dt=dtype_names, dst_dt=dtype_names, seed=seeds, mode=fill_modes)
def test_reorder_blocked_pairs_both_directions(data, src_dt, dst_dt, seed, mode):
    """a -> b and b -> a for two random (possibly double-) blocked tags."""
    nd = data.draw(st.integers(1, 4), label="ndims")
    dims = data.draw(small_dims(nd))
    a = data.draw(tagged_descs(dtype=src_dt, dims=dims), label="a")
    b = data.draw(tagged_descs(dtype=dst_dt, dims=dims), label="b")
    both_reorder(fill(src_dt, a.span, seed, mode), a, b)
    both_reorder(fill(dst_dt, b.span, seed + 1, mode), b.with_dtype(dst_dt),
                 a.with_dtype(src_dt))


@SETTINGS
@given(data=st.data(), seed=seeds, mode=fill_modes, dt=dtype_names)
def test_round_trip_same_dtype(data, seed, mode, dt):
    """a -> b -> a gives back a's logical values and a's canonical padding."""
    a = data.draw(any_descs(dtype=dt), label="a")
    b = data.draw(any_descs(dtype=dt, dims=a.dims), label="b")
    x = fill(dt, a.span, seed, mode)
    there = both_reorder(x, a, b)
    back = both_reorder(there, b, a)
    assert_same_bits(back, REF.reorder(x, a, a), "round trip")
    assert_same_bits(reference.read_logical(back, a), reference.read_logical(x, a), "values")


@SETTINGS
@given(pair=submemory_descs(), dst_dt=dtype_names, seed=seeds, mode=fill_modes, data=st.data())
def test_submemory_both_directions(pair, dst_dt, seed, mode, data):
    parent, sub = pair
    other = data.draw(any_descs(dtype=dst_dt, dims=sub.dims), label="other")
    n = max(parent.span, sub.span)
    x = fill(sub.dtype.name, n, seed, mode)
    both_reorder(x[:sub.span], sub, other)
    y = fill(dst_dt, other.span, seed + 7, mode)
    both_reorder(y, other, sub.with_dtype(dst_dt))


@SETTINGS
@given(dst=halo_descs(), src_dt=dtype_names, seed=seeds, data=st.data())
def test_halo_destination(dst, src_dt, seed, data):
    src = data.draw(any_descs(dtype=src_dt, dims=dst.dims), label="src")
    both_reorder(fill(src_dt, src.span, seed), src, dst)


@FEW
@given(dst=any_descs(), src_dt=dtype_names, seed=seeds, data=st.data())
def test_reorder_into_touches_only_footprint(dst, src_dt, seed, data):
    """cpu.reorder_into writes exactly the dst footprint (values, tails, halo)
    and leaves every other element of the buffer as it was."""
    src = data.draw(any_descs(dtype=src_dt, dims=dst.dims), label="src")
    x = fill(src_dt, src.span, seed)
    want = REF.reorder(x, src, dst)
    sentinel = fill(dst.dtype.name, dst.span + 3, seed + 1, "bits")
    buf = sentinel.copy()
    cpu.reorder_into(x, src, buf, dst)
    if dst.is_zero:
        assert_same_bits(buf, sentinel, "zero-volume dst untouched")
        return
    q = [g.ravel() for g in np.indices(dst.padded_dims)]
    foot = np.zeros(buf.size, dtype=bool)
    foot[reference.walk(dst, q)] = True
    expect = sentinel.copy()
    expect[foot] = np.pad(want, (0, 3))[foot]
    assert_same_bits(buf, expect, f"reorder_into {src} -> {dst}")


# -- benchdnn cases -------------------------------------------------------------------
BENCHDNN = [
    ((2, 64, 3, 3), t1, t2) for t1 in ("abcd", "acdb", "aBcd4b", "aBcd8b", "aBcd16b")
    for t2 in ("abcd", "acdb", "aBcd4b", "aBcd8b", "aBcd16b") if t1 != t2
] + [
    ((2, 40, 3, 3), "aBcd8b", "aBcd16b"),
    ((16, 63), "ab", "AB16b16a2b"),
    ((89, 73), "ab", "BA16a16b"), ((89, 73), "ab", "BA16a32b"),
    ((89, 73), "ab", "BA16a48b"), ((89, 73), "ab", "BA16a64b"),
    ((57, 89, 73), "abc", "aCB16b16c"), ((57, 89, 73), "abc", "aCB16b64c"),
    ((2, 64, 64, 3, 3), "goihw", "gOIhw16i16o"), ((2, 64, 64, 3, 3), "goihw", "gOIhw8i16o2i"),
    ((2, 64, 64, 3, 3), "goihw", "gOIhw8o16i2o"),
    ((4, 16, 16, 3, 3), "goihw", "gOIhw2i4o2i"), ((4, 16, 16, 3, 3), "goihw", "gOIhw4i8o2i"),
    ((29, 27, 2, 2), "oihw", "OIhw8o16i2o"), ((29, 27, 2, 2), "oihw", "OIhw8i16o2i"),
    ((29, 27, 2, 2), "oihw", "OIhw4o8i8o4i"),
    ((0, 5, 8, 8), "nchw", "nChw8c"), ((16, 31, 0, 3), "oihw", "OIhw16o16i"),
] + [
    ((11, 17, 2, 3), t1, t2)
    for t1 in ("abcd", "ABcd16a16b", "ABcd16b16a", "BAcd16a16b", "BAcd16b16a")
    for t2 in ("abcd", "ABcd16a16b", "ABcd16b16a", "BAcd16a16b", "BAcd16b16a") if t1 != t2
]


@pytest.mark.parametrize("dims, t1, t2", BENCHDNN)
@pytest.mark.parametrize("dts", [("f32", "f32"), ("f32", "s8"), ("bf16", "f16"), ("s32", "u8")])
def test_benchdnn_cases(dims, t1, t2, dts):
    src = MemoryDesc(dims, dts[0], tag=t1)
    dst = MemoryDesc(dims, dts[1], tag=t2)
    x = fill(dts[0], src.span, hash((dims, t1, t2)) % 2 ** 32, "special")
    out = both_reorder(x, src, dst)
    back = both_reorder(out, dst, src.with_dtype(dts[1]))
    if dts[0] == dts[1]:
        assert_same_bits(reference.read_logical(back, src), reference.read_logical(x, src))


def test_large_tiled_path():
    """Big enough for the threaded, tiled copy (SMALL_ELEMS), with a C tail."""
    dims = (2, 17, 40, 41)
    for t1, t2, dt in (("nchw", "nChw16c", "f32"), ("nhwc", "nchw", "f16"),
                       ("aBcd16b", "acdb", "s8"), ("nchw", "nhwc", "bf16")):
        src, dst = MemoryDesc(dims, dt, tag=t1), MemoryDesc(dims, "f32", tag=t2)
        both_reorder(fill(dt, src.span, 5), src, dst)
        both_reorder(fill(dt, src.span, 6), src, dst.with_dtype(dt))


# -- images -----------------------------------------------------------------------------
def layout_dims(layout):
    if layout.ndims == 1:
        return st.sampled_from((0, 1, 3, 4, 5, 17, 33)).map(lambda w: (w,))
    dims = small_dims(4, max_volume=400)
    if layout.kind == "activation":
        return st.one_of(dims, small_dims(2))
    return dims


@st.composite
def image_cases(draw, names=tuple(NAMED)):
    layout = NAMED[draw(st.sampled_from(names), label="layout")]
    dims = draw(layout_dims(layout), label="dims")
    return layout, dims


@SETTINGS
@given(case=image_cases(), src_dt=dtype_names, img_dt=image_dtype_names, seed=seeds,
       mode=fill_modes, data=st.data())
def test_to_image(case, src_dt, img_dt, seed, mode, data):
    layout, dims = case
    src = data.draw(any_descs(dtype=src_dt, dims=dims), label="src")
    x = fill(src_dt, src.span, seed, mode)
    want = REF.to_image(x, layout, src, img_dt)
    got = CPU.to_image(x, layout, src, img_dt)
    assert want.shape == layout.array_shape(dims)
    assert_same_bits(got, want, f"to_image {layout} {src} -> {img_dt}")


@SETTINGS
@given(case=image_cases(), img_dt=image_dtype_names, dst_dt=dtype_names, seed=seeds,
       mode=fill_modes, data=st.data())
def test_from_image(case, img_dt, dst_dt, seed, mode, data):
    """Padding lanes hold garbage: from_image must ignore them."""
    layout, dims = case
    dst = data.draw(any_descs(dtype=dst_dt, dims=dims), label="dst")
    shape = layout.array_shape(dims)
    image = fill(img_dt, int(np.prod(shape)), seed, mode).reshape(shape)
    want = REF.from_image(image, layout, dst)
    got = CPU.from_image(image, layout, dst)
    assert_same_bits(got, want, f"from_image {layout} {img_dt} -> {dst}")


@SETTINGS
@given(case=image_cases(), dt=image_dtype_names, seed=seeds, mode=fill_modes, data=st.data())
def test_image_round_trip(case, dt, seed, mode, data):
    layout, dims = case
    src = data.draw(any_descs(dtype=dt, dims=dims), label="src")
    x = fill(dt, src.span, seed, mode)
    for eng in (REF, CPU):
        image = eng.to_image(x, layout, src, dt)
        back = eng.from_image(image, layout, src)
        assert_same_bits(back, REF.reorder(x, src, src), f"{eng.name} round trip {layout}")


@FEW
@given(case=image_cases(), dt=image_dtype_names, seed=seeds, data=st.data())
def test_api_engines_agree(case, dt, seed, data):
    """The public functions with engine='cpu' and engine='reference'."""
    layout, dims = case
    tag = data.draw(tags(len(dims), max_blocked=0), label="plain tag")
    desc = MemoryDesc(dims, dt, tag=tag)
    x = fill(dt, desc.span, seed).reshape(runtime.physical_shape(desc))
    img_dt = data.draw(image_dtype_names, label="image dtype")
    imgs = [runtime.to_image(x, layout.name, src=tag, dtype=img_dt, engine=e)
            for e in ("reference", "cpu")]
    assert_same_bits(imgs[1], imgs[0], "to_image")
    backs = [runtime.from_image(imgs[0], layout.name, dims, dst=tag, dtype=dt, engine=e)
             for e in ("reference", "cpu")]
    assert_same_bits(backs[1], backs[0], "from_image")
    assert backs[0].shape == x.shape
