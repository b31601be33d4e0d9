"""The OpenCL engine as a device (runtime/opencl/device.py, memory.py,
moves.py, host.py): a frozen Device record read once, every memory object
made in one place and leased from a bounded pool, a cached MovePlan per
(sides, device), pinned host arrays, and the discrete-device path that a
CPU implementation runs when ``host_in_place=False``.

What a GPU decides is tested by its facts: a Device record with a GPU's
facts (a stand-in) plans what the engine would do there."""
from __future__ import annotations

import dataclasses
import gc
import os

import numpy as np
import pytest

import runtime
from conftest import bits, in_threads, needs
from runtime import ImageDesc, MemoryDesc, image_layout
from runtime import engine as engines
from runtime.errors import ClayoutError

cl = needs("pyopencl")
from runtime.opencl import images, moves, pinned  # noqa: E402
from runtime.opencl.device import Device, EngineOptions  # noqa: E402
from runtime.opencl.engine import OpenCLEngine  # noqa: E402
from runtime.opencl.pool import size_class  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/__init__.py", "runtime/opencl/device.py", "runtime/opencl/images.py",
           "runtime/opencl/pinned.py", "runtime/opencl/pool.py")

DIMS = (1, 17, 6, 5)
X = (np.arange(np.prod(DIMS), dtype=np.float32) % 23 - 11) / 4


@pytest.fixture
def discrete(cl_engine):
    """The engine as a discrete device would run it: host arrays copied to
    device memory and back (USE_HOST_PTR off), on the session's queue."""
    return OpenCLEngine(queue=cl_engine.queue, host_in_place=False)


CALLS = {   # name: (a call on an engine, what it must give)
    "reorder": lambda eng, out: runtime.reorder(X, MemoryDesc(DIMS),
                                                MemoryDesc(DIMS, tag="nChw16c"), engine=eng,
                                                out=out),
    "to_image": lambda eng, out: runtime.to_image(X.reshape(DIMS), "in_out_channel",
                                                  engine=eng, out=out),
    "from_image": lambda eng, out: runtime.from_image(
        runtime.to_image(X.reshape(DIMS), "conv2d_filter", engine="reference"),
        "conv2d_filter", DIMS, dst="nhwc", engine=eng, out=out),
}


def _out(name):
    want = CALLS[name]("reference", None)
    return want, np.empty_like(want)


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("access", ["auto", "direct"])
def test_a_repeated_host_conversion_makes_no_memory_object(cl_engine, name, access):
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False, image_access=access)
    want, out = _out(name)
    CALLS[name](eng, out)
    made = sum(eng.memory.made.values())
    for _ in range(20):
        assert np.array_equal(bits(CALLS[name](eng, out)), bits(want))
    assert sum(eng.memory.made.values()) == made, eng.memory.stats()
    assert eng.memory.stats()["reused"] >= 20


def test_the_pool_bound_holds_under_a_shape_sweep(cl_engine, monkeypatch):
    monkeypatch.setenv("CLAYOUT_OPENCL_POOL_BYTES", str(64 << 10))
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    assert eng.device.pool_bytes == 64 << 10
    for c in (1, 3, 5, 17, 33, 64, 100):
        x = np.ones((1, c, 9, 11), np.float32)
        runtime.to_image(x, "in_out_channel", engine=eng)
        runtime.reorder(x, MemoryDesc(x.shape), MemoryDesc(x.shape, tag="nhwc"), engine=eng)
        assert eng.memory.pool.stats()["bytes"] <= 64 << 10
    assert eng.memory.pool.stats()["released"] > 0
    eng.close()
    assert eng.memory.pool.stats()["objects"] == 0
    assert np.array_equal(runtime.to_image(np.ones((1, 3, 2, 2), np.float32), "in_out_channel",
                                           engine=eng)[..., :3], np.ones((2, 2, 3)))


