"""Accessors read and write every layout by logical index, on the device.

A gather kernel reads every logical element through ``load`` (and four at a
time through ``load4``) and must give the tensor; a scatter kernel writes
through ``store4`` (``store`` where the storage takes one element) into a
fresh image or buffer and must give what ``to_image`` / ``reorder`` give,
bit for bit, padding lanes included. Loads outside the dims give 0; baked
and generic accessors give the same bits; several compile together."""
import numpy as np
import pyopencl as cl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime
from conftest import bits
from runtime import ClayoutError, ImageDesc, MemoryDesc, image_layout
from runtime.opencl import images, programs
from runtime.opencl.accessor import accessor
from strategies import FEW, MOVED, small_dims

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/accessor.py", "runtime/opencl/accessor_args.py",
           "runtime/opencl/images.py", "runtime/opencl/programs.py")

VALUE = {"f32": np.float32, "f16": np.float32, "bf16": np.float32, "s32": np.int32,
         "s8": np.int32, "u8": np.uint32}
CTYPE = {np.float32: "float", np.int32: "int", np.uint32: "uint"}
LAYOUTS = sorted(MOVED) + ["acBd4b:2", "Abcd4a:1", "bcda:2:1"]


def values(dtype, n, seed):
    rng = np.random.default_rng(seed)
    if dtype in ("f32", "f16", "bf16"):
        return runtime.convert(rng.standard_normal(n).astype(np.float32) * 7, dtype)
    lo, hi = {"s32": (-2 ** 31, 2 ** 31 - 1), "s8": (-128, 127), "u8": (0, 255)}[dtype]
    return rng.integers(lo, hi, n, endpoint=True).astype(runtime.algebra.dtypes.dtype(dtype).np)


def each_index(acc, kernel: str, buffer: str, body: str) -> str:
    """A kernel over the i-th logical index (row-major) of acc's dims: the
    index decoded into i0, i1, ...; d holds the dims and s their strides."""
    r, n = acc.rank, acc.name
    dims = ", ".join(f"{n}_dim({n}_ARGS, {k})" for k in range(r))
    strides = " ".join(f"s[{k}] = s[{k + 1}] * d[{k + 1}];" for k in reversed(range(r - 1)))
    decode = " ".join(f"int i{k} = rest % d[{k}]; rest /= d[{k}];" for k in reversed(range(r)))
    return f"""
__kernel void {kernel}({n}_PARAMS, {buffer}, const int total)
{{
    const int i = get_global_id(0);
    if (i >= total) return;
    const int d[{r}] = {{{dims}}};
    int s[{r}];
    s[{r - 1}] = 1;
    {strides}
    int rest = i;
    {decode}
    {body}
}}
"""


def gather_source(acc, four: bool) -> str:
    """out[i] = the element at the i-th logical index (row-major), by load
    or, along the lane axis, by load4 from multiples of 4 (kernel gather4)."""
    n, t = acc.name, CTYPE[VALUE[acc.side.dtype.name]]
    call = ", ".join(f"i{k}" for k in range(acc.rank))
    if four:
        lane = acc.lane_axis
        body = [f"if (i{lane} % 4) return;",
                f"{t}4 v = {n}_load4({n}_ARGS, {call});"]
        body += [f"if (i{lane} + {j} < d[{lane}]) out[i + {j} * s[{lane}]] = v.s{j};"
                 for j in range(4)]
    else:
        body = [f"out[i] = {n}_load({n}_ARGS, {call});"]
    return each_index(acc, f"gather{4 if four else ''}", f"__global {t} *out", " ".join(body))


