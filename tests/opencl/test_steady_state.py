"""What a steady-state call leaves behind on the discrete path
(``host_in_place=False``), counted: frames and outputs make no memory
object and build no program for a new crop or a new output shape, hot ones
are baked off the calling thread, the threshold kernel does one global
atomic a work-group, a tensor result written whole is not filled first,
and the output kernel's work-group size is the engine's choice, not the
driver's."""
from __future__ import annotations

import re

import numpy as np
import pytest

import runtime
from conftest import bits, in_threads, needs

cl = needs("pyopencl")
from runtime.opencl import baking, output, programs  # noqa: E402
from runtime.opencl.engine import OpenCLEngine  # noqa: E402

MODULES = ("runtime/opencl/output.py", "runtime/opencl/frame.py", "runtime/opencl/programs.py",
           "runtime/opencl/baking.py", "runtime/cache.py")


@pytest.fixture
def discrete(cl_engine):
    return OpenCLEngine(queue=cl_engine.queue, host_in_place=False)


class Made:
    """Every cl.Buffer made while it is installed (clayout's own and pyopencl's)."""

    def __init__(self, monkeypatch):
        self.count = 0
        made = self

        class Counting(cl.Buffer):
            def __init__(self, *a, **kw):
                made.count += 1
                super().__init__(*a, **kw)
        monkeypatch.setattr(cl, "Buffer", Counting)


def calling_builds() -> int:
    return programs.STATS["builds"] - programs.STATS["builds_in_background"]


