"""MemoryDesc against independent oracles.

* ``offsets`` (oneDNN's walk) against the sum over ``axes`` for every index;
* hand numpy oracles: every op mirrored on a numpy arange;
* size, equality, submemory, reshape, permute_axes and halo by oneDNN's rules,
  each accepted op checked element by element against its parent.
"""
import doctest
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from runtime import ClayoutError, MemoryDesc, engine
from runtime.reference import engine as reference

from strategies import (SETTINGS, any_descs, assert_same_bits, fill, halo_descs, small_dims,
                        sub_of, submemory_descs, tagged_descs)

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/ops.py", "runtime/algebra/strides.py", "runtime/engine.py",
           "runtime/reference/__init__.py", "runtime/reference/engine.py",
           "runtime/algebra/desc.py")

CPU, REF = engine.get("cpu"), engine.get("reference")


def grid(dims):
    return [g.ravel() for g in np.indices(dims, dtype=np.int64)]


def axes_offsets(desc, idx):
    """The offset from ``desc.axes``: sum of ((q // div) % size) * stride, outer
    axes without the modulo, q the halo-padded index; plus offset0."""
    off = np.full(idx[0].shape, desc.offset0, dtype=np.int64)
    for a in desc.axes:
        q = idx[a.dim] + desc.halo_lower[a.dim]
        digit = q // a.div if a.outer else (q // a.div) % a.size
        off += digit * a.stride
    return off


# -- the walk vs the axes ---------------------------------------------------------------
@SETTINGS
@given(desc=any_descs())
def test_offsets_walk_equals_axes(desc):
    if desc.is_zero:
        return
    idx = grid(desc.dims)
    assert np.array_equal(desc.offsets(idx), axes_offsets(desc, idx))
    some = tuple(int(i[-1]) for i in idx)
    assert desc.offset(some) == int(axes_offsets(desc, [np.array([v]) for v in some])[0])


@SETTINGS
@given(desc=any_descs())
def test_offsets_distinct_and_inside_span(desc):
    """No two elements share memory; every element lies in [offset0, span)."""
    if desc.is_zero:
        assert desc.size == 0
        return
    off = desc.offsets(grid(desc.dims))
    assert len(np.unique(off)) == off.size
    assert off.min() >= desc.offset0 and off.max() < desc.span


@SETTINGS
@given(desc=tagged_descs())
def test_tag_descs_are_dense(desc):
    """A tag-made desc fills [0, size) exactly: size is prod(padded) elements."""
    if desc.is_zero:
        assert desc.size == 0
        return
    n = math.prod(desc.padded_dims)
    assert desc.size == n * desc.dtype.itemsize
    off = desc.offsets(grid(desc.padded_dims))
    assert sorted(off.tolist()) == list(range(n))
    assert desc.is_dense


def test_offset_out_of_range():
    d = MemoryDesc((2, 3), tag="ab")
    for bad in [(2, 0), (0, 3), (-1, 0), (0,), (0, 0, 0)]:
        with pytest.raises(ClayoutError, match="outside"):
            d.offset(bad)


# -- numpy oracles on an arange ----------------------------------------------------------
def physical_by_offsets(desc, logical):
    out = np.zeros(desc.span, dtype=logical.dtype)
    out[desc.offsets(grid(desc.dims))] = logical.ravel()
    return out


N, C, H, W = 2, 17, 3, 5
NCHW = np.arange(N * C * H * W, dtype=np.float32).reshape(N, C, H, W)


