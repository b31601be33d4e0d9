"""`clayout model`'s default writes everything the model needs, on real exports.

Images where a role's layout takes a weight, plain buffers for every other
float constant the graph reads (a scalar of an Add, a Clip bound, a Resize's
scales, an LSTM's weights); ``--images-only`` asks for images alone and
fails naming every constant it would leave out, one per line. The models: a
YOLOv8-like detection head built here with onnx.helper (SiLU convolutions,
Split, Resize by scales, DFL, anchors and strides), PaddleOCR's PP-OCRv4
detector and its text-direction classifier, and Silero VAD (fetched from
pinned PyPI wheels by tests/model/conftest.py). Also here: weights quantized
without a DequantizeLinear (``Mul(Cast(q), scale)``) under ``--quantized
keep``, and ConstantOfShape fills in the accounting.
"""
import numpy as np
import pytest

from conftest import bits, needs, run

onnx = needs("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from runtime.model.manifest import accounting_problems, read_manifest  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/model_command.py", "runtime/model/left_out.py", "runtime/model/plan.py")

F32 = TensorProto.FLOAT
RNG = np.random.default_rng(48)


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _silu_conv(prefix, x, cin, cout, k, stride, inits):
    """Conv (its BatchNorm folded in, as exporters do) and SiLU = x * sigmoid(x)."""
    inits += [_init(f"{prefix}.weight", RNG.standard_normal((cout, cin, k, k)).astype(np.float32)),
              _init(f"{prefix}.bias", RNG.standard_normal(cout).astype(np.float32))]
    return [helper.make_node("Conv", [x, f"{prefix}.weight", f"{prefix}.bias"], [f"{prefix}.c"],
                             name=f"{prefix}/conv", strides=[stride, stride],
                             pads=[k // 2] * 4),
            helper.make_node("Sigmoid", [f"{prefix}.c"], [f"{prefix}.s"]),
            helper.make_node("Mul", [f"{prefix}.c", f"{prefix}.s"], [f"{prefix}.y"])]


def yolo_like(path) -> str:
    """A YOLOv8-like export: SiLU convolutions, a C2f-style Split and Concat,
    an upsampling Resize by constant scales, a head split into box and class
    channels, the DFL (Softmax over 16 bins, a Conv of arange(16)), and the
    box decoding with constant anchor points, a Div by 2 and per-anchor
    strides: the role-less constants a real export carries."""
    inits, nodes = [], []
    nodes += _silu_conv("m0", "images", 3, 8, 3, 2, inits)                   # 1,8,16,16
    inits.append(_init("split", np.array([4, 4], np.int64)))
    nodes += [helper.make_node("Split", ["m0.y", "split"], ["a", "b"], axis=1),
              helper.make_node("Concat", ["b", "a"], ["ab"], axis=1)]
    inits += [_init("roi", np.zeros(0, np.float32)),
              _init("up.scales", np.array([1, 1, 2, 2], np.float32))]
    nodes.append(helper.make_node("Resize", ["ab", "roi", "up.scales"], ["up"], mode="nearest"))
    nodes += _silu_conv("m1", "up", 8, 8, 3, 4, inits)                        # 1,8,8,8
    nodes += _silu_conv("head", "m1.y", 8, 66, 1, 1, inits)                   # 1,66,8,8
    inits += [_init("flat", np.array([1, 66, 64], np.int64)),
              _init("parts", np.array([64, 2], np.int64)),
              _init("bins", np.array([1, 4, 16, 64], np.int64)),
              _init("boxes", np.array([1, 4, 64], np.int64)),
              _init("dfl.weight", np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1)),
              _init("zero", np.array([0], np.int64)), _init("two", np.array([2], np.int64)),
              _init("four", np.array([4], np.int64)), _init("axis1", np.array([1], np.int64)),
              _init("anchors", (np.mgrid[0:8, 0:8].reshape(2, 1, 64).transpose(1, 0, 2)[:, ::-1]
                                + 0.5).astype(np.float32)),
              _init("half", np.array(2.0, np.float32)),
              _init("strides", np.full((1, 64), 8.0, np.float32))]
    nodes += [helper.make_node("Reshape", ["head.y", "flat"], ["flat_y"]),
              helper.make_node("Split", ["flat_y", "parts"], ["box", "cls"], axis=1),
              helper.make_node("Reshape", ["box", "bins"], ["box4"]),
              helper.make_node("Transpose", ["box4"], ["box4t"], perm=[0, 2, 1, 3]),
              helper.make_node("Softmax", ["box4t"], ["soft"], axis=1),
              helper.make_node("Conv", ["soft", "dfl.weight"], ["dist"], name="dfl/conv"),
              helper.make_node("Reshape", ["dist", "boxes"], ["ltrb"]),
              helper.make_node("Slice", ["ltrb", "zero", "two", "axis1"], ["lt"]),
              helper.make_node("Slice", ["ltrb", "two", "four", "axis1"], ["rb"]),
              helper.make_node("Sub", ["anchors", "lt"], ["x1y1"]),
              helper.make_node("Add", ["anchors", "rb"], ["x2y2"]),
              helper.make_node("Add", ["x1y1", "x2y2"], ["sum"]),
              helper.make_node("Div", ["sum", "half"], ["cxy"]),
              helper.make_node("Sub", ["x2y2", "x1y1"], ["wh"]),
              helper.make_node("Concat", ["cxy", "wh"], ["xywh"], axis=1),
              helper.make_node("Mul", ["xywh", "strides"], ["dbox"]),
              helper.make_node("Sigmoid", ["cls"], ["scores"]),
              helper.make_node("Concat", ["dbox", "scores"], ["output0"], axis=1)]
    graph = helper.make_graph(nodes, "yolo_like", [helper.make_tensor_value_info(
        "images", F32, [1, 3, 32, 32])], [helper.make_tensor_value_info("output0", F32, [1, 6, 64])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def exports(real_exports, tmp_path_factory):
    return {"yolo_like": yolo_like(tmp_path_factory.mktemp("yolo") / "yolov8n_like.onnx"),
            **real_exports}


# the buffers each export needs, by kind (the summary line's words), and their number
NEEDS = {"yolo_like": ("3 buffers", "1 Resize input, 1 Sub input, 1 scalar"),
         "ppocr_det": ("207 buffers", "201 scalars, 6 Resize inputs"),
         "ppocr_cls": ("72 buffers", "72 scalars"),
         "silero_vad": ("16 buffers", "12 LSTM weights, 4 scalars")}


@pytest.mark.parametrize("name", list(NEEDS))
def test_the_default_writes_a_complete_file(exports, name, tmp_path, capsys):
    path, out = exports[name], tmp_path / "w.safetensors"
    code, stdout, err = run(capsys, "model", path, "-o", out, "--verify")
    assert code == 0 and err == "", err
    tensors, manifest = read_manifest(out)
    assert accounting_problems(manifest) == []
    fates = {c["fate"] for c in manifest["accounting"]["constants"]}
    assert fates <= {"placed", "folded", "kept", "dead", "empty"}
    buffers = [e for e in manifest["tensors"] if e["layout"] == "buffer"]
    count, kinds = NEEDS[name]
    assert f"{len(buffers)} buffers" == count, stdout
    assert f"{count} (" in stdout and f"the buffers hold what no image layout takes: {kinds};" \
        in stdout, stdout
    assert f"verified {len(manifest['tensors'])} tensors" in stdout
    for e in buffers:   # each buffer holds the constant's values, as the model stores them
        assert tensors[e["name"]].size == np.prod(e["dims"]), e["name"]

    # --images-only: exit 1, nothing written, every buffer of the default named on its line
    strict = tmp_path / "strict.safetensors"
    code, stdout, err = run(capsys, "model", path, "-o", strict, "--images-only")
    *listed, last = err.splitlines()
    assert code == 1 and stdout == "" and not strict.exists()
    assert last == (f"clayout: error: --images-only: {len(buffers)} constant(s) the model needs "
                    "cannot go on an image (listed above, one per line); " + (
                        "drop --images-only to store them as plain buffers (the default: every "
                        "constant the model needs is then in the file)"))
    assert len(listed) == len(buffers)
    named = [line.split("'")[1] for line in listed]
    assert all(line.startswith("clayout: left out: '") for line in listed)
    assert sorted(named) == sorted(e["name"] for e in buffers)


def test_keep_buffers_is_the_default_and_still_accepted(exports, tmp_path, capsys):
    path = exports["yolo_like"]
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "a.safetensors")
    assert code == 0, err
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "b.safetensors", "--keep-buffers")
    assert code == 0, err
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "c.safetensors", "--keep-buffers",
                       "--images-only")
    assert code == 2 and "not allowed with argument" in err
    code, out, _ = run(capsys, "model", "--help")
    assert code == 0 and "the default, accepted for older scripts" in " ".join(out.split())