def test_threads_on_a_discrete_engine_give_the_sequential_bits(discrete):
    names = list(CALLS)
    want = {n: CALLS[n]("reference", None) for n in names}

    def work(t):
        for k in range(12):
            name = names[(t + k) % len(names)]
            out = np.empty_like(want[name]) if k % 2 else None
            assert np.array_equal(bits(CALLS[name](discrete, out)), bits(want[name])), name
    in_threads(work, 8)


@pytest.mark.parametrize("path", ["driver", "staging"])
def test_the_host_paths_give_the_same_bits(cl_engine, monkeypatch, path):
    monkeypatch.setenv("CLAYOUT_OPENCL_HOST_PATH", path)
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    assert moves.host_path(eng.device).pageable == path
    for name in CALLS:
        want, out = _out(name)
        assert np.array_equal(bits(CALLS[name](eng, out)), bits(want)), name
    if path == "staging":
        assert eng.memory.made["pinned"] >= 1


def test_settings_are_read_once_per_engine_and_staging_once_per_plan(cl_engine, monkeypatch):
    """Over 100 calls of one conversion: no CLAYOUT_ variable is read, and
    the image's access (images.unsupported) is decided when its plan is made."""
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    out = np.empty(ImageDesc(image_layout("in_out_channel"), DIMS).array_shape, np.float32)
    runtime.to_image(X.reshape(DIMS), "in_out_channel", engine=eng, out=out)
    reads, asked = [], []

    class Counting(dict):
        def get(self, key, default=None):
            reads.append(key)
            return super().get(key, default)

        def __getitem__(self, key):
            reads.append(key)
            return super().__getitem__(key)

        def __contains__(self, key):
            reads.append(key)
            return super().__contains__(key)
    monkeypatch.setattr(os, "environ", Counting(os.environ))
    real = images.unsupported
    monkeypatch.setattr(images, "unsupported", lambda *a: asked.append(a) or real(*a))
    for _ in range(100):
        runtime.to_image(X.reshape(DIMS), "in_out_channel", engine=eng, out=out)
    assert [k for k in reads if k.startswith("CLAYOUT_")] == [] and asked == []


# -- plans by the device's facts ------------------------------------------------------------
def stand_in(engine, **facts) -> Device:
    """The engine's Device record with other facts (and options)."""
    return dataclasses.replace(engine.device, **facts)


def test_a_gpu_record_plans_direct_images_and_the_discrete_path(cl_engine):
    gpu = stand_in(cl_engine, kind="gpu", host_unified=False, name="stand-in GPU",
                   platform="stand-in")
    image = ImageDesc(image_layout("in_out_channel"), DIMS)
    p = moves.move_plan(MemoryDesc(DIMS), image, gpu)
    assert (p.access, p.host.in_place, p.host.pageable) == ("direct", False, "staging")
    assert (p.host.chunk, p.host.stages) == (moves.CHUNK_BYTES, moves.STAGES)
    assert "image hardware" in p.why and not p.through_buffers
    # both ends host arrays there: the image's dense host form, no image object
    host = moves.move_plan(MemoryDesc(DIMS), image, gpu, dense=True)
    assert (host.access, host.image_object, host.through_buffers) == ("dense", False, True)
    cpu = stand_in(cl_engine, kind="cpu", host_unified=True, name="stand-in CPU",
                   platform="stand-in")
    p = moves.move_plan(MemoryDesc(DIMS), image, cpu)
    assert (p.access, p.host.in_place) == ("staged", True) and "CPU device" in p.why
    # a half one-channel image is staged anywhere; a buffer storage is its buffer
    half = ImageDesc(image_layout("image_2d_weights_c1_b_fyx"), (5, 3, 2, 2), "f16")
    assert moves.move_plan(MemoryDesc((5, 3, 2, 2)), half, gpu).access == "staged"
    flat = ImageDesc(image_layout("tflite_buffer"), DIMS)
    assert moves.move_plan(MemoryDesc(DIMS), flat, gpu).access == "dense"


