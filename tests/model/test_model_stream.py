"""Models at full size: `clayout model` streams its file in bounded memory.

- The streamed file is byte for byte what the in-memory path writes
  (``convert_plan`` then ``safetensors.numpy.save``) on the suite's models:
  the sample CNN (plain, f16, tiled, Winograd), the quantized sample (fold
  and keep), a TFLite model, PP-OCRv4 det.
- A large tensor stays in its file until converted (a FileSpan): ONNX
  external data, a large inline .onnx (read without its tensors' bytes:
  runtime/model/onnx/inline.py, which changes nothing but where the bytes
  are), a .tflite buffer.
- A generated model of 94 MB converts in a child process whose data
  segment (resource.setrlimit RLIMIT_DATA, over what its imports took) is
  capped at 4 times its largest weight plus 96 MiB, which the in-memory path
  exceeds (it needs about 4 times the whole model), external data, inline
  and .tflite alike, and the images equal the reference engine's; the
  thorough tier converts a 1.13 GB model under the same cap.
- ``--dry-run`` says the peak memory it will need.
"""
import json
import os
import sys

import numpy as np
import pytest

from conftest import (CHILDREN_FOLDER, ROOT, THOROUGH, bits, child_result, needs, run,
                      start_child)

onnx = needs("onnx")
needs("safetensors")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from safetensors.numpy import save  # noqa: E402

import runtime  # noqa: E402
from runtime import model  # noqa: E402
from runtime.model import manifest as mf  # noqa: E402
from runtime.model.manifest import read_manifest  # noqa: E402
from runtime.model.onnx import inline  # noqa: E402
from runtime.model.tensor_data import LAZY_BYTES, FileSpan, values  # noqa: E402
from runtime.errors import ClayoutError  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/onnx/inline.py", "runtime/model/safetensors_file.py",
           "runtime/model/stream.py", "runtime/model/tensor_data.py")

SAMPLE = ROOT / "runtime" / "data" / "sample_cnn.onnx"
QUANTIZED = ROOT / "runtime" / "data" / "sample_quantized.onnx"
RNG = np.random.default_rng(54)


def in_memory_bytes(path, options) -> bytes:
    """The file as the in-memory path writes it: every array, then safetensors' save."""
    plan, sources = model.plan_file(str(path), options)
    stored, _ = model.convert_plan(plan, sources)
    return save(stored, metadata={mf.MANIFEST_KEY: json.dumps(plan.manifest())})


CASES = [(SAMPLE, {}), (SAMPLE, {"dtype": "f16"}), (SAMPLE, {"max_image": (8, 8)}),
         (SAMPLE, {"winograd": "mace"}), (QUANTIZED, {}), (QUANTIZED, {"quantized": "keep"}),
         (SAMPLE, {"max_image": (8, 8), "tiles": False})]


@pytest.mark.parametrize("path, options", CASES)
def test_the_streamed_file_is_the_in_memory_one(tmp_path, path, options):
    opts = model.Options(**options)
    out = tmp_path / "w.safetensors"
    plan, sources = model.plan_file(str(path), opts)
    manifest, verified = model.write_plan(plan, sources, str(out), verify_all=True)
    assert out.read_bytes() == in_memory_bytes(path, opts)
    assert verified == len(manifest["tensors"])


def test_the_streamed_file_is_the_in_memory_one_on_real_models(tmp_path, capsys, ppocr,
                                                               mediapipe_models):
    for path in (ppocr["det"], mediapipe_models["face_detection_short_range.tflite"]):
        out = tmp_path / "w.safetensors"
        code, _, err = run(capsys, "model", path, "-o", out, "-q", "--verify")
        assert code == 0, err
        assert out.read_bytes() == in_memory_bytes(path, model.Options()), path


# -- large tensors stay in their files ---------------------------------------------------------
def conv_model(path, count, shape=(64, 64, 8, 8), **save_args):
    """``count`` convolutions whose weights are ``shape`` (1 MiB each: lazy)."""
    nodes, inits, prev = [], [], "x"
    weights = []
    for i in range(count):
        w = RNG.standard_normal(shape).astype(np.float32)
        weights.append(w)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"y{i}"], name=f"c{i}"))
        prev = f"y{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         None)],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path),
              **save_args)
    return weights


