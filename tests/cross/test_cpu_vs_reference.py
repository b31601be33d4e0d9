"""The fast path (engine 'cpu') against the reference, bit for bit, on both
of its paths: the compiled moves and numpy.

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
from runtime import MemoryDesc, engine
from runtime.cpu import engine as cpu
from runtime.cpu import geometry
from runtime.reference import engine as reference
from conftest import tiered

from strategies import (FEW, MOVED as NAMED, SETTINGS, any_descs, assert_same_bits, dtype_names, fill,
                        scaled, small_tiles,
                        fill_modes, halo_descs, image_dtype_names, seeds, small_dims,
                        strided_descs, submemory_descs, tagged_descs, tags)

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/dtypes.py", "runtime/contract.py", "runtime/cpu/geometry.py",
           "runtime/reference/__init__.py", "runtime/reference/engine.py")

REF = engine.get("reference")
pytestmark = pytest.mark.usefixtures("cpu_path")   # every test on both paths of the cpu engine


def both_reorder(data, src, dst):
    want = REF.convert(src, dst, data)
    got = engine.get("cpu").convert(src, dst, data)
    what = f"reorder {src.describe()} -> {dst.describe()}"
    assert_same_bits(got, want, what)
    if 0 < dst.span <= 20000:
        # into a buffer of junk: every element of dst's footprint must be written
        buf = np.frombuffer(np.full(dst.span * dst.dtype.itemsize, 0xA5, np.uint8).tobytes(),
                            dtype=dst.dtype.np).copy()
        cpu.reorder_into(np.asarray(data).reshape(-1), src, buf, dst)
        foot = footprint(dst)
        assert_same_bits(buf[foot], want[foot], what + " (into a junk buffer)")
    return got


def footprint(desc):
    """Offsets of every position of desc's padded extent (values, halo, tails)."""
    q = [g.ravel() for g in np.indices(desc.padded_dims)]
    return reference.walk(desc, q)


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
    assert_same_bits(back, REF.convert(a, a, x), "round trip")
    assert_same_bits(reference.read(back, a), reference.read(x, a), "values")


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


@SETTINGS
@given(dst=any_descs(), src_dt=dtype_names, seed=seeds, data=st.data())
def test_reorder_into_touches_only_footprint(dst, src_dt, seed, data):
    """cpu.reorder_into writes exactly the dst footprint (values, tails, halo)
    and leaves every other element of the buffer as it was."""
    src = data.draw(any_descs(dtype=src_dt, dims=dst.dims), label="src")
    x = fill(src_dt, src.span, seed)
    want = REF.convert(src, dst, x)
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


BENCHDNN_DTS = [("f32", "f32"), ("f32", "s8"), ("bf16", "f16"), ("s32", "u8")]


# The covering set (116 of 232 cases in every tier, the rest in the thorough
# tier): every case in f32 -> f32 (a same-dtype bit copy, whose round trip is
# exact) and in one of the three conversions, in turn (case j: conversion
# 1 + j % 3): the tags' index math does not depend on the dtype pair, nor a
# conversion's rule on the tags.
@pytest.mark.parametrize("dts, dims, t1, t2", tiered(
    [(dts, *case) for dts in BENCHDNN_DTS for case in BENCHDNN],
    lambda case: BENCHDNN_DTS.index(case[0]) in (0, 1 + BENCHDNN.index(case[1:]) % 3),
    ids=lambda case: f"dts{BENCHDNN_DTS.index(case[0])}-dims{BENCHDNN.index(case[1:])}-"
                     f"{case[2]}-{case[3]}"))
def test_benchdnn_cases(dims, t1, t2, dts):
    src = MemoryDesc(dims, dts[0], tag=t1)
    dst = MemoryDesc(dims, dts[1], tag=t2)
    x = fill(dts[0], src.span, hash((dims, t1, t2)) % 2 ** 32, "special")
    out = both_reorder(x, src, dst)
    back = both_reorder(out, dst, src.with_dtype(dts[1]))
    if dts[0] == dts[1]:
        assert_same_bits(reference.read(back, src), reference.read(x, src))


