"""The forward transform stage as an OpenCL kernel (runtime/opencl/transform.py).

For every Winograd transform of the catalog, on dims with channel tails
(O, I in 1, 3, 5, 17; a split axis padded), and inputs full of the values
where a different evaluation shows (zeros of both signs, subnormals, values
near the float32 limit, infinities, NaN), the kernel's output bits are those
of ``Transform.apply`` and of the reference's own ``forward``, NaN where they
give NaN. Which NaN (sign, payload) is not compared: IEEE 754 leaves open
which operand's NaN a sum of two NaNs keeps, x86 keeps the first operand's
and compilers (numpy's loops and the kernel's alike) may swap the operands of
a sum, and GPUs return one canonical NaN; measured on PoCL, numpy and the
kernel each keep sometimes the input NaN, sometimes a new one (inf - inf,
0 * inf). The kernel source turns contraction off and writes G's float32
numbers exactly. Whole
conversions agree with the reference through both doors of the engine: host
arrays (``apply``) and Memory objects on the device (``convert_storage``,
the three stages without leaving the device, on an in-order and an
out-of-order queue). Nothing is launched for a tensor with no elements.
``under_oclgrind`` is run by tests/cross/test_oclgrind.py's child under oclgrind.
"""
import itertools

import numpy as np
import pytest

import runtime
from conftest import bits
from runtime import IMAGE_LAYOUTS, MemoryDesc
from runtime.algebra.catalog import WINOGRAD
from runtime.algebra.conversion import Apply
from runtime.reference.engine import forward

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/conversion.py", "runtime/opencl/__init__.py",
           "runtime/opencl/transform.py", "runtime/reference/engine.py")

CHANNELS = (1, 3, 5, 17)
SPECIAL = np.array([0.0, -0.0, 1e-40, -3e-42, 1.4e-45, 1.17e-38, -1.1754942e-38, 3e38, -3.4e38,
                    np.inf, -np.inf, np.nan, 1.0, -2.5, 7.0], np.float32)
TRANSFORMS = sorted(WINOGRAD)
# numpy warns of the overflows and NaNs these inputs are made of
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

WINOGRAD_LAYOUTS = sorted(n for n, lay in IMAGE_LAYOUTS.items() if lay.transform is not None)


def logical_dims(transform, o, i, other=2):
    """(O, I, H, W) with every transformed axis r long (and every axis the
    transform needs square), others ``other`` (an inner axis it leaves alone)."""
    return tuple(transform.taps if a in transform.axes + transform.square
                 else (o, i, other, other)[a] for a in range(4))


def filter_dims(layout, o, i):
    """(O, I, kH, kW) of a square kernel a Winograd layout takes."""
    t = IMAGE_LAYOUTS[layout].transform
    return logical_dims(t, o, i, t.taps)


