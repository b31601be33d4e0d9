"""Every cache is bounded (size documented and settable), clearable, and
memory stays flat over many conversions of many shapes."""
import json
import os
import sys

import numpy as np
import pytest

import runtime
from conftest import child_result, start_child
from runtime import ClayoutError, MemoryDesc
from runtime import cache
from runtime.algebra import layout

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/layout.py", "runtime/cache.py", "runtime/cpu/plan.py",
           "runtime/opencl/plan.py", "runtime/opencl/programs.py", "runtime/settings.py",
           "runtime/sources.py")

# the child converts 10,000 times, cycling through 500 distinct shapes and three
# kinds of conversion (in runs of 50, so that a program cache of 2 evicts and
# builds a program again every 50 conversions, not at every one: a build costs
# 25 ms even from PoCL's disk cache), and prints its resident memory after every 1,000
CHILD = """
import json, os, sys
import numpy as np
import runtime
from runtime import MemoryDesc

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

engine = runtime.engine.get(sys.argv[1])
shapes = [(1 + i % 2, 1 + i % 23, 1 + (i // 23) % 5, 1 + i // 115) for i in range(500)]
assert len(set(shapes)) == 500
samples = []
for n in range(10_000):
    dims = shapes[n % 500]
    x = np.full(dims, n % 7, np.float32)
    kind = (n // 50) % 3
    if kind == 0:
        runtime.reorder(x.reshape(-1), MemoryDesc(dims), MemoryDesc(dims, tag="nChw8c"),
                        engine=engine)
    elif kind == 1:
        runtime.to_image(x, "in_out_channel", engine=engine)
    else:
        img = np.zeros(runtime.image_layout("conv2d_filter").array_shape(dims), np.float32)
        runtime.from_image(img, "conv2d_filter", dims, engine=engine)
    if n % 1000 == 999:
        samples.append(rss())
print(json.dumps(samples))
"""
SMALL = {"CLAYOUT_PLAN_CACHE": "40", "CLAYOUT_PLACEMENT_CACHE": "40",
         "CLAYOUT_CPU_PLAN_CACHE": "40", "CLAYOUT_PROGRAM_CACHE": "2",
         "CLAYOUT_SIDES_CACHE": "40"}
FLAT = "test_memory_stays_flat_over_10000_conversions_of_500_shapes"


def _start_flat(name: str, small: bool) -> None:
    env = dict(os.environ, **(SMALL if small else {}))
    if os.path.isdir("/etc/OpenCL/vendors"):
        # the system's implementations only: the child measures clayout's
        # caches on the default device, not what a second runtime the ICD
        # loader also loads (Intel's, from .venv) touches in the meantime
        env["OCL_ICD_VENDORS"] = "/etc/OpenCL/vendors"
    start_child(("flat", name, small), [sys.executable, "-c", CHILD, name], env=env)


def start_early(items):
    """The children of the selected cases of the test below start as soon as
    the run's tests are known (tests/conftest.py): each measures its own
    resident memory, so they run side by side and beside the rest of the
    suite, on another core, and the test only waits for its own."""
    for item in items:
        if getattr(item, "originalname", "") == FLAT:
            _start_flat(item.callspec.params["name"], item.callspec.params["small"])


@pytest.mark.slow
@pytest.mark.parametrize("name, small", [("cpu", False), ("cpu", True), ("opencl", False),
                                         ("opencl", True)])
def test_memory_stays_flat_over_10000_conversions_of_500_shapes(name, small, request):
    """After the first 2,000 conversions (every plan made once; with small
    caches, plans evicted and made again all along) resident memory grows by
    less than 4 MiB over the next 8,000. The baseline is the higher of the
    samples after 1,000 and 2,000 conversions: the allocator sometimes hands
    pages back just then (a dip of 2 MiB was seen), and a dip is not growth;
    a leak still grows over the 8,000 after it. The children start when the
    run starts (``start_early``); the test waits for its own."""
    if name == "opencl":
        request.getfixturevalue("cl_engine")
    _start_flat(name, small)    # a no-op where start_early started it
    done = child_result(("flat", name, small))
    assert done.returncode == 0, done.stderr
    samples = json.loads(done.stdout.strip().splitlines()[-1])
    growth = max(samples[2:]) - max(samples[:2])
    assert growth < 4 << 20, [s >> 20 for s in samples]


def test_every_cache_is_registered_bounded_and_settable(cl_engine, monkeypatch):
    from runtime.cpu import plan as cpu_plan
    from runtime.opencl import plan as cl_plan
    from runtime.opencl import programs
    assert {cpu_plan.PLANS.name, cl_plan.PLANS.name, programs.PROGRAMS.name,
            layout.GEOMETRY.name} <= set(cache.REGISTRY)
    for lru in cache.REGISTRY.values():
        monkeypatch.setattr(lru, "_size", 3)
    cache.clear_all()
    for c in range(1, 12):
        dims = (1, c, 2, 3)
        x = np.ones(dims, np.float32)
        for engine in ("cpu", "opencl"):
            runtime.reorder(x.reshape(-1), MemoryDesc(dims), MemoryDesc(dims, tag="nhwc"),
                            engine=engine)
            runtime.to_image(x, "in_out_height", engine=engine)
    sizes = {lru.name: len(lru) for lru in cache.REGISTRY.values()}
    assert all(n <= 3 for n in sizes.values()), sizes
    used = {cpu_plan.PLANS.name, cl_plan.PLANS.name, programs.PROGRAMS.name, layout.GEOMETRY.name}
    assert all(sizes[name] > 0 for name in used), sizes   # (shapes this small are never hot)
    cl_plan.PLANS.size = 1          # shrinking drops the oldest at once
    assert len(cl_plan.PLANS) == 1
    cache.clear_all()
    assert all(len(lru) == 0 for lru in cache.REGISTRY.values())


