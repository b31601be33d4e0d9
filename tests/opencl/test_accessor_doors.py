"""Accessors never give a silent wrong result: each test is a mistake a new
user makes, and what clayout does about it.

- the 3x3 convolution of docs/kernels.md, which stores four output
  channels at a time, refuses to compile (with its own #error text) for an
  output whose lanes run along H or W, and gives numpy's values on every
  output that can take it, read from inputs of other lane axes;
- ``load4_aK`` gives the four elements along axis K on every layout,
  whatever its lane axis, from any index; ``store4_aK`` writes them where
  the storage can and is a compile error that says so where it cannot;
- ``store4`` off a lane boundary writes the four elements on a buffer and
  nothing on an image, which a program built with -DCLAYOUT_CHECKS prints;
- ``args`` refuses what a kernel cannot bind for the tensor (a host array,
  a wrong kind of object, a small buffer, a Memory of another side or on
  the cpu engine) with one ClayoutError line, and binds a right Memory.
"""
import re
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

import runtime
from runtime import ClayoutError, ImageDesc, Memory, MemoryDesc, image_layout
from runtime.memory import convert
from runtime.opencl.accessor import accessor
from runtime.opencl import programs
from opencl.test_accessor import each_index

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/memory.py", "runtime/opencl/accessor.py", "runtime/opencl/programs.py")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "kernels.md"


def docs_kernel() -> str:
    """The conv3x3 kernel text of docs/kernels.md, as the doctest runs it."""
    text = DOCS.read_text()
    body = text[text.index('>>> kernel = """\n') + len('>>> kernel = """\n'):]
    body = body[:body.index('... """')]
    return "".join(line[4:] + "\n" for line in body.splitlines())


KERNEL = docs_kernel()
REFUSAL = re.search(r'#error "(.*)"', KERNEL).group(1)
X_DIMS, W_DIMS, Y_DIMS = (1, 5, 6, 7), (6, 5, 3, 3), (1, 6, 6, 7)


def on_device(eng, side, logical: np.ndarray) -> Memory:
    """A Memory of ``side`` on ``eng`` holding the logical tensor."""
    return convert(Memory.from_numpy(logical.reshape(-1), MemoryDesc(logical.shape), eng), side)


def logical(mem: Memory) -> np.ndarray:
    return convert(mem, MemoryDesc(mem.dims)).to_numpy().reshape(mem.dims)


def conv_reference(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + 6, j:j + 7], w[:, :, i, j])
               for i in range(3) for j in range(3))


def side(kind, dims):
    return MemoryDesc(dims, tag=kind[4:]) if kind.startswith("tag:") else \
        ImageDesc(image_layout(kind), dims)


@pytest.mark.parametrize("out", ["in_out_height", "in_out_width"])
def test_the_docs_convolution_refuses_lanes_along_h_or_w(cl_engine, out):
    """Four output channels are four pixels of these images: the kernel's
    own #error, not wrong values."""
    xa = accessor("in_out_channel", X_DIMS, name="x")
    wa = accessor("conv2d_filter", W_DIMS, name="w")
    ya = accessor(out, Y_DIMS, name="y", access="write")
    assert "#define y_STORE4_A1" not in ya.source
    with pytest.raises(cl.RuntimeError, match=re.escape(REFUSAL)):
        programs.build(cl_engine.context, xa.source + wa.source + ya.source + KERNEL)


@pytest.mark.parametrize("x_kind, w_kind, y_kind", [
    ("in_out_channel", "conv2d_filter", "in_out_channel"),
    ("in_out_height", "weight_width", "tag:nchw"),      # y's lanes along W: four stores
    ("in_out_width", "tag:OIhw8i16o2i", "tag:nhwc"),
    ("tag:nChw8c", "image_2d_weights_c4_fyx_b", "tflite_buffer")])   # pixels in a buffer
def test_the_docs_convolution_is_right_wherever_it_compiles(cl_engine, x_kind, w_kind, y_kind):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(X_DIMS).astype(np.float32)
    w = rng.standard_normal(W_DIMS).astype(np.float32)
    sides = side(x_kind, X_DIMS), side(w_kind, W_DIMS), side(y_kind, Y_DIMS)
    xa, wa = accessor(sides[0], name="x"), accessor(sides[1], name="w")
    ya = accessor(sides[2], name="y", access="write")
    program = programs.build(cl_engine.context, xa.source + wa.source + ya.source + KERNEL)
    xm, wm = on_device(cl_engine, sides[0], x), on_device(cl_engine, sides[1], w)
    ym = on_device(cl_engine, sides[2], np.zeros(Y_DIMS, np.float32))
    program.conv3x3(cl_engine.queue, (7, 6, 2), None, *xa.args(xm), *wa.args(wm), *ya.args(ym))
    assert np.abs(logical(ym) - conv_reference(x, w)).max() < 1e-4


