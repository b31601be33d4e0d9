"""clayout model plans, then converts (runtime.model.plan): the plan
equals the real run tensor by tensor, ``--dry-run`` prints it and writes
nothing, other formats are named, a truncated external data file says what
it holds, and a ``--winograd`` that takes no filter says why.
"""
import dataclasses
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from runtime import model
from runtime.model.manifest import read_manifest
from runtime.model.report import totals

from conftest import needs  # noqa: E402
onnx = needs("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from conftest import run, with_facts

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/__init__.py", "runtime/model/plan.py", "runtime/model/report.py")

DATA = Path(__file__).resolve().parents[2] / "runtime" / "data"
SAMPLE = DATA / "sample_cnn.onnx"
QUANTIZED = DATA / "sample_quantized.onnx"


def files(folder):
    """Every name in ``folder``, hidden ones too (a temporary file starts with a dot)."""
    return sorted(p.name for p in folder.iterdir())


def same_as_the_real_run(tmp_path, path, **options):
    """The plan of ``path`` against the manifest ``convert_file`` writes with
    the same options: every stored tensor's name, role, layout, dims, dtype,
    image size and bytes, every skipped name, and the whole manifest."""
    plan, sources = model.plan_file(str(path), model.Options(engine="cpu", **options))
    out = tmp_path / "real.safetensors"
    manifest, _ = model.convert_file(str(path), str(out), engine="cpu", verify_all=True,
                                     **options)
    _, written = read_manifest(out)
    assert written == manifest
    assert len(plan.stored) == len(manifest["tensors"])
    for p, e in zip(plan.stored, manifest["tensors"]):
        assert (p.name, p.role, p.layout, list(p.dims), p.dtype, p.bytes) == \
            (e["name"], e["role"], e["layout"], e["dims"], e["dtype"], e["bytes"]), p.name
        if p.kind == "image":
            assert list(p.size) == e["size"], p.name
            assert len(p.tiles) == len(e.get("tiles", ())), p.name
    assert [p.name for p in plan.skipped] == [s["name"] for s in manifest["skipped"]]
    assert [p.reason for p in plan.skipped] == [s["reason"] for s in manifest["skipped"]]
    assert plan.manifest() == manifest
    assert list(sources) == [p.name for p in plan.stored]
    return plan, manifest


@pytest.mark.parametrize("path, options", [
    (SAMPLE, {}),
    (SAMPLE, {"dtype": "f16"}),
    (SAMPLE, {"max_image": (8, 8)}),                      # a fallback and three tiled weights
    (SAMPLE, {"max_image": (8, 8), "tiles": False, "keep_buffers": True}),   # buffers
    (SAMPLE, {"winograd": "mace"}),
    (QUANTIZED, {"keep_buffers": True}),                  # its activations' scales: buffers
    (QUANTIZED, {"quantized": "keep", "keep_buffers": True}),
], ids=["sample", "f16", "tiles", "buffers", "winograd", "quantized", "quantized-keep"])
def test_the_plan_is_the_real_run(tmp_path, path, options):
    plan, manifest = same_as_the_real_run(tmp_path, path, **options)
    kinds = {p.kind for p in plan.placements}
    assert kinds >= {"image", "skipped"}
    if options.get("keep_buffers"):
        assert "buffer" in kinds and all(p.reason for p in plan.stored if p.kind == "buffer")


def test_the_plan_of_ppocr_det_is_the_real_run(tmp_path, capsys, ppocr):
    plan, manifest = same_as_the_real_run(tmp_path, ppocr["det"], keep_buffers=True)
    assert len(plan.stored) == 129 + 207 and sum(p.bytes for p in plan.stored) == \
        sum(e["bytes"] for e in manifest["tensors"])
    before = files(tmp_path)
    code, out, err = run(capsys, "model", ppocr["det"], "--dry-run", "--engine", "cpu",
                         "--keep-buffers")
    assert code == 0, err
    assert out.splitlines()[-1] == f"dry run, nothing written: {totals(manifest)}"
    assert files(tmp_path) == before


def test_placements_are_frozen_and_hold_no_arrays():
    plan, sources = model.plan_file(str(SAMPLE))
    p = plan.stored[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.layout = "argument"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.placements = ()
    for q in plan.placements:
        assert not any(isinstance(getattr(q, f.name), np.ndarray) for f in dataclasses.fields(q))
    assert isinstance(sources[p.name], np.ndarray)


# -- --dry-run ---------------------------------------------------------------------------------
def _totals(line, head):
    assert line.startswith(head + ": "), line
    return line[len(head) + 2:]


@pytest.mark.parametrize("extra", [[], ["--max-image", "8,8"], ["--dtype", "f16"],
                                   ["--winograd", "mace"]])
def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys, extra):
    before = files(tmp_path)
    code, out, err = run(capsys, "model", SAMPLE, "--dry-run", *extra)
    assert code == 0 and err == "", err
    assert files(tmp_path) == before
    lines = out.splitlines()
    assert lines[0].split() == ["name", "role", "layout", "dims", "image", "dtype", "bytes",
                                "reason"]
    for name in ("conv1.weight", "fc.weight", "flatten.shape", "fc.weight_io"):
        assert any(line.startswith(name + " ") for line in lines), name
    skipped = [line for line in lines if " skipped " in line]
    assert len(skipped) == 2 and "only float weights go on images" in skipped[0]
    planned = _totals(lines[-1], "dry run, nothing written")

    target = tmp_path / "w.safetensors"
    code, out, err = run(capsys, "model", SAMPLE, "--dry-run", "-o", target, *extra)
    assert code == 0 and _totals(out.splitlines()[-1], f"would write {target}") == planned
    assert files(tmp_path) == before                    # no output, no temporary file

    code, out, err = run(capsys, "model", SAMPLE, "-o", target, *extra)
    assert code == 0, err
    assert _totals(next(line for line in out.splitlines() if line.startswith("wrote ")),
                   f"wrote {target}") == planned
    assert files(tmp_path) == before + ["w.safetensors"]


def test_dry_run_leaves_an_existing_output_alone(tmp_path, capsys):
    target = tmp_path / "w.safetensors"
    target.write_bytes(b"old")
    code, out, _ = run(capsys, "model", SAMPLE, "-o", target, "--dry-run", "--quiet")
    assert code == 0 and out == ""
    assert target.read_bytes() == b"old" and files(tmp_path) == ["w.safetensors"]


def test_dry_run_says_why_a_tensor_is_a_buffer(tmp_path, capsys):
    code, out, _ = run(capsys, "model", SAMPLE, "--dry-run", "--max-image", "8,8", "--no-tiles",
                       "--keep-buffers")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("pw3.weight "))
    assert "buffer abcd" in row and "no filter layout fits" in row
    assert ", 3 buffers (" in out.splitlines()[-1]