def scatter_source(acc) -> str:
    """Every lane group (a multiple of 4 on the lane axis) stored with
    store4 from a plain logical tensor of values; without a lane axis, every
    element with store."""
    n, t = acc.name, CTYPE[VALUE[acc.side.dtype.name]]
    call = ", ".join(f"i{k}" for k in range(acc.rank))
    if acc.lane_axis is None:
        body = f"{n}_store({n}_ARGS, {call}, src[i]);"
    else:
        lane = acc.lane_axis
        get = [f"(i{lane} + {j} < d[{lane}] ? src[i + {j} * s[{lane}]] : 7)" for j in range(4)]
        body = (f"if (i{lane} % 4) return; "
                f"{n}_store4({n}_ARGS, {call}, ({t}4)({', '.join(get)}));")
    return each_index(acc, "scatter", f"__global const {t} *src", body)


def storage(eng, side, data, write=False):
    """Device storage of ``side`` holding ``data`` (its host array)."""
    mf = cl.mem_flags
    if side.is_image:   # an image object, or the buffer of a buffer storage
        if write:
            return images.create(eng.context, side, eng.limits, mf.READ_WRITE)
        return images.create(eng.context, side, eng.limits, mf.READ_ONLY,
                             hostbuf=np.ascontiguousarray(data))
    arr = np.ascontiguousarray(data).reshape(-1)
    return cl.Buffer(eng.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=arr) \
        if arr.size else cl.Buffer(eng.context, mf.READ_WRITE, 4)


def program(eng, read, write=None):
    """One program: the accessors (several compile together), gather and
    gather4 over ``read``, scatter over ``write``."""
    text = read.source + gather_source(read, False)
    if read.lane_axis is not None:
        text += gather_source(read, True)
    if write is not None:
        text += write.source + scatter_source(write)
    return programs.build(eng.context, text)


def gather(eng, prg, acc, data, four=False) -> np.ndarray:
    total = int(np.prod(acc.side.dims))
    out = np.zeros(max(total, 1), VALUE[acc.side.dtype.name])
    out_buf = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, out.nbytes)
    if total:
        knl = prg.gather4 if four else prg.gather
        knl(eng.queue, (total,), None, *acc.args(storage(eng, acc.side, data)), out_buf,
            np.int32(total))
        cl.enqueue_copy(eng.queue, out, out_buf)
    return out[:total]


def scatter(eng, prg, acc, logical) -> np.ndarray:
    side = acc.side
    total = int(np.prod(side.dims))
    if side.is_image:
        store = storage(eng, side, None, write=True)
        eng.write(store, side, np.full(side.array_shape, 99, side.dtype.np))   # junk first
    else:
        store = storage(eng, side, np.full(side.span, 99, side.dtype.np))
    src = cl.Buffer(eng.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                    hostbuf=np.ascontiguousarray(logical.reshape(-1)) if total else
                    np.zeros(1, logical.dtype))
    if total:
        prg.scatter(eng.queue, (total,), None, *acc.args(store), src, np.int32(total))
    return eng.read(store, side)


@pytest.mark.parametrize("generic", [False, True])
@settings(FEW, max_examples=15)
@given(data=st.data())
def test_gather_and_scatter_every_image_layout(cl_engine, generic, data):
    name = data.draw(st.sampled_from(LAYOUTS), "layout")
    layout = image_layout(name)
    dims = data.draw(small_dims(layout.ndims, sizes=(1, 2, 3, 4, 5, 17)), "dims")
    dt = data.draw(st.sampled_from(["f32", "f16", "s8", "u8", "s32"]), "dtype")
    if layout.lanes == 0:   # a single texture: C = 1, 2 or 4 in one texel (3: no format)
        c = data.draw(st.sampled_from((1, 2, 4)), "channels")
        if images.unsupported(cl_engine.context, ImageDesc(layout, (1, c, 1, 1), dt)):
            c = 4           # the device has no CL_RG (PoCL): tests/opencl/test_opencl_storage.py
        dims = (dims[0], c) + dims[2:]
    if dt == "f16" and ImageDesc(layout, dims).lanes == 1:
        dt = "f32"    # PoCL 3.1 reads and writes CL_R + HALF_FLOAT wrongly
    side = ImageDesc(layout, dims, dt)
    x = values(dt, int(np.prod(side.dims)), sum(dims))
    image = runtime.to_image(x.reshape(side.dims), layout, src="abcdefghijkl"[:len(dims)])
    acc = accessor(side, name="t", generic=generic)
    if layout.groups:   # lanes across grouped dims: readable, not writable
        with pytest.raises(ClayoutError, match="cannot write"):
            accessor(side, name="u", access="write", generic=generic)
        out = None
    else:
        out = accessor(side, name="u", access="write", generic=generic)
    prg = program(cl_engine, acc, out)
    got = gather(cl_engine, prg, acc, image)
    assert np.array_equal(got, x.astype(VALUE[dt])), (name, dims, dt)
    if acc.lane_axis is not None:
        assert np.array_equal(gather(cl_engine, prg, acc, image, True), x.astype(VALUE[dt]))
    if out is not None:
        back = scatter(cl_engine, prg, out, x.astype(VALUE[dt]))
        # the pixels that hold an element (stores write no other: docs/kernels.md)
        held = np.asarray(runtime.to_image(np.ones(side.dims, np.float32), layout)) != 0
        held = held.any(-1, keepdims=True) if layout.lanes else held
        held = np.broadcast_to(held, np.shape(image))
        assert np.array_equal(bits(back)[held], bits(image)[held]), (name, dims, dt)


