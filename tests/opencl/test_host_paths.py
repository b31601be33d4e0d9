"""Host arrays on the discrete path (``host_in_place=False``, what a GPU
that does not share host memory runs): the image's dense host form crosses
where both ends are host arrays (no image object, no Read/WriteImage), and
a pageable array crosses pipelined in chunks through pinned stages
(runtime/opencl/transfer.py), bit for bit at every size around a chunk,
from many threads as from one, with no memory object made per call."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from conftest import bits, in_threads, needs
from runtime import ImageDesc, MemoryDesc, image_layout

cl = needs("pyopencl")
from runtime.opencl import moves, transfer  # noqa: E402
from runtime.opencl.engine import OpenCLEngine  # noqa: E402

MODULES = ("runtime/opencl/transfer.py", "runtime/opencl/host.py", "runtime/opencl/moves.py",
           "runtime/opencl/memory.py")

CHUNK = 4096
DIMS = (1, 17, 6, 5)
X = (np.arange(np.prod(DIMS), dtype=np.float32) % 23 - 11) / 4


@pytest.fixture
def staging(cl_engine, monkeypatch):
    """The discrete path with pageable arrays pipelined in chunks of 4 KiB."""
    monkeypatch.setenv("CLAYOUT_OPENCL_HOST_PATH", "staging")
    monkeypatch.setenv("CLAYOUT_OPENCL_CHUNK_BYTES", str(CHUNK))
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    path = moves.host_path(eng.device)
    assert (path.pageable, path.chunk, path.stages) == ("staging", CHUNK, moves.STAGES)
    return eng


class Copies:
    """Every clEnqueue*Copy the engine makes, and which of them touch an image."""

    def __init__(self, monkeypatch):
        self.all, self.images = 0, 0
        real = cl.enqueue_copy

        def counting(queue, dest, src, **kw):
            self.all += 1
            self.images += any(isinstance(o, cl.Image) for o in (dest, src))
            return real(queue, dest, src, **kw)
        monkeypatch.setattr(cl, "enqueue_copy", counting)


# sizes around a chunk: zero, one byte, one under, exactly one, one byte past, several + a tail
SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 5, 7 * CHUNK + 4095]


@pytest.mark.parametrize("nbytes", SIZES)
def test_a_chunked_transfer_is_bit_exact_at_every_size(staging, nbytes):
    eng = staging
    path = moves.host_path(eng.device)
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, np.uint8)
    back = np.full(nbytes, 0xA5, np.uint8)
    plan = transfer.chunks(nbytes, CHUNK)
    assert sum(n for _, n in plan.parts) == nbytes and len(plan.parts) == -(-nbytes // CHUNK)
    with eng.memory.lease_buffer(max(1, nbytes)) as buf:
        transfer.upload(eng, buf, data, path)
        transfer.download(eng, back, buf, None, path)
    assert np.array_equal(back, data)


def test_chunks_are_planned_once_per_size():
    transfer.PLANS.clear()
    first = transfer.chunks(3 * CHUNK + 5, CHUNK)
    assert transfer.chunks(3 * CHUNK + 5, CHUNK) is first and len(transfer.PLANS) == 1
    assert first.parts[-1] == (3 * CHUNK, 5)
    assert transfer.chunks(0, CHUNK).parts == ()


CALLS = {
    "reorder": lambda eng, x, out: runtime.reorder(x, MemoryDesc(x.shape),
                                                   MemoryDesc(x.shape, tag="nChw16c"),
                                                   engine=eng, out=out),
    "to_image": lambda eng, x, out: runtime.to_image(x, "in_out_channel", engine=eng, out=out),
    "from_image": lambda eng, x, out: runtime.from_image(
        runtime.to_image(x, "conv2d_filter", engine="reference"), "conv2d_filter", x.shape,
        dst="nhwc", engine=eng, out=out),
}


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("dims", [(1, 17, 6, 5), (2, 33, 16, 17)])   # one chunk, several
def test_the_pipelined_path_gives_the_reference_bits(staging, name, dims):
    x = (np.arange(np.prod(dims), dtype=np.float32) % 29 - 13) / 8
    x = x.reshape(dims)
    want = CALLS[name]("reference", x, None)
    assert np.array_equal(bits(CALLS[name](staging, x, np.empty_like(want))), bits(want))


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("access", ["auto", "direct"])
def test_a_host_to_host_call_makes_no_image_and_no_memory_object(cl_engine, monkeypatch, name,
                                                                 access):
    """Per steady-state call on the discrete path: no memory object made (the
    pool's), no image object at all and no Read/WriteImage, with the device
    reaching images directly (a GPU) or staged (a CPU device)."""
    for path in ("driver", "staging"):
        monkeypatch.setenv("CLAYOUT_OPENCL_HOST_PATH", path)
        eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False, image_access=access)
        x = X.reshape(DIMS)
        want = CALLS[name]("reference", x, None)
        out = np.empty_like(want)
        CALLS[name](eng, x, out)
        made = dict(eng.memory.made)
        copies = Copies(monkeypatch)
        for _ in range(10):
            assert np.array_equal(bits(CALLS[name](eng, x, out)), bits(want))
        assert dict(eng.memory.made) == made and made.get("images", 0) == 0, made
        assert copies.images == 0 and copies.all >= 20, (copies.all, copies.images)
        monkeypatch.undo()


def test_only_a_device_image_is_an_image_object(cl_engine):
    """A Memory image on the discrete path is an image object; the host call
    of the same conversion is planned dense."""
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False, image_access="direct")
    image = ImageDesc(image_layout("in_out_channel"), DIMS)
    assert moves.move_plan(MemoryDesc(DIMS), image, eng.device).image_object
    assert not moves.move_plan(MemoryDesc(DIMS), image, eng.device, dense=True).image_object
    mem = runtime.to_image(runtime.Memory.from_numpy(X, MemoryDesc(DIMS), engine=eng),
                           "in_out_channel")
    assert isinstance(mem.storage, cl.Image)
    assert np.array_equal(mem.to_numpy(), runtime.to_image(X.reshape(DIMS), "in_out_channel",
                                                           engine="reference"))


def test_pipelined_calls_from_many_threads_give_the_single_threaded_bits(staging):
    """Eight threads share the host copy workers and the pool's stages:
    each result equals the single-threaded one."""
    inputs = [(np.arange(2 * 33 * 16 * 17, dtype=np.float32) % (7 + t)).reshape(2, 33, 16, 17)
              for t in range(8)]
    alone = {(t, n): CALLS[n](staging, inputs[t], None).copy() for t in range(8) for n in CALLS}

    def work(t):
        for _ in range(3):
            for n in CALLS:
                out = np.empty_like(alone[(t, n)])
                assert np.array_equal(bits(CALLS[n](staging, inputs[t], out)),
                                      bits(alone[(t, n)])), (t, n)
    in_threads(work, 8)


def test_a_pinned_array_crosses_directly(staging):
    """A pinned array (runtime.empty_pinned) is not staged: no pinned stage is leased."""
    x = runtime.empty_pinned(DIMS, np.float32, engine=staging)
    x[...] = X.reshape(DIMS)
    out = runtime.empty_pinned(DIMS[:1] + DIMS[2:] + DIMS[1:2], np.float32, engine=staging)
    runtime.reorder(x, MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nhwc"), engine=staging,
                    out=out.reshape(-1))
    assert staging.memory.made["pinned"] == 2   # the two arrays, no stage
    assert np.array_equal(out, X.reshape(DIMS).transpose(0, 2, 3, 1))