@pytest.mark.parametrize("argv, words", [
    (["--dry-run", "--verify"], "--verify reads back what the conversion writes, and --dry-run"),
    ([], "give -o OUT.safetensors to write the converted weights, or --dry-run"),
    (["--dry-run", "-o", "w.npy"], "clayout model writes a safetensors file"),
])
def test_dry_run_refusals(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "model", SAMPLE, *argv)
    assert code == 1 and err.startswith("clayout: error: ") and err.count("\n") == 1, err
    assert words in err and files(tmp_path) == []


# -- other formats -------------------------------------------------------------------------------
def _safetensors(path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))


def _zip(path, member):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, b"\x80\x02}q\x00.")


MAKERS = {
    "m.pt": (lambda p: _zip(p, "m/data.pkl"), "is a PyTorch checkpoint (a zip archive)"),
    "m.zip": (lambda p: _zip(p, "notes.txt"), "is a zip archive"),
    "m.npy": (lambda p: np.save(p, np.zeros(3, np.float32)), "is a NumPy .npy array"),
    "m.safetensors": (_safetensors, "is a safetensors file"),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_other_formats_are_named(tmp_path, capsys, name):
    make, words = MAKERS[name]
    make(tmp_path / name)
    before = files(tmp_path)
    for extra in (["--dry-run"], ["-o", tmp_path / "o.safetensors"]):
        code, _, err = run(capsys, "model", tmp_path / name, *extra)
        assert code == 1 and err.count("\n") == 1, err
        assert err == (f"clayout: error: {tmp_path / name} {words}, not an ONNX model; "
                       "clayout model reads ONNX (.onnx) and TensorFlow Lite (.tflite) models\n")
        assert files(tmp_path) == before


def test_a_clayout_output_is_not_a_model(tmp_path, capsys):
    out = tmp_path / "w.safetensors"
    model.convert_file(str(SAMPLE), str(out))
    code, _, err = run(capsys, "model", out, "--dry-run")
    assert code == 1 and "w.safetensors is a safetensors file, not an ONNX model" in err


# -- truncated external data --------------------------------------------------------------------
def test_truncated_external_data_says_what_the_file_holds(tmp_path, capsys):
    w0 = np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3)
    w1 = np.ones((64, 64, 4, 4), np.float32)                 # 262144 bytes
    nodes = [helper.make_node("Conv", ["x", "w0"], ["y0"], name="c0"),
             helper.make_node("Conv", ["y0", "w1"], ["y"], name="c1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w1, "w1")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.external_data_helper.convert_model_to_external_data(m, location="w.bin",
                                                             size_threshold=0)
    onnx.save_model(m, str(tmp_path / "m.onnx"))
    saved = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    offset = int({e.key: e.value for e in saved.graph.initializer[1].external_data}["offset"])
    data = (tmp_path / "w.bin").read_bytes()
    (tmp_path / "w.bin").write_bytes(data[:offset + 101632])
    before = files(tmp_path)
    code, _, err = run(capsys, "model", tmp_path / "m.onnx", "-o", tmp_path / "o.safetensors")
    assert code == 1 and err.count("\n") == 1, err
    assert (f"tensor 'w1' with dims (64, 64, 4, 4) needs 262144 bytes of external data from "
            f"offset {offset} of 'w.bin', a {offset + 101632}-byte file that holds only 101632 "
            "bytes from that offset") in err
    assert "offers" not in err and files(tmp_path) == before


def test_an_external_data_length_that_is_not_the_tensors(tmp_path, capsys):
    w = np.ones((4, 3, 3, 3), np.float32)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.external_data_helper.convert_model_to_external_data(m, location="w.bin",
                                                             size_threshold=0)
    onnx.save_model(m, str(tmp_path / "m.onnx"))
    saved = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    for entry in saved.graph.initializer[0].external_data:
        if entry.key == "length":
            entry.value = "100"
    (tmp_path / "m.onnx").write_bytes(saved.SerializeToString())
    code, _, err = run(capsys, "model", tmp_path / "m.onnx", "--dry-run")
    assert code == 1 and ("tensor 'w' with dims (4, 3, 3, 3) needs 432 bytes of external data, "
                          "but its external data entry says length 100 at offset 0 of 'w.bin'"
                          ) in err


# -- images the cpu engine converts ------------------------------------------------------------------
def test_dry_run_says_which_images_the_host_converts(tmp_path, capsys, monkeypatch, default_cl_engine):
    from runtime.algebra.storage import Limits
    with_facts(monkeypatch, default_cl_engine, limits=Limits.of((8, 8)))   # the build machine's
    argv = ["model", SAMPLE, "--engine", "opencl", "--max-image", "64,64"]
    code, out, err = run(capsys, *argv, "--dry-run")
    assert code == 0, err
    rows = [line for line in out.splitlines()
            if line.endswith("over the opencl device's limit: converted on the host")]
    assert [row.split()[0] for row in rows] == ["conv1.weight", "dw2.weight", "pw3.weight",
                                                "fc.weight"]
    assert out.splitlines()[-1].startswith("note: 4 image(s) over the opencl device's 8x8 limit "
                                           "(--max-image 64,64 is the target's) would be converted")
    planned = out.splitlines()[-2].split(": ", 1)[1]
    code, out, err = run(capsys, *argv, "-o", tmp_path / "w.safetensors")
    assert code == 0, err
    assert f"wrote {tmp_path / 'w.safetensors'}: {planned}" in out.splitlines()
    _, manifest = read_manifest(tmp_path / "w.safetensors")
    assert manifest["host_converted"] == ["conv1.weight", "dw2.weight", "pw3.weight",
                                          "fc.weight"]


# -- --winograd that takes nothing -----------------------------------------------------------------
def _notes(out):
    return [line for line in out.splitlines() if line.startswith("note: ")]


def test_winograd_with_no_eligible_filter_says_why(tmp_path, capsys):
    code, plain, _ = run(capsys, "model", SAMPLE, "-o", tmp_path / "a.safetensors")
    code, out, err = run(capsys, "model", SAMPLE, "-o", tmp_path / "b.safetensors",
                         "--winograd", "winograd_2x5_mnn")
    assert code == 0, err
    notes = _notes(out)
    assert notes == [
        "note: --winograd winograd_2x5_mnn: no Conv filter qualified, so no Winograd image: its "
        "layouts take float Conv filters of a square 5x5 kernel, with strides 1, dilations 1 and "
        "group 1, read by Conv nodes only; here 'conv1.weight': a 3x3 kernel; 'dw2.weight': "
        "depthwise (group 8); 'pw3.weight': a 1x1 kernel; every weight is placed as without "
        "--winograd"]
    # the table and summary as without --winograd; the manifest adds only the option's name
    assert out.replace(notes[0] + "\n", "").replace("b.safetensors", "a.safetensors") == plain
    _, a = read_manifest(tmp_path / "a.safetensors")
    _, b = read_manifest(tmp_path / "b.safetensors")
    assert b.pop("winograd") == "winograd_2x5_mnn" and a == b
    code, out, _ = run(capsys, "model", SAMPLE, "--dry-run", "--winograd", "winograd_2x5_mnn")
    assert _notes(out) == notes
    code, out, _ = run(capsys, "model", SAMPLE, "--dry-run", "--winograd", "mace")
    assert _notes(out) == []                              # conv1.weight qualifies


def test_winograd_note_names_strides_and_dilations(tmp_path, capsys):
    w = np.ones((4, 3, 3, 3), np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="down", strides=[2, 2]),
             helper.make_node("Conv", ["y", "v"], ["z"], name="wide", dilations=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         None)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"),
                               numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "v")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              str(tmp_path / "m.onnx"))
    code, out, err = run(capsys, "model", tmp_path / "m.onnx", "--dry-run", "--winograd", "mnn")
    assert code == 0, err
    (note,) = _notes(out)
    assert "square 3x3 or 5x5 kernel" in note
    assert "'w': strides 2,2 (Conv down input 1); 'v': dilations 2,2 (Conv wide input 1)" in note


