"""Conversions that do not wait: ``wait=False`` on every door (to_image,
from_image, reorder, from_frame, read_output) and on prepared calls returns
a Pending whose result equals the waited call's, bit for bit, on every
engine and both OpenCL host paths (in place; the discrete path through the
upload queue, by the driver's copy and pipelined through pinned stages);
the input is consumed when the call returns (overwritten at once, the
result is unchanged); eight threads with calls in flight get what one
thread gets; a Pending dropped unfinished hands its device memory back only
once its commands are done (the next calls come out right)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import runtime
from conftest import in_threads, needs, same_bits
from runtime import MemoryDesc

cl = needs("pyopencl")
from runtime.algebra.output import Pending  # noqa: E402
from runtime.opencl.engine import OpenCLEngine  # noqa: E402

MODULES = ("runtime/opencl/host.py", "runtime/doors/calls.py", "runtime/doors/prepared_call.py",
           "runtime/contract.py", "runtime/algebra/output.py", "runtime/opencl/transfer.py")

DIMS = (1, 17, 9, 7)      # C with a tail, H and W odd
NCHW = MemoryDesc(DIMS, tag="nchw")
NHWC = MemoryDesc(DIMS, tag="nhwc")
FRAME = (48, 32)          # an NV21 frame 32 wide, 32 high


def _x(seed: int) -> np.ndarray:
    return (np.arange(np.prod(DIMS), dtype=np.float32).reshape(DIMS) * (seed + 1) % 97 - 48) / 8


def _frame(seed: int) -> np.ndarray:
    return ((np.arange(np.prod(FRAME)) * (seed + 3)) % 251).astype(np.uint8).reshape(FRAME)


DOORS = {
    "to_image": lambda a, eng, **kw: runtime.to_image(a, "in_out_channel", engine=eng, **kw),
    "from_image": lambda a, eng, **kw: runtime.from_image(a, "in_out_channel", DIMS, engine=eng,
                                                          **kw),
    "reorder": lambda a, eng, **kw: runtime.reorder(a, NCHW, NHWC, engine=eng, **kw),
    "from_frame": lambda a, eng, **kw: runtime.from_frame(a, "in_out_channel", format="nv21",
                                                          size=(12, 10), engine=eng, **kw),
    "read_output": lambda a, eng, **kw: runtime.read_output(a, "nchw", DIMS, argmax=True,
                                                            engine=eng, **kw),
}


def _input(door: str, seed: int) -> np.ndarray:
    if door == "from_frame":
        return _frame(seed)
    if door == "from_image":
        return runtime.to_image(_x(seed), "in_out_channel", engine="cpu")
    return _x(seed)


@pytest.fixture(params=["in place", "driver", "staging"])
def engine(request, cl_engine, monkeypatch):
    """The OpenCL engine on each host path: kernels on the caller's arrays;
    the discrete path by the driver's copy; pipelined in 4 KiB chunks."""
    if request.param == "in place":
        return OpenCLEngine(queue=cl_engine.queue, host_in_place=True)
    monkeypatch.setenv("CLAYOUT_OPENCL_HOST_PATH", request.param)
    monkeypatch.setenv("CLAYOUT_OPENCL_CHUNK_BYTES", "4096")
    return OpenCLEngine(queue=cl_engine.queue, host_in_place=False)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_call_that_does_not_wait_equals_the_waited_call_and_consumes_its_input(engine, door):
    call = DOORS[door]
    for seed in range(3):   # the first call parses; the next go through its prepared call
        data = _input(door, seed)
        want = call(data, engine)
        pending = call(data, engine, wait=False)
        assert isinstance(pending, Pending)
        data[...] = 0                    # the input is the caller's again at once
        got = pending.result()
        assert pending.done() and pending.result() is got
        assert same_bits(got, want), (door, seed)
        assert same_bits(call(_input(door, seed), "cpu"), want)   # and right


