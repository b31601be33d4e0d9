"""Memory objects: allocate, attach without a copy, map, same_buffer, padding
restored on attach, conversions that stay on the device."""
import numpy as np
import pytest

import runtime
from conftest import bits, from_img, to_img
from runtime import ClayoutError, Memory, MemoryDesc
from runtime import engine as engines
from runtime.opencl import host
from runtime.opencl.engine import OpenCLEngine

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/contract.py", "runtime/opencl/events.py", "runtime/opencl/host.py",
           "runtime/memory.py", "runtime/opencl/memory.py")

REF = engines.get("reference")
DIMS = (2, 17, 3, 3)


def _x(n=2 * 17 * 3 * 3):
    return np.arange(n, dtype=np.float32) - 50.5


@pytest.fixture(params=["cpu", "opencl"])
def engine(request, cl_engine):
    return cl_engine if request.param == "opencl" else engines.get("cpu")


def test_round_trip_stays_on_the_device(cl_engine, monkeypatch):
    src = Memory.from_numpy(_x(), MemoryDesc(DIMS), engine=cl_engine)

    def no_host(*a, **k):
        raise AssertionError("a Memory conversion went through the host")
    monkeypatch.setattr(host, "array_in", no_host)
    monkeypatch.setattr(host, "array_out", no_host)
    blocked = runtime.reorder(src, None, MemoryDesc(DIMS, tag="nChw16c"))
    image = runtime.to_image(blocked, "in_out_channel", dtype="f16")
    back = runtime.from_image(image, "in_out_channel", DIMS, dst="nhwc", dtype="f32")
    monkeypatch.undo()
    nchw, nhwc = MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nhwc")
    want_img = to_img(REF, _x(), runtime.image_layout("in_out_channel"), nchw, "f16")
    assert np.array_equal(bits(image.to_numpy()), bits(want_img))
    want = from_img(REF, want_img, runtime.image_layout("in_out_channel"), nhwc)
    assert np.array_equal(bits(back.to_numpy()), bits(want))
    assert isinstance(back.storage, type(src.storage))


def test_conversions_on_every_engine(engine):
    src = Memory.from_numpy(_x(), MemoryDesc(DIMS), engine=engine)
    dst = runtime.reorder(src, None, MemoryDesc(DIMS, "bf16", tag="nChw8c"))
    assert np.array_equal(bits(dst.to_numpy()),
                          bits(REF.convert(MemoryDesc(DIMS), dst.desc, _x())))
    img = runtime.to_image(src, "conv2d_filter", dtype="s8")
    want = to_img(REF, _x(), runtime.image_layout("conv2d_filter"), MemoryDesc(DIMS), "s8")
    assert np.array_equal(img.to_numpy(), want)
    into = Memory(MemoryDesc(DIMS, "f32", tag="acdb"), engine)
    out = runtime.from_image(img, "conv2d_filter", DIMS, out=into)
    assert out is into
    with pytest.warns(DeprecationWarning, match="a destination Memory goes in out="):
        assert runtime.from_image(img, "conv2d_filter", DIMS, dst=into) is into
    assert np.array_equal(into.to_numpy(), from_img(REF, want, img.layout, into.desc))


def test_attach_user_buffer_and_queue(cl_engine):
    import pyopencl as cl
    ctx = cl.Context(cl_engine.context.devices)
    queue = cl.CommandQueue(ctx)
    desc = MemoryDesc(DIMS, tag="nChw16c")        # C 17 -> 32: a padded layout
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, desc.size)
    cl.enqueue_copy(queue, buf, np.full(desc.span, 7, np.float32))
    mem = Memory(desc, data=buf, queue=queue)
    assert mem.storage is buf and mem.engine.queue is queue
    host = mem.to_numpy()
    tail = REF.convert(MemoryDesc(DIMS), desc, np.ones(np.prod(DIMS), np.float32)) == 0
    assert (host[tail] == 0).all() and (host[~tail] == 7).all()   # padding re-zeroed
    assert mem.same_buffer(Memory(desc, data=buf, queue=queue))
    assert not mem.same_buffer(Memory(desc, engine=mem.engine))


def test_attach_numpy_without_copy(engine):
    desc = MemoryDesc(DIMS, tag="nChw8c", halo=((0, 0, 1, 1), (0, 0, 1, 1)), fill=2.0)
    arr = np.full(desc.span, 9, np.float32)
    mem = Memory(desc, engine, data=arr)
    with mem.map() as a:
        a[desc.offset((0, 0, 0, 0))] = -1.0
    assert arr[desc.offset((0, 0, 0, 0))] == -1.0      # the user's memory, in place
    logical = REF.convert(desc, MemoryDesc(DIMS), arr)
    want = REF.convert(MemoryDesc(DIMS), desc, logical)  # tails 0, halo 2.0, data kept
    assert np.array_equal(mem.to_numpy(), want)


def test_map_writes_back(engine):
    mem = Memory(MemoryDesc((4, 5)), engine)
    with mem.map() as a:
        a[:] = np.arange(20)
    assert np.array_equal(mem.to_numpy(), np.arange(20, dtype=np.float32))
    img = Memory.image("argument", (8,), "u8", engine)
    with img.map() as a:
        a[...] = 3
    assert (img.to_numpy() == 3).all()