BUFFERS = ["nchw", "nhwc", "nChw16c", "nChw4c", "Acdb4a", "ABcd8b16a2b", "chwn"]


@pytest.mark.parametrize("generic", [False, True])
@settings(FEW, max_examples=15)
@given(data=st.data())
def test_gather_and_scatter_every_buffer(cl_engine, generic, data):
    dims = data.draw(small_dims(4, sizes=(1, 2, 3, 4, 5, 17)), "dims")
    kind = data.draw(st.sampled_from(["tag", "strided", "halo"]), "kind")
    dt = data.draw(st.sampled_from(["f32", "f16", "bf16", "s8", "u8", "s32"]), "dtype")
    if kind == "tag":
        desc = MemoryDesc(dims, dt, tag=data.draw(st.sampled_from(BUFFERS), "tag"))
    elif kind == "strided":   # a gap after each dim, and an offset
        s_h = dims[3] + 2
        s_c = dims[2] * s_h + 1
        desc = MemoryDesc(dims, dt, strides=(dims[1] * s_c + 3, s_c, s_h, 1), offset0=5)
    else:
        desc = MemoryDesc(dims, dt, tag=data.draw(st.sampled_from(["nchw", "nChw8c"]), "tag"),
                          halo=((0, 1, 2, 1), (0, 2, 1, 3)), fill=3)
    x = values(dt, int(np.prod(dims)), sum(dims))
    phys = runtime.reorder(x, MemoryDesc(dims, dt), desc)
    acc = accessor(desc, name="b", generic=generic)
    out = accessor(desc, name="c", access="write", generic=generic)
    prg = program(cl_engine, acc, out)
    assert np.array_equal(gather(cl_engine, prg, acc, phys), x.astype(VALUE[dt]))
    if acc.lane_axis is not None:
        assert np.array_equal(gather(cl_engine, prg, acc, phys, True), x.astype(VALUE[dt]))
    back = scatter(cl_engine, prg, out, x.astype(VALUE[dt]))
    logical = runtime.reorder(back, desc, MemoryDesc(dims, dt))
    assert np.array_equal(bits(logical), bits(x))


@pytest.mark.parametrize("name, dims", [("in_out_channel", (2, 5, 3, 3)),
                                        ("conv2d_filter", (6, 3, 2, 2)),
                                        ("in_out_width", (1, 2, 3, 7)), ("argument", (5,))])