@pytest.mark.parametrize("door", ["to_image", "from_image", "reorder", "from_frame"])
def test_out_given_is_written_when_the_result_is_asked(engine, door):
    call = DOORS[door]
    data = _input(door, 1)
    want = call(data, engine)
    out = np.full_like(want, 7)
    pending = call(data, engine, out=out, wait=False)
    assert pending.result() is out and same_bits(out, want)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_calls_in_flight_from_eight_threads_equal_one_thread(engine, door):
    call = DOORS[door]
    want = {seed: call(_input(door, seed), engine) for seed in range(8)}
    got = {}

    def work(t):
        # each thread keeps three calls in flight, then takes their results in order
        pending = []
        for k in range(6):
            seed = (t + k) % 8
            data = _input(door, seed)
            pending.append((seed, call(data, engine, wait=False)))
            data[...] = 0
            if len(pending) == 3:
                seed0, p = pending.pop(0)
                got[(t, k)] = same_bits(p.result(), want[seed0])
        for seed0, p in pending:
            got[(t, -seed0)] = same_bits(p.result(), want[seed0])
    in_threads(work)
    assert len(got) == 48 and all(got.values())


@pytest.mark.parametrize("what", ["to_image", "reorder", "from_frame"])
def test_prepared_calls_do_not_wait_either(engine, what):
    if what == "to_image":
        conv, data = runtime.prepare.to_image(DIMS, np.float32, "in_out_channel",
                                              engine=engine), _x(2)
    elif what == "reorder":
        conv, data = runtime.prepare.reorder(NCHW, NHWC, engine=engine), _x(2)
    else:
        conv = runtime.prepare.from_frame(FRAME, "in_out_channel", format="nv21", size=(12, 10),
                                          engine=engine)
        data = _frame(2)
    want = conv(data)
    pending = conv(data, wait=False)
    data[...] = 0
    assert same_bits(pending.result(), want)


def test_a_dropped_pending_returns_its_memory_only_once_done(engine):
    """Pendings dropped unfinished: their leases go back to the pool after
    their commands (the pool's next leases, taken at once by the calls
    after, must not be written under a running read back)."""
    want = [runtime.reorder(_x(s), NCHW, NHWC, engine=engine) for s in range(4)]
    for _ in range(3):
        for s in range(4):
            runtime.reorder(_x(s), NCHW, NHWC, engine=engine, wait=False)   # dropped
        gc.collect()
        got = [runtime.reorder(_x(s), NCHW, NHWC, engine=engine, wait=False) for s in range(4)]
        assert all(same_bits(p.result(), w) for p, w in zip(got, want))


def test_host_engines_finish_before_returning():
    """On the host engines a call that does not wait is done when it returns."""
    for name in ("cpu", "reference"):
        p = runtime.reorder(_x(0), NCHW, NHWC, engine=name, wait=False)
        assert p.done() and p.event is None
        assert same_bits(p.result(), runtime.reorder(_x(0), NCHW, NHWC, engine="cpu"))


def test_the_discrete_upload_is_waited_for_on_its_own_queue(cl_engine, monkeypatch):
    """Off a host-unified device the input crosses before the call returns:
    every copy from the caller's array blocks, on the upload queue (so it
    waits for itself, not for the previous call's kernel and read back)."""
    monkeypatch.setenv("CLAYOUT_OPENCL_HOST_PATH", "driver")
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    data = _x(3)
    seen = []
    real = cl.enqueue_copy

    def watching(queue, dest, src, **kw):
        if isinstance(src, np.ndarray) and np.may_share_memory(src, data):
            seen.append((queue, kw.get("is_blocking", True)))
        return real(queue, dest, src, **kw)
    monkeypatch.setattr(cl, "enqueue_copy", watching)
    runtime.reorder(data, NCHW, NHWC, engine=eng, wait=False).result()
    assert seen == [(eng.device.upload_queue, True)]