def test_user_image(cl_engine):
    import pyopencl as cl
    layout = runtime.image_layout("in_out_channel")
    w, h = layout.image_shape(DIMS)
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    image = cl.create_image(cl_engine.context, cl.mem_flags.READ_WRITE, fmt, shape=(w, h))
    mem = Memory.image(layout, DIMS, "f32", data=image)
    src = Memory.from_numpy(_x(), MemoryDesc(DIMS), engine=mem.engine)
    assert runtime.to_image(src, layout, out=mem) is mem
    assert np.array_equal(mem.to_numpy(), to_img(REF, _x(), layout, MemoryDesc(DIMS), "f32"))
    with pytest.raises(ClayoutError, match="does not match"):
        Memory.image(layout, (1, 17, 3, 3), "f32", data=image)


def test_zero_volume_allocates_nothing(engine):
    mem = Memory(MemoryDesc((0, 5, 3, 3), tag="nChw8c"), engine)
    assert mem.storage is None and mem.to_numpy().size == 0
    out = runtime.reorder(mem, None, MemoryDesc((0, 5, 3, 3)))
    assert out.storage is None
    img = runtime.to_image(mem, "in_out_channel")
    assert img.storage is None and img.to_numpy().shape == (0, 6, 4)


def test_image_over_the_limit_refused_before_allocation(cl_engine, monkeypatch):
    def no_alloc(*a, **k):
        raise AssertionError("allocated")
    import pyopencl as cl
    monkeypatch.setattr(cl, "create_image", no_alloc)
    # one column past the device's own limit (PoCL derives it from the memory it sees)
    width = cl_engine.limits.image2d[0] + 1
    dims = (1, 4, 3, width)
    with pytest.raises(ClayoutError, match=str(cl_engine.limits.image2d[0])):
        Memory.image("in_out_channel", dims, "f32", cl_engine)
    with pytest.raises(ClayoutError, match="in_out_channel"):
        runtime.to_image(np.zeros(dims, np.float32), "in_out_channel", engine=cl_engine)


def test_engine_mismatch_is_refused(cl_engine):
    mem = Memory.from_numpy(_x(), MemoryDesc(DIMS), engine=cl_engine)
    with pytest.raises(ClayoutError, match="engine"):
        runtime.reorder(mem, None, MemoryDesc(DIMS, tag="nhwc"), engine="cpu")


def test_host_arrays_read_only_and_memory_mapped(cl_engine, tmp_path):
    """On a CPU device the kernels work on the caller's arrays in place
    (USE_HOST_PTR): read-only and memory-mapped inputs must still work and
    stay untouched."""
    x = _x()
    np.save(tmp_path / "x.npy", x)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    frozen = x.copy()
    frozen.setflags(write=False)
    src, dst = MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nChw16c")
    want = REF.convert(src, dst, x)
    for arr in (mapped, frozen):
        assert np.array_equal(bits(cl_engine.convert(src, dst, arr.reshape(-1))), bits(want))
        img = to_img(cl_engine, arr.reshape(-1), runtime.image_layout("in_out_channel"), src, "f32")
        img.setflags(write=False)
        back = from_img(cl_engine, img, runtime.image_layout("in_out_channel"), src)
        assert np.array_equal(bits(back), bits(x.reshape(-1)))
    assert np.array_equal(np.load(tmp_path / "x.npy"), x)


def test_memory_reorder_checks_src_desc_and_writes_into_out(engine):
    src = Memory.from_numpy(_x(), MemoryDesc(DIMS), engine=engine)
    with pytest.raises(runtime.ClayoutError, match="does not describe it"):
        runtime.reorder(src, MemoryDesc(DIMS, tag="nhwc"), MemoryDesc(DIMS, tag="nChw16c"))
    out = Memory.image("in_out_channel", DIMS, "f32", engine)
    got = runtime.to_image(src, "in_out_channel", out=out)
    assert got is out
    want = to_img(REF, _x(), runtime.image_layout("in_out_channel"), MemoryDesc(DIMS), "f32")
    assert np.array_equal(bits(out.to_numpy()), bits(want))


def test_new_memory_on_an_out_of_order_queue_is_zeroed_before_it_is_written(cl_engine,
                                                                          monkeypatch):
    """A new Memory's zero fill is ordered before its first write even on an
    out-of-order queue, where only events order commands. The fill is held
    back by a user event for 0.3 s: were it left pending, it would land after
    from_numpy's write and zero the data."""
    import threading

    import pyopencl as cl
    props = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    eng = OpenCLEngine(queue=cl.CommandQueue(cl_engine.context, properties=props))
    real_fill = cl.enqueue_fill_buffer

    def late_fill(queue, buf, pattern, offset, size, wait_for=None):
        gate = cl.UserEvent(queue.context)
        threading.Timer(0.3, gate.set_status, (cl.command_execution_status.COMPLETE,)).start()
        return real_fill(queue, buf, pattern, offset, size, wait_for=[gate, *(wait_for or [])])

    monkeypatch.setattr(cl, "enqueue_fill_buffer", late_fill)
    desc = MemoryDesc((2, 17, 5, 6), "f32")
    x = np.arange(1, desc.span + 1, dtype=np.float32)
    mem = Memory.from_numpy(x, desc, engine=eng)
    eng.queue.finish()
    assert np.array_equal(mem.to_numpy(), x)
