"""Thread safety: twelve threads sharing ONE engine, forty conversions each in
the thorough tier and sixteen in ci (reorder, to_image, from_image; host
arrays, host arrays with out=, buffer and image Memory objects, and Memory
objects shared by every thread), give exactly the bits of the same
conversions run one after another. Sixteen calls still make every kind of
call of every thread at least twice (the kinds cycle every 8 and 5 calls),
all twelve threads at once. In the thorough tier each thread has a job of
its own (JOBS); in ci the twelve threads share six of them, two threads a
job (THREAD_JOBS): every storage (2-D image of 4 lanes and of one channel,
3-D image, image array, buffer, image buffer) and every dtype but s8 still
meet, each job in two threads at once on their own data."""
import sys
import threading

import numpy as np
import pytest

import runtime
from conftest import THOROUGH, bits, from_img, image_side, to_img
from runtime import Memory, MemoryDesc, from_image, reorder, to_image
from runtime import engine as engines

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cpu/pool.py", "runtime/opencl/engine.py", "runtime/opencl/moves.py")

CALLS = 40 if THOROUGH else 16
# per thread: dims (tails everywhere), buffer dtype, image dtype, layout, reorder target
JOBS = [
    ((1, 5, 3, 4), "f32", "f32", "in_out_channel", "nhwc"),
    ((2, 3, 2, 5), "f16", "f16", "in_out_width", "nChw8c"),
    ((1, 9, 2, 3), "u8", "u8", "in_out_height", "nChw4c"),
    ((5, 4, 2, 2), "s32", "s32", "conv2d_filter", "OIhw8i8o"),
    ((2, 7, 1, 3), "s8", "s8", "texture_2d", "nChw16c"),
    ((3, 1, 2, 6), "bf16", "f16", "image_2d_weights_c1_b_fyx", "ohwi"),
    ((3, 6, 2, 2), "f32", "u8", "dw_conv2d_filter", "acdb"),
    ((6, 17, 2, 1), "f16", "f32", "weight_width", "nChw8c"),
    # the storages beyond the 2-D image
    ((2, 5, 3, 3), "f32", "f32", "tflite_texture_3d", "nhwc"),
    ((1, 9, 2, 5), "f16", "f16", "tflite_texture_array", "nChw8c"),
    ((3, 6, 1, 2), "s32", "s32", "tflite_buffer", "acdb"),
    ((2, 3, 5, 1), "f32", "u8", "tflite_image_buffer", "nChw4c"),
]
THREADS = len(JOBS)
THREAD_JOBS = list(range(THREADS)) if THOROUGH else [0, 5, 8, 9, 10, 11] * 2   # thread -> job
SHARED_DIMS = (2, 6, 3, 5)
COMMON = MemoryDesc(SHARED_DIMS, "f32", tag="nChw8c")


def _values(shape, dt, seed) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape) * 40
    if not runtime.algebra.dtypes.dtype(dt).is_float:
        x = np.clip(x, -120, 120)
    return runtime.convert(x.astype(np.float32), dt)


def _host_call(engine, t, k):
    dims, dt, img_dt, layout, tag = JOBS[THREAD_JOBS[t]]
    src, dst = MemoryDesc(dims, dt), MemoryDesc(dims, img_dt, tag=tag)
    out = k % 2 == 1     # every other call writes into a reused array
    if k % 4 == 3:       # the same conversion (one kernel) in every thread, on its own data
        x = _values(SHARED_DIMS, "f32", (t, k))
        if k % 8 == 3:
            return [reorder(x.reshape(-1), MemoryDesc(SHARED_DIMS), COMMON, engine=engine)]
        return [to_image(x, "in_out_channel", engine=engine)]
    if k % 4 == 0:
        x = _values(src.span, dt, (t, k))
        if not out:
            return [reorder(x, src, dst, engine=engine)]
        into = np.empty(dst.span, dst.dtype.np)
        return [reorder(x, src, dst, engine=engine, out=into)]
    if k % 4 == 1:
        x = _values(dims, dt, (t, k))
        img = to_image(x, layout, dtype=img_dt, engine=engine)
        if out:
            to_image(x, layout, dtype=img_dt, engine=engine, out=img)
        return [img]
    shape = runtime.image_layout(layout).array_shape(dims)
    img = _values(shape, img_dt, (t, k))   # values in the padding lanes too: not checked
    back = from_image(img, layout, dims, dst=tag, dtype=dt, engine=engine, check_padding=False)
    if out:
        from_image(img, layout, dims, dst=tag, dtype=dt, engine=engine, out=back,
                   check_padding=False)
    return [back]


