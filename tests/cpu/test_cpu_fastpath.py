"""The numpy fast path on shapes large enough to take its tiled, threaded
paths (staging through a compact buffer, peeled lane axes, widened 16-byte
items, the far-plane and row-block paths), checked bit for bit against the
reference and a numpy oracle; each test asserts the method its plan chose
(``runtime.cpu.plan``: ``Plan.method``, ``Copy.method``)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import image_side
from runtime import engine
from runtime.algebra.desc import MemoryDesc
from runtime.cpu import engine as cpu
from runtime.cpu import geometry
from runtime.reference.engine import read
from strategies import fill, scaled, small_tiles

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/desc.py", "runtime/cpu/__init__.py", "runtime/cpu/blocked.py",
           "runtime/cpu/copy.py", "runtime/cpu/engine.py", "runtime/cpu/geometry.py",
           "runtime/cpu/methods.py", "runtime/cpu/plan.py", "runtime/cpu/rows.py",
           "runtime/reference/engine.py")

DIMS = (2, 20, 37, 61)  # odd H and W, C % 16 != 0
pytestmark = pytest.mark.usefixtures("cpu_path")   # each test on both paths


def expected(method: str) -> str:
    """``method`` where the numpy path plans, "compiled" where the compiled
    moves do (every box pair is one compiled copy there)."""
    return "compiled" if engine.get("cpu").path == "compiled" else method


def plan(src: MemoryDesc, dst: MemoryDesc):
    """The plan of the cpu engine on the module's path (conftest.cpu_path)."""
    return engine.get("cpu").plan(src, dst)


REF = engine.get("reference")


def dst_desc(dst: str, dims, dtype="f32") -> MemoryDesc:
    """A tag, or 'image:NAME' for the dense desc of that image."""
    if dst.startswith("image:"):
        return image_side(dst[6:], dims, dtype).desc
    return MemoryDesc(dims, dtype, tag=dst)


@pytest.fixture(autouse=True)
def tiled():
    with small_tiles(small=1 << 14, tile=1 << 12):  # DIMS then takes the tiled path
        yield


# the methods the plan picks at DIMS under small_tiles, per dtype (f32, f16, s8): 2- and
# 1-byte transposes are blocked where 4-byte ones gather far planes; 16c tails are copies
METHODS = {
    ("nchw", "nhwc"): ("far-plane", "far-plane", "blocked"),
    ("nhwc", "nchw"): ("blocked", "blocked", "blocked"),
    ("nchw", "nChw16c"): ("far-plane", "far-plane", "blocked"),
    ("nChw16c", "nhwc"): ("tiles", "copy", "copy"),
    ("nhwc", "acBd4b"): ("tiles", "blocked", "blocked"),
    ("nchw", "acBd4b"): ("far-plane", "far-plane", "blocked"),
    ("nchw", "Acdb4a"): ("far-plane", "far-plane", "far-plane"),
    ("nchw", "cBda4b"): ("far-plane", "far-plane", "blocked"),
    ("nChw8c", "nChw16c"): ("tiles", "copy", "copy"),
    ("chwn", "ABcd8b16a2b"): ("far-plane", "far-plane", "far-plane"),
}


@pytest.mark.parametrize("src_tag, dst_tag", list(METHODS))
@pytest.mark.parametrize("dtype", ["f32", "f16", "s8"])
def test_tiled_paths_match_reference(src_tag, dst_tag, dtype):
    src = MemoryDesc(DIMS, dtype, tag=src_tag)
    dst = MemoryDesc(DIMS, dtype, tag=dst_tag)
    assert src.nelems > geometry.SMALL_ELEMS
    method = expected(METHODS[src_tag, dst_tag][("f32", "f16", "s8").index(dtype)])
    assert method in {c.method for c in plan(src, dst).copies}
    x = np.random.default_rng(1).integers(-100, 100, src.span).astype(src.dtype.np)
    want = REF.convert(src, dst, x)
    got = engine.get("cpu").convert(src, dst, x)
    assert np.array_equal(got.view(dst.dtype.bits), want.view(dst.dtype.bits))


@pytest.mark.parametrize("dtype", ["f32", "f16", "s8"])
def test_two_axis_transpose_goes_by_merged_tiles(dtype):
    """N = 1 NHWC -> NCHW is a transpose of two axes once H and W merge
    (C x HW): tiles of the merged views, not ufunc blocks; with N = 2 the
    batch keeps three axes and blocks. Both give the reference's bits."""
    for dims, method, ndim in (((1,) + DIMS[1:], "tiles", 2), (DIMS, "blocked", 3)):
        src, dst = MemoryDesc(dims, dtype, tag="nhwc"), MemoryDesc(dims, dtype, tag="nchw")
        (c,) = plan(src, dst).copies
        assert c.method == expected(method) and len(c.dst.shape) >= ndim
        if method == "tiles":
            assert c.dst.shape == (dims[1], dims[2] * dims[3])   # H and W merged
        x = np.random.default_rng(2).integers(-100, 100, src.span).astype(src.dtype.np)
        want = REF.convert(src, dst, x)
        assert np.array_equal(engine.get("cpu").convert(src, dst, x).view(dst.dtype.bits),
                              want.view(dst.dtype.bits))


def test_transpose_matches_numpy_oracle():
    x = np.arange(np.prod(DIMS), dtype=np.float32).reshape(DIMS)
    got = engine.get("cpu").convert(MemoryDesc(DIMS, tag="nchw"), MemoryDesc(DIMS, tag="nhwc"), x.reshape(-1))
    assert np.array_equal(got, x.transpose(0, 2, 3, 1).reshape(-1))


