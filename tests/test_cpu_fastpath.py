"""The numpy fast path on shapes large enough to take its tiled, threaded
paths (staging through a compact buffer, peeled lane axes, widened 16-byte
items), checked bit for bit against the reference and a numpy oracle."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.cpu import engine as cpu
from runtime.cpu import tiles as cpu_tiles
from runtime.reference import engine as reference
from runtime.algebra.desc import MemoryDesc
from strategies import FEW, fill, small_tiles

DIMS = (2, 20, 37, 61)  # odd H and W, C % 16 != 0


@pytest.fixture(autouse=True)
def tiled():
    with small_tiles(small=1 << 14, tile=1 << 12):  # DIMS then takes the tiled path
        yield


@pytest.mark.parametrize("src_tag, dst_tag", [
    ("nchw", "nhwc"), ("nhwc", "nchw"), ("nchw", "nChw16c"), ("nChw16c", "nhwc"),
    ("nhwc", "acBd4b"), ("nchw", "acBd4b"), ("nchw", "Acdb4a"), ("nchw", "cBda4b"),
    ("nChw8c", "nChw16c"), ("chwn", "ABcd8b16a2b"),
])
@pytest.mark.parametrize("dtype", ["f32", "f16", "s8"])
def test_tiled_paths_match_reference(src_tag, dst_tag, dtype):
    src = MemoryDesc(DIMS, dtype, tag=src_tag)
    dst = MemoryDesc(DIMS, dtype, tag=dst_tag)
    assert src.nelems > cpu_tiles.SMALL_ELEMS
    x = np.random.default_rng(1).integers(-100, 100, src.span).astype(src.dtype.np)
    want = reference.reorder(x, src, dst)
    got = cpu.reorder(x, src, dst)
    assert np.array_equal(got.view(dst.dtype.bits), want.view(dst.dtype.bits))


def test_transpose_matches_numpy_oracle():
    x = np.arange(np.prod(DIMS), dtype=np.float32).reshape(DIMS)
    got = cpu.reorder(x.reshape(-1), MemoryDesc(DIMS, tag="nchw"), MemoryDesc(DIMS, tag="nhwc"))
    assert np.array_equal(got, x.transpose(0, 2, 3, 1).reshape(-1))


def test_conversion_in_tiles():
    src = MemoryDesc(DIMS, "f32", tag="nchw")
    dst = MemoryDesc(DIMS, "bf16", tag="nChw16c")
    x = np.random.default_rng(2).standard_normal(src.span).astype(np.float32) * 1e3
    x[::97] = np.nan
    want = reference.reorder(x, src, dst)
    assert np.array_equal(cpu.reorder(x, src, dst).view(np.uint16), want.view(np.uint16))


def test_reorder_into_leaves_outside_footprint_alone():
    parent = MemoryDesc((2, 32, 9, 9), tag="nChw16c")
    sub = parent.submemory((2, 16, 9, 9), (0, 16, 0, 0))
    buf = np.full(parent.span, 7.0, np.float32)
    x = np.ones(MemoryDesc((2, 16, 9, 9)).span, np.float32)
    cpu.reorder_into(x, MemoryDesc((2, 16, 9, 9)), buf, sub)
    logical = reference.read_logical(buf, parent)
    assert (logical[:, 16:] == 1).all() and (logical[:, :16] == 7).all()


@pytest.mark.parametrize("stage_bytes", [1 << 12, 1 << 19])  # many row blocks with a remainder; few
@pytest.mark.parametrize("src_tag, dst, dims", [
    ("oihw", "image:conv2d_filter", (1, 20, 37, 61)),        # O=1: three zero lanes of four
    ("nchw", "image:in_out_channel", (3, 3, 37, 61)),        # C=3: one zero lane
    ("nhwc", "image:in_out_channel", (1, 3, 91, 61)),
    ("nchw", "nChw16c", (2, 9, 37, 61)),                     # C=9 in 16c: one box, 7 zero lanes
])
@pytest.mark.parametrize("dtypes", [("f32", "f32"), ("f16", "f16"), ("s8", "s8"), ("f32", "f16")])
def test_zero_padding_written_in_row_blocks(monkeypatch, stage_bytes, src_tag, dst, dims, dtypes):
    """A dense destination with zero padding, into a buffer of junk: the data
    and the zeros are written row block by row block (runtime.cpu_rows), and
    every element of the buffer gets the reference's bits."""
    from runtime.cpu import rows as cpu_rows
    from runtime.algebra.layout import image_layout
    from runtime.algebra.desc import MemoryDesc as _M
    dst_desc = lambda d, dims, dt="f32": image_layout(d[6:]).desc(dims, dt) if d.startswith("image:") else _M(dims, dt, tag=d)  # noqa: E731
    calls = []
    monkeypatch.setattr(cpu_rows, "STAGE_BYTES", stage_bytes)
    real = cpu_rows.copy_rows
    monkeypatch.setattr(cpu_rows, "copy_rows", lambda *a: calls.append(1) or real(*a))
    src = MemoryDesc(dims, dtypes[0], tag=src_tag)
    dstd = dst_desc(dst, dims, dtypes[1])
    assert src.nelems > cpu_tiles.SMALL_ELEMS
    x = np.random.default_rng(3).integers(-100, 100, src.span).astype(src.dtype.np)
    want = reference.reorder(x, src, dstd)
    buf = np.frombuffer(np.full(dstd.span * dstd.dtype.itemsize, 0xA5, np.uint8).tobytes(),
                        dtype=dstd.dtype.np).copy()
    cpu.reorder_into(x, src, buf, dstd)
    assert calls, "the row-block path was not taken"
    assert np.array_equal(buf.view(dstd.dtype.bits), want.view(dstd.dtype.bits))