def values(dims, seed, special=0.4):
    """Normal values with a share of SPECIAL ones at random places."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(dims).astype(np.float32)
    where = rng.random(dims) < special
    x[where] = rng.choice(SPECIAL, int(where.sum()))
    return x


def same(a, b) -> bool:
    """Equal bits, except that any NaN equals any NaN (the module's docstring)."""
    a, b = np.array(a, np.float32), np.array(b, np.float32)
    nan = np.isnan(a)
    if a.shape != b.shape or not np.array_equal(nan, np.isnan(b)):
        return False
    a[nan], b[nan] = 0, 0
    return np.array_equal(bits(a), bits(b))


def device_apply(engine, transform, x):
    step = Apply(transform, MemoryDesc(x.shape, "f32"),
                 MemoryDesc(transform.out_dims(x.shape), "f32"))
    return engine.apply(step, x.reshape(-1)).reshape(transform.out_dims(x.shape))


@pytest.mark.parametrize("name", TRANSFORMS)
def test_kernel_bits_are_the_documented_evaluation(cl_engine, name):
    t = WINOGRAD[name]
    for k, (o, i) in enumerate(itertools.product(CHANNELS, CHANNELS)):
        x = values(logical_dims(t, o, i), k)
        got = device_apply(cl_engine, t, x)
        want = t.apply(x)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert same(got, want), (name, x.shape)
        assert same(got, forward(t, x)), (name, x.shape)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_special_values_everywhere(cl_engine, name):
    """Each special value alone against a background of each other one: a
    zero coefficient times inf or NaN is NaN, as numpy's full sum gives."""
    t = WINOGRAD[name]
    dims = logical_dims(t, 2, 5)
    for a, b in itertools.product(SPECIAL, repeat=2):
        x = np.full(dims, a, np.float32)
        x[1, 3, ...] = b
        x.reshape(-1)[::5] = b
        got = device_apply(cl_engine, t, x)
        assert same(got, t.apply(x)), (name, a, b)


def test_split_padding_is_positive_zero(cl_engine):
    t = next(t for t in WINOGRAD.values() if t.split is not None)
    x = np.full(logical_dims(t, 2, 5), np.nan, np.float32)
    got = device_apply(cl_engine, t, x)
    axis, block = t.split
    tail = np.moveaxis(got, (axis, axis + 1), (0, 1))[-1, 5 % block:]
    assert tail.size and np.all(bits(tail) == 0)
    assert np.isnan(np.moveaxis(got, (axis, axis + 1), (0, 1))[-1, :5 % block]).all()


@pytest.mark.parametrize("name", TRANSFORMS)
def test_source_is_exact_and_uncontracted(name):
    from runtime.opencl.transform import literal, render
    t = WINOGRAD[name]
    source = render(t, logical_dims(t, 3, 5)).source
    assert "#pragma OPENCL FP_CONTRACT OFF" in source
    g = t.f32_matrix()
    for v in g.reshape(-1):
        lit = literal(v)
        assert lit in source
        assert np.float32(float.fromhex(lit.rstrip("f"))).tobytes() == v.tobytes()
    # the sizes are arguments: one program for every shape of a transform
    assert render(t, logical_dims(t, 17, 1)).source == source


def test_literal_of_every_kind_of_number():
    from runtime.opencl.transform import literal
    for v in np.array([1.0, -0.5, 1 / 3, -2 / 9, 1.4e-45, -1e-40, 3.4e38, 0.0], np.float32):
        assert np.float32(float.fromhex(literal(v).rstrip("f"))).tobytes() == v.tobytes()
    assert literal(np.float32(-0.0)) == "-0.0f"
    assert literal(np.float32(np.inf)) == "INFINITY"
    with pytest.raises(runtime.ClayoutError, match="NaN"):
        literal(np.float32(np.nan))


def test_wrong_dims_are_one_clear_error():
    from runtime.opencl.transform import render
    with pytest.raises(runtime.ClayoutError, match="takes 3 along axes"):
        render(WINOGRAD["F(2,3) MACE"], (2, 2, 3, 4))


def test_no_launch_for_no_elements(cl_engine, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was launched for an empty tensor")
    monkeypatch.setattr(cl_engine.launcher, "run_kernel", refuse)
    for name in TRANSFORMS:
        t = WINOGRAD[name]
        for o, i in ((0, 3), (3, 0)):
            x = np.zeros(logical_dims(t, o, i), np.float32)
            assert device_apply(cl_engine, t, x).shape == t.out_dims(x.shape)


@pytest.mark.parametrize("layout", WINOGRAD_LAYOUTS)
def test_conversions_match_the_reference(cl_engine, layout):
    """to_image through host arrays and through device Memory (from a plain
    buffer, read in place, and from an ohwi one, moved first) into f32 and
    f16 images."""
    for k, (o, i) in enumerate(((1, 1), (5, 3), (3, 17))):
        x = values(filter_dims(layout, o, i), 100 + k, special=0.1)
        for dtype in ("f32", "f16"):
            want = runtime.to_image(x, layout, dtype=dtype, engine="reference")
            got = runtime.to_image(x, layout, dtype=dtype, engine=cl_engine)
            assert same(got, want), (layout, x.shape, dtype)
            for tag in ("abcd", "acdb"):
                src = MemoryDesc(x.shape, "f32", tag=tag)
                held = runtime.reorder(x, MemoryDesc(x.shape), src, engine="reference")
                mem = runtime.Memory.from_numpy(held.reshape(-1), src, engine=cl_engine)
                img = runtime.to_image(mem, layout, dtype=dtype)
                assert same(img.to_numpy(), want), (layout, tag, dtype)


def test_device_memory_stays_on_the_device(cl_engine, monkeypatch):
    """A Memory conversion into a Winograd image neither reads the storage
    back nor runs a stage on host arrays."""
    layout = WINOGRAD_LAYOUTS[0]
    x = values(filter_dims(layout, 5, 3), 11, special=0.1)
    want = runtime.to_image(x, layout, engine="reference")
    mem = runtime.Memory.from_numpy(x.reshape(-1), MemoryDesc(x.shape), engine=cl_engine)
    with monkeypatch.context() as m:
        for method in ("read", "apply", "convert", "move"):
            m.setattr(cl_engine, method, lambda *a, **k: pytest.fail("left the device"))
        img = runtime.to_image(mem, layout)
    assert same(img.to_numpy(), want)


def test_out_of_order_queue_chains_the_stages(cl_engine):
    import pyopencl as cl

    from runtime.opencl.engine import OpenCLEngine
    try:
        queue = cl.CommandQueue(cl_engine.context, properties=cl.command_queue_properties
                                .OUT_OF_ORDER_EXEC_MODE_ENABLE)
    except cl.Error as exc:
        pytest.skip(f"no out-of-order queue: {exc}")
    eng = OpenCLEngine(queue=queue)
    layout = "winograd_4x3_tflite" if "winograd_4x3_tflite" in IMAGE_LAYOUTS else \
        WINOGRAD_LAYOUTS[0]
    x = values(filter_dims(layout, 17, 5), 7, special=0.1)
    src = MemoryDesc(x.shape, "f32", tag="acdb")
    held = runtime.reorder(x, MemoryDesc(x.shape), src, engine="reference")
    mem = runtime.Memory.from_numpy(held.reshape(-1), src, engine=eng)
    img = runtime.to_image(mem, layout)
    queue.finish()
    want = runtime.to_image(x, layout, engine="reference")
    assert same(img.to_numpy(), want)


def under_oclgrind(eng, bad) -> int:
    """Run by tests/cross/test_oclgrind.py's child on the oclgrind device: each
    transform's kernel on a small shape (a split tail included), through
    apply and through device Memory; mismatches are appended to ``bad``."""
    with np.errstate(all="ignore"):   # the inputs overflow and hold NaN on purpose
        return _under_oclgrind(eng, bad)


def _under_oclgrind(eng, bad) -> int:
    runs = 0
    for k, name in enumerate(TRANSFORMS):
        t = WINOGRAD[name]
        x = values(logical_dims(t, 2, 5), k, special=0.3)
        runs += 1
        if not same(device_apply(eng, t, x), t.apply(x)):
            bad.append(f"transform {name}")
    for layout in WINOGRAD_LAYOUTS[:2]:
        t = IMAGE_LAYOUTS[layout].transform
        x = values(filter_dims(layout, 2, 5), 9, special=0.1)
        src = MemoryDesc(x.shape, "f32", tag="acdb")
        held = runtime.reorder(x, MemoryDesc(x.shape), src, engine="reference")
        mem = runtime.Memory.from_numpy(held.reshape(-1), src, engine=eng)
        runs += 1
        if not same(runtime.to_image(mem, layout).to_numpy(),
                    runtime.to_image(x, layout, engine="reference")):
            bad.append(f"transform to_image {layout} on device Memory")
    return runs