# -- four at a time along a named axis --------------------------------------------------------
READ = [("in_out_channel", (2, 5, 3, 6)), ("in_out_height", (2, 5, 6, 3)),
        ("in_out_width", (1, 3, 2, 9)), ("conv2d_filter", (6, 5, 2, 3)),
        ("weight_width", (3, 6, 2, 2)), ("image_2d_weights_c4_fyx_b", (5, 3, 2, 2)),
        ("tflite_image_buffer", (2, 5, 3, 2)), ("tflite_buffer", (1, 6, 2, 3)),
        ("tag:nchw", (2, 3, 2, 6)), ("tag:nChw8c", (1, 9, 2, 3)), ("tag:chwn", (5, 2, 3, 2))]


@pytest.fixture(scope="module")
def along_program(cl_engine):
    """One program: every READ side's accessor (t0, t1, ...; the last ones
    generic) and a kernel along_tK writing load4_aK for every axis K at
    every logical index."""
    accs = [accessor(side(kind, dims), name=f"t{n}", generic=n % 3 == 2)
            for n, (kind, dims) in enumerate(READ)]
    text = ""
    for acc in accs:
        call = ", ".join(f"i{k}" for k in range(acc.rank))
        body = " ".join(f"vstore4({acc.name}_load4_a{k}({acc.name}_ARGS, {call}), "
                        f"i * {acc.rank} + {k}, out);" for k in range(acc.rank))
        text += acc.source + each_index(acc, f"along_{acc.name}", "__global float *out", body)
    return accs, programs.build(cl_engine.context, text)


@pytest.mark.parametrize("n", range(len(READ)), ids=[kind for kind, _ in READ])
def test_load4_along_every_axis_of_every_layout(cl_engine, along_program, n):
    accs, program = along_program
    acc, dims = accs[n], READ[n][1]
    x = (np.arange(int(np.prod(dims)), dtype=np.float32) + 1).reshape(dims)
    mem = on_device(cl_engine, acc.side, x)
    out = cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE, x.size * len(dims) * 16)
    getattr(program, f"along_{acc.name}")(cl_engine.queue, (x.size,), None, *acc.args(mem), out,
                                          np.int32(x.size))
    got = np.empty((*dims, len(dims), 4), np.float32)
    cl.enqueue_copy(cl_engine.queue, got, out)
    padded = np.pad(x, [(0, 3)] * len(dims))    # past the dims: 0
    for k in range(len(dims)):
        want = np.stack([np.take(padded, range(j, j + dims[k]), axis=k)[
            tuple(slice(0, d) for d in dims)] for j in range(4)], axis=-1)
        assert np.array_equal(got[..., k, :], want), (READ[n], k, acc.lane_axis)


def test_store4_along_an_axis_an_rgba_image_cannot_write_is_a_compile_error(cl_engine):
    ya = accessor("in_out_height", (1, 6, 5, 3), name="y", access="write")
    assert "#define y_STORE4_A2 1" in ya.source    # its lane axis
    kernel = "__kernel void k(y_PARAMS) { y_store4_a1(y_ARGS, 0, 0, 0, 0, (float4)(1.0f)); }"
    with pytest.raises(cl.RuntimeError, match="y_store4_a1_is_not_available_on_an_RGBA_image_"
                                              "whose_lanes_run_along_axis_2"):
        programs.build(cl_engine.context, ya.source + kernel)


STORE = "__kernel void put(y_PARAMS, const int at) {{ {call}; }}"


def put(eng, side_, call, at, options=()) -> np.ndarray:
    """The logical tensor after one work item's ``call`` (with the int
    ``at``) on a fresh zeroed Memory of ``side_``."""
    ya = accessor(side_, name="y", access="write")
    program = programs.build(eng.context, ya.source + STORE.format(call=call), options)
    mem = on_device(eng, side_, np.zeros(side_.dims, np.float32))
    program.put(eng.queue, (1,), None, *ya.args(mem), np.int32(at))
    eng.queue.finish()
    return logical(mem)


V = "(float4)(1.0f, 2.0f, 3.0f, 4.0f)"


@pytest.mark.parametrize("kind", ["tag:nchw", "tflite_buffer", "image_2d_weights_c1_b_fyx"])
def test_store4_along_an_axis_of_a_storage_taking_one_element(cl_engine, kind):
    """A buffer, the buffer storage and a one-channel image take four
    elements along any axis: here C from channel 1, the last one past the
    dims dropped."""
    dims = (1, 4, 2, 3)
    got = put(cl_engine, side(kind, dims), f"y_store4_a1(y_ARGS, 0, at, 1, 2, {V})", 1)
    want = np.zeros(dims, np.float32)
    want[0, 1:, 1, 2] = [1, 2, 3]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("kind", ["tag:nchw", "tflite_buffer"])
