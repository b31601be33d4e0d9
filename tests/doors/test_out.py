"""out= on host arrays: reorder, to_image and from_image write into the
caller's array on every engine, bit for bit what a fresh result holds, even
when the array held garbage; anything but a writable, C-contiguous array of
exactly the result's shape and dtype is refused by name."""
import numpy as np
import pytest

import runtime
from conftest import bits
from runtime import ClayoutError, Memory, MemoryDesc, from_image, reorder, to_image
from runtime import engine as engines

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/doors/checks.py",)

DIMS = (2, 17, 3, 4)
# (src desc, dst desc): block tails, gaps + offset0, halo with a fill, a dtype change
REORDERS = [
    (MemoryDesc(DIMS, "f32"), MemoryDesc(DIMS, "f32", tag="nChw16c")),
    (MemoryDesc(DIMS, "f32"), MemoryDesc(DIMS, "f16", strides=(17 * 16 + 5, 16, 5, 1),
                                         offset0=7)),
    (MemoryDesc(DIMS, "f32", tag="nhwc"),
     MemoryDesc(DIMS, "u8", tag="nhwc", halo=((0, 0, 1, 2), (0, 0, 2, 1)), fill=3)),
    (MemoryDesc(DIMS, "s32", tag="nhwc"), MemoryDesc(DIMS, "s8", tag="nChw8c")),
    (MemoryDesc(DIMS, "f32"), MemoryDesc(DIMS, "bf16", tag="nhwc")),
]
# (layout, image dtype): padding lanes and rows, one-channel, half
IMAGES = [("in_out_channel", "f32"), ("conv2d_filter", "f16"), ("in_out_width", "u8"),
          ("image_2d_weights_c1_b_fyx", "f16"), ("texture_2d", "s32")]


@pytest.fixture(params=["reference", "cpu", "opencl-direct", "opencl-staged"])
def engine(request):
    if not request.param.startswith("opencl"):
        return engines.get(request.param)
    cl_engine = request.getfixturevalue("cl_engine")
    from runtime.opencl.engine import OpenCLEngine
    return OpenCLEngine(queue=cl_engine.queue, image_access=request.param.split("-")[1])


