"""One engine per device context (runtime/opencl/engine.py ``shared``): every
Memory made on the caller's context (a ``cl.Buffer`` / ``cl.Image`` as data)
lives on one engine, and on one engine per (context, queue) when the caller
gives a queue, so that conversions between them, and their reads, go
through one queue in order:

- two Memory objects on one context report the same engine, and Memory
  objects converted from them stay on it; another context gets another;
- a caller's queue gets the engine of (context, queue); the process-wide
  engine is the shared one of its own context and queue;
- an ``OpenCLEngine`` the caller constructs stays the caller's;
- ``Memory.from_buffer``'s BufferCopyWarning is said once for one context,
  also when the first Memory is gone before the second is made;
- eight threads converting between Memory objects on one context give
  exactly the bits of the same calls run one after another.
"""
import threading
import warnings

import numpy as np
import pytest

import runtime
from conftest import bits, needs
from runtime import BufferCopyWarning, ClayoutError, Memory, MemoryDesc

cl = needs("pyopencl")
from runtime.opencl import engine as cl_engines  # needs pyopencl
from runtime.opencl.engine import OpenCLEngine

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/contexts.py", "runtime/opencl/engine.py", "runtime/cpu/engine.py",
           "runtime/engine.py", "runtime/reference/engine.py")

mf = cl.mem_flags
DIMS = (1, 6, 3, 5)


@pytest.fixture
def ctx(cl_engine):
    """A context of the test's own on the engine's device: no engine has it yet."""
    return cl.Context(cl_engine.context.devices)


def _buffer(ctx, array=None, nbytes=None) -> "cl.Buffer":
    if array is not None:
        return cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR,
                         hostbuf=np.ascontiguousarray(array))
    return cl.Buffer(ctx, mf.READ_WRITE, nbytes)


def _values(seed, n=int(np.prod(DIMS))) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_memory_objects_on_one_context_share_one_engine(ctx):
    src_desc, dst_desc = MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nhwc")
    src = Memory(src_desc, data=_buffer(ctx, _values(0)))
    dst = Memory(dst_desc, data=_buffer(ctx, nbytes=dst_desc.size))
    image = Memory.image("tflite_buffer", DIMS, data=_buffer(ctx, nbytes=4096))
    assert src.engine is dst.engine is image.engine
    assert isinstance(src.engine, OpenCLEngine) and src.engine.context == ctx
    assert runtime.reorder(src, None, dst_desc).engine is src.engine   # new Memory: same engine
    runtime.reorder(src, None, None, out=dst)
    with pytest.warns(DeprecationWarning, match="a destination Memory goes in out="):
        runtime.reorder(src, None, dst)   # the older way: dst_desc a Memory
    want = _values(0).reshape(DIMS).transpose(0, 2, 3, 1).reshape(-1)
    assert np.array_equal(bits(dst.to_numpy()), bits(want))


def test_another_context_gets_another_engine(ctx, cl_engine):
    other = cl.Context(cl_engine.context.devices)
    mem = Memory(MemoryDesc(DIMS), data=_buffer(ctx, nbytes=4096))
    far = Memory(MemoryDesc(DIMS), data=_buffer(other, nbytes=4096))
    assert far.engine is not mem.engine and far.engine.context == other
    with pytest.raises(ClayoutError, match="different engines"):
        runtime.reorder(mem, None, None, out=far)
    # a buffer on the process-wide engine's context: that engine
    assert Memory(MemoryDesc(DIMS), data=_buffer(cl_engine.context, nbytes=4096)).engine \
        is cl_engine


def test_a_queue_gets_the_engine_of_context_and_queue(ctx, cl_engine):
    queue, queue2 = cl.CommandQueue(ctx), cl.CommandQueue(ctx)
    desc = MemoryDesc(DIMS)
    on_queue = Memory(desc, data=_buffer(ctx, nbytes=desc.size), queue=queue)
    assert Memory(desc, queue=queue).engine is on_queue.engine          # allocated there
    assert Memory(desc, data=_buffer(ctx, nbytes=desc.size), queue=queue).engine \
        is on_queue.engine
    assert on_queue.engine.queue is queue
    plain = Memory(desc, data=_buffer(ctx, nbytes=desc.size))           # the context's own queue
    second = Memory(desc, queue=queue2)
    assert len({id(on_queue.engine), id(plain.engine), id(second.engine)}) == 3
    assert plain.engine.queue != queue and second.engine.queue is queue2
    # the process-wide engine is the engine of its own context and queue
    assert Memory(desc, queue=cl_engine.queue).engine is cl_engine
    assert cl_engines.shared(cl_engine.context) is cl_engine


