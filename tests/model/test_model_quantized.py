"""clayout model on quantized and recurrent synthetic graphs (onnx.helper).

- QDQ: DequantizeLinear of constants (per tensor and per axis; int8, uint8,
  int32) folded by (q - zero_point) * scale in f32, checked against numpy here
  and against onnxruntime's own DequantizeLinear, bit for bit; with
  ``--quantized keep`` the integer tensor on an s8/u8/s32 image and its
  parameters on argument images NAME.scale / NAME.zero_point.
- Integer operators: ConvInteger and MatMulInteger after DynamicQuantizeLinear
  (the scale found after them), QLinearConv (and its int32 bias),
  QLinearMatMul; the cases clayout cannot store exit 1 naming the weight.
- LSTM and GRU weights: buffers by default, or a failure naming them with --images-only.
- 1-D convolutions on conv2d_filter as (O, I, 1, K); 3-D refused.
- The weights' own float type as the default dtype.
Every stored image is compared with the reference engine's image of a
logical tensor computed here from the ONNX arrays.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import needs

onnx = needs("onnx")
ort = needs("onnxruntime")
needs("safetensors")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import runtime
from runtime.algebra.storage import Limits
from runtime import model

from conftest import ROOT, bits, run, with_facts

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/__init__.py", "runtime/model/integer_weights.py",
           "runtime/model/quantization.py")

RNG = np.random.default_rng(14)


def ints(dtype, *shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def floats(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def build(tmp_path, nodes, inits, inputs=None, outputs=None, name="m.onnx", opset=13):
    if inputs is None:
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT,
                                                        None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              initializer=[numpy_helper.from_array(np.asarray(v), k)
                                           for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / name
    onnx.save(m, str(path))
    return path


def convert(tmp_path, capsys, path, *extra, out="w.safetensors"):
    target = tmp_path / out
    code, stdout, err = run(capsys, "model", path, "-o", target, "--verify", *extra)
    assert code == 0, err
    assert "verified" in stdout and err == ""
    with safe_open(str(target), "np") as f:
        manifest = json.loads(f.metadata()["clayout"])
    return load_file(str(target)), manifest, stdout


def fails(tmp_path, capsys, argv, *words):
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run(capsys, "model", *argv)
    assert code == 1 and out == "", (out, err)
    *listed, last = err.splitlines()   # with --images-only: one line per constant left out
    assert last.startswith("clayout: error: ") and err.endswith("\n"), err
    assert all(line.startswith("clayout: left out: ") for line in listed), err
    for w in words:
        assert w in err, (w, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    return err


def entry_of(manifest, name):
    return {e["name"]: e for e in manifest["tensors"]}[name]


def expect(images, manifest, name, layout, logical, dtype):
    """The stored image of ``name`` is the reference's image of ``logical``."""
    e = entry_of(manifest, name)
    assert (e["layout"], tuple(e["dims"]), e["dtype"]) == (layout, logical.shape, dtype), e
    want = runtime.to_image(np.ascontiguousarray(logical), layout, dtype=dtype,
                            engine="reference")
    assert images[name].dtype == want.dtype and np.array_equal(bits(images[name]), bits(want))
    return e


def rule(q, scale, zero, axis):
    """(q - zero) * scale as the docs state it, written out independently."""
    shape = [1] * q.ndim
    if axis is not None:
        shape[axis] = -1
    d = q.astype(np.int64) - np.asarray(zero).astype(np.int64).reshape(shape if axis is not None
                                                                       else ())
    s = np.asarray(scale, np.float32).reshape(shape if axis is not None else ())
    return (d.astype(np.float32) * s).astype(np.float32)


def onnxruntime_dequantize(tmp_path, q, scale, zero, axis):
    """onnxruntime's DequantizeLinear of the same constants: the ground truth."""
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs)
    path = build(tmp_path, [node], {"q": q, "s": scale, "z": zero}, inputs=[],
                 name="dq_only.onnx")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {})[0]