def _values(desc: MemoryDesc, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(desc.span) * 40
    if not desc.dtype.is_float:
        x = np.clip(x, -100, 100)
    return runtime.convert(x.astype(np.float32), desc.dtype)


def _garbage(shape, dtype) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    out.view(np.uint8)[...] = 0xA5
    return out


@pytest.mark.parametrize("src,dst", REORDERS, ids=lambda d: str(d))
def test_reorder_into_garbage(engine, src, dst):
    x = _values(src)
    fresh = reorder(x, src, dst, engine=engine)
    out = _garbage(fresh.shape, fresh.dtype)
    assert reorder(x, src, dst, engine=engine, out=out) is out
    assert np.array_equal(bits(out), bits(fresh))
    assert np.array_equal(bits(out), bits(reorder(x, src, dst, engine="reference")))


@pytest.mark.parametrize("layout,dtype", IMAGES)
def test_to_image_and_back_into_garbage(engine, layout, dtype):
    src = MemoryDesc(DIMS, "f32", tag="oihw")
    x = _values(src).reshape(DIMS)
    fresh = to_image(x, layout, dtype=dtype, engine=engine)
    out = _garbage(fresh.shape, fresh.dtype)
    assert to_image(x, layout, dtype=dtype, engine=engine, out=out) is out
    assert np.array_equal(bits(out), bits(fresh))
    assert np.array_equal(bits(out), bits(to_image(x, layout, dtype=dtype, engine="reference")))
    for tag, dt in (("oihw", "f32"), ("OIhw8i8o", None), ("ohwi", "bf16")):
        want = from_image(fresh, layout, DIMS, dst=tag, dtype=dt, engine=engine)
        back = _garbage(want.shape, want.dtype)
        assert from_image(fresh, layout, DIMS, dst=tag, dtype=dt, engine=engine,
                          out=back) is back
        assert np.array_equal(bits(back), bits(want)), (layout, tag)


def test_zero_sized_output_is_zeroed(engine):
    dims = (0, 5, 3, 2)
    src, dst = MemoryDesc(dims), MemoryDesc(dims, tag="nChw8c")
    out = _garbage((dst.span,), np.float32)
    assert reorder(np.zeros(0, np.float32), src, dst, engine=engine, out=out) is out
    img = _garbage(runtime.image_layout("in_out_channel").array_shape(dims), np.float32)
    to_image(np.zeros(dims, np.float32), "in_out_channel", engine=engine, out=img)
    assert not img.any()


def _error(fn, *args, **kw) -> str:
    with pytest.raises(ClayoutError) as info:
        fn(*args, **kw)
    return str(info.value)


@pytest.mark.parametrize("kind", ["reorder", "to_image", "from_image"])
def test_bad_out_is_refused_by_name(kind, engine):
    src, dst = MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nChw16c")
    x = _values(src)
    image = to_image(x.reshape(DIMS), "in_out_channel", engine="cpu")
    if kind == "reorder":
        call, shape, dtype = (lambda out: reorder(x, src, dst, engine=engine, out=out),
                              (dst.span,), np.float32)
    elif kind == "to_image":
        call, shape, dtype = (lambda out: to_image(x.reshape(DIMS), "in_out_channel",
                                                   engine=engine, out=out),
                              image.shape, np.float32)
    else:
        call, shape, dtype = (lambda out: from_image(image, "in_out_channel", DIMS, dtype="f16",
                                                     engine=engine, out=out),
                              DIMS, np.float16)
    want = f"writable, C-contiguous {runtime.algebra.dtypes.dtype(dtype).name}"
    readonly = np.zeros(shape, dtype)
    readonly.setflags(write=False)
    bad = {
        "shape (": np.zeros((2,) + tuple(shape), dtype),
        "dtype float64": np.zeros(shape, np.float64),
        "not C-contiguous": np.zeros(shape, dtype, order="F") if len(shape) > 1 else
        np.zeros(2 * shape[0], dtype)[::2],
        "read-only": readonly,
        "got list": np.zeros(shape, dtype).tolist(),
    }
    for what, out in bad.items():
        message = _error(call, out)
        assert want in message and str(tuple(shape)) in message and what in message, message
        assert message.startswith(kind), message


def test_out_overlapping_the_input_is_refused():
    src, dst = MemoryDesc((8, 8)), MemoryDesc((8, 8), tag="ba")
    buf = np.arange(128, dtype=np.float32)
    x = buf[:64]
    assert "overlaps the input" in _error(reorder, x, src, dst, out=x)
    assert "overlaps the input" in _error(reorder, x, src, dst, out=buf[32:96])
    out = buf[64:]       # the same array's other half is fine
    assert reorder(x, src, dst, out=out) is out
    assert np.array_equal(out, np.arange(64, dtype=np.float32).reshape(8, 8).T.reshape(-1))


def test_out_with_memory_arguments_points_to_the_memory_way():
    src = Memory.from_numpy(np.zeros(2 * 17 * 3 * 4, np.float32), MemoryDesc(DIMS))
    out = np.zeros(MemoryDesc(DIMS, tag="nhwc").span, np.float32)
    assert "out= takes a Memory to write into (a numpy out= goes with a host array input)" \
        in _error(reorder, src, None, MemoryDesc(DIMS, tag="nhwc"), out=out)
    img = runtime.to_image(src, "in_out_channel")
    assert "out= takes a Memory to write into" in _error(from_image, img, "in_out_channel",
                                                         DIMS, out=out)
    assert "numpy array as out=" in _error(to_image, np.zeros(DIMS, np.float32),
                                           "in_out_channel", out=img)
    assert "takes an image Memory, got ndarray" in _error(
        to_image, src, "in_out_channel", out=np.zeros(img.to_numpy().shape, np.float32))