def test_images_only_message_names_every_constant_in_python(exports):
    """The Python API's error (Options(keep_buffers=False)) names every one too,
    on one line: no "... (N in all)"."""
    from runtime import model
    from runtime.model.left_out import LeftOut
    with pytest.raises(LeftOut) as caught:
        model.plan_file(exports["ppocr_det"], model.Options(keep_buffers=False))
    text = str(caught.value)
    assert caught.value.count == 207 and "in all" not in text and "\n" not in text
    assert all(line.split("'")[1] in text for line in caught.value.lines)


# -- weights quantized as Mul(Cast(q), scale) ------------------------------------------------------
def cast_mul_model(path, scale_shape=(8,)):
    """An int8 weight-only export: a MatMul weight stored as int8, Cast to
    float and multiplied by per-column scales (no DequantizeLinear)."""
    q = RNG.integers(-128, 128, (16, 8)).astype(np.int8)
    scale = ((RNG.random(scale_shape) + 0.5) / 64).astype(np.float32)
    nodes = [helper.make_node("Cast", ["q"], ["qf"], to=F32, name="cast"),
             helper.make_node("Mul", ["qf", "scale"], ["w"], name="dq"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [1, 16])],
                              [helper.make_tensor_value_info("y", F32, None)],
                              [_init("q", q), _init("scale", scale)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return q, scale


@pytest.mark.parametrize("scale_shape", [(8,), (1, 8), ()])
def test_cast_mul_weights_stay_quantized_with_keep(tmp_path, capsys, scale_shape):
    q, scale = cast_mul_model(tmp_path / "m.onnx", scale_shape)
    out = tmp_path / "k.safetensors"
    code, stdout, err = run(capsys, "model", tmp_path / "m.onnx", "-o", out, "--quantized", "keep",
                            "--verify")
    assert code == 0, err
    tensors, manifest = read_manifest(out)
    by = {e["name"]: e for e in manifest["tensors"]}
    assert by["w"]["dtype"] == "s8" and by["w"]["quantization"]["source"] == "Mul dq"
    assert by["w.scale"]["source_name"] == "scale"
    from runtime import model
    assert np.array_equal(model.read_back(tensors["w"], by["w"]), q)
    assert np.array_equal(bits(model.read_back(tensors["w.scale"], by["w.scale"])),
                          bits(scale.reshape(-1)))
    assert "1 to their integers q" in stdout
    # folded by default: the f32 value Mul computes, and where it came from
    code, stdout, err = run(capsys, "model", tmp_path / "m.onnx", "-o", out, "--verify")
    assert code == 0, err
    tensors, manifest = read_manifest(out)
    (w,) = manifest["tensors"]
    assert w["dtype"] == "f32" and w["dequantized"]["node"] == "Mul dq"
    assert np.array_equal(bits(model.read_back(tensors["w"], w)),
                          bits(q.astype(np.float32) * scale))
    assert "(q - zero_point) * scale of their DequantizeLinear or Cast -> Mul" in stdout


def test_a_mul_that_is_not_a_scale_stays_a_float_weight(tmp_path, capsys):
    """Scales along two axes are no per-axis quantization: the weight is its
    float value, with --quantized keep too."""
    cast_mul_model(tmp_path / "m.onnx", (16, 8))
    out = tmp_path / "k.safetensors"
    code, _, err = run(capsys, "model", tmp_path / "m.onnx", "-o", out, "--quantized", "keep",
                       "--verify")
    assert code == 0, err
    _, manifest = read_manifest(out)
    (w,) = manifest["tensors"]
    assert w["dtype"] == "f32" and "dequantized" not in w


# -- ConstantOfShape in the accounting -------------------------------------------------------------
def test_constant_of_shape_fills_are_counted(tmp_path, capsys):
    """A ConstantOfShape's float fill is a float constant of the model (its
    values are first float there): counted, and placed where it is stored."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["fill"], name="cos",
                              value=_init("v", np.array([0.5], np.float32))),
             helper.make_node("Add", ["x", "fill"], ["y"]),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="cos_zeros"),
             helper.make_node("Mul", ["y", "w"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [1, 6])],
                              [helper.make_tensor_value_info("z", F32, None)],
                              [_init("shape", np.array([1, 6], np.int64)),
                               _init("w", np.ones(6, np.float32))])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    code, stdout, err = run(capsys, "model", path, "-o", tmp_path / "w.safetensors", "--verify")
    assert code == 0, err
    _, manifest = read_manifest(tmp_path / "w.safetensors")
    a = manifest["accounting"]
    fates = {c["name"]: (c["elements"], c["fate"]) for c in a["constants"]}
    assert fates == {"fill": (6, "placed"), "zeros": (6, "dead"), "w": (6, "placed")}
    assert "accounted for: 18 float elements in 3 constants = 12 placed" in stdout