def test_least_recently_used_goes_first():
    lru = cache.LRU("test cache", "CLAYOUT_TEST_CACHE", 2)
    try:
        made = []
        for key in ("a", "b", "a", "c", "b"):
            lru.get(key, lambda: made.append(key) or key.upper())
        assert made == ["a", "b", "c", "b"]      # "b" was evicted by "c", made again
        assert lru.keys() == ["c", "b"]
    finally:
        del cache.REGISTRY["test cache"]


@pytest.mark.parametrize("value", ["many", "-1", "1.5"])
def test_a_bad_size_in_the_environment_is_one_clear_error(value, monkeypatch):
    monkeypatch.setenv("CLAYOUT_PLAN_CACHE", value)
    with pytest.raises(ClayoutError, match=r"CLAYOUT_PLAN_CACHE='.*' is not a count"):
        cache.cache_size("CLAYOUT_PLAN_CACHE", 4096)


@pytest.mark.parametrize("value, minimum, want", [
    (None, None, 7), ("12", None, 12), ("-3", None, -3), ("0", 0, 0),
    ("-1", 0, "'-1' is not a count"), ("1.5", None, "'1.5' is not a count"),
    ("", None, "'' is not a count"),
])
def test_env_int_reads_one_whole_number(value, minimum, want, monkeypatch):
    from runtime.settings import env_int
    if value is None:
        monkeypatch.delenv("CLAYOUT_TEST_NUMBER", raising=False)
    else:
        monkeypatch.setenv("CLAYOUT_TEST_NUMBER", value)
    if isinstance(want, int):
        assert env_int("CLAYOUT_TEST_NUMBER", 7, "a count", minimum) == want
    else:
        with pytest.raises(ClayoutError, match=f"CLAYOUT_TEST_NUMBER={want}"):
            env_int("CLAYOUT_TEST_NUMBER", 7, "a count", minimum)


def test_a_cache_bounded_in_bytes_holds_its_budget():
    lru = cache.LRU("test weighed cache", "CLAYOUT_TEST_CACHE", 100, weigh=len, budget=10)
    try:
        for key in ("aaaa", "bbbb", "cc", "dddd"):
            lru.get(key, lambda: key)
            assert lru.bytes <= 10
        assert lru.keys() == ["bbbb", "cc", "dddd"] and lru.bytes == 10
        lru.budget = 6                # shrinking drops the oldest at once
        assert lru.keys() == ["cc", "dddd"] and lru.bytes == 6
        lru.clear()
        assert lru.bytes == 0 and len(lru) == 0
    finally:
        del cache.REGISTRY["test weighed cache"]


def test_what_is_cheapest_to_make_again_goes_first():
    """With costs: the cheap entry goes before older dear ones; a dear entry
    unused for long enough goes too (the floor rises with every eviction)."""
    lru = cache.LRU("test costed cache", "CLAYOUT_TEST_CACHE", 3, cost=lambda v: v)
    try:
        for key, cost in (("dear", 10.0), ("cheap", 0.1), ("mid", 1.0)):
            lru.get(key, lambda c=cost: c)
        lru.get("new", lambda: 1.0)                  # full: the cheapest goes, not the oldest
        assert sorted(lru.keys()) == ["dear", "mid", "new"]
        for i in range(40):                          # "dear" unused while others come and go
            lru.get(("other", i), lambda: 1.0)
        assert "dear" not in lru.keys()
    finally:
        del cache.REGISTRY["test costed cache"]


def test_a_full_program_cache_builds_nothing_on_the_calling_thread(cl_engine, monkeypatch):
    """Three families, each with two hot shapes (baked off the calling thread),
    in a program cache of five: nine programs for five places. The baked
    ones are given up first (their generic program serves, and they are
    baked again off the thread), so after the first rounds no calling
    thread builds. A plain least-recently-used cache gave up generic
    programs too, and the loop rebuilt them on the calling thread."""
    from runtime.opencl import baking, programs
    from runtime.opencl.engine import OpenCLEngine
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "1")
    eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    programs.PROGRAMS.clear()   # five places for this test's programs alone
    monkeypatch.setattr(programs.PROGRAMS, "_size", 5)
    calls = []
    for c in (64, 72):                      # 256 KiB and more: hot after one call
        dims = (1, c, 32, 32)
        x = np.ones(dims, np.float32)
        calls += [lambda x=x, d=dims: runtime.reorder(x, MemoryDesc(d), MemoryDesc(d, tag="nhwc"),
                                                      engine=eng),
                  lambda x=x, d=dims: runtime.reorder(x, MemoryDesc(d),
                                                      MemoryDesc(d, tag="nChw8c"), engine=eng),
                  lambda x=x: runtime.to_image(x, "in_out_channel", engine=eng)]

    def calling():
        return programs.STATS["builds"] - programs.STATS["builds_in_background"]
    for _ in range(3):                      # warm: generic programs, bakes, first evictions
        for call in calls:
            call()
        baking.settle()
    before = calling()
    for _ in range(6):
        for call in calls:
            call()
        baking.settle()
    assert calling() == before and len(programs.PROGRAMS) <= 5