def test_large_tiled_path():
    """The threaded, tiled copy (above SMALL_ELEMS), with a C tail."""
    dims = (2, 17, 40, 41)
    with small_tiles(small=1 << 14, tile=1 << 12):
        for t1, t2, dt in (("nchw", "nChw16c", "f32"), ("nhwc", "nchw", "f16"),
                           ("aBcd16b", "acdb", "s8"), ("nchw", "nhwc", "bf16")):
            src, dst = MemoryDesc(dims, dt, tag=t1), MemoryDesc(dims, "f32", tag=t2)
            assert src.nelems > geometry.SMALL_ELEMS
            both_reorder(fill(dt, src.span, 5), src, dst)
            both_reorder(fill(dt, src.span, 6), src, dst.with_dtype(dt))


# -- images -----------------------------------------------------------------------------
def layout_dims(layout):
    if layout.ndims == 1:
        return st.sampled_from((0, 1, 3, 4, 5, 17, 33)).map(lambda w: (w,))
    forms = [small_dims(4, max_volume=400)]
    if layout.kind == "activation":
        forms.append(small_dims(2))
    if layout.volume is not None:
        forms.append(small_dims(5, max_volume=400))
    dims = st.one_of(*forms)
    if layout.lanes == 0:   # one texel holds C whole: C <= 4
        return dims.map(lambda d: d[:1] + (min(d[1], 4),) + d[2:])
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
    want = to_img(REF, x, layout, src, img_dt)
    got = to_img(engine.get("cpu"), x, layout, src, img_dt)
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
    want = from_img(REF, image, layout, dst)
    got = from_img(engine.get("cpu"), image, layout, dst)
    assert_same_bits(got, want, f"from_image {layout} {img_dt} -> {dst}")


@SETTINGS
@given(case=image_cases(), dt=image_dtype_names, seed=seeds, mode=fill_modes, data=st.data())
def test_image_round_trip(case, dt, seed, mode, data):
    layout, dims = case
    src = data.draw(any_descs(dtype=dt, dims=dims), label="src")
    x = fill(dt, src.span, seed, mode)
    for eng in (REF, engine.get("cpu")):
        image = to_img(eng, x, layout, src, dt)
        back = from_img(eng, image, layout, src)
        assert_same_bits(back, REF.convert(src, src, x), f"{eng.name} round trip {layout}")


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


# -- large cases: the tiled, threaded path of the fast path ---------------------------------
LARGE = scaled(5 / 24)   # 25 examples in the thorough tier, 10 in ci


@LARGE
@given(data=st.data(), src_dt=dtype_names, dst_dt=dtype_names, seed=seeds)
def test_large_reorders(data, src_dt, dst_dt, seed):
    """Above geometry.SMALL_ELEMS elements (made small here), with tails: tiles,
    staging and lane peeling must give the reference's bits."""
    c = data.draw(st.sampled_from((3, 5, 17, 64)), label="C")
    hw = data.draw(st.sampled_from(((33, 65), (64, 64), (41, 97), (128, 17))), label="HW")
    n = data.draw(st.sampled_from((1, 2)), label="N")
    dims = (n, c) + hw
    kind = data.draw(st.sampled_from(("tag", "tag", "halo", "strided")), label="kind")
    a = MemoryDesc(dims, src_dt, tag=data.draw(tags(4, max_blocked=1, allow_double=False)))
    if kind == "halo":
        b = MemoryDesc(dims, dst_dt, tag=data.draw(tags(4, max_blocked=1, sizes=(1, 2, 4, 16))),
                       halo=((0, 1, 2, 0), (0, 2, 0, 1)), fill=data.draw(st.sampled_from((0.0, -1.5))))
    elif kind == "strided":
        b = data.draw(strided_descs(dtype=dst_dt, dims=dims))
    else:
        b = MemoryDesc(dims, dst_dt, tag=data.draw(tags(4, max_blocked=2)))
    assume(max(a.span, b.span) < 1_500_000)
    x = fill(src_dt, a.span, seed)
    with small_tiles():
        both_reorder(x, a, b)


@pytest.mark.slow
@LARGE
@given(name=st.sampled_from(sorted(NAMED)), dt=image_dtype_names, src_dt=dtype_names,
       seed=seeds, data=st.data())