# -- frames -----------------------------------------------------------------------------------
def test_a_moving_crop_into_16_mib_builds_nothing_and_makes_no_buffer(discrete, monkeypatch):
    """1x3x1280x1280 f32 (19.7 MB) from a frame, each call another crop:
    after the first, no program is built (on any thread) and no buffer is
    made (the taps buffer is leased). Before, every crop baked its own
    program at that size and made a taps buffer."""
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (360 * 3 // 2, 640), np.uint8)
    out = np.empty((1, 3, 1280, 1280), np.float32)
    kw = dict(format="nv21", size=(1280, 1280), fit="letterbox", fill=114, scale=1 / 255,
              engine=discrete, out=out)
    runtime.from_frame(frame, "nchw", crop=(0, 0, 600, 340), **kw)
    baking.settle()
    builds, made = programs.STATS["builds"], Made(monkeypatch)
    crops = [(2 * i, i, 600 - 4 * i, 340 - 2 * i) for i in range(1, 4)]
    for crop in crops:
        got = runtime.from_frame(frame, "nchw", crop=crop, **kw).copy()
        want = runtime.from_frame(frame, "nchw", crop=crop, format="nv21", size=(1280, 1280),
                                  fit="letterbox", fill=114, scale=1 / 255, engine="cpu")
        assert np.array_equal(bits(got), bits(want)), crop
    baking.settle()
    assert programs.STATS["builds"] == builds and made.count == 0


def test_a_repeated_crop_is_baked_off_the_calling_thread(discrete):
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (120 * 3 // 2, 160), np.uint8)
    kw = dict(format="nv12", size=(96, 96), crop=(4, 2, 140, 110), engine=discrete)
    first = runtime.from_frame(frame, "nchw", **kw)
    calling = calling_builds()
    for _ in range(discrete.device.options.specialize_after + 2):
        assert np.array_equal(bits(runtime.from_frame(frame, "nchw", **kw)), bits(first))
    baking.settle()
    assert calling_builds() == calling
    assert np.array_equal(bits(runtime.from_frame(frame, "nchw", **kw)), bits(first))


# -- outputs ----------------------------------------------------------------------------------
def _logits(dims, seed=0):
    return np.random.default_rng(seed).standard_normal(dims).astype(np.float32)


def test_a_new_output_shape_builds_nothing(discrete):
    """30 outputs of 30 shapes, one family each kind: one program each kind,
    built by the first call (before: one program per shape, 30 builds)."""
    kinds = [dict(argmax=True), dict(activation="sigmoid", threshold=0.5, top_k=7),
             dict(activation="softmax", dst="nhwc")]
    for kw in kinds:
        runtime.read_output(_logits((1, 5, 4, 3)), "nchw", (1, 5, 4, 3), engine=discrete, **kw)
    builds = programs.STATS["builds"]
    for i in range(30):
        dims = (1 + i % 2, 3 + i, 2 + i % 5, 1 + i % 7)
        x = _logits(dims, i)
        for kw in kinds:
            got = runtime.read_output(x, "nchw", dims, engine=discrete, **kw)
            want = runtime.read_output(x, "nchw", dims, engine="cpu", **kw)
            got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            for g, w in zip(got, want):
                assert g.shape == w.shape and np.abs(g.astype(np.float64) - w).max(initial=0) \
                    <= 1e-6, (dims, kw)
    assert programs.STATS["builds"] == builds


def test_a_hot_output_is_baked_off_the_calling_thread(discrete):
    dims = (1, 21, 64, 64)   # 344 KiB: at least HOT_BYTES
    x = _logits(dims)
    first = runtime.read_output(x, "nchw", dims, argmax=True, engine=discrete)
    side = runtime.MemoryDesc(dims)
    calling = calling_builds()
    for _ in range(discrete.device.options.specialize_after + 2):
        assert np.array_equal(runtime.read_output(x, "nchw", dims, argmax=True,
                                                  engine=discrete), first)
    baking.settle()
    from runtime.algebra.output import output_rule
    plan = output.output_plan(discrete, side, output_rule(dims, "f32", argmax=True))
    assert not plan.kernel.generic and calling_builds() == calling
    assert np.array_equal(runtime.read_output(x, "nchw", dims, argmax=True, engine=discrete),
                          first)


def test_the_threshold_kernel_does_one_global_atomic_a_group():
    """From the kernel text: the selected elements are counted in local
    memory; the one global atomic is taken by the group's first work item."""
    from runtime.algebra.output import output_rule
    dims = (1, 16, 80, 80)
    rule = output_rule(dims, "f32", activation="sigmoid", threshold=0.5, top_k=100)
    text = output.source(runtime.MemoryDesc(dims), rule)
    body = text[text.index(f"__kernel void {output.NAME}"):]
    globals_ = re.findall(r"atomic_\w+\(\s*count\b", body)
    assert globals_ == ["atomic_add(count"], globals_
    assert "atomic_inc" not in body
    guard = body[:body.index("atomic_add(count")].rsplit("\n", 1)[-1]
    assert "get_local_id(0) == 0" in guard
    assert re.search(r"__local int group_n", body) and "atomic_add(&group_n" in body


@pytest.mark.parametrize("tag, fills", [("nhwc", 0), ("nchw", 0), ("nChw4c", 1)])
def test_a_tensor_result_written_whole_is_not_filled(discrete, monkeypatch, tag, fills):
    """nhwc and nchw: every element is the kernel's, no fill; nChw4c of 5
    channels has a padded block the kernel does not write: zeroed."""
    dims = (1, 5, 6, 7)
    x = _logits(dims)
    want = runtime.read_output(x, "nchw", dims, activation="softmax", dst=tag, engine="cpu")
    runtime.read_output(x, "nchw", dims, activation="softmax", dst=tag, engine=discrete)
    seen = []
    real = cl.enqueue_fill_buffer
    monkeypatch.setattr(cl, "enqueue_fill_buffer", lambda *a, **kw: seen.append(a[2]) or
                        real(*a, **kw))
    for _ in range(3):
        got = runtime.read_output(x, "nchw", dims, activation="softmax", dst=tag,
                                  engine=discrete)
        assert got.shape == want.shape and np.abs(got - want).max() <= 1e-6
    # the threshold's counter is the other fill read_output makes; none here
    assert len(seen) == 3 * fills, seen


def test_the_output_kernel_runs_in_groups_the_engine_chose(discrete, monkeypatch):
    dims = (2, 7, 9, 5)
    launched = []
    real = discrete.launcher.run_kernel
    monkeypatch.setattr(discrete.launcher, "run_kernel", lambda *a, **kw: launched.append(
        (a[2], kw.get("local_size"))) or real(*a, **kw))
    runtime.read_output(_logits(dims), "nchw", dims, argmax=True, engine=discrete)
    group = min(output.LOCAL, discrete.device.max_work_group)
    assert launched == [((-(-45 // group) * group, 2), (group, 1))]


def test_a_steady_output_makes_no_memory_object(discrete):
    dims = (1, 6, 10, 12)
    x = _logits(dims)
    calls = [dict(argmax=True), dict(threshold=0.0, top_k=5), dict(activation="sigmoid")]
    for kw in calls:
        runtime.read_output(x, "nchw", dims, engine=discrete, **kw)
    made = dict(discrete.memory.made)
    for _ in range(5):
        for kw in calls:
            runtime.read_output(x, "nchw", dims, engine=discrete, **kw)
    assert dict(discrete.memory.made) == made


def test_outputs_from_many_threads_give_the_single_threaded_results(discrete):
    """Eight threads share the generic plans (and a bake on the way): each
    result equals the single-threaded one."""
    shapes = [(1, 3 + t, 8 + t, 5) for t in range(8)]
    xs = [_logits(d, t) for t, d in enumerate(shapes)]
    kinds = [dict(argmax=True), dict(activation="sigmoid", threshold=0.4, top_k=6)]
    alone = {(t, k): runtime.read_output(xs[t], "nchw", shapes[t], engine=discrete, **kw)
             for t in range(8) for k, kw in enumerate(kinds)}

    def work(t):
        for _ in range(4):
            for k, kw in enumerate(kinds):
                got = runtime.read_output(xs[t], "nchw", shapes[t], engine=discrete, **kw)
                want = alone[(t, k)]
                got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
                assert all(np.array_equal(g, w) for g, w in zip(got, want)), (t, k)
    in_threads(work, 8)


def test_a_top_k_over_the_cap_from_many_threads_reads_its_own_output(discrete):
    """More selected than the buffers hold (CAP) with top_k: the kernel runs
    again with room for all of them, on the output's device copy, which
    must still be the call's own (before, a host array's pooled copy went
    back to the pool first, and another thread's upload could land in it:
    garbage indices)."""
    from runtime.algebra.output import CAP
    dims = (1, 3, 160, 160)   # 76,800 elements, all selected: over the cap of 65,536
    assert np.prod(dims) > CAP
    xs = [(np.arange(np.prod(dims), dtype=np.float32) % (997 + t)).reshape(dims)
          for t in range(8)]
    kw = dict(threshold=-1.0, top_k=5)
    alone = [runtime.read_output(x, "nchw", dims, engine=discrete, **kw) for x in xs]

    def work(t):
        for _ in range(3):
            idx, val = runtime.read_output(xs[t], "nchw", dims, engine=discrete, **kw)
            assert np.array_equal(idx, alone[t][0]) and np.array_equal(val, alone[t][1]), t
    in_threads(work, 8)