def test_conversion_in_tiles():
    src = MemoryDesc(DIMS, "f32", tag="nchw")
    dst = MemoryDesc(DIMS, "bf16", tag="nChw16c")
    x = np.random.default_rng(2).standard_normal(src.span).astype(np.float32) * 1e3
    x[::97] = np.nan
    want = REF.convert(src, dst, x)
    assert np.array_equal(engine.get("cpu").convert(src, dst, x).view(np.uint16), want.view(np.uint16))


def test_reorder_into_leaves_outside_footprint_alone():
    parent = MemoryDesc((2, 32, 9, 9), tag="nChw16c")
    sub = parent.submemory((2, 16, 9, 9), (0, 16, 0, 0))
    buf = np.full(parent.span, 7.0, np.float32)
    x = np.ones(MemoryDesc((2, 16, 9, 9)).span, np.float32)
    cpu.reorder_into(x, MemoryDesc((2, 16, 9, 9)), buf, sub)
    logical = read(buf, parent).reshape(parent.dims)
    assert (logical[:, 16:] == 1).all() and (logical[:, :16] == 7).all()


@pytest.mark.parametrize("stage_bytes", [1 << 12, 1 << 19])  # many row blocks with a remainder; few
@pytest.mark.parametrize("src_tag, dst, dims", [
    ("oihw", "image:conv2d_filter", (1, 20, 37, 61)),        # O=1: three zero lanes of four
    ("nchw", "image:in_out_channel", (3, 3, 37, 61)),        # C=3: one zero lane
    ("nhwc", "image:in_out_channel", (1, 3, 91, 61)),
    ("nchw", "nChw16c", (2, 9, 37, 61)),                     # C=9 in 16c: one box, 7 zero lanes
])
@pytest.mark.parametrize("dtypes", [("f32", "f32"), ("f16", "f16"), ("s8", "s8"), ("f32", "f16")])
def test_zero_padding_written_in_row_blocks(stage_bytes, src_tag, dst, dims, dtypes):
    """A dense destination with zero padding, into a buffer of junk: the data
    and the zeros are written row block by row block (the plan's "rows"), and
    every element of the buffer gets the reference's bits."""
    with small_tiles(small=1 << 14, tile=1 << 12, stage_bytes=stage_bytes):
        src = MemoryDesc(dims, dtypes[0], tag=src_tag)
        dstd = dst_desc(dst, dims, dtypes[1])
        assert src.nelems > geometry.SMALL_ELEMS
        assert plan(src, dstd).method == expected("rows")
        x = np.random.default_rng(3).integers(-100, 100, src.span).astype(src.dtype.np)
        want = REF.convert(src, dstd, x)
        buf = np.frombuffer(np.full(dstd.span * dstd.dtype.itemsize, 0xA5, np.uint8).tobytes(),
                            dtype=dstd.dtype.np).copy()
        cpu.reorder_into(x, src, buf, dstd)
        assert np.array_equal(buf.view(dstd.dtype.bits), want.view(dstd.dtype.bits))


FAR_DIMS = [(1, 17, 65, 67), (2, 5, 63, 71), (2, 3, 65, 65), (1, 64, 65, 65), (1, 20, 67, 63)]


@scaled(1 / 4)   # 30 examples in the thorough tier, 12 in ci
@given(dims=st.sampled_from(FAR_DIMS),
       dst=st.sampled_from(["nhwc", "nChw16c", "nChw8c", "Acdb4a", "image:in_out_channel"]),
       dtypes=st.sampled_from([("f32", "f32"), ("f16", "f16"), ("s8", "s8"), ("f32", "f16"),
                               ("s8", "f32"), ("bf16", "f32")]),
       seed=st.integers(0, 1000))
def test_far_plane_transposes_match_reference(dims, dst, dtypes, seed):
    """Destinations whose short inner run (channels, a block, an RGBA lane)
    is gathered from source planes at least 4 KiB apart take the far-plane
    path: every element gets the reference's bits, with C and H, W tails and
    dtype conversions."""
    src = MemoryDesc(dims, dtypes[0], tag="nchw")
    dstd = dst_desc(dst, dims, dtypes[1])
    assert src.nelems > geometry.SMALL_ELEMS
    assert dims[2] * dims[3] * src.dtype.itemsize >= geometry.PLANE_BYTES
    assert expected("far-plane") in {c.method for c in plan(src, dstd).copies}
    x = fill(dtypes[0], src.span, seed)
    want = REF.convert(src, dstd, x)
    got = engine.get("cpu").convert(src, dstd, x)
    assert np.array_equal(got.view(dstd.dtype.bits), want.view(dstd.dtype.bits))


def test_small_copies_are_one_copy_and_plans_are_cached():
    src, dst = MemoryDesc((1, 3, 5, 7), tag="nchw"), MemoryDesc((1, 3, 5, 7), tag="nhwc")
    p = plan(src, dst)
    # the destination's inner run (C = 3) is short: one copy per channel, numpy's
    # inner loop then runs along H*W; the other way the inner run is W, long enough
    assert p.method == expected("peeled copy") and plan(src, dst) is p
    if p.method != "compiled":   # the compiled copy has no lanes to peel
        assert p.copies[0].axes == (1,) and p.copies[0].dst.shape[1] == 3
    assert plan(dst, src).method == expected("copy")
    blocked = plan(MemoryDesc((2, 3, 5), tag="abc"), MemoryDesc((2, 3, 5), tag="aBc4b"))
    # the compiled copy writes the block tail with its rows: nothing left to zero
    assert blocked.padding == ("none" if p.method == "compiled" else "memset")
    assert blocked.method == expected("peeled copy")
    via = plan(MemoryDesc((2, 24, 3), tag="aBc8b"), MemoryDesc((2, 24, 3), tag="aBc3b"))
    assert via.method == "via" and via.via == MemoryDesc((2, 24, 3))