def test_large_images(name, dt, src_dt, seed, data):
    layout = NAMED[name]
    if layout.ndims == 1:
        dims = (data.draw(st.sampled_from((40001, 65536))),)
    else:
        dims = data.draw(st.sampled_from(((1, 17, 64, 65), (2, 64, 33, 17), (64, 17, 7, 7),
                                          (3, 130, 41, 29))))
        if layout.lanes == 0:   # one texel holds C whole
            dims = (dims[0], 3) + dims[2:]
    src = MemoryDesc(dims, src_dt, tag=data.draw(tags(len(dims), max_blocked=1,
                                                       allow_double=False)))
    x = fill(src_dt, src.span, seed)
    want = to_img(REF, x, layout, src, dt)
    cpu_engine = engine.get("cpu")
    assert_same_bits(to_img(cpu_engine, x, layout, src, dt), want, f"to_image {name} {dims}")
    dst = MemoryDesc(dims, src_dt, tag=data.draw(tags(len(dims), max_blocked=1)))
    image = fill(dt, want.size, seed + 3).reshape(want.shape)
    assert_same_bits(from_img(cpu_engine, image, layout, dst), from_img(REF, image, layout, dst),
                     f"from_image {name} {dims}")


# -- every dtype pair, deterministically ----------------------------------------------------
from runtime.algebra.dtypes import IMAGE_NAMES, NAMES  # noqa: E402
from conftest import to_img, from_img

LAYOUT_DIMS = {"argument": (17,), "tflite_single_texture_2d": (2, 3, 3, 3)}
# the layouts whose lanes make the cpu engine's copies differ by dtype: 4 lanes
# (in_out_channel), one channel (image_2d_weights_c1_b_fyx), C = 3 lanes in one
# texel (tflite_single_texture_2d here), and the 1-D argument
DTYPE_PATHS = ("in_out_channel", "image_2d_weights_c1_b_fyx", "tflite_single_texture_2d",
               "argument")
CONVERSIONS = [(s, i) for s in NAMES for i in IMAGE_NAMES if s != i]   # 25 pairs, in turn


def _layout_dtype_covered(case) -> bool:
    """The covering set of the layout x dtype grid (453 of 1157 cases in every
    tier, the rest in the thorough tier): every layout with every same-dtype
    pair (the plan widens same-dtype lanes into one item by item size, and the
    round trip is exact), every dtype pair on DTYPE_PATHS, and every layout
    with one conversion (a pair of its own: the conversions' copies are
    planned per layout too). Dtype rules do not depend on the layout beyond
    these paths; index math does not depend on the dtype."""
    img_dt, src_dt, name = case
    k = sorted(NAMED).index(name)
    return (src_dt == img_dt or name in DTYPE_PATHS
            or CONVERSIONS[k % len(CONVERSIONS)] == (src_dt, img_dt))


@pytest.mark.parametrize("img_dt, src_dt, name", tiered(
    [(img_dt, src_dt, name) for img_dt in IMAGE_NAMES for src_dt in NAMES
     for name in sorted(NAMED)], _layout_dtype_covered, ids="-".join))
def test_every_layout_and_dtype_pair(name, src_dt, img_dt):
    layout = NAMED[name]
    dims = LAYOUT_DIMS.get(name, (2, 5, 3, 3))
    tag = {1: "a", 4: "aBcd4b"}[len(dims)]
    src = MemoryDesc(dims, src_dt, tag=tag)
    x = fill(src_dt, src.span, 99, "special")
    image = to_img(REF, x, layout, src, img_dt)
    assert_same_bits(to_img(engine.get("cpu"), x, layout, src, img_dt), image, "to_image")
    dst = MemoryDesc(dims, src_dt, tag={1: "a", 4: "acdb"}[len(dims)],
                     halo=None if len(dims) == 1 else ((0, 1, 0, 0), (0, 0, 1, 0)))
    back = from_img(REF, image, layout, dst)
    assert_same_bits(from_img(engine.get("cpu"), image, layout, dst), back, "from_image")
    if src_dt == img_dt:
        assert_same_bits(reference.read(back, dst), reference.read(x, src))


REORDER_TAGS = [("nchw", "nChw16c"), ("aBcd4b", "ABcd8b16a2b"), ("acdb", "strided")]


