"""The benchmark runs and its peers agree with the fast path (tiny sizes:
speed is measured by tools/bench.py, never by a test)."""
import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import bench  # noqa: E402  (tools/bench.py)

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/", "runtime/cli/bench.py")


def test_cpu_rows_tiny():
    rows = bench.cpu_rows(["tiny"], repeat=1, inner=1)  # asserts naive numpy == fast path
    assert {r["case"] for r in rows} == {name for name, _, _ in bench.CASES}
    assert all(r["cpu"] > 0 and r["memcpy"] > 0 and r["out="] > 0 for r in rows)


def test_path_rows_tiny_without_onednn():
    """The compiled and numpy paths agree (the rows assert it); without
    oneDNN a line says why and its column stays empty."""
    lines = []
    rows = bench.path_rows(["tiny", "tiny64"], repeat=1, report=lines.append,
                           peer="oneDNN not loaded: a test")
    assert lines[0].startswith("oneDNN: oneDNN not loaded: a test; cpu engine: ")
    cases = bench.IMAGE_CASES + bench.PEER_CASES
    assert [r["case"] for r in rows] == [f"{s}->{d}" for s, d in cases]
    assert all("onednn" not in r and r["clayout"] > 0 and r["numpy"] > 0 for r in rows)


@pytest.mark.slow
def test_onednn_peer_agrees_bit_for_bit(monkeypatch):
    """oneDNN's reorder primitive (the PyPI wheel's library through ctypes,
    fetched into the tests' cache) gives the bits of both paths."""
    import bench_onednn
    from conftest import cache_folder, fetched
    monkeypatch.setenv("CLAYOUT_BENCH_CACHE", cache_folder())
    peer = fetched("oneDNN's library", lambda cache: bench_onednn.load())
    if isinstance(peer, str):
        pytest.fail(peer)
    lines = []
    rows = bench.path_rows(["tiny64"], repeat=1, report=lines.append, peer=peer)
    assert lines[0].startswith(f"oneDNN: {peer.version}") and len(rows) == 4
    assert all(r["onednn"] > 0 for r in rows) and lines[-1].startswith("geomean clayout / oneDNN")


@pytest.mark.slow
def test_opencl_rows_tiny(cl_engine):
    import bench_opencl as cl_bench
    lines = []
    rows = cl_bench.run([bench.SIZES["tiny"]], lines.append, engine=cl_engine, repeats=1)
    assert len(rows) == 6 and lines[0].startswith("OpenCL device:")
    assert all(r["ms"] > 0 and r["limit_ms"] > 0 and r["host_out_ms"] > 0 and r["unbaked_ms"] > 0
               and r["direct_ms"] > 0 and r["tiled_ms"] > 0 for r in rows)
    # both families timed; the device's choice is one of them (direct on a CPU device)
    assert {r["family"] for r in rows} <= {"direct", "tiled"}
    assert "kernel family:" in lines[0] and "| family |" in lines[1]
    # the access model's prediction beside each (the H100 record's on a CPU device)
    assert "| h100 model % |" in lines[1] or cl_engine.device.kind == "gpu"
    assert all(0 < r["model_pct"] <= 100 for r in rows)


@pytest.mark.slow
def test_model_start_up_says_where_the_time_goes(cl_engine):
    """One new process per run kind on the packaged sample model: each
    start-up's phases are measured, none negative, and together within the
    process's wall time; the table names every phase."""
    import bench_model
    path = str(ROOT / "runtime" / "data" / "sample_cnn.onnx")
    up = bench_model.start_up(path, "f32", 1, opencl=True)
    assert set(up["phases"]) == {"cpu", "cold", "warm"} and up["builds"] >= 1
    for runs in up["phases"].values():
        (run,) = runs
        assert set(run["phases"]) == set(bench_model.PHASES)
        assert all(v >= 0 for v in run["phases"].values())
        assert sum(run["phases"].values()) <= run["seconds"]
    assert up["phases"]["cold"][0]["phases"]["builds"] > 0 == up["phases"]["cpu"][0]["phases"][
        "builds"]
    lines = []
    bench_model.phase_table(up["phases"], lines.append)
    assert [line.split(" |")[0] for line in lines[3:]] == \
        [f"| {name}" for name in bench_model.PHASES] + ["| interpreter"]