@pytest.mark.parametrize("form", ["inline", "external"])
def test_large_onnx_tensors_are_read_when_converted(tmp_path, form):
    path = tmp_path / "m.onnx"
    extra = {"save_as_external_data": True, "location": "m.data"} if form == "external" else {}
    weights = conv_model(path, 3, **extra)
    found = model.front_ends.read_constants(model.load(str(path)), str(path))
    assert all(isinstance(c.array, FileSpan) for c in found)
    for c, w in zip(found, weights):
        assert c.array.nbytes >= LAZY_BYTES and c.array.shape == w.shape
        assert np.array_equal(bits(values(c.array)), bits(w))
    if form == "inline":   # in the model file itself, where its raw_data lies
        assert {c.array.path for c in found} == {str(path)}


def test_the_inline_walk_changes_only_where_the_bytes_are(tmp_path):
    """The stripped model parses to the original, but for the large tensors'
    raw_data, now external references to the same bytes of the file; a
    subgraph's and a Constant node's tensors included."""
    big = RNG.standard_normal((64, 64, 8, 8)).astype(np.float32)
    small = RNG.standard_normal(5).astype(np.float32)
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(big, "k")),
         helper.make_node("Conv", ["x", "k"], ["ty"])], "then", [],
        [helper.make_tensor_value_info("ty", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch),
             helper.make_node("Add", ["y", "s"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, None),
                                           helper.make_tensor_value_info("cond", 9, [])],
                              [helper.make_tensor_value_info("z", 1, None)],
                              [numpy_helper.from_array(small, "s"),
                               numpy_helper.from_array(big, "init")])
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    onnx.save(original, str(path))
    stripped = onnx.ModelProto.FromString(inline.stripped(str(path), LAZY_BYTES))
    moved = []

    def restore(tensor):
        info = {e.key: e.value for e in tensor.external_data}
        if info.get("location") == inline.IN_MODEL_FILE:
            with open(path, "rb") as f:
                f.seek(int(info["offset"]))
                tensor.raw_data = f.read(int(info["length"]))
            del tensor.external_data[:]
            tensor.ClearField("data_location")
            moved.append(tensor.name)
    for t in stripped.graph.initializer:
        restore(t)
    for n in stripped.graph.node:
        for a in n.attribute:
            if a.type == a.GRAPH:
                for sub in a.g.node:
                    for b in sub.attribute:
                        if b.type == b.TENSOR:
                            restore(b.t)
    assert sorted(moved) == ["init", "k", "k"]
    assert stripped == original