# -- QDQ --------------------------------------------------------------------------------------
QDQ_CASES = {   # name: (consumer op, q, scale, zero point, axis, role layout, logical of ONNX)
    "conv per-axis int8": ("Conv", ints(np.int8, 6, 3, 3, 3), floats(6) ** 2 / 50,
                           ints(np.int8, 6), 0, "conv2d_filter", lambda a: a),
    "conv per-tensor uint8": ("Conv", ints(np.uint8, 5, 2, 1, 3), np.float32(0.0371),
                              np.uint8(131), None, "conv2d_filter", lambda a: a),
    "conv-transpose per-axis": ("ConvTranspose", ints(np.int8, 4, 6, 2, 2),
                                floats(6) ** 2 / 40, ints(np.int8, 6), 1, "conv2d_filter",
                                lambda a: a.transpose(1, 0, 2, 3)),
    "matmul per-column": ("MatMul", ints(np.int8, 12, 7), floats(7) ** 2 / 30, ints(np.int8, 7),
                          1, "weight_width", lambda a: a.T[:, :, None, None]),
    "bias int32 per-axis": ("Conv bias", ints(np.int32, 6) // 4096, floats(6) ** 2 / 1e4,
                            np.zeros(6, np.int32), 0, "argument", lambda a: a),
}


def _qdq_model(tmp_path, case):
    op, q, scale, zero, axis, _, _ = QDQ_CASES[case]
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], name="dq", **attrs)]
    inits = {"q": q, "s": scale, "z": zero}
    if op == "Conv bias":
        inits["fw"] = floats(6, 2, 1, 1)
        nodes.append(helper.make_node("Conv", ["x", "fw", "w"], ["y"], name="op"))
    else:
        nodes.append(helper.make_node(op, ["x", "w"], ["y"], name="op"))
    return build(tmp_path, nodes, inits)


@pytest.mark.parametrize("case", list(QDQ_CASES))
def test_qdq_folded(tmp_path, capsys, case):
    _, q, scale, zero, axis, layout, logical = QDQ_CASES[case]
    images, manifest, out = convert(tmp_path, capsys, _qdq_model(tmp_path, case))
    want = rule(q, scale, zero, axis)
    truth = onnxruntime_dequantize(tmp_path, q, scale, zero, axis)
    assert truth.dtype == np.float32 and np.array_equal(bits(truth), bits(want))
    e = expect(images, manifest, "w", layout, logical(want), "f32")
    assert e["dequantized"] == {"q": "q", "scale": "s", "zero_point": "z", "axis": axis,
                                "node": "DequantizeLinear 'dq'"}
    assert e["origin"] == "initializer -> DequantizeLinear dq"
    assert {s["name"]: s["folded_into"] for s in manifest["skipped"]} == \
        {"q": ["w"], "s": ["w"], "z": ["w"]}
    assert manifest["quantized"] == "fold" and manifest["format"] == "clayout-model/7"


@pytest.mark.parametrize("case", list(QDQ_CASES))
def test_qdq_kept(tmp_path, capsys, case):
    _, q, scale, zero, axis, layout, logical = QDQ_CASES[case]
    images, manifest, out = convert(tmp_path, capsys, _qdq_model(tmp_path, case),
                                    "--quantized", "keep")
    kind = {"int8": "s8", "uint8": "u8", "int32": "s32"}[q.dtype.name]
    e = expect(images, manifest, "w", layout, logical(q), kind)
    expect(images, manifest, "w.scale", "argument", np.asarray(scale).reshape(-1), "f32")
    expect(images, manifest, "w.zero_point", "argument", np.asarray(zero).reshape(-1), kind)
    want_logical_axis = {None: None, 0: 0, 1: 0}[axis]
    assert e["quantization"] == {"q": "q", "scale": "w.scale", "zero_point": "w.zero_point",
                                 "axis": axis, "logical_axis": want_logical_axis,
                                 "source": "DequantizeLinear 'dq'",
                                 "scale_source": "DequantizeLinear 'dq'"}
    p = entry_of(manifest, "w.scale")
    assert (p["param_of"], p["source_name"]) == ("w", "s")
    assert manifest["skipped"] == [] and manifest["quantized"] == "keep"
    assert f"({sum(t['bytes'] for t in manifest['tensors'])} bytes of f32, {kind})" in out