def _memory_call(engine, shared, t, k):
    dims, dt, img_dt, layout, tag = JOBS[THREAD_JOBS[t]]
    src, dst = MemoryDesc(dims, dt), MemoryDesc(dims, img_dt, tag=tag)
    kind = k % 5
    if kind == 0:
        mem = Memory.from_numpy(_values(src.span, dt, (t, k)), src, engine=engine)
        return [reorder(mem, None, dst).to_numpy()]
    if kind == 1:   # the reported round trip: buffer -> image -> buffer
        mem = Memory.from_numpy(_values(src.span, dt, (t, k)), src, engine=engine)
        img = to_image(mem, layout, dtype=img_dt)
        return [img.to_numpy(), from_image(img, layout, dims, dtype=dt).to_numpy()]
    if kind == 2:
        shape = runtime.image_layout(layout).array_shape(dims)
        img = Memory.from_numpy(_values(shape, img_dt, (t, k)), layout, engine=engine,
                                dims=dims)
        into = Memory(dst, engine)
        from_image(img, layout, dims, out=into)
        return [into.to_numpy()]
    if kind == 3:   # Memory objects every thread reads at once
        buf, img = shared
        blocked = reorder(buf, None, MemoryDesc(SHARED_DIMS, img_dt, tag=tag))
        back = from_image(img, "in_out_channel", SHARED_DIMS, dst=tag, dtype=dt)
        return [blocked.to_numpy(), back.to_numpy(), reorder(buf, None, COMMON).to_numpy()]
    # the same conversions (one kernel each) in every thread, on its own data
    mem = Memory.from_numpy(_values(COMMON.nelems, "f32", (t, k)), MemoryDesc(SHARED_DIMS),
                            engine=engine)
    img = to_image(mem, "in_out_channel")
    return [reorder(mem, None, COMMON).to_numpy(), img.to_numpy(),
            from_image(img, "in_out_channel", SHARED_DIMS, dst="nhwc").to_numpy()]


def _run_threads(call):
    """{(thread, call index): result} of every call, run by THREADS threads at once."""
    results, errors = {}, []
    start = threading.Barrier(THREADS)

    def work(t):
        start.wait()
        try:
            for k in range(CALLS):
                results[t, k] = call(t, k)
        except Exception as exc:  # noqa: BLE001 - reported below, with its thread
            errors.append((t, exc))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: interleave the calls finely
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    return results


def _compare(call):
    want = {(t, k): call(t, k) for t in range(THREADS) for k in range(CALLS)}
    got = _run_threads(call)
    differ = [key for key in want
              if len(got[key]) != len(want[key])
              or any(not np.array_equal(bits(a), bits(b)) for a, b in zip(got[key], want[key]))]
    assert not differ, f"{len(differ)} of {len(want)} threaded results differ: {differ[:8]}"


def _engine(request, name):
    """A new engine object of ``name``: opencl-staged and opencl-direct get
    their own queue on the session's context; opencl-out-of-order an
    out-of-order queue (image access auto)."""
    if not name.startswith("opencl"):
        return engines.get(name)
    cl_engine = request.getfixturevalue("cl_engine")
    import pyopencl as cl
    from runtime.opencl.engine import OpenCLEngine
    if name == "opencl-out-of-order":
        props = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
        return OpenCLEngine(queue=cl.CommandQueue(cl_engine.context, properties=props))
    return OpenCLEngine(context=cl_engine.context, image_access=name.split("-")[1])


@pytest.mark.parametrize("name", ["reference", "cpu", "opencl-staged", "opencl-direct",
                                  "opencl-out-of-order"])
def test_host_arrays_on_one_engine_from_many_threads(request, name):
    shared_engine = _engine(request, name)
    _compare(lambda t, k: _host_call(shared_engine, t, k))