def test_an_engine_the_caller_constructs_stays_theirs(ctx):
    mine = OpenCLEngine(context=ctx)
    desc = MemoryDesc(DIMS)
    assert Memory(desc, data=_buffer(ctx, nbytes=desc.size), engine=mine).engine is mine
    theirs = Memory(desc, data=_buffer(ctx, nbytes=desc.size))
    assert theirs.engine is not mine                                     # never handed out
    assert Memory(desc, data=_buffer(ctx, nbytes=desc.size)).engine is theirs.engine
    mine_queue = OpenCLEngine(queue=cl.CommandQueue(ctx))
    assert Memory(desc, engine=mine_queue, queue=mine_queue.queue).engine is mine_queue


def test_buffer_copy_warning_once_for_one_context(ctx):
    # a 3-D image never views a buffer: its bytes are copied on every device
    side = runtime.ImageDesc(runtime.image_layout("tflite_texture_3d"), DIMS)
    pixels = _values(1, int(np.prod(side.array_shape))).reshape(side.array_shape)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        first = Memory.from_buffer(_buffer(ctx, pixels), "tflite_texture_3d", DIMS)
        engine = first.engine
        second = Memory.from_buffer(_buffer(ctx, pixels), "tflite_texture_3d", DIMS)
        del first, second     # no Memory holds the engine now: it is still the context's
        third = Memory.from_buffer(_buffer(ctx, pixels), "tflite_texture_3d", DIMS)
    assert [w.category for w in told] == [BufferCopyWarning]
    assert "copied into a new image" in str(told[0].message)
    assert third.engine is engine and third.zero_copy is False
    assert np.array_equal(bits(third.to_numpy()), bits(pixels))


# -- threads ------------------------------------------------------------------------------------
THREADS, CALLS = 8, 12
LAYOUT = "tflite_texture_3d"


def _targets(ctx):
    """The two Memory objects a thread writes into, on the caller's context: an
    NHWC buffer and a tflite_texture_3d image (staged through a cl.Image)."""
    nhwc = MemoryDesc(DIMS, tag="nhwc")
    side = runtime.ImageDesc(runtime.image_layout(LAYOUT), DIMS)
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    image = cl.create_image(ctx, mf.READ_WRITE, fmt, shape=side.shape)
    return Memory(nhwc, data=_buffer(ctx, nbytes=nhwc.size)), \
        Memory.image(LAYOUT, DIMS, data=image)


def _call(ctx, targets, t, k) -> bytes:
    """Call k of thread t: a new source Memory on the caller's buffer, converted
    into one of the thread's Memory objects, read back."""
    src = Memory(MemoryDesc(DIMS), data=_buffer(ctx, _values(1000 * t + k)))
    if k % 2 == 0:
        runtime.reorder(src, None, None, out=targets[0])
        return bits(targets[0].to_numpy()).tobytes()
    runtime.to_image(src, LAYOUT, out=targets[1])
    return bits(targets[1].to_numpy()).tobytes()


def test_eight_threads_between_memory_objects_on_one_context(ctx):
    alone_targets = _targets(ctx)
    alone = [[_call(ctx, alone_targets, t, k) for k in range(CALLS)] for t in range(THREADS)]
    want = _values(0).reshape(DIMS).transpose(0, 2, 3, 1).reshape(-1)
    assert alone[0][0] == bits(want).tobytes()
    assert alone[0][1] == bits(runtime.to_image(_values(1).reshape(DIMS), LAYOUT,
                                                engine="reference")).tobytes()
    got = [None] * THREADS
    errors = []
    start = threading.Barrier(THREADS)

    def work(t):
        try:
            targets = _targets(ctx)
            start.wait()
            got[t] = [_call(ctx, targets, t, k) for k in range(CALLS)]
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert got == alone
    assert alone_targets[0].engine is cl_engines.shared(ctx)   # every Memory on one engine
