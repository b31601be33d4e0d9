"""The cpu engine's path, chosen once per engine (runtime/cpu/engine.py
``CpuEngine(path=...)``): CLAYOUT_CPU is read when an engine is made and
never per call; each reorder looks its plan up once; engines on the two
paths give the same bits and never share a plan; a bad path is refused with
the allowed values; and both paths run on the one worker pool
(runtime/cpu/pool.py), the library starting no threads of its own."""
import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import runtime
from conftest import ROOT, same_bits
from runtime import ClayoutError, MemoryDesc
from runtime.cpu import plan as cpu_plan
from runtime.cpu.engine import CpuEngine

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cpu/__init__.py", "runtime/cpu/copy.py", "runtime/cpu/engine.py",
           "runtime/cpu/geometry.py", "runtime/cpu/plan.py", "runtime/doors/prepared_call.py")

DIMS = (1, 19, 23, 29)
PATHS = ("compiled", "numpy")


class CountedEnviron(collections.abc.MutableMapping):
    """os.environ, counting the reads of each name."""

    def __init__(self, env):
        self.env, self.reads = env, collections.Counter()

    def __getitem__(self, name):
        self.reads[name] += 1
        return self.env[name]

    def __contains__(self, name):
        self.reads[name] += 1
        return name in self.env

    def __setitem__(self, name, value):
        self.env[name] = value

    def __delitem__(self, name):
        del self.env[name]

    def __iter__(self):
        return iter(self.env)

    def __len__(self):
        return len(self.env)

    def copy(self):
        return dict(self.env)


def calls(eng):
    """name -> one call of each door on ``eng`` through the public API: a
    reorder (one that goes via a plain intermediate too), to_image, from_image."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(DIMS).astype(np.float32)
    nchw, nhwc = MemoryDesc(DIMS, tag="nchw"), MemoryDesc(DIMS, "f16", tag="nhwc")
    blocked = MemoryDesc((2, 24, 3), tag="aBc8b"), MemoryDesc((2, 24, 3), tag="aBc3b")
    y = rng.standard_normal(blocked[0].span).astype(np.float32)
    image = runtime.to_image(x, "in_out_channel", engine="reference")
    return {
        "reorder": lambda: runtime.reorder(x.reshape(-1), nchw, nhwc, engine=eng),
        "reorder via": lambda: runtime.reorder(y, *blocked, engine=eng),
        "to_image": lambda: runtime.to_image(x, "in_out_channel", engine=eng),
        "from_image": lambda: runtime.from_image(image, "in_out_channel", DIMS, engine=eng),
    }


@pytest.mark.parametrize("path", PATHS)
def test_the_path_is_read_when_the_engine_is_made_and_never_per_call(path, monkeypatch):
    monkeypatch.setenv("CLAYOUT_CPU", path)
    counted = CountedEnviron(os.environ)
    monkeypatch.setattr(os, "environ", counted)
    eng = CpuEngine()
    assert eng.path == path and counted.reads["CLAYOUT_CPU"] == 1
    doors = calls(eng)
    for call in doors.values():
        call()                      # warm: the library loaded, the plans made
    monkeypatch.setenv("CLAYOUT_CPU", "numpy" if path == "compiled" else "compiled")
    counted.reads.clear()
    for call in doors.values():
        call()
    f = np.random.default_rng(1).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    runtime.from_frame(f, "in_out_channel", format="rgb", size=(20, 16), engine=eng)
    runtime.read_output(np.ones((1, 5, 3, 4), np.float32), "nchw", (1, 5, 3, 4), argmax=True,
                        engine=eng)
    assert not [name for name in counted.reads if name.startswith("CLAYOUT_CPU")], counted.reads
    assert eng.path == path


@pytest.mark.parametrize("path", PATHS)
def test_one_plan_lookup_per_reorder_on_a_warm_plan(path, monkeypatch):
    eng = CpuEngine(path)
    doors = calls(eng)
    for call in doors.values():
        call()
    looked = []
    real = cpu_plan.PLANS.get
    monkeypatch.setattr(cpu_plan.PLANS, "get", lambda key, make: looked.append(key) or
                        real(key, make))
    for name, call in doors.items():
        looked.clear()
        call()   # a door's call kept under its signature holds its plan: no lookup at all
        assert len(looked) <= 1, (name, len(looked))


def test_the_two_paths_give_the_same_bits_and_never_share_a_plan():
    compiled, numpy_path = CpuEngine("compiled"), CpuEngine(path="numpy")
    a, b = (calls(e) for e in (compiled, numpy_path))
    for name in a:
        assert same_bits(a[name](), b[name]()), name
    rng = np.random.default_rng(7)
    for src_tag, dst_tag, dts in (("nchw", "nChw16c", ("f32", "bf16")),
                                  ("nhwc", "nchw", ("s8", "f32")),
                                  ("nChw8c", "nhwc", ("f16", "f16"))):
        src, dst = MemoryDesc(DIMS, dts[0], tag=src_tag), MemoryDesc(DIMS, dts[1], tag=dst_tag)
        x = (rng.standard_normal(src.span) * 60).astype(src.dtype.np)
        got = [runtime.reorder(x, src, dst, engine=e) for e in (compiled, numpy_path)]
        assert same_bits(*got), (src_tag, dst_tag, dts)
        plans = [e.plan(src, dst) for e in (compiled, numpy_path)]
        assert plans[0] is not plans[1]
        assert plans[0].method == "compiled" != plans[1].method


def test_a_bad_path_names_the_allowed_ones():
    for bad in ("fast", "Numpy", ""):
        with pytest.raises(ClayoutError, match=r"cpu path .* is not one of auto, compiled, numpy"):
            CpuEngine(bad)


POOL = textwrap.dedent("""
    import os, threading
    import numpy as np
    import runtime
    from runtime import MemoryDesc
    from runtime.cpu import geometry
    from runtime.cpu.engine import CpuEngine
    dims = (1, 64, 96, 96)        # over SMALL_BYTES and SMALL_ELEMS: parts on the pool
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32).reshape(-1)
    got = [runtime.reorder(x, MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc"),
                           engine=CpuEngine(path)) for path in ("compiled", "numpy")]
    assert np.array_equal(*got)
    pool = [t.name for t in threading.enumerate() if t.name.startswith("clayout-cpu")]
    print(len(os.listdir("/proc/self/task")), threading.active_count(), len(pool),
          geometry.THREADS)
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_both_paths_run_on_one_pool_and_the_library_starts_no_thread():
    """In a child (numpy's BLAS held to one thread): after a compiled and a
    numpy conversion cut into parts, every thread of the process is a Python
    thread, the pool's at most THREADS - 1 of them."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", POOL], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    tasks, python, pool, threads = map(int, done.stdout.split())
    assert tasks == python and pool <= max(1, threads - 1), done.stdout