def test_long_names_are_cut_to_the_terminal_not_in_the_manifest(monkeypatch):
    """A fused name (TFLite's 'model/block_3/conv2d;model/block_3/bn;...')
    is cut in its middle to the width the table has on a terminal ($COLUMNS,
    or its size); a file or a pipe gets it whole, and the manifest keeps it."""
    import io
    import sys
    from runtime.model.report import aligned, table, terminal_width
    name = "model/backbone/block_12/depthwise_conv2d;model/backbone/block_12/bn/FusedBatchNorm"
    manifest = {"tensors": [{"name": name, "role": "depthwise", "layout": "dw_conv2d_filter",
                             "dims": [1, 96, 3, 3], "storage": "image2d", "size": [27, 24],
                             "dtype": "f16", "bytes": 5184}], "skipped": []}
    lines = table(manifest, width=100).splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    shown = lines[2].split("  ")[0]
    assert "…" in shown and name.startswith(shown.split("…")[0])
    assert name.endswith(shown.split("…")[1]) and manifest["tensors"][0]["name"] == name

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert terminal_width() == 100 and table(manifest) == "\n".join(lines)
    monkeypatch.setattr(sys, "stdout", io.StringIO())   # a file or a pipe: names whole
    assert terminal_width() is None and name in table(manifest)
    rows = [("name", "b", "reason"), ("x" * 50, "1", "a long sentence " * 5)]
    assert len(aligned(rows, free_last=True, width=40)[2].split("  ")[0]) == 40 - 1 - 2
    assert len(aligned(rows, free_last=True, width=20)[2].split("  ")[0]) == 32   # the least