FAR_DIMS = [(1, 17, 65, 67), (2, 5, 63, 71), (2, 3, 65, 65), (1, 64, 65, 65), (1, 20, 67, 63)]


@settings(FEW, max_examples=30)
@given(dims=st.sampled_from(FAR_DIMS),
       dst=st.sampled_from(["nhwc", "nChw16c", "nChw8c", "Acdb4a", "image:in_out_channel"]),
       dtypes=st.sampled_from([("f32", "f32"), ("f16", "f16"), ("s8", "s8"), ("f32", "f16"),
                               ("s8", "f32"), ("bf16", "f32")]),
       seed=st.integers(0, 1000))
def test_far_inner_transposes_match_reference(dims, dst, dtypes, seed):
    """Destinations whose short inner run (channels, a block, an RGBA lane)
    is gathered from source planes at least 4 KiB apart take the staged
    big-tile path (cpu_tiles._copy_far_inner): every element gets the reference's
    bits, with C and H, W tails and dtype conversions."""
    from runtime.algebra.layout import image_layout
    from runtime.algebra.desc import MemoryDesc as _M
    dst_desc = lambda d, dims, dt="f32": image_layout(d[6:]).desc(dims, dt) if d.startswith("image:") else _M(dims, dt, tag=d)  # noqa: E731
    src = MemoryDesc(dims, dtypes[0], tag="nchw")
    dstd = dst_desc(dst, dims, dtypes[1])
    assert src.nelems > cpu_tiles.SMALL_ELEMS
    assert dims[2] * dims[3] * src.dtype.itemsize >= 4096
    x = fill(dtypes[0], src.span, seed)
    want = reference.reorder(x, src, dstd)
    calls = []
    real = cpu_tiles._copy_far_inner
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu_tiles, "_copy_far_inner", lambda *a: calls.append(1) or real(*a))
        got = cpu.reorder(x, src, dstd)
    assert calls, "the far-inner path was not taken"
    assert np.array_equal(got.view(dstd.dtype.bits), want.view(dstd.dtype.bits))