# opencl-direct runs in the thorough tier: its Memory conversions launch the
# kernels the host-array test's opencl-direct launches (image objects as
# arguments, under the same launch lock) and take no lock of their own; the
# staging lock Memory objects share is opencl-staged's, here in every tier.
@pytest.mark.parametrize("name", ["cpu", "opencl-staged",
                                  pytest.param("opencl-direct", marks=pytest.mark.thorough)])
def test_memory_objects_on_one_engine_from_many_threads(request, name):
    shared_engine = _engine(request, name)
    shared_src = MemoryDesc(SHARED_DIMS, "f32")
    x = _values(shared_src.span, "f32", 99)
    shared = (Memory.from_numpy(x, shared_src, engine=shared_engine),
              Memory.from_numpy(to_image(x.reshape(SHARED_DIMS), "in_out_channel"),
                                "in_out_channel", engine=shared_engine, dims=SHARED_DIMS))
    _compare(lambda t, k: _memory_call(shared_engine, shared, t, k))


def test_defaults_made_once_under_threads(monkeypatch):
    """First calls from many threads at once make one default engine and one pool."""
    from runtime.cpu import pool as cpu_pool
    from runtime.opencl import engine as cl_engine
    monkeypatch.setattr(cl_engine, "_DEFAULT", None)
    monkeypatch.setattr(cpu_pool, "_POOL", None)
    made = []
    real = cl_engine.OpenCLEngine

    def counting(*args, **kw):
        made.append(1)
        return real(*args, **kw)
    monkeypatch.setattr(cl_engine, "OpenCLEngine", counting)
    got = _run_threads(lambda t, k: [cl_engine.default(), cpu_pool.pool()] if k == 0 else [])
    assert len(made) == 1
    assert len({id(r[0]) for r in got.values() if r}) == 1
    assert len({id(r[1]) for r in got.values() if r}) == 1


def test_memory_steps_on_an_out_of_order_queue_with_barriers(request):
    """On the user's out-of-order queue each Memory step is ordered by a
    barrier, as the engine's documentation asks; the result is exact."""
    import pyopencl as cl
    eng = _engine(request, "opencl-out-of-order")
    desc = MemoryDesc((2, 17, 5, 6), "f32")
    x = _values(desc.span, "f32", 7)
    src = Memory.from_numpy(x, desc, engine=eng)
    cl.enqueue_barrier(eng.queue)
    img = to_image(src, "in_out_channel", dtype="f16")
    cl.enqueue_barrier(eng.queue)
    back = from_image(img, "in_out_channel", desc.dims, dst="nChw8c", dtype="f32")
    cl.enqueue_barrier(eng.queue)
    ref = engines.get("reference")
    want_img = to_img(ref, x, runtime.image_layout("in_out_channel"), desc, "f16")
    assert np.array_equal(bits(img.to_numpy()), bits(want_img))
    assert np.array_equal(bits(back.to_numpy()),
                          bits(from_img(ref, want_img, runtime.image_layout("in_out_channel"), back.desc)))


def test_a_shape_turning_hot_under_threads(request, monkeypatch):
    """Eight threads convert one shape of 275 KiB on one engine while it
    switches from its family's generic program to its baked one (after 2
    calls here): every result has the single-threaded bits."""
    from runtime.opencl import baking, moves
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "2")     # read by the engines made next
    monkeypatch.delenv("CLAYOUT_SPECIALIZE_BYTES", raising=False)
    dims = (1, 61, 33, 35)
    x = _values(dims, "f32", 5)
    want = to_image(x, "in_out_height", dtype="f16", engine=_engine(request, "opencl-staged"))
    eng = _engine(request, "opencl-staged")   # a new engine: its plans start generic again
    src = MemoryDesc(dims)
    image = image_side(runtime.image_layout("in_out_height"), src.dims, "f16")
    assert moves.move_plan(src, image, eng.device).generic
    got = _run_threads(lambda t, k: [to_image(x, "in_out_height", dtype="f16", engine=eng)]
                       if k < 12 else [])
    assert all(np.array_equal(bits(r[0]), bits(want)) for r in got.values() if r)
    baking.settle()   # built off the calling threads, swapped in when ready
    assert not moves.move_plan(src, image, eng.device).generic