def test_qdq_depthwise_per_axis_kept(tmp_path, capsys):
    """A depthwise weight (C, 1, kH, kW): its per-channel axis 0 is logical dim 1."""
    q, scale, zero = ints(np.int8, 8, 1, 3, 3), floats(8) ** 2 / 50, ints(np.int8, 8)
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], name="dq", axis=0),
             helper.make_node("Conv", ["x", "w"], ["y"], group=8)]
    path = build(tmp_path, nodes, {"q": q, "s": scale, "z": zero})
    images, manifest, _ = convert(tmp_path, capsys, path, "--quantized", "keep")
    e = expect(images, manifest, "w", "dw_conv2d_filter", q.transpose(1, 0, 2, 3), "s8")
    assert (e["quantization"]["axis"], e["quantization"]["logical_axis"]) == (0, 1)
    images, manifest, _ = convert(tmp_path, capsys, path)
    expect(images, manifest, "w", "dw_conv2d_filter",
           rule(q, scale, zero, 0).transpose(1, 0, 2, 3), "f32")


def test_qdq_then_transpose(tmp_path, capsys):
    """A DequantizeLinear followed by a folded Transpose: q and its axis move along."""
    q, scale, zero = ints(np.int8, 7, 12), floats(7) ** 2 / 30, ints(np.int8, 7)   # (N, K)
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["wt"], name="dq", axis=0),
             helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    path = build(tmp_path, nodes, {"q": q, "s": scale, "z": zero})
    images, manifest, _ = convert(tmp_path, capsys, path)
    expect(images, manifest, "w", "weight_width", rule(q, scale, zero, 0)[:, :, None, None], "f32")
    images, manifest, _ = convert(tmp_path, capsys, path, "--quantized", "keep")
    e = expect(images, manifest, "w", "weight_width", q[:, :, None, None], "s8")
    assert (e["quantization"]["axis"], e["quantization"]["logical_axis"]) == (1, 0)


def test_qdq_unsupported_forms_name_the_weight(tmp_path, capsys):
    q = ints(np.int8, 4, 3, 1, 1)
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], name="dq", axis=0,
                              block_size=2),
             helper.make_node("Conv", ["x", "w"], ["y"])]
    path = build(tmp_path, nodes, {"q": q, "s": floats(4, 2), "z": ints(np.int8, 4, 2)},
                 opset=21)
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"],
          "DequantizeLinear 'dq' of 'q'", "block_size 2")
    nodes[0] = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], name="dq", axis=0)
    path = build(tmp_path, nodes, {"q": q, "s": floats(3), "z": ints(np.int8, 3)})
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"],
          "DequantizeLinear 'dq' of 'q'", "scale of shape (3,)", "(4,) (per axis)")
    path = build(tmp_path, nodes, {"q": q.astype(np.int16), "s": floats(4),
                                   "z": ints(np.int16, 4)}, opset=21)
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--quantized", "keep",
                             "--images-only"],
          "'w' (4, 3, 1, 1)", "int16 values", "--quantized fold")
    images, manifest, _ = convert(tmp_path, capsys, path)   # folding int16 is fine
    assert entry_of(manifest, "w")["dtype"] == "f32"


