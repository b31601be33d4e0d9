"""clayout inside a real engine: an out-of-order queue, the caller's own
kernels ordered by events (``wait_for=`` in, ``Memory.event`` /
``Pending.event`` out), host inputs consumed when a call returns, no program
built on the calling thread of a steady loop, another engine's queue on the
same context named for a Memory (docs/engines.md, "Inside an engine")."""
from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest

import runtime
from runtime import ClayoutError, Memory, MemoryDesc
from runtime.opencl import baking, programs
from runtime.opencl.engine import OpenCLEngine

from conftest import same_bits

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/events.py", "runtime/opencl/baking.py", "runtime/opencl/engine.py",
           "runtime/opencl/launcher.py",
           "runtime/opencl/memory.py", "runtime/doors/calls.py", "runtime/doors/checks.py")

OOO = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
DIMS = (1, 32, 64, 64)


def out_of_order(cl_engine, **options) -> OpenCLEngine:
    """An engine on a new out-of-order queue of cl_engine's context."""
    queue = cl.CommandQueue(cl_engine.context, properties=OOO)
    return OpenCLEngine(queue=queue, **options)


def values(i: int, dims=DIMS) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(dims).astype(np.float32)


@pytest.mark.parametrize("access", ["staged", "direct"])
def test_independent_conversions_on_an_out_of_order_queue(cl_engine, access, monkeypatch):
    """12 independent to_image, from_image and reorder calls of every kind on
    Memory objects, no barrier between them, the pool kept small (2 MiB, a
    staging buffer is 512 KiB): each result the cpu engine's bits. Before,
    a staging buffer went back to the pool when its commands were enqueued:
    86 of 120 to_image results wrong on PoCL."""
    monkeypatch.setenv("CLAYOUT_OPENCL_POOL_BYTES", str(2 << 20))
    eng = out_of_order(cl_engine, image_access=access)
    n = 12
    xs = [values(i) for i in range(n)]
    src = [Memory.from_numpy(x, MemoryDesc(DIMS), engine=eng) for x in xs]
    imgs = [Memory.image("in_out_channel", DIMS, engine=eng) for _ in range(n)]
    eng.queue.finish()
    made = [runtime.to_image(s, "in_out_channel", out=m) for s, m in zip(src, imgs)]
    backs = [runtime.from_image(m, "in_out_channel", DIMS, dst=MemoryDesc(DIMS, tag="nhwc"))
             for m in imgs]
    blocked = [runtime.reorder(s, None, MemoryDesc(DIMS, tag="nChw16c")) for s in src]
    outs = [runtime.read_output(m, argmax=True, wait=False) for m in imgs]
    tiles = [runtime.to_image(x, "in_out_channel", max_image=(256, 64), engine=eng)
             for x in xs[:3]]
    eng.queue.finish()
    for i, x in enumerate(xs):
        want = runtime.to_image(x, "in_out_channel", engine="cpu")
        assert made[i] is imgs[i] and same_bits(imgs[i].to_numpy(), want), i
        nhwc = runtime.reorder(x, MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nhwc"), engine="cpu")
        assert same_bits(backs[i].to_numpy(), nhwc), i
        b16 = runtime.reorder(x, MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nChw16c"), engine="cpu")
        assert same_bits(blocked[i].to_numpy(), b16), i
        assert (outs[i].result() == np.argmax(x, axis=1)).all(), i
    for i, t in enumerate(tiles):
        cut = runtime.to_image(xs[i], "in_out_channel", max_image=(256, 64), engine="cpu")
        assert len(t) == len(cut) and all(same_bits(a, b) for a, b in zip(t, cut)), i


def test_frames_into_memory_on_an_out_of_order_queue(cl_engine):
    """from_frame of host frames into image Memory objects, back to back."""
    eng = out_of_order(cl_engine)
    frames = [np.random.default_rng(i).integers(0, 256, (360, 320), np.uint8) for i in range(8)]
    outs = [Memory.image("in_out_channel", (1, 3, 96, 96), engine=eng) for _ in frames]
    eng.queue.finish()
    for f, m in zip(frames, outs):
        runtime.from_frame(f, "in_out_channel", format="nv21", size=(96, 96), out=m)
    eng.queue.finish()
    for f, m in zip(frames, outs):
        want = runtime.from_frame(f, "in_out_channel", format="nv21", size=(96, 96),
                                  engine="cpu")
        assert np.abs(m.to_numpy() - want).max() <= 1e-4


# -- host inputs: consumed when the call returns ---------------------------------------------
def _engines(cl_engine):
    return [("cpu", "cpu"), ("reference", "reference"), ("opencl", cl_engine),
            ("opencl-discrete", OpenCLEngine(queue=cl_engine.queue, host_in_place=False)),
            ("opencl-out-of-order", out_of_order(cl_engine))]


def test_a_host_frame_into_a_memory_is_uploaded_before_the_call_returns(cl_engine):
    """The issue's case: the frame overwritten right after the call (17 of 20
    wrong before), and a temporary frame freed (12 of 20)."""
    for name, eng in _engines(cl_engine)[2:]:
        m = Memory.image("in_out_channel", (1, 3, 64, 64), engine=eng)
        for i in range(10):
            f = np.random.default_rng(i).integers(0, 256, (240, 320), np.uint8)
            want = runtime.from_frame(f, "in_out_channel", format="nv21", size=(64, 64),
                                      engine="cpu")
            runtime.from_frame(f, "in_out_channel", format="nv21", size=(64, 64), out=m)
            f[...] = 0
            del f
            eng.queue.finish()
            assert np.abs(m.to_numpy() - want).max() <= 1e-4, (name, i)


def test_read_output_without_waiting_has_consumed_its_host_input(cl_engine):
    """The issue's case: read_output(x, ..., wait=False), then x[...] = 0,
    then .result(): 10 of 10 wrong before."""
    for name, eng in _engines(cl_engine):
        for i in range(5):
            x = values(i, (1, 21, 32, 32))
            img = runtime.to_image(x, "in_out_channel")
            want = np.argmax(x, axis=1)
            p = runtime.read_output(x, "nchw", x.shape, argmax=True, engine=eng, wait=False)
            q = runtime.read_output(img, "in_out_channel", x.shape, argmax=True, engine=eng,
                                    wait=False)
            x[...] = 0
            img[...] = 0
            assert (p.result() == want).all() and (q.result() == want).all(), (name, i)


@pytest.mark.parametrize("door", ["reorder", "to_image", "from_image", "from_frame",
                                  "tiles"])
def test_every_door_has_consumed_its_host_input_when_it_returns(cl_engine, door):
    for name, eng in _engines(cl_engine):
        x = values(7, (1, 5, 9, 11))
        img = runtime.to_image(x, "in_out_channel")
        frame = np.random.default_rng(7).integers(0, 256, (30, 20), np.uint8)
        call = {
            "reorder": lambda e: runtime.reorder(x, MemoryDesc(x.shape),
                                                 MemoryDesc(x.shape, tag="nhwc"), engine=e),
            "to_image": lambda e: runtime.to_image(x, "in_out_channel", engine=e),
            "from_image": lambda e: runtime.from_image(img, "in_out_channel", x.shape,
                                                       engine=e),
            "from_frame": lambda e: runtime.from_frame(frame, "nchw", format="nv21",
                                                       engine=e),
            "tiles": lambda e: runtime.to_image(x, "in_out_channel", max_image=(11, 3),
                                                engine=e),
        }[door]
        want = call("cpu")
        got = call(eng)
        x[...], img[...], frame[...] = 7, 7, 7   # overwritten right after the call returns
        if isinstance(got, tuple):
            assert all(np.abs(a - b).max() <= 1e-4 for a, b in zip(got, want)), name
        else:
            assert np.abs(got - want).max() <= 1e-4, name


# -- events in and out ------------------------------------------------------------------------
SCALE = """
__kernel void scale(__global const float *src, __global float *dst, float k) {
    size_t i = get_global_id(0);
    dst[i] = src[i] * k;
}
"""


def test_an_engine_loop_chains_its_kernels_with_clayout_by_events(cl_engine):
    """Per frame on an out-of-order queue, no barrier: the caller's kernel
    scales the input buffer, clayout places it on an image (wait_for the
    kernel), reads it back to nhwc (its Memory.event), the caller's kernel
    scales that (waiting for clayout's event), read_output takes the argmax
    (wait_for the kernel; its Pending). 30 frames equal the in-order loop's;
    only the first call builds on the calling thread."""
    dims = (1, 8, 16, 12)
    n = int(np.prod(dims))

    def loop(eng, frames):
        scale = programs.build(eng.context, SCALE).scale
        src = Memory(MemoryDesc(dims), engine=eng)
        scaled = Memory(MemoryDesc(dims), engine=eng)
        img = Memory.image("in_out_channel", dims, engine=eng)
        nhwc = Memory(MemoryDesc(dims, tag="nhwc"), engine=eng)
        again = Memory(MemoryDesc(dims, tag="nhwc"), engine=eng)
        eng.queue.finish()
        results, built = [], []
        for k, x in enumerate(frames):
            up = cl.enqueue_copy(eng.queue, src.storage, x, is_blocking=False,
                                 wait_for=[e for e in (src.event,) if e is not None] or None)
            ev = scale(eng.queue, (n,), None, src.storage, scaled.storage, np.float32(k + 1),
                       wait_for=[up])
            runtime.to_image(scaled, "in_out_channel", out=img, wait_for=[ev])
            runtime.from_image(img, "in_out_channel", dims, out=nhwc)
            ev2 = scale(eng.queue, (n,), None, nhwc.storage, again.storage, np.float32(-1),
                        wait_for=[nhwc.event])
            before = programs.STATS["builds"] - programs.STATS["builds_in_background"]
            p = runtime.read_output(again, argmax=True, wait=False, wait_for=[ev2])
            results.append(p.result())
            up.wait()
            built.append(programs.STATS["builds"] - programs.STATS["builds_in_background"]
                         - before)
        return results, built

    frames = [values(k, dims) for k in range(30)]
    want, _ = loop(OpenCLEngine(queue=cl.CommandQueue(cl_engine.context)), frames)
    got, built = loop(out_of_order(cl_engine), frames)
    assert all((a == b).all() for a, b in zip(got, want))
    assert all((w == np.argmin(f, axis=1)).all() for w, f in zip(want, frames))
    assert sum(built[1:]) == 0, built


def test_a_hot_shape_is_baked_off_the_calling_thread(cl_engine, monkeypatch):
    """A steady loop of a 1 MiB conversion turns hot after a few calls: its
    baked program is built on the bake worker, never inside a call (before:
    the 9th call built it, 30-233 ms on one frame)."""
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "3")
    monkeypatch.delenv("CLAYOUT_SPECIALIZE_BYTES", raising=False)
    eng = OpenCLEngine(queue=cl_engine.queue)
    dims = (1, 64, 63, 65)
    x = values(1, dims)
    want = runtime.to_image(x, "in_out_height", engine="cpu")
    runtime.to_image(x, "in_out_height", engine=eng)        # the first call: its generic program
    calling = programs.STATS["builds"] - programs.STATS["builds_in_background"]
    background = programs.STATS["builds_in_background"]
    for _ in range(40):
        assert same_bits(runtime.to_image(x, "in_out_height", engine=eng), want)
    baking.settle()
    assert programs.STATS["builds"] - programs.STATS["builds_in_background"] == calling
    assert programs.STATS["builds_in_background"] >= background   # built there, or cached


def test_wait_for_takes_events_only():
    x = values(0, (1, 3, 2, 2))
    for bad, words in [(5, "wait_for=5; allowed"), ([None], "wait_for holds None"),
                       (["e"], "wait_for holds 'e'")]:
        with pytest.raises(ClayoutError, match=words):
            runtime.to_image(x, "in_out_channel", wait_for=bad)
        with pytest.raises(ClayoutError, match=words):
            runtime.read_output(x, "nchw", x.shape, wait_for=bad)


def test_a_memory_converted_on_another_queue_of_its_context(cl_engine):
    """engine= names another engine on the Memory's context: it runs there,
    after the Memory's commands (before, engine= was ignored)."""
    a = OpenCLEngine(queue=cl.CommandQueue(cl_engine.context, properties=OOO))
    b = OpenCLEngine(queue=cl.CommandQueue(cl_engine.context, properties=OOO))
    x = values(3)
    src = Memory.from_numpy(x, MemoryDesc(DIMS), engine=a)
    img = runtime.to_image(src, "in_out_channel", engine=b)
    assert img.engine is b
    back = runtime.from_image(img, "in_out_channel", DIMS, engine=a)
    assert back.engine is a and same_bits(back.to_numpy(), x.reshape(-1))
    other = OpenCLEngine(device=cl_engine.context.devices[0])   # its own context
    with pytest.raises(ClayoutError, match="cannot be converted on engine"):
        runtime.to_image(src, "in_out_channel", engine=other)