@pytest.mark.parametrize("generic", [False, True])
def test_outside_the_dims_is_zero(cl_engine, name, dims, generic):
    """load at -1 and at the dim on every axis gives 0, and load4 of the last
    lane group gives 0 past the dims, even where the image's padding lanes
    hold junk."""
    side = ImageDesc(image_layout(name), dims)
    x = values("f32", int(np.prod(dims)), 3) + 1000    # no zero among the elements
    image = runtime.to_image(x.reshape(dims), name, src="abcd"[:len(dims)])
    flat = image.reshape(-1, 4)
    for p in range(flat.shape[0]):       # padding lanes: junk
        y, xx = divmod(p, side.width)
        for k in range(4):
            if side.index(xx, y, k) is None:
                flat[p, k] = -5.0
    acc = accessor(side, name="t", generic=generic)
    r, lane = acc.rank, acc.lane_axis
    probes = []
    for k in range(r):
        for v in (-1, dims[k]):
            idx = [0] * r
            idx[k] = v
            probes.append(idx)
    last = [0] * r
    last[lane] = (dims[lane] - 1) // 4 * 4
    calls = "\n    ".join(f"out[{i}] = t_load(t_ARGS, {', '.join(map(str, p))});"
                          for i, p in enumerate(probes))
    text = acc.source + f"""
__kernel void probe(t_PARAMS, __global float *out)
{{
    {calls}
    const float4 v = t_load4(t_ARGS, {', '.join(map(str, last))});
    vstore4(v, 0, out + {len(probes)});
}}
"""
    prg = programs.build(cl_engine.context, text)
    out = np.full(len(probes) + 4, 7.0, np.float32)
    buf = cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                    hostbuf=out)
    prg.probe(cl_engine.queue, (1,), None, *acc.args(storage(cl_engine, side, image)), buf)
    cl.enqueue_copy(cl_engine.queue, out, buf)
    assert (out[:len(probes)] == 0).all()
    inside = dims[lane] - last[lane]
    lanes = out[len(probes):]
    assert (lanes[inside:] == 0).all() and (lanes[:inside] > 500).all(), lanes


@pytest.mark.parametrize("name", sorted(n for n, lay in runtime.IMAGE_LAYOUTS.items()
                                        if lay.transform is not None))
def test_a_winograd_image_is_read_by_its_placed_index(name, cl_engine):
    """An accessor of a Winograd layout reads U (the transform's output, by
    the placed index (o, i, u, v)), as the engines computed it."""
    layout = runtime.image_layout(name)
    k = layout.transform.taps
    g = values("f32", 5 * 6 * k * k, 3).reshape(5, 6, k, k)
    for dtype in ("f32", "f16") if layout.lanes == 4 else ("f32",):   # PoCL 3.1: CL_R + half
        image = runtime.to_image(g, name, dtype=dtype, engine="cpu")
        acc = runtime.accessor(name, g.shape, dtype=dtype)
        assert acc.side.dims == runtime.ImageDesc(layout, g.shape).placed
        got = gather(cl_engine, program(cl_engine, acc), acc, image)
        want = runtime.convert(layout.transform.apply(g).reshape(-1), dtype).astype(np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (name, dtype)


@pytest.mark.parametrize("layout, dims", [("in_out_channel", (1, 6, 2, 3)),
                                          ("tflite_image_buffer", (1, 6, 2, 3)),
                                          (MemoryDesc((2, 5, 3), tag="aCb4c"), None)])
def test_a_name_its_functions_use_inside_is_refused_and_every_other_builds(cl_engine, layout,
                                                                           dims):
    """'d', 'p', 'n', 'k', 'q0', 'i0' (and 'v' for a writer) were accepted,
    then failed to compile: the accessor's own variables. Now they are
    refused in one line; every name accepted builds."""
    for access in ("read", "write"):
        for name in ("d", "k", "i0", "q0", "v", "t", "x", "src", "dst", "img", "w", "min"):
            try:
                acc = accessor(layout, dims, name=name, access=access)
            except ClayoutError as exc:
                assert "is a name its functions use inside" in str(exc)
                assert name in ("d", "k", "i0", "q0", "v", "p", "n") or access == "write", name
                continue
            programs.build(cl_engine.context, acc.source)   # raises where it does not build
    with pytest.raises(ClayoutError, match="'i0' is a name its functions use inside"):
        accessor("in_out_channel", (1, 6, 2, 3), name="i0")