def np_blocked(x, axis, b):
    """Pad ``axis`` of x to a multiple of b, split it into (outer, b) and move
    the block innermost."""
    n = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, -n % b)
    x = np.pad(x, pad)
    shape = x.shape[:axis] + (x.shape[axis] // b, b) + x.shape[axis + 1:]
    x = x.reshape(shape)
    return np.moveaxis(x, axis + 1, -1)


NUMPY_ORACLES = {
    "nhwc": lambda x: np.transpose(x, (0, 2, 3, 1)),
    "chwn": lambda x: np.transpose(x, (1, 2, 3, 0)),
    "hwio": lambda x: np.transpose(x, (2, 3, 1, 0)),
    "nChw16c": lambda x: np_blocked(x, 1, 16),
    "nChw8c": lambda x: np_blocked(x, 1, 8),
    "nChw4c": lambda x: np_blocked(x, 1, 4),
    # OIhw16i16o = ABcd16b16a: (O/16, I/16, h, w, 16i, 16o)
    "OIhw16i16o": lambda x: np.transpose(
        np.pad(x, ((0, -N % 16), (0, -C % 16), (0, 0), (0, 0))).reshape(
            (N + -N % 16) // 16, 16, (C + -C % 16) // 16, 16, H, W), (0, 2, 4, 5, 3, 1)),
    # OIhw8i16o2i = ABcd8b16a2b: (O/16, I/16, h, w, (i/2)%8, o%16, i%2)
    "OIhw8i16o2i": lambda x: np.transpose(
        np.pad(x, ((0, -N % 16), (0, -C % 16), (0, 0), (0, 0))).reshape(
            (N + -N % 16) // 16, 16, (C + -C % 16) // 16, 8, 2, H, W), (0, 2, 5, 6, 3, 1, 4)),
    # texture_2d's buffer: cBda4b = (h, C/4, w, n, 4c)
    "cBda4b": lambda x: np.transpose(np_blocked(x, 1, 4), (2, 1, 3, 0, 4)),
}


@pytest.mark.parametrize("tag", sorted(NUMPY_ORACLES))
def test_numpy_oracle(tag):
    want = np.ascontiguousarray(NUMPY_ORACLES[tag](NCHW)).ravel()
    desc = MemoryDesc(NCHW.shape, tag=tag)
    assert desc.span == want.size
    assert np.array_equal(physical_by_offsets(desc, NCHW), want)
    src = MemoryDesc(NCHW.shape, tag="nchw")
    for eng in ("cpu", "reference"):
        got = runtime.reorder(NCHW, src, desc, engine=eng)
        assert np.array_equal(got, want), eng
        back = runtime.reorder(got, desc, src, engine=eng)
        assert np.array_equal(back, NCHW.ravel()), eng


def test_nhwc_physical_shape_is_transpose():
    desc = MemoryDesc(NCHW.shape, tag="nhwc")
    phys = runtime.reorder(NCHW, MemoryDesc(NCHW.shape, tag="nchw"), desc)
    assert np.array_equal(phys.reshape(runtime.physical_shape(desc)), NCHW.transpose(0, 2, 3, 1))


# -- worked values and size ------------------------------------------------------------
@pytest.mark.parametrize("tag, dims, padded, strides", [
    ("nChw16c", (2, 17, 3, 4), (2, 32, 3, 4), (384, 192, 64, 16)),
    ("nChw8c", (2, 17, 3, 4), (2, 24, 3, 4), (288, 96, 32, 8)),
    ("OIhw16i16o", (20, 30, 3, 3), (32, 32, 3, 3), (4608, 2304, 768, 256)),
])
def test_padded_dims_and_strides(tag, dims, padded, strides):
    desc = MemoryDesc(dims, tag=tag)
    assert desc.padded_dims == padded
    assert desc.strides == strides


def test_offset_walk_worked_value():
    """Inner block first (16 % 16 = 0), then the outer parts: 1*384 + 1*192 + 2*64 + 3*16."""
    assert MemoryDesc((2, 17, 3, 4), tag="nChw16c").offset((1, 16, 2, 3)) == 752


@pytest.mark.parametrize("dims, tag, dtype, size", [
    ((32, 64, 3, 3), "NChw16n16c", "f32", 73728),
    ((2, 17, 3, 4), "nChw16c", "f32", 2 * 32 * 12 * 4),
    ((2, 17, 3, 4), "nChw16c", "bf16", 2 * 32 * 12 * 2),
    ((2, 17, 3, 4), "nchw", "s8", 2 * 17 * 12),
    ((0, 5, 8, 8), "nChw8c", "f32", 0),
    ((16, 31, 0, 3), "OIhw16o16i", "f32", 0),
    ((0,), "a", "u8", 0),
    ((1, 1, 1, 1), "ABcd8b16a2b", "f32", 16 * 16 * 4),
])
def test_size(dims, tag, dtype, size):
    assert MemoryDesc(dims, dtype, tag=tag).size == size


def test_size_strided_and_offset0():
    d = MemoryDesc((2, 3), "f32", strides=(10, 2), offset0=5)
    assert d.size == 20 * 4           # oneDNN: max(padded * stride), offset0 excluded
    assert d.span == 25
    assert d.offset((1, 2)) == 5 + 10 + 4


def test_zero_volume_strides():
    """A zero dim leaves the running stride unchanged (oneDNN)."""
    d = MemoryDesc((2, 0, 3), tag="abc")
    assert d.strides == (3, 3, 1)
    assert d.size == 0 and d.span == 0


# -- equality --------------------------------------------------------------------------
def test_equality_rules():
    a = MemoryDesc((2, 1, 3), tag="abc")
    # the stride of a dim with dims == padded == 1 is ignored
    assert a == MemoryDesc((2, 1, 3), strides=(3, 1, 1))
    assert a == MemoryDesc((2, 1, 3), strides=(3, 7, 1))
    assert a == MemoryDesc((2, 1, 3), tag="acb")
    assert hash(a) == hash(MemoryDesc((2, 1, 3), tag="acb"))
    assert a != MemoryDesc((2, 1, 3), tag="cab")
    assert a != MemoryDesc((2, 1, 3), tag="abc", offset0=1)
    assert a != MemoryDesc((2, 1, 3), "f16", tag="abc")
    assert a != MemoryDesc((2, 1, 3), strides=(6, 3, 1))       # a gap
    assert a != MemoryDesc((2, 1, 3), tag="aBc4b")               # blocked (padded 4)
    assert a != MemoryDesc((2, 1, 3), tag="Abc2a")
    assert a != MemoryDesc((2, 1, 4), tag="abc")
    assert a != MemoryDesc((2, 1, 3), tag="abc", halo=((0, 0, 1), (0, 0, 0)))
    # the same blocking written two ways
    assert MemoryDesc((4, 8), tag="AB4b4a") != MemoryDesc((4, 8), tag="AB4a4b")
    assert MemoryDesc((1, 16, 3, 3), tag="aBcd16b") != MemoryDesc((1, 16, 3, 3), tag="aBcd8b")
    assert MemoryDesc((4, 8), tag="nc") == MemoryDesc((4, 8), strides=(8, 1))
    # a unit dim padded by blocking keeps its stride meaningful: blocks differ anyway
    assert MemoryDesc((2, 1), tag="aB8b") != MemoryDesc((2, 1), tag="ab")


# -- user strides -----------------------------------------------------------------------
@pytest.mark.parametrize("dims, strides", [
    ((2, 3), (1, 1)), ((2, 3), (2, 1)), ((2, 3), (3, 2)), ((4, 4), (1, 2)), ((2, 2), (0, 1)),
    ((3, 2, 2), (3, 2, 1)),
])
def test_overlapping_strides_refused(dims, strides):
    with pytest.raises(ClayoutError, match="overlap"):
        MemoryDesc(dims, strides=strides)


@pytest.mark.parametrize("dims, strides", [
    ((2, 3), (3, 1)), ((2, 3), (1, 2)), ((2, 3), (10, 3)), ((2, 1, 3), (3, 0, 1)),
    ((1, 5), (0, 1)), ((0, 3), (1, 1)), ((3, 2, 2), (4, 1, 2)), ((2, 3), (4, 1)),
])
def test_valid_strides_accepted(dims, strides):
    d = MemoryDesc(dims, strides=strides)
    if not d.is_zero:
        off = d.offsets(grid(d.dims))
        assert len(np.unique(off)) == off.size


@pytest.mark.parametrize("kwargs, words", [
    (dict(strides=(1,)), "strides"),
    (dict(strides=(-1, 1)), "non-negative"),
    (dict(strides=(3, 1), tag="ab"), "either"),
    (dict(tag="ab", offset0=-1), "offset0"),
    (dict(tag="abc"), "3 dims"),
    (dict(tag="ab", halo=((0,), (0,))), "halo"),
    (dict(tag="ab", halo=((0, -1), (0, 0))), "halo"),
    (dict(tag="ab", dtype="f64"), "dtype"),
])
def test_bad_desc_arguments(kwargs, words):
    with pytest.raises(ClayoutError, match=words):
        MemoryDesc((2, 3), **kwargs)


@pytest.mark.parametrize("dims", [(), (2, -1), tuple([1] * 13), (2.5, 3)])
def test_bad_dims(dims):
    with pytest.raises(ClayoutError):
        MemoryDesc(dims)


def test_strided_tag_recovered():
    assert MemoryDesc((2, 3, 4), strides=(12, 1, 3)).tag == "acb"
    assert MemoryDesc((2, 3, 4), strides=(24, 1, 3)).tag is None   # a gap: no tag
    assert MemoryDesc((2, 3, 4), strides=(12, 1, 3), offset0=2).tag == "acb"


# -- submemory ------------------------------------------------------------------------
@SETTINGS
@given(pair=submemory_descs())
def test_submemory_is_a_view_of_the_parent(pair):
    """sub.offset(i) == parent.offset(i + offsets) for every index."""
    parent, sub = pair
    if sub.is_zero:
        return
    off = [(sub.offset0 - parent.offset0)]
    # recover offsets from offset0: find them by matching the first element
    idx = grid(sub.dims)
    got = sub.offsets(idx)
    # the sub's first element must be some parent element
    base = np.argwhere(parent.offsets(grid(parent.dims)).reshape(parent.dims) == got[0])
    assert len(base) == 1, off
    start = base[0]
    want = parent.offsets([i + s for i, s in zip(idx, start)])
    assert np.array_equal(got, want)


def test_submemory_cases():
    p = MemoryDesc((2, 40, 3, 3), tag="nChw16c")   # padded C 48
    s = p.submemory((2, 16, 3, 3), (0, 16, 0, 0))
    assert s.dims == (2, 16, 3, 3) and s.padded_dims == (2, 16, 3, 3)
    assert s.offset0 == 1 * p.strides[1]
    assert s.offset((1, 5, 2, 1)) == p.offset((1, 21, 2, 1))
    # reaching the right border: padded = parent padded - offset
    s = p.submemory((2, 8, 3, 3), (0, 32, 0, 0))
    assert s.padded_dims == (2, 16, 3, 3)
    assert s.offset((1, 7, 2, 2)) == p.offset((1, 39, 2, 2))
    # smaller than one block, not at the border
    s = p.submemory((1, 5, 1, 1), (1, 16, 2, 0))
    assert s.padded_dims == (1, 5, 1, 1)
    assert s.offset((0, 4, 0, 0)) == p.offset((1, 20, 2, 0))
    # of a strided desc with offset0
    q = MemoryDesc((4, 5), strides=(10, 1), offset0=3)
    s = q.submemory((2, 2), (1, 3))
    assert s.offset0 == 3 + 10 + 3 and s.offset((1, 1)) == q.offset((2, 4))
    # zero-volume submemory is legal
    assert p.submemory((2, 0, 3, 3), (0, 16, 0, 0)).size == 0


@pytest.mark.parametrize("dims, offsets, words", [
    ((2, 16, 3, 3), (0, 8, 0, 0), "multiple of its block 16"),
    ((2, 20, 3, 3), (0, 0, 0, 0), "neither a multiple"),
    ((2, 25, 3, 3), (0, 16, 0, 0), "outside"),
    ((3, 16, 3, 3), (0, 0, 0, 0), "outside"),
    ((2, 16, 3, 3), (0, -16, 0, 0), "outside"),
    ((2, 16, 3), (0, 0, 0), "entries"),
])
def test_submemory_refused(dims, offsets, words):
    p = MemoryDesc((2, 40, 3, 3), tag="nChw16c")
    with pytest.raises(ClayoutError, match=words):
        p.submemory(dims, offsets)


def test_submemory_of_halo_refused():
    d = MemoryDesc((2, 3), tag="ab", halo=((1, 1), (1, 1)))
    with pytest.raises(ClayoutError, match="halo"):
        d.submemory((1, 1), (0, 0))


# -- reshape -----------------------------------------------------------------------------
def same_elements(old, new):
    """Every logical element, in row-major order, sits at the same offset."""
    if old.is_zero:
        return
    flat = np.arange(old.nelems)
    a = old.offsets(list(np.unravel_index(flat, old.dims)))
    b = new.offsets(list(np.unravel_index(flat, new.dims)))
    assert np.array_equal(a, b)


@pytest.mark.parametrize("dims, tag, new, want", [
    ((1, 15, 12), "aBc8b", (1, 15, 3, 4), "aBcd8b"),
    ((3, 4, 5, 6), "ABcd16b16a", (1, 3, 4, 5, 6), "aBCde16c16b"),
    ((2, 3, 4, 5), "abcd", (6, 20), "ab"),
    ((2, 3, 4, 5), "abcd", (2, 60), "ab"),
    ((2, 3, 4, 5), "abcd", (2, 3, 2, 2, 5), "abcde"),
    ((6, 20), "ab", (2, 3, 4, 5), "abcd"),
    ((2, 3, 4, 5), "acdb", (2, 3, 20), "acb"),
    ((2, 3, 4, 5), "abcd", (1, 2, 1, 3, 4, 5, 1), "abcdefg"),
    ((1, 2, 1, 3), "abcd", (2, 3), "ab"),
    ((2, 32, 4, 5), "aBcd16b", (2, 32, 20), "aBc16b"),
    ((2, 32, 4, 5), "aBcd16b", (2, 32, 2, 2, 5), "aBcde16b"),
    ((2, 3, 4, 5), "abcd", (4, 30), "ab"),   # one dense group, joined then split
])
def test_reshape_accepted(dims, tag, new, want):
    d = MemoryDesc(dims, tag=tag)
    r = d.reshape(new)
    assert r == MemoryDesc(new, tag=want)
    assert r.dims == tuple(new) and r.size == d.size
    same_elements(d, r)


@pytest.mark.parametrize("dims, tag, new, words", [
    ((2, 8, 3, 4), "aBcd8b", (2, 96), "blocked"),
    ((2, 17, 3, 4), "aBcd16b", (2, 17, 12), "padded"),   # fine: only h, w join
    ((2, 3, 4, 5), "acdb", (6, 20), "dense"),
    ((2, 3, 4, 5), "abcd", (2, 3, 4, 6), "volume"),
    ((2, 3), "ab", (5,), "volume"),
])
def test_reshape_refused(dims, tag, new, words):
    d = MemoryDesc(dims, tag=tag)
    if words == "padded":  # the h, w join is legal even with C padded
        same_elements(d, d.reshape(new))
        with pytest.raises(ClayoutError, match="blocked or padded"):
            d.reshape((2, 17 * 3, 4))
        return
    with pytest.raises(ClayoutError, match=words):
        d.reshape(new)


def test_reshape_strided_gap_refused_and_unit_padded():
    d = MemoryDesc((2, 3, 4), strides=(24, 8, 1))   # a gap between b and c
    with pytest.raises(ClayoutError, match="dense"):
        d.reshape((2, 12))
    same_elements(d, d.reshape((6, 4)))            # a, b are dense with each other
    with pytest.raises(ClayoutError, match="unit dim"):
        MemoryDesc((2, 1, 3), tag="aBc4b").reshape((2, 3))


@SETTINGS
@given(data=st.data())
def test_reshape_unit_dims_property(data):
    """Adding and removing unit dims never moves an element."""
    nd = data.draw(st.integers(1, 4))
    dims = data.draw(small_dims(nd))
    d = data.draw(tagged_descs(dims=dims))
    pos = data.draw(st.integers(0, nd))
    new = dims[:pos] + (1,) + dims[pos:]
    r = d.reshape(new)
    same_elements(d, r)
    back = r.reshape(dims)
    same_elements(d, back)
    assert back == d


# -- permute_axes -------------------------------------------------------------------------
def test_permute_axes_gtest():
    d = MemoryDesc((2, 15, 3, 4), tag="ABcd16b16a")
    p = d.permute_axes((1, 0, 2, 3))
    assert p == MemoryDesc((15, 2, 3, 4), tag="BAcd16a16b")


@SETTINGS
@given(desc=any_descs(), data=st.data())
def test_permute_axes_moves_dims(desc, data):
    perm = data.draw(st.permutations(range(desc.ndims)))
    p = desc.permute_axes(perm)
    for i in range(desc.ndims):
        assert p.dims[perm[i]] == desc.dims[i]
        assert p.padded_dims[perm[i]] == desc.padded_dims[i]
    assert p.size == desc.size
    if desc.is_zero:
        return
    idx = grid(desc.dims)
    moved = [None] * desc.ndims
    for i in range(desc.ndims):
        moved[perm[i]] = idx[i]
    assert np.array_equal(p.offsets(moved), desc.offsets(idx))
    inverse = [0] * desc.ndims
    for i, v in enumerate(perm):
        inverse[v] = i
    assert p.permute_axes(inverse) == desc


def test_permute_axes_refused():
    with pytest.raises(ClayoutError, match="permutation"):
        MemoryDesc((2, 3), tag="ab").permute_axes((0, 0))


# -- halo ---------------------------------------------------------------------------------
def test_halo_basics():
    d = MemoryDesc((2, 5, 3, 3), tag="nChw4c", halo=((0, 1, 1, 2), (0, 2, 1, 0)), fill=-1)
    # blocking on the padded extent: C 1 + 5 + 2 = 8, a multiple of 4
    assert d.padded_dims == (2, 8, 5, 5)
    assert d.extent == (2, 8, 5, 5)
    # element 0 sits after lower
    assert d.offset((0, 0, 0, 0)) == MemoryDesc((2, 8, 5, 5), tag="nChw4c").offset((0, 1, 1, 2))
    e = MemoryDesc((1, 3, 1, 1), tag="nChw4c", halo=((0, 1, 0, 0), (0, 1, 0, 0)))
    assert e.padded_dims == (1, 8, 1, 1)   # 1 + 3 + 1 = 5 -> 8


@SETTINGS
@given(dst=halo_descs(), seed=st.integers(0, 2 ** 32 - 1))
def test_halo_fill_and_tails(dst, seed):
    """Halo positions hold the fill (converted with §3's rules), block tails are
    zero even in halo rows, values sit after lower. Checked on an oracle built
    from the walk over the padded grid, for both engines."""
    src = MemoryDesc(dst.dims, dst.dtype)
    x = fill(dst.dtype.name, src.span, seed)
    fillv = runtime.convert(np.array([dst.fill], np.float32), dst.dtype.name)
    want = np.zeros(dst.span, dst.dtype.np)
    if not dst.is_zero:
        q = grid(dst.padded_dims)
        halo = np.ones(q[0].shape, bool)
        inside = np.ones(q[0].shape, bool)
        for d, qd in enumerate(q):
            lo, n = dst.halo_lower[d], dst.dims[d]
            halo &= qd < dst.extent[d]
            inside &= (qd >= lo) & (qd < lo + n)
        off = reference.walk(dst, q)
        want[off[halo & ~inside]] = fillv[0]
        want[off[inside]] = x
    for eng in (CPU, REF):
        assert_same_bits(eng.convert(src, dst, x), want, f"{eng.name} halo {dst.describe()}")


@st.composite
def reshape_targets(draw, dims):
    """New dims from 1-3 random edits: insert or remove a unit dim, join two
    neighbours, split a dim by a divisor."""
    new = list(dims)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(("unit", "drop", "join", "split")))
        if op == "unit" and len(new) < 8:
            new.insert(draw(st.integers(0, len(new))), 1)
        elif op == "drop" and 1 in new and len(new) > 1:
            new.remove(1)
        elif op == "join" and len(new) > 1:
            i = draw(st.integers(0, len(new) - 2))
            new[i:i + 2] = [new[i] * new[i + 1]]
        elif op == "split" and len(new) < 8:
            i = draw(st.integers(0, len(new) - 1))
            fs = [f for f in (2, 3, 4, 5, 8) if new[i] % f == 0 and new[i] > 0]
            if fs:
                f = draw(st.sampled_from(fs))
                new[i:i + 1] = [f, new[i] // f]
    return tuple(new)


@SETTINGS
@given(desc=any_descs(), data=st.data())
def test_reshape_accepted_only_when_elements_stay(desc, data):
    """Any reshape clayout accepts keeps every element at its offset; a refusal
    is a ClayoutError naming the rule."""
    new = data.draw(reshape_targets(desc.dims), label="new dims")
    try:
        r = desc.reshape(new)
    except ClayoutError as exc:
        assert any(w in str(exc) for w in ("blocked", "padded", "dense", "volume", "halo",
                                           "grouped", "matched", "unit")), str(exc)
        return
    assert r.dims == new
    same_elements(desc, r)
    # oneDNN's size is max(padded / blocks * stride): dropping a unit dim whose
    # stride spans more than the rest may shrink it; nothing else changes it. A
    # submemory ending inside a block (padded % blocks != 0) floors that term to
    # 0 (as oneDNN does), so a unit dim added next to it may count it again.
    if desc.is_zero or any(p % desc.blocks_of(d) for d, p in enumerate(desc.padded_dims)):
        return
    assert r.size <= desc.size
    if 1 not in desc.dims:
        assert r.size == desc.size


def test_reshape_of_plain_dense_always_accepted():
    """Joins and splits of a dense unblocked unpadded desc are never refused."""
    d = MemoryDesc((2, 3, 4, 5), tag="abcd")
    for new in [(120,), (2, 60), (6, 4, 5), (2, 3, 20), (4, 30), (1, 120, 1), (5, 24)]:
        same_elements(d, d.reshape(new))


# -- the C expressions the kernels inline, evaluated on numpy index arrays --------------------
def eval_c(expr: str, env: dict):
    """Evaluate an OpenCL C integer expression of non-negative values
    (where C's / truncation equals Python's //)."""
    assert "//" not in expr and "?" not in expr, expr
    return eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(env))


@SETTINGS
@given(desc=any_descs())
def test_c_offset_mirrors_offsets(desc):
    if desc.is_zero:
        return
    idx = grid(desc.dims)
    names = [f"i{d}" for d in range(desc.ndims)]
    got = eval_c(desc.c_offset(names), dict(zip(names, idx)))
    assert np.array_equal(np.broadcast_to(got, idx[0].shape), desc.offsets(idx)), desc.c_offset(names)


@SETTINGS
@given(pair=submemory_descs(), data=st.data())
def test_submemory_of_submemory(pair, data):
    """A view of a view is a view of the parent: every element of the inner
    sub is an element of the parent, and the two levels agree."""
    parent, sub = pair
    inner = data.draw(sub_of(sub), label="inner")
    if inner.is_zero:
        return
    parent_offsets = set(parent.offsets(grid(parent.dims)).tolist())
    got = inner.offsets(grid(inner.dims))
    assert set(got.tolist()) <= parent_offsets
    assert set(got.tolist()) <= set(sub.offsets(grid(sub.dims)).tolist())
    assert len(np.unique(got)) == got.size


def test_replace_worked_example():
    """MemoryDesc.replace's docstring runs as written."""
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(MemoryDesc.replace, "replace",
                                             globs={"MemoryDesc": MemoryDesc}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries == 5
    desc = MemoryDesc((2, 32, 3, 4), tag="nChw16c")
    assert desc.replace() == desc and desc.replace(dtype="f16").dtype.name == "f16"


@pytest.mark.parametrize("fields, words", [
    ({"colour": 1}, "unknown field"),
    ({"strides": (1, 2, 3)}, "strides"),
    ({"dims": (2, 32, 3, 4.5)}, "must be integers"),
    ({"inner_idxs": (4,)}, "inner_blks"),
    ({"padded_dims": (2, 16, 3, 4)}, "padded_dims"),
    ({"offset0": -1}, "offset0"),
])
def test_replace_refuses_fields_that_do_not_fit(fields, words):
    with pytest.raises(ClayoutError, match=words):
        MemoryDesc((2, 32, 3, 4), tag="nChw16c").replace(**fields)