def test_store4_off_a_lane_boundary_writes_the_four_elements_on_a_buffer(cl_engine, kind):
    dims = (1, 6, 2, 7) if kind == "tag:nchw" else (1, 7, 2, 2)
    s = side(kind, dims)
    lane = accessor(s, name="y", access="write").lane_axis
    index = ["0"] * 4
    index[lane] = "at"
    got = put(cl_engine, s, f"y_store4(y_ARGS, {', '.join(index)}, {V})", 5)
    want = np.zeros(dims, np.float32)
    for j in (0, 1):   # 5 and 6 along the lane axis; 7 and 8 are past the dims
        at = [0] * 4
        at[lane] = 5 + j
        want[tuple(at)] = j + 1
    assert np.array_equal(got, want)


def test_store4_off_a_lane_boundary_of_an_image_writes_nothing_and_checks_say_so(
        cl_engine, capfd):
    s = ImageDesc(image_layout("in_out_channel"), (1, 6, 2, 3))
    call = f"y_store4(y_ARGS, 0, at, 1, 2, {V})"
    assert not put(cl_engine, s, call, 1).any()
    capfd.readouterr()
    assert not put(cl_engine, s, call, 1, ["-DCLAYOUT_CHECKS"]).any()
    printed = capfd.readouterr().out
    assert "clayout: y_store4 at i1 = 1, not a multiple of 4: an RGBA image is written a " \
           "whole pixel at a time; nothing written" in printed, printed
    on_boundary = put(cl_engine, s, call, 4, ["-DCLAYOUT_CHECKS"])   # channels 4, 5 (6, 7: none)
    assert on_boundary[0, 4:, 1, 2].tolist() == [1, 2] and on_boundary.sum() == 3
    assert "clayout:" not in capfd.readouterr().out


# -- args: what a kernel binds ---------------------------------------------------------------
def refusal(acc, storage) -> str:
    with pytest.raises(ClayoutError) as caught:
        acc.args(storage)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"accessor {acc.name!r} of "), message
    return message


def test_args_refuses_what_is_not_the_tensor(cl_engine):
    ctx, rw = cl_engine.context, cl.mem_flags.READ_WRITE
    image = accessor("in_out_channel", X_DIMS, name="x")
    buffer = accessor(MemoryDesc(X_DIMS), name="b")
    view = accessor("tflite_image_buffer", X_DIMS, name="v")
    good = Memory.image("in_out_channel", X_DIMS, engine=cl_engine)
    host = np.zeros(image.side.array_shape, np.float32)
    assert "takes a cl.Image (a 14x6 image2d RGBA FLOAT), got ndarray" in refusal(image, host)
    assert "got Buffer" in refusal(image, cl.Buffer(ctx, rw, image.side.nbytes))
    assert "does not match" in refusal(image, Memory.image("in_out_channel", (1, 5, 6, 6),
                                                           engine=cl_engine).storage)
    assert "takes a cl.Buffer (of at least 840 bytes), got Image" in refusal(buffer, good.storage)
    assert "840 bytes" in refusal(buffer, np.zeros(210, np.float32))
    assert "cl.Buffer of 16 bytes is too small for it: it needs 840 bytes" in \
        refusal(buffer, cl.Buffer(ctx, rw, 16))
    assert "is not its image1d_buffer_t view" in refusal(view, good.storage)
    for other in [Memory.image("in_out_channel", (1, 5, 6, 6), engine=cl_engine),
                  Memory.image("in_out_height", X_DIMS, engine=cl_engine),
                  Memory.image("in_out_channel", X_DIMS, "s32", engine=cl_engine),
                  Memory(MemoryDesc(X_DIMS), cl_engine)]:
        assert f"takes a Memory of that side (layout, dims and dtype); got " \
               f"{other.side.describe()}" in refusal(image, other)
    assert "whose storage is a host array" in \
        refusal(image, Memory.image("in_out_channel", X_DIMS, engine="cpu"))
    assert "takes a Memory of that side" in refusal(buffer, Memory(MemoryDesc(X_DIMS, "s8"),
                                                                   cl_engine))


def test_args_binds_a_right_memory(cl_engine):
    """A Memory gives its device object: an image buffer's view, a Winograd
    filter's image (its accessor reads the placement), a buffer as it is."""
    dims = (1, 6, 2, 3)
    mem = Memory.image("tflite_image_buffer", dims, engine=cl_engine)
    bound = accessor("tflite_image_buffer", dims).args(mem)[0]
    assert bound.type == cl.mem_object_type.IMAGE1D_BUFFER
    assert accessor("tflite_image_buffer", dims).args(bound)[0] is bound   # the view itself
    wino = Memory.image("winograd_4x3_tflite", (8, 3, 3, 3), engine=cl_engine)
    assert accessor("winograd_4x3_tflite", (8, 3, 3, 3)).args(wino)[0] is wino.storage
    plain = Memory(MemoryDesc(dims, tag="nhwc"), cl_engine)
    generic = accessor(plain.side, generic=True)
    assert generic.args(plain) == (plain.storage,) + generic.values