# -- integer operators -------------------------------------------------------------------------
def _dynamic_conv(tmp_path, w, w_zero, w_scale, name="conv.onnx"):
    """What quantize_dynamic makes of a Conv: DynamicQuantizeLinear, ConvInteger,
    Cast, and a Mul by the input's run-time scale times the weight's scale."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("Mul", ["xs", "w_scale"], ["scales"], name="scales_mul"),
             helper.make_node("ConvInteger", ["xq", "w_q", "xz", "w_zero"], ["acc"],
                              name="conv"),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "scales"], ["y"], name="out_mul")]
    return build(tmp_path, nodes, {"w_q": w, "w_zero": w_zero, "w_scale": w_scale}, name=name)


def test_conv_integer_after_dynamic_quantize(tmp_path, capsys):
    w, zero, scale = ints(np.uint8, 8, 3, 3, 3), ints(np.uint8, 8), floats(1)[0] ** 2
    images, manifest, out = convert(tmp_path, capsys, _dynamic_conv(tmp_path, w, zero,
                                                                    np.float32(scale)))
    e = expect(images, manifest, "w_q", "conv2d_filter", w, "u8")
    expect(images, manifest, "w_q.zero_point", "argument", zero, "u8")
    expect(images, manifest, "w_q.scale", "argument", np.float32([scale]), "f32")
    assert e["consumer"] == "ConvInteger conv input 1"
    assert e["quantization"]["axis"] == 0 and e["quantization"]["source"] == \
        "ConvInteger conv input 1"
    assert e["quantization"]["scale_source"].startswith("Mul scales_mul: the constant times")
    assert manifest["skipped"] == []          # the scale and zero point are the weight's
    assert "ConvInteger 1/0/0" in out and "bytes of f32, u8" in out
    # the same with --quantized keep: integer operators are always kept
    again, manifest2, _ = convert(tmp_path, capsys, tmp_path / "conv.onnx", "--quantized", "keep",
                                  out="k.safetensors")
    assert manifest2["tensors"] == manifest["tensors"]


def test_matmul_integer_scale_after_cast(tmp_path, capsys):
    """MatMulInteger whose output is multiplied by a constant directly."""
    b, zero, scale = ints(np.int8, 10, 6), np.int8(3), np.float32(0.02)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "b", "xz", "bz"], ["acc"], name="mm"),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "k"], ["y"], name="rescale")]
    path = build(tmp_path, nodes, {"b": b, "bz": zero, "k": scale})
    images, manifest, out = convert(tmp_path, capsys, path)
    e = expect(images, manifest, "b", "weight_width", b.T[:, :, None, None], "s8")
    expect(images, manifest, "b.zero_point", "argument", np.int8([3]), "s8")
    expect(images, manifest, "b.scale", "argument", np.float32([0.02]), "f32")
    assert e["quantization"]["axis"] is None
    assert e["quantization"]["scale_source"] == "Mul rescale: the constant its output is " \
        "multiplied by"
    assert "MatMulInteger 1/0/0" in out


def test_qlinear_conv_and_matmul(tmp_path, capsys):
    w, w_scale, w_zero = ints(np.int8, 6, 4, 1, 3), floats(6) ** 2 / 50, np.zeros(6, np.int8)
    bias = ints(np.int32, 6) // 65536
    b, b_scale, b_zero = ints(np.uint8, 5, 3), floats(3) ** 2 / 50, ints(np.uint8, 3)
    act = {"xs": np.float32(0.1), "xz": np.uint8(128), "ys": np.float32(0.2),
           "yz": np.uint8(120), "zs": np.float32(0.3), "zz": np.uint8(3)}
    nodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz",
                                              "bias"], ["y"], name="qconv"),
             helper.make_node("QLinearMatMul", ["y", "ys", "yz", "b", "bs", "bz", "zs", "zz"],
                              ["z"], name="qmm")]
    path = build(tmp_path, nodes, {"w": w, "ws": w_scale, "wz": w_zero, "bias": bias, "b": b,
                                   "bs": b_scale, "bz": b_zero, **act},
                 inputs=[helper.make_tensor_value_info("x", TensorProto.UINT8, None)],
                 outputs=[helper.make_tensor_value_info("z", TensorProto.UINT8, None)])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--images-only"],
          "3 constant(s) the model needs cannot go on an image",
          "left out: 'xs' () (QLinearConv qconv input 1)",
          "an activation's quantization parameter", "drop --images-only")
    images, manifest, out = convert(tmp_path, capsys, path)
    e = expect(images, manifest, "w", "conv2d_filter", w, "s8")
    expect(images, manifest, "w.scale", "argument", w_scale, "f32")
    expect(images, manifest, "w.zero_point", "argument", w_zero, "s8")
    assert e["quantization"]["scale_source"] == "QLinearConv qconv input 4"
    expect(images, manifest, "bias", "argument", bias, "s32")
    e = expect(images, manifest, "b", "weight_width", b.T[:, :, None, None], "u8")
    expect(images, manifest, "b.scale", "argument", b_scale, "f32")
    expect(images, manifest, "b.zero_point", "argument", b_zero, "u8")
    assert (e["quantization"]["axis"], e["quantization"]["logical_axis"]) == (1, 0)
    # the activations' parameters: the float scales kept as buffers, the integer zero points
    # (not float weights) skipped; each with its reason
    kept = {e["name"]: e["reason"] for e in manifest["tensors"] if e["layout"] == "buffer"}
    skipped = {s["name"]: s["reason"] for s in manifest["skipped"]}
    assert set(kept) == {"xs", "ys", "zs"} and set(skipped) == {"xz", "yz", "zz"}
    assert all("an activation's quantization parameter" in r for r in
               list(skipped.values()) + list(kept.values()))
    assert "QLinearConv 2/2/2, QLinearMatMul 1/1/1" in out   # ys, yz: QLinearConv's first
    a = manifest["accounting"]   # the float constants: ws, bs placed (scales); xs, ys, zs kept
    assert (a["float_constants"], a["placed"], a["kept"], a["folded"], a["dead"]) == \
        (5, 9, 3, 0, 0)


def test_integer_weights_that_cannot_be_stored_are_named(tmp_path, capsys):
    w = ints(np.int8, 4, 3, 2, 2, 2)                       # a 3-D ConvInteger
    nodes = [helper.make_node("ConvInteger", ["x", "w"], ["y"], name="conv3d")]
    path = build(tmp_path, nodes, {"w": w}, inputs=[
        helper.make_tensor_value_info("x", TensorProto.UINT8, None)],
        outputs=[helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--images-only"],
          "'w' (4, 3, 2, 2, 2) (ConvInteger conv3d input 1)", "a 3-D convolution",
          "drop --images-only")
    stored, manifest, out = convert(tmp_path, capsys, path)
    e = entry_of(manifest, "w")
    assert (e["layout"], e["dtype"], e["tag"]) == ("buffer", "s8", "abcde")
    assert np.array_equal(stored["w"], w) and "ConvInteger 0/1/0" in out
    # a zero point computed at run time
    nodes = [helper.make_node("Identity", ["x"], ["xz"]),
             helper.make_node("MatMulInteger", ["x", "b", "xz", "x"], ["y"], name="mm")]
    path = build(tmp_path, nodes, {"b": ints(np.int8, 4, 4)}, inputs=[
        helper.make_tensor_value_info("x", TensorProto.INT8, None)],
        outputs=[helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--images-only"],
          "'b' (4, 4) (MatMulInteger mm input 1)", "zero point 'x'", "not a constant")


# -- recurrent weights -------------------------------------------------------------------------
RECURRENT = {"LSTM": 4, "GRU": 3}


@pytest.mark.parametrize("op", list(RECURRENT))
def test_recurrent_weights(tmp_path, capsys, op):
    gates, hidden, inputs = RECURRENT[op], 5, 3
    arrays = {"W": floats(1, gates * hidden, inputs), "R": floats(1, gates * hidden, hidden),
              "B": floats(1, 2 * gates * hidden)}
    nodes = [helper.make_node(op, ["x", "W", "R", "B"], ["y"], hidden_size=hidden, name="rnn"),
             helper.make_node("MatMul", ["y", "fc"], ["z"])]
    arrays["fc"] = floats(hidden, 2)
    path = build(tmp_path, nodes, arrays)
    err = fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--images-only"],
                "3 constant(s) the model needs cannot go on an image",
                f"left out: 'W' (1, {gates * hidden}, 3) ({op} rnn input 1)", "'R'", "'B'",
                "drop --images-only")
    assert "'fc'" not in err
    stored, manifest, out = convert(tmp_path, capsys, path)   # buffers, by default
    for name, tag in (("W", "abc"), ("R", "abc"), ("B", "ab")):
        e = entry_of(manifest, name)
        assert (e["layout"], e["tag"], tuple(e["dims"]), e["role"]) == \
            ("buffer", tag, arrays[name].shape, None)
        assert e["reason"] == f"{op} input {'WRB'.index(name) + 1} has no image role"
        assert np.array_equal(bits(stored[name]), bits(arrays[name]))
    expect(stored, manifest, "fc", "weight_width", arrays["fc"].T[:, :, None, None], "f32")
    assert "1 images, 3 buffers" in out and f"{op} 0/3/0" in out and "MatMul 1/0/0" in out


# -- 1-D and 3-D convolutions ----------------------------------------------------------------------
def test_conv1d(tmp_path, capsys):
    w, dw, wt = floats(8, 3, 5), floats(8, 1, 3), floats(8, 4, 2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"]),
             helper.make_node("Conv", ["a", "dw"], ["b"], group=8),
             helper.make_node("ConvTranspose", ["b", "wt"], ["y"])]
    path = build(tmp_path, nodes, {"w": w, "dw": dw, "wt": wt})
    images, manifest, out = convert(tmp_path, capsys, path)
    e = expect(images, manifest, "w", "conv2d_filter", w[:, :, None, :], "f32")
    assert e["steps"] == [["reshape", [8, 3, 1, 5]]] and e["mapping"].startswith("1-D")
    e = expect(images, manifest, "dw", "dw_conv2d_filter", dw.transpose(1, 0, 2)[:, :, None, :],
               "f32")
    assert e["steps"][0] == ["reshape", [8, 1, 1, 3]]
    expect(images, manifest, "wt", "conv2d_filter", wt.transpose(1, 0, 2)[:, :, None, :], "f32")
    for name, want in (("w", w), ("dw", dw), ("wt", wt)):      # the steps undo exactly
        back = model.read_back(images[name], entry_of(manifest, name))
        assert np.array_equal(bits(back), bits(want))
    assert "Conv 2/0/0, ConvTranspose 1/0/0" in out


def test_conv3d_is_refused(tmp_path, capsys):
    path = build(tmp_path, [helper.make_node("Conv", ["x", "w"], ["y"], name="c3")],
                 {"w": floats(4, 2, 3, 3, 3)})
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--images-only"],
          "'w' (4, 2, 3, 3, 3) (Conv c3 input 1): Conv weight of rank 5 (a 3-D convolution): "
          "image layouts take 1-D and 2-D convolutions only")


# -- the default dtype ------------------------------------------------------------------------------
def test_float16_model_gives_f16_images(tmp_path, capsys):
    w = floats(4, 3, 3, 3, dtype=np.float16)
    path = build(tmp_path, [helper.make_node("Conv", ["x", "w", "b"], ["y"])],
                 {"w": w, "b": floats(4, dtype=np.float16)})
    images, manifest, _ = convert(tmp_path, capsys, path)
    assert manifest["dtype"] == "f16"
    expect(images, manifest, "w", "conv2d_filter", w, "f16")
    images, manifest, _ = convert(tmp_path, capsys, path, "--dtype", "f32")
    expect(images, manifest, "w", "conv2d_filter", w.astype(np.float32), "f32")
    mixed = build(tmp_path, [helper.make_node("Conv", ["x", "w", "b"], ["y"])],
                  {"w": w, "b": floats(4)}, name="mixed.onnx")
    images, manifest, _ = convert(tmp_path, capsys, mixed)
    assert manifest["dtype"] == "f32"                  # exact for both
    expect(images, manifest, "w", "conv2d_filter", w.astype(np.float32), "f32")


# -- the device's limit and the target's ------------------------------------------------------------
def test_max_image_over_the_device_limit(tmp_path, capsys, monkeypatch, default_cl_engine):
    """--max-image larger than the device allows: those images are converted on
    the host, with the cpu engine's bits, and the command says so once."""
    big, bias = floats(16, 16, 3, 3), floats(16)               # conv2d_filter 16 x 36
    fc = floats(12, 40)                                         # MatMul: weight_width 3 x 40
    nodes = [helper.make_node("Conv", ["x", "big", "bias"], ["a"]),
             helper.make_node("MatMul", ["a", "fc"], ["y"])]
    path = build(tmp_path, nodes, {"big": big, "bias": bias, "fc": fc})
    with_facts(monkeypatch, default_cl_engine, limits=Limits.of((8, 8)))   # the build machine's
    assert runtime.engine.get("opencl") is default_cl_engine
    with pytest.raises(runtime.ClayoutError, match="over the device limit 8x8"):
        runtime.to_image(big, "conv2d_filter", engine=default_cl_engine)
    images, manifest, out = convert(tmp_path, capsys, path, "--engine", "opencl",
                                    "--max-image", "64,64", "--no-tiles")
    assert manifest["engine"] == "opencl" and manifest["host_converted"] == ["big", "fc"]
    for name, logical, layout in (("big", big, "conv2d_filter"), ("bias", bias, "argument"),
                                  ("fc", fc.T[:, :, None, None], "weight_width")):
        cpu = runtime.to_image(np.ascontiguousarray(logical), layout, engine="cpu")
        assert np.array_equal(bits(images[name]), bits(cpu)), name
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert notes == ["note: 2 image(s) over the opencl device's 8x8 limit (--max-image 64,64 is "
                     "the target's) were converted on the host by the cpu engine, with the same "
                     "bits: 'big', 'fc'"]
    # with tiles of at most 16x16, over the device's 8x8 too
    images, manifest, out = convert(tmp_path, capsys, path, "--engine", "opencl",
                                    "--max-image", "16,16", out="t.safetensors")
    assert manifest["host_converted"] == ["big", "fc"] and "in 3 tiles" in out