def test_auto_takes_cpu_for_host_arrays_on_a_discrete_device(cl_engine, monkeypatch):
    from runtime.opencl import engine as cl_module
    fake = OpenCLEngine(queue=cl_engine.queue)
    fake.device = stand_in(fake, kind="gpu", host_unified=False, name="stand-in GPU")
    monkeypatch.setattr(cl_module, "_DEFAULT", fake)
    eng, why = engines.choose_engine("auto")
    assert eng.name == "cpu" and "stand-in GPU is a discrete device" in why
    # a Memory on the device converts there whatever 'auto' says
    mem = runtime.Memory.from_numpy(X, MemoryDesc(DIMS), engine=cl_engine)
    done = runtime.reorder(mem, None, MemoryDesc(DIMS, tag="nhwc"), engine="auto")
    assert done.engine is cl_engine


def test_the_options_are_checked_when_the_engine_is_made(cl_engine, monkeypatch):
    for name, value, words in [("CLAYOUT_OPENCL_TILED", "yes", "CLAYOUT_OPENCL_TILED='yes' is "
                                "not one of 0, 1"),
                               ("CLAYOUT_OPENCL_POOL_BYTES", "-1", "is not a byte count"),
                               ("CLAYOUT_OPENCL_HOST_PATH", "dma", "not one of auto, driver, "
                                "staging")]:
        with monkeypatch.context() as m:
            m.setenv(name, value)
            with pytest.raises(ClayoutError, match=words):
                OpenCLEngine(queue=cl_engine.queue)
    with pytest.raises(ClayoutError, match="image_access 'fast'; allowed: auto, direct, staged"):
        EngineOptions.read("fast")


def test_size_classes():
    assert [size_class(n) for n in (1, 4096, 4097, 32768, 32769, 40000, 1 << 20,
                                    (1 << 20) + 1)] == \
        [4096, 4096, 8192, 32768, 40960, 40960, 1 << 20, (1 << 20) + (1 << 18)]


# -- pinned host arrays ------------------------------------------------------------------------
@pytest.mark.parametrize("in_place", [True, False])
def test_pinned_arrays_convert_and_are_freed(cl_engine, in_place):
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=in_place)
    before = pinned.count()
    src = runtime.empty_pinned(DIMS, "f32", engine=eng)
    out = runtime.empty_pinned(ImageDesc(image_layout("in_out_channel"), DIMS).array_shape,
                               np.float32, engine=eng)
    assert src.shape == DIMS and src.dtype == np.float32 and src.flags.writeable
    assert eng.memory.is_pinned(src) and eng.memory.is_pinned(src[0, 3]) and \
        not eng.memory.is_pinned(X) and pinned.count() == before + 2
    src[...] = X.reshape(DIMS)
    runtime.to_image(src, "in_out_channel", engine=eng, out=out)
    want = runtime.to_image(X.reshape(DIMS), "in_out_channel", engine="reference")
    assert np.array_equal(bits(out), bits(want))
    back = runtime.from_image(out, "in_out_channel", DIMS, engine=eng)
    assert np.array_equal(back, X.reshape(DIMS))
    del src, out
    gc.collect()
    assert pinned.count() == before


def test_empty_pinned_without_a_device_engine_is_a_plain_array():
    a = runtime.empty_pinned((3, 4), np.int8, engine="cpu")
    assert isinstance(a, np.ndarray) and a.shape == (3, 4) and a.dtype == np.int8


# a loop Intel's compiler cannot vectorize: its build log has remarks (pyopencl: a CompilerWarning)
REMARKED = """__kernel void k(__global float *a, int n) {{   // thread {t}
    float s = 0; int i;
    for (i = 0; i < n; i++) {{ s += a[i]; if (s > 10) break; }}
    a[0] = s + i;
}}"""


def test_builds_from_many_threads_stay_quiet(cl_engine):
    """Programs built from many threads at once say nothing (a build log is
    shown only with CLAYOUT_DEBUG=1): the quieting swaps the process's
    warning filters, which two builds at once would restore out of order."""
    import warnings
    from runtime.opencl import programs
    context = cl_engine.context
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        in_threads(lambda t: programs.build(context, REMARKED.format(t=f"{os.getpid()}-{t}")))
    assert [str(w.message)[:80] for w in said] == []
