"""The benchmark runs and its peers agree with the fast path (tiny sizes:
speed is measured by tools/bench.py, never by a test)."""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import bench  # noqa: E402  (tools/bench.py)


def test_cpu_rows_tiny():
    rows = bench.cpu_rows(["tiny"], repeat=1, inner=1)  # asserts naive numpy == fast path
    assert {r["case"] for r in rows} == {name for name, _, _ in bench.CASES}
    assert all(r["cpu"] > 0 and r["memcpy"] > 0 and r["out="] > 0 for r in rows)


@pytest.mark.slow
def test_opencl_rows_tiny(cl_engine):
    import bench_opencl as cl_bench
    lines = []
    rows = cl_bench.run([bench.SIZES["tiny"]], lines.append, engine=cl_engine, repeats=1)
    assert len(rows) == 6 and lines[0].startswith("OpenCL device:")
    assert all(r["ms"] > 0 and r["limit_ms"] > 0 and r["host_out_ms"] > 0 and r["unbaked_ms"] > 0
               for r in rows)