def _reorder_dtype_covered(case) -> bool:
    """The covering set (48 of 108 cases in every tier, the rest in the
    thorough tier): every same-dtype pair on every tag pair (a bit copy by item
    size, planned per tag pair) and every other dtype pair on one of the three
    tag pairs, in turn: a conversion's rule does not depend on the tags."""
    t1, t2, dst_dt, src_dt = case
    pair = NAMES.index(src_dt) * len(NAMES) + NAMES.index(dst_dt)
    return src_dt == dst_dt or pair % 3 == REORDER_TAGS.index((t1, t2))


@pytest.mark.parametrize("t1, t2, dst_dt, src_dt", tiered(
    [(t1, t2, dst_dt, src_dt) for t1, t2 in REORDER_TAGS for dst_dt in NAMES
     for src_dt in NAMES], _reorder_dtype_covered, ids="-".join))
def test_every_reorder_dtype_pair(src_dt, dst_dt, t1, t2):
    dims = (3, 17, 2, 3)
    src = MemoryDesc(dims, src_dt, tag=t1)
    dst = (MemoryDesc(dims, dst_dt, strides=(300, 1, 60, 18), offset0=3) if t2 == "strided"
           else MemoryDesc(dims, dst_dt, tag=t2))
    x = fill(src_dt, src.span, 98, "mixed")
    out = both_reorder(x, src, dst)
    both_reorder(out, dst, src.with_dtype(dst_dt))


@pytest.mark.parametrize("dims, t1, t2", [
    ((2, 3, 4, 5), "aBcd1b", "abcd"), ((2, 3, 4, 5), "abcd", "aBcd1b1b"),
    ((2, 3, 4, 5), "ABcd1a2b", "aBcd3b"), ((1,) * 12, "abcdefghijkl", "lkjihgfedcba"),
    ((2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1), "abcdefghijkl", "aBcdefghijkl4b"),
    ((2, 3, 2, 3, 2, 1, 1, 1, 1, 1, 1, 2), "abcdefghijkl", "LkjihgfedcbA2l3a"),
    ((5,), "A2a", "A3a"), ((6,), "A2a3a", "A3a2a"), ((7,), "A4a2a", "A2a4a"),
    ((17, 3), "AB4a4b", "BA4b4a"), ((17, 3), "Ab16a", "aB16b"),
])
@pytest.mark.parametrize("dt", ["f32", "s8"])
def test_odd_tags(dims, t1, t2, dt):
    """Unit blocks, 12 dims, blocks that do not chain (2 vs 3), both directions."""
    a, b = MemoryDesc(dims, dt, tag=t1), MemoryDesc(dims, "f16", tag=t2)
    both_reorder(fill(dt, a.span, 1), a, b)
    both_reorder(fill("f16", b.span, 2), b, a)


def test_halo_unit_block():
    """A unit block (1a) has an outer and an inner axis at div 1: halo fills
    must pair each digit range with its own stride."""
    dst = MemoryDesc((1, 1), "f32", tag="Ab1a", halo=((0, 0), (1, 1)), fill=1)
    src = MemoryDesc((1, 1), "f32")
    x = np.array([5], np.float32)
    assert REF.convert(src, dst, x).tolist() == [5, 1, 1, 1]
    buf = np.full(dst.span, 9, np.float32)     # a sentinel instead of np.empty's leftovers
    cpu.reorder_into(x, src, buf, dst)
    assert buf.tolist() == [5, 1, 1, 1]         # cpu: [5, 1, 1, 9]


def test_sub_unit_block():
    """The zero tail of a unit-blocked submemory lands on its own element."""
    parent = MemoryDesc((2, 5, 2, 1), "f32", tag="ABcd2b1a")
    sub = parent.submemory((2, 1, 1, 1), (0, 4, 0, 0))     # padded C 2: one tail element
    src = MemoryDesc((2, 1, 1, 1), "f32")
    x = np.array([1, 2], np.float32)
    foot = footprint(sub)
    assert REF.convert(src, sub, x)[foot].tolist() == [1, 0, 2, 0]
    buf = np.full(sub.span, 9, np.float32)
    cpu.reorder_into(x, src, buf, sub)
    assert buf[foot].tolist() == [1, 0, 2, 0]               # cpu: [1, 0, 2, 9]
