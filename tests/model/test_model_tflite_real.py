"""clayout model on real .tflite files: MediaPipe's face, hand, landmark and
segmentation models from PyPI's mediapipe 0.10.14 wheel (fetched once into
$CLAYOUT_TEST_CACHE, never installed or imported).

The ground truth is LiteRT's own interpreter (ai-edge-litert): each model runs
once with the default delegate off and every intermediate tensor preserved,
so the value of each tensor a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED
reads (the output of a DEQUANTIZE of float16, of a DENSIFY of a sparse tensor)
is what the interpreter computed. The operators and tensor indices come from
the ``tflite`` package's reader, not clayout's. Every such weight is mapped
to its logical tensor here with numpy, placed by the reference engine and
compared bit for bit with what ``clayout model`` stored; the count of weights
per model is pinned, so a weight that went missing fails.

selfie_segmentation uses MediaPipe's custom op Convolution2DTransposeBias,
which LiteRT cannot run: its weights are compared with the float16 buffers as
the ``tflite`` package reads them.
"""
import numpy as np
import pytest

import runtime
from runtime import model
from runtime.model.manifest import read_manifest
from tests.conftest import run, same_bits
from conftest import needs

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/apply.py",)

tflite = needs("tflite")
interpreter_module = needs("ai_edge_litert.interpreter")

WEIGHT_OPS = {"CONV_2D": 1, "DEPTHWISE_CONV_2D": 1, "FULLY_CONNECTED": 1, "TRANSPOSE_CONV": 1,
              "Convolution2DTransposeBias": 1}
VECTOR_INPUTS = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2,
                 "Convolution2DTransposeBias": 2, "PRELU": 1}    # biases, PRELU alphas
COUNTS = {   # (filters and FC weights, all images: those and the vectors) per model
    "face_detection_short_range.tflite": (37, 74),
    "face_detection_full_range_sparse.tflite": (91, 182),
    "selfie_segmentation.tflite": (55, 110),
    "hand_landmark_lite.tflite": (51, 102),
    "face_landmark.tflite": (45, 113),
}
NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


def graph(path):
    """[(op name, [input tensor indices], [output tensor indices])], the
    tensors' names, the model and its subgraph 0, read by the tflite package."""
    buf = open(path, "rb").read()
    m = tflite.Model.GetRootAsModel(buf, 0)
    g = m.Subgraphs(0)
    codes = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        codes.append(oc.CustomCode().decode() if code == 32 else NAMES[code])
    ops = [(codes[g.Operators(j).OpcodeIndex()], list(g.Operators(j).InputsAsNumpy()),
            list(g.Operators(j).OutputsAsNumpy())) for j in range(g.OperatorsLength())]
    names = [g.Tensors(t).Name().decode() for t in range(g.TensorsLength())]
    return ops, names, m, g, buf


def tensor_values(path):
    """{tensor index: value} of every tensor LiteRT computed (all preserved);
    None for a model LiteRT cannot run (a custom op)."""
    Interpreter = interpreter_module.Interpreter
    resolver = interpreter_module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        it = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver,
                         experimental_preserve_all_tensors=True)
        it.allocate_tensors()
    except (RuntimeError, ValueError):
        return None
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    values = {}
    for d in it.get_tensor_details():
        try:
            values[d["index"]] = np.array(it.get_tensor(d["index"]))
        except ValueError:   # a tensor with no data
            pass
    return values


def buffer_values(m, g, t):
    """A dense tensor's values as the tflite package reads its buffer."""
    tensor = g.Tensors(t)
    dtype = {0: np.float32, 1: np.float16, 9: np.int8, 2: np.int32}[tensor.Type()]
    data = m.Buffers(tensor.Buffer()).DataAsNumpy()
    return np.frombuffer(data.tobytes(), dtype).reshape(tensor.ShapeAsNumpy())


def logical(op, w, input_channels):
    """The logical tensor and layout of weight ``w`` (float32) of ``op``."""
    if op == "DEPTHWISE_CONV_2D":
        _, kh, kw, cm = w.shape
        mult = cm // input_channels
        out = np.empty((mult, input_channels, kh, kw), w.dtype)
        for c in range(input_channels):
            for m in range(mult):
                out[m, c] = w[0, :, :, c * mult + m]
        return "dw_conv2d_filter", out
    if op == "FULLY_CONNECTED":
        return "weight_width", w.reshape(w.shape + (1, 1))
    return "conv2d_filter", w.transpose(0, 3, 1, 2)        # OHWI -> OIHW


def expected_weights(path):
    """{image name: (layout, logical float32 tensor)} of every weight of WEIGHT_OPS."""
    ops, names, m, g, _ = graph(path)
    values = tensor_values(path)
    dequantized = {outputs[0]: inputs[0] for op, inputs, outputs in ops if op == "DEQUANTIZE"}
    want = {}

    def value_of(t):
        if values is not None:
            return values[t].astype(np.float32)
        # no interpreter run: the float16 buffer behind the DEQUANTIZE
        return buffer_values(m, g, dequantized[t]).astype(np.float32)

    for op, inputs, _ in ops:
        if op in VECTOR_INPUTS and len(inputs) > VECTOR_INPUTS[op] >= 0 and \
                inputs[VECTOR_INPUTS[op]] in dequantized:
            t = inputs[VECTOR_INPUTS[op]]
            want[names[t]] = ("argument", value_of(t).reshape(-1))
        if op in WEIGHT_OPS:
            t = inputs[WEIGHT_OPS[op]]
            channels = int(g.Tensors(inputs[0]).ShapeAsNumpy()[-1])
            want[names[t]] = logical(op, value_of(t), channels)
    return want