def test_a_file_the_walk_cannot_read_gets_protobufs_error(tmp_path):
    path = tmp_path / "m.onnx"
    conv_model(path, 2)
    data = path.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[:len(data) // 2])
    assert inline.stripped(str(tmp_path / "cut.onnx"), LAZY_BYTES) is None
    with pytest.raises(ClayoutError, match="cut.onnx: not an ONNX model .the protobuf does not "
                       "parse"):
        model.load(str(tmp_path / "cut.onnx"))


def test_large_tflite_buffers_are_read_when_converted(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    import bench_scale
    path = bench_scale.tflite_model(str(tmp_path / "m.tflite"), 2)
    found = model.front_ends.read_constants(model.load(path), path)
    assert [type(c.array) for c in found] == [FileSpan, FileSpan]
    assert found[0].array.shape == (512, 3, 3, 512)


@pytest.mark.slow
def test_models_at_scale_bench_row_tiny():
    """tools/bench.py --models-at-scale on one-convolution models: a row per
    form, each with its time, peak memory and --dry-run's estimate (speed is
    measured by the bench, never by a test)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import bench_scale
    lines = []
    rows = bench_scale.run((1,), forms=("external", "tflite"), verify=False, out=lines.append)
    assert [(r["form"], r["count"]) for r in rows] == [("external", 1), ("tflite", 1)]
    assert all(r["seconds"] > 0 and r["peak"] > r["bytes"] for r in rows)
    assert lines[0].startswith("| model (N conv 512x512x3x3 f32) |") and len(lines) == 4


def test_dry_run_says_the_peak_memory(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    conv_model(path, 3, save_as_external_data=True, location="m.data")
    code, out, err = run(capsys, "model", path, "--dry-run")
    assert code == 0, err
    line = out.splitlines()[-2]   # before the totals line
    plan, sources = model.plan_file(str(path))
    e = model.peak_estimate(plan, sources)
    weight = 64 * 64 * 8 * 8 * 4
    image = plan.stored[0].bytes / 2**20
    assert line == (f"peak memory: reading the model, then {2 + 2 * image:.1f} MiB more to "
                    f"convert ({1 + image:.1f} MiB for the tensor being converted: read from the "
                    f"file, moved, placed; {image:.1f} MiB for the image being written; 1.0 MiB "
                    "for the tensor read ahead); 0.0 MiB of the model's constants stay in memory")
    # each weight: read (1), its image (1); one image being written meanwhile; nothing held
    assert (e["held"], e["writing"]) == (0, plan.stored[0].bytes)
    assert e["largest"] == weight + plan.stored[0].bytes
    assert e["ahead"] == weight and e["total"] >= e["now"] + e["largest"] + e["writing"] + weight


# -- bounded memory, in a child process under a cap ---------------------------------------------
CHILD = """
import os, resource, subprocess, sys
folder, form, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
make = ("import sys; sys.path.insert(0, {tools!r}); import bench_scale; "
        "print(bench_scale.MAKERS[sys.argv[1]](sys.argv[2], int(sys.argv[3])))")
path = subprocess.run([sys.executable, "-c", make, form, os.path.join(folder, "m"), str(count)],
                      capture_output=True, text=True, check=True).stdout.strip()
import runtime, runtime.model, onnx, safetensors, safetensors.numpy   # what converting imports
from runtime import cli
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
cap = status("VmData") + {budget}
resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
code = cli.main(["model", path, "-o", os.path.join(folder, "w.safetensors"), "--engine", "cpu",
                 "-q", "--verify"])
print("peak", status("VmHWM"), "cap", cap, flush=True)
os.unlink(path)
if os.path.exists(path + ".data"):
    os.unlink(path + ".data")
sys.exit(code)
"""
WEIGHT = 512 * 512 * 3 * 3 * 4
BUDGET = 4 * WEIGHT + (96 << 20)   # bytes over what the imports took
SIZES = [("external", 10), ("inline", 10), ("tflite", 10)] + \
    ([("external", 120)] if THOROUGH else [])


def _key(form, count):
    return ("bounded", form, count)


def _start(form, count):
    folder = CHILDREN_FOLDER / f"bounded-{form}-{count}"   # shared by pytest-xdist's workers
    folder.mkdir(exist_ok=True)
    code = CHILD.format(tools=str(ROOT / "tools"), budget=BUDGET)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MALLOC_ARENA_MAX="2",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start_child(_key(form, count), [sys.executable, "-c", code, str(folder), form, str(count)],
                env=env, timeout=1800 if count > 10 else 300)
    return folder


def start_early(items):
    """The children convert in the background from the start of the run."""
    for item in items:
        if getattr(item, "originalname", "") == "test_bounded_memory":
            _start(*item.callspec.params["case"])


@pytest.mark.parametrize("case", SIZES, ids=[f"{f}-{n}" for f, n in SIZES])
def test_bounded_memory(case):
    form, count = case
    folder = _start(form, count)
    done = child_result(_key(form, count))
    assert done.returncode == 0, done.stderr[-2000:]
    tensors, manifest = read_manifest(folder / "w.safetensors")
    assert len(manifest["tensors"]) == count
    rng = np.random.default_rng(54)   # the generator's weights, in order (tools/bench_scale.py)
    for i in range(count):
        w = rng.standard_normal((512, 512, 3, 3), dtype=np.float32)
        entry = manifest["tensors"][i]
        want = runtime.to_image(w, "conv2d_filter", engine="reference")
        assert entry["layout"] == "conv2d_filter"
        assert np.array_equal(bits(tensors[entry["name"]]), bits(want)), entry["name"]
    del tensors
    os.unlink(folder / "w.safetensors")