def test_frame_rows_tiny_cpu(monkeypatch):
    """The frame case on the cpu engine (its checks: from_frame agrees with
    itself on every door, and with the cv2 chain within its rounding), and
    without cv2 (those rows left out, a line says so)."""
    import bench_frame
    lines = []
    (row,) = bench_frame.rows(["tiny"], repeat=1, inner=1, opencl=False, report=lines.append)
    want = {"from_frame cpu out=", "from_frame cpu", "moving crop cpu"}
    if bench_frame._cv2() is not None:
        want |= {"chain cpu", "cv2 alone"}
        assert set(bench_frame.ratios(row["ms"])) == {"chain / from_frame, cpu",
                                                     "from_frame(cpu) / cv2 alone",
                                                     "moving crop / repeated, cpu"}
    assert set(row["ms"]) == want and all(v > 0 for v in row["ms"].values())
    bench_frame.print_table([row], lines.append)
    assert lines[0].split()[:2] == ["size", "call"]
    monkeypatch.setattr(bench_frame, "_cv2", lambda: None)
    lines = []
    (row,) = bench_frame.rows(["tiny"], repeat=1, inner=1, opencl=False, report=lines.append)
    assert set(row["ms"]) == {"from_frame cpu out=", "from_frame cpu", "moving crop cpu"}
    assert lines[0].startswith("cv2 not installed")


@pytest.mark.slow
def test_frame_rows_tiny_opencl(cl_engine):
    """The frame case with the opencl rows: the host frame on each engine and
    the frame already on the device agree bit for bit (checked by the bench)."""
    import bench_frame
    (row,) = bench_frame.rows(["tiny"], repeat=1, inner=1, engine=cl_engine, report=print)
    assert {"from_frame opencl out=", "from_frame opencl", "device frame"} <= set(row["ms"])
    assert all(v > 0 for v in row["ms"].values())


def test_output_rows_tiny(cl_engine):
    """The output case: read_output against from_image + numpy on each engine,
    with a ratio line per engine and the bytes read back."""
    import bench_output
    lines = []
    ratios = bench_output.run(repeat=1, inner=1, opencl=cl_engine, cases=("tiny",),
                              out=lines.append)
    assert set(ratios) == {("tiny", "cpu"), ("tiny", "opencl")}
    assert all(r > 0 for r in ratios.values())
    assert any("read back: 256 bytes of the result" in line for line in lines), lines


def test_clayout_bench_finds_the_checkouts_tools(capsys):
    """`clayout bench` runs tools/bench.py of the checkout it runs from (it
    looked in runtime/ and always said the build had none)."""
    from runtime.cli.bench import bench_script
    from conftest import run
    assert bench_script() == ROOT / "tools" / "bench.py"
    code, out, err = run(capsys, "bench", "--help")
    assert code == 0 and "ratios against the copy limit" in out, err


@pytest.mark.slow
def test_gpu_check_runs_here(default_cl_engine, tmp_path, capsys):
    """tools/gpu_check.py, the one command a lent GPU runs, runs on this
    machine's device too (its tiny sizes): every section, both families,
    the model's prediction beside each move, the JSON it leaves."""
    import gpu_check
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--quick", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for section in ("## Programs", "## Moves", "## Image footprints"):
        assert section in text
    found = json.loads(out.read_text())
    assert len(found["moves"]) == len(gpu_check.MOVES)
    assert all(r["direct"] > 0 and r["tiled"] > 0 and 0 < r["model"] <= 1
               for r in found["moves"])
    assert {r["footprint"] for r in found["footprints"]} == set(gpu_check.FOOTPRINTS)
    assert {r["family"] for r in found["programs"]} == {"direct", "tiled"}


@pytest.mark.slow
def test_discrete_frame_and_output_rows_tiny(cl_engine):
    """The discrete path's rows (tools/bench_discrete.py) run, agree between
    pageable and pinned arrays, and print each path against its floors."""
    import bench_discrete
    from runtime.opencl.engine import OpenCLEngine
    engine = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    lines = []
    ms = bench_discrete.frame_rows(1, 1, lines.append, engine=engine,
                                   case=((64, 48), (32, 32)))
    assert set(ms) == {"repeated", "pinned", "moving crop", "two in turn", "two in flight",
                       "pageable floor", "pinned floor"}
    assert all(v > 0 for v in ms.values()) and "moving crop / repeated" in lines[-1]
    assert "two in flight / two in turn" in lines[-1]
    found = bench_discrete.output_rows(["tiny"], 1, 1, lines.append, engine=engine)
    assert found["tiny"]["read_output"] > 0 and "pinned floor" in lines[-1]


@pytest.mark.slow
def test_the_soak_runs_and_reports(cl_engine):
    """tools/soak.py for two seconds on two threads: no error, a line of
    memory and rate, and the summary."""
    import soak
    from runtime.opencl.engine import OpenCLEngine
    engine = OpenCLEngine(queue=cl_engine.queue, host_in_place=False)
    lines = []
    result = soak.soak(engine, 2 / 60, 2, False, 1.0, lines.append)
    assert result["errors"] == [] and result["calls"] > 0 and result["samples"]
    soak.summary(result, lines.append)
    assert lines[-1].startswith("memory: peak ")