@pytest.fixture(scope="module")
def expected(mediapipe_models):
    return {name: expected_weights(path) for name, path in mediapipe_models.items()}


@pytest.mark.parametrize("name", list(COUNTS))
def test_every_weight_is_what_litert_computes(tmp_path, capsys, mediapipe_models, expected, name):
    out = tmp_path / "w.safetensors"
    code, stdout, err = run(capsys, "model", mediapipe_models[name], "-o", out, "--verify",
                            "--engine", "cpu")
    assert code == 0, err
    images, manifest = read_manifest(out)
    assert manifest["source_format"] == "tflite" and manifest["dtype"] == "f16"
    by = {e["name"]: e for e in manifest["tensors"]}
    want = expected[name]
    filters = sum(layout != "argument" for layout, _ in want.values())
    assert (filters, len(by)) == COUNTS[name] and set(want) <= set(by), \
        sorted(set(want) - set(by))
    for tensor, (layout, value) in want.items():
        e = by[tensor]
        assert (e["layout"], tuple(e["dims"]), e["dtype"]) == (layout, value.shape, "f16"), tensor
        # the f16 values are exact in float32: the image of the interpreter's value is the same
        ref = runtime.to_image(np.ascontiguousarray(value), layout, dtype="f16",
                               engine="reference")
        assert same_bits(ref, images[tensor]), tensor
        back = model.read_back(images[tensor], e)
        assert np.array_equal(back.astype(np.float32), model.source_weight(
            value, model.manifest.steps_of(e), e["source_shape"])), tensor
    assert f"verified {len(manifest['tensors'])} tensors" in stdout
    skipped = {s["name"] for s in manifest["skipped"]}
    assert not skipped & set(want)
    # every float constant accounted for: the totals are the file's float elements
    a = manifest["accounting"]
    assert (a["float_constants"], a["float_elements"]) == float_elements(mediapipe_models[name])
    assert a["placed"] + a["folded"] + a["kept"] + a["dead"] + a["empty"] == a["float_elements"]
    assert "accounted for: " in stdout


def float_elements(path) -> tuple[int, int]:
    """(float constants, their elements) of a .tflite file, read by the tflite
    package: the tensors with data of a float type, or of an integer type with a
    scale (their values are real)."""
    _, _, m, _, _ = graph(path)
    count = elements = 0
    for s in range(m.SubgraphsLength()):
        g = m.Subgraphs(s)
        for t in range(g.TensorsLength()):
            tensor = g.Tensors(t)
            data = m.Buffers(tensor.Buffer()).DataLength() if tensor.Buffer() < \
                m.BuffersLength() else 0
            q = tensor.Quantization()
            scaled = q is not None and q.ScaleLength() > 0
            kind = tensor.Type()
            is_float = kind in (tflite.TensorType.FLOAT32, tflite.TensorType.FLOAT16)
            if data and (is_float or (scaled and kind in (tflite.TensorType.INT8,
                                                          tflite.TensorType.UINT8,
                                                          tflite.TensorType.INT16,
                                                          tflite.TensorType.INT32))):
                count += 1
                elements += int(np.prod(tensor.ShapeAsNumpy())) if tensor.ShapeLength() else 1
    return count, elements


def test_the_model_doc_shows_what_the_command_prints(tmp_path, capsys, mediapipe_models,
                                                  monkeypatch):
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "docs" / "model.md").read_text()
    block = readme.split("$ clayout model face_detection_short_range.tflite", 1)[1]
    block = block.split("```", 1)[0]
    shown = [line for line in block.splitlines()[1:] if line and line != "..."]
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "model", mediapipe_models["face_detection_short_range.tflite"],
                         "-o", "face.safetensors", "--verify")
    assert code == 0, err
    printed = out.splitlines()
    assert len(shown) > 8 and all(line in printed for line in shown), \
        [line for line in shown if line not in printed]


def test_dry_run_max_image_and_the_graph_ends(tmp_path, capsys, mediapipe_models):
    path = mediapipe_models["face_landmark.tflite"]
    code, planned, err = run(capsys, "model", path, "--dry-run", "--max-image", "2048,2048")
    assert code == 0, err
    out = tmp_path / "w.safetensors"
    code, done, err = run(capsys, "model", path, "-o", out, "--verify", "--max-image",
                          "2048,2048")
    assert code == 0, err
    images, manifest = read_manifest(out)
    wide = next(e for e in manifest["tensors"] if e["name"] == "conv2d_21/Kernel_dequantize")
    assert max(wide["size"]) <= 2048 or "tiles" in wide
    totals = [line for line in done.splitlines() if line.startswith("wrote ")][0]
    assert totals.replace("wrote ", "would write ", 1).split(":", 1)[1] in planned
    it = interpreter_module.Interpreter(model_path=str(path))
    for key, details in (("inputs", it.get_input_details()), ("outputs", it.get_output_details())):
        assert [(v["name"], v["shape"], v["dtype"]) for v in manifest[key]] == \
            [(d["name"], d["shape"].tolist(), np.dtype(d["dtype"]).name) for d in details]