# -- the shipped sample ---------------------------------------------------------------------------
def test_quantized_sample_is_up_to_date_and_runs(tmp_path):
    """runtime/data/sample_quantized.onnx (docs/cli.md's example) is what its
    tool builds, and onnxruntime runs it."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_quantized_sample.py"),
                           "--check", "-o", str(ROOT / "runtime" / "data" /
                                                "sample_quantized.onnx")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    path = ROOT / "runtime" / "data" / "sample_quantized.onnx"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, {"input": RNG.random((1, 3, 16, 16), dtype=np.float32)})[0]
    assert out.shape == (1, 10) and np.isfinite(out).all()
    for form, kinds in (("fold", {"f32", "u8"}), ("keep", {"f32", "s8", "s32", "u8"})):
        manifest, verified = model.convert_file(str(path), str(tmp_path / f"{form}.safetensors"),
                                                quantized=form, verify_all=True,
                                                keep_buffers=True)   # the input's scale
        assert {e["dtype"] for e in manifest["tensors"]} == kinds
        assert verified == len(manifest["tensors"])


@pytest.mark.parametrize("form", ["fold", "keep"])
def test_quantized_sample_on_opencl(tmp_path, cl_engine, form):
    """Integer and float images of the quantized sample: the OpenCL engine's
    bits are the cpu engine's (s8, u8, s32 and f32 images)."""
    path = str(ROOT / "runtime" / "data" / "sample_quantized.onnx")
    files = {}
    for name, engine in (("cpu", "cpu"), ("opencl", cl_engine)):
        out = tmp_path / f"{name}.safetensors"
        model.convert_file(path, str(out), quantized=form, engine=engine, verify_all=True,
                           keep_buffers=True)
        files[name] = load_file(str(out))
    assert sorted(files["cpu"]) == sorted(files["opencl"])
    for key, image in files["cpu"].items():
        assert image.dtype == files["opencl"][key].dtype
        assert np.array_equal(bits(image), bits(files["opencl"][key])), key
