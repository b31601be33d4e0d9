"""Constant subgraphs folded, and every float constant accounted for
(runtime.model.onnx.fold, runtime.model.tflite.fold, runtime.model.accounting).

Ground truth for folding is onnxruntime: each folded operator's output is
also a graph output, so onnxruntime computes the same tensor from the same
constants, and clayout's folded constant must have its bits. A PyTorch-style
LSTM whose W, R and B come through Slice, Concat and Unsqueeze of constants
(inside an If branch too, from outer-scope constants) converts with every
weight placed or kept, equal to onnxruntime's view of them; a constant
through an operator clayout does not evaluate is named and the run exits 1;
every float element of the graph is placed, folded, kept, dead or empty.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from runtime.errors import ClayoutError
from runtime.model import front_ends
from runtime.model.accounting import account
from runtime.model.graph import Constant
from runtime.model.manifest import accounting_problems, read_manifest, upgrade

from conftest import needs  # noqa: E402
onnx = needs("onnx")
ort = needs("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from conftest import bits, run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/__init__.py", "runtime/model/accounting.py",
           "runtime/model/front_ends.py", "runtime/model/graph.py",
           "runtime/model/onnx/__init__.py", "runtime/model/onnx/constants.py",
           "runtime/model/onnx/fold.py", "runtime/model/tflite/__init__.py",
           "runtime/model/tflite/constants.py", "runtime/model/tflite/fold.py")

RNG = np.random.default_rng(39)
F32 = TensorProto.FLOAT


def const(name, array):
    return helper.make_node("Constant", [], [name], name=f"c_{name}",
                            value=numpy_helper.from_array(np.asarray(array), name))


def save(tmp_path, nodes, outputs, inputs=(), opset=17, name="m.onnx"):
    """The model, its outputs' types filled by onnx's shape inference."""
    graph = helper.make_graph(nodes, "g", list(inputs),
                              [helper.make_empty_tensor_value_info(o) for o in outputs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    typed = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    for out in m.graph.output:
        out.type.CopyFrom(typed[out.name].type)
    path = tmp_path / name
    onnx.save(m, str(path))
    return path


def ort_outputs(path, feeds=None) -> dict:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds or {})))


def folded(path) -> dict:
    """{name: array} of every constant clayout's ONNX reader finds (folded ones too)."""
    return {c.name: c.array for c in front_ends.read_constants(front_ends.load(str(path)),
                                                               str(path))}


A = RNG.standard_normal((4, 6)).astype(np.float32)
I64 = np.int64
# name: (nodes after the constants, extra constants[, opset]); every op reads the constant "a"
CASES = {
    "Slice": ([helper.make_node("Slice", ["a", "s", "e", "ax", "st"], ["y"])],
              {"s": np.array([3, 1], I64), "e": np.array([0, 100], I64),
               "ax": np.array([1, 0], I64), "st": np.array([-1, 2], I64)}),
    "Slice default axes": ([helper.make_node("Slice", ["a", "s", "e"], ["y"])],
                           {"s": np.array([-3], I64), "e": np.array([-1], I64)}),
    "Concat": ([helper.make_node("Concat", ["a", "a"], ["y"], axis=-1)], {}),
    "Split": ([helper.make_node("Split", ["a", "sp"], ["y", "y2"], axis=1)],
              {"sp": np.array([2, 4], I64)}),
    "Split equal": ([helper.make_node("Split", ["a"], ["y", "y2"], axis=0, num_outputs=2)],
                    {}, 18),
    "Gather": ([helper.make_node("Gather", ["a", "i"], ["y"], axis=1)],
               {"i": np.array([[0, -1], [2, 3]], I64)}),
    "Unsqueeze": ([helper.make_node("Unsqueeze", ["a", "ax"], ["y"])],
                  {"ax": np.array([0, -1], I64)}),
    "Squeeze": ([helper.make_node("Unsqueeze", ["a", "ax"], ["u"]),
                 helper.make_node("Squeeze", ["u", "ax"], ["y"])], {"ax": np.array([1], I64)}),
    "Reshape": ([helper.make_node("Reshape", ["a", "sh"], ["y"])],
                {"sh": np.array([0, 2, -1], I64)}),
    "Flatten": ([helper.make_node("Flatten", ["a"], ["y"], axis=0)], {}),
    "Transpose": ([helper.make_node("Transpose", ["a"], ["y"], perm=[1, 0])], {}),
    "Cast": ([helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT16)], {}),
    "Expand": ([helper.make_node("Expand", ["a", "sh"], ["y"])],
               {"sh": np.array([3, 1, 1], I64)}),
    "Tile": ([helper.make_node("Tile", ["a", "r"], ["y"])], {"r": np.array([2, 3], I64)}),
    "Pad constant": ([helper.make_node("Pad", ["a", "p", "v"], ["y"])],
                     {"p": np.array([1, -1, 0, 2], I64), "v": np.array(2.5, np.float32)}),
    "Pad reflect": ([helper.make_node("Pad", ["a", "p"], ["y"], mode="reflect")],
                    {"p": np.array([1, 2, 2, 1], I64)}),
    "Pad edge": ([helper.make_node("Pad", ["a", "p"], ["y"], mode="edge")],
                 {"p": np.array([0, 3, 1, 0], I64)}),
    "Mul": ([helper.make_node("Mul", ["a", "k"], ["y"])], {"k": np.float32(1 / 3)}),
    "Add": ([helper.make_node("Add", ["a", "b"], ["y"])],
            {"b": RNG.standard_normal((6,)).astype(np.float32)}),
    "Sub": ([helper.make_node("Sub", ["k", "a"], ["y"])], {"k": np.float32(0.1)}),
    "Div": ([helper.make_node("Div", ["a", "k"], ["y"])], {"k": np.float32(7)}),
    "Div int": ([helper.make_node("Shape", ["a"], ["s"]),
                 helper.make_node("Div", ["n", "s"], ["y"])], {"n": np.array([-7, 7], I64)}),
    "Shape": ([helper.make_node("Shape", ["a"], ["y"], start=-1)], {}),
    "ConstantOfShape": ([helper.make_node("Shape", ["a"], ["s"]),
                         helper.make_node("ConstantOfShape", ["s"], ["y"],
                                          value=numpy_helper.from_array(
                                              np.array([1.25], np.float32)))], {}),
    "Range": ([helper.make_node("Range", ["r0", "r1", "r2"], ["y"])],
              {"r0": np.float32(1.5), "r1": np.float32(-2.0), "r2": np.float32(-0.75)}),
    "Identity": ([helper.make_node("Identity", ["a"], ["y"])], {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_folded_op_is_what_onnxruntime_computes(tmp_path, case):
    nodes, extra, *opset = CASES[case]
    outputs = [o for n in nodes[-1:] for o in n.output]
    path = save(tmp_path, [const("a", A)] + [const(k, v) for k, v in extra.items()] + nodes,
                outputs, opset=opset[0] if opset else 17)
    want, got = ort_outputs(path), folded(path)
    for name in outputs:
        assert got[name].shape == want[name].shape, (case, name)
        assert got[name].dtype == want[name].dtype, (case, name)
        assert np.array_equal(bits(got[name]), bits(want[name])), (case, name)


# -- an LSTM as PyTorch exports it ----------------------------------------------------------------
HIDDEN, INPUT = 3, 5


def torch_lstm_nodes(prefix=""):
    """W, R and B of an LSTM made the way PyTorch's exporter makes them: each
    gate block sliced out of weight_ih / weight_hh (PyTorch's gate order i, f,
    g, o), concatenated in ONNX's order (i, o, f, c), unsqueezed; B the two
    biases concatenated."""
    h = HIDDEN
    w_ih = RNG.standard_normal((4 * h, INPUT)).astype(np.float32)
    w_hh = RNG.standard_normal((4 * h, h)).astype(np.float32)
    b_ih, b_hh = (RNG.standard_normal(4 * h).astype(np.float32) for _ in range(2))
    nodes = [const(prefix + "weight_ih", w_ih), const(prefix + "weight_hh", w_hh),
             const(prefix + "bias_ih", b_ih), const(prefix + "bias_hh", b_hh),
             const(prefix + "zero", np.array([0], np.int64))]
    for k, gate in enumerate("ifgo"):
        nodes += [const(f"{prefix}s{gate}", np.array([k * h], np.int64)),
                  const(f"{prefix}e{gate}", np.array([(k + 1) * h], np.int64))]
    for what in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        for gate in "ifgo":
            nodes.append(helper.make_node("Slice", [prefix + what, f"{prefix}s{gate}",
                                                    f"{prefix}e{gate}", prefix + "zero"],
                                          [f"{prefix}{what}_{gate}"]))
        nodes.append(helper.make_node("Concat", [f"{prefix}{what}_{g}" for g in "iofg"],
                                      [f"{prefix}{what}_onnx"], axis=0))
    nodes += [helper.make_node("Unsqueeze", [prefix + "weight_ih_onnx", prefix + "zero"],
                               [prefix + "W"]),
              helper.make_node("Unsqueeze", [prefix + "weight_hh_onnx", prefix + "zero"],
                               [prefix + "R"]),
              helper.make_node("Concat", [prefix + "bias_ih_onnx", prefix + "bias_hh_onnx"],
                               [prefix + "B0"], axis=0),
              helper.make_node("Unsqueeze", [prefix + "B0", prefix + "zero"], [prefix + "B"])]
    return nodes


def lstm_model(tmp_path):
    nodes = torch_lstm_nodes() + [
        helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=HIDDEN, name="rnn"),
        # the folded tensors as outputs too: onnxruntime's view of them
        helper.make_node("Identity", ["W"], ["W_out"]), helper.make_node("Identity", ["R"], ["R_out"]),
        helper.make_node("Identity", ["B"], ["B_out"])]
    x = helper.make_tensor_value_info("x", F32, [2, 1, INPUT])
    return save(tmp_path, nodes, ["y", "W_out", "R_out", "B_out"], [x])


def test_an_lstm_through_slice_concat_unsqueeze_keeps_every_weight(tmp_path, capsys):
    path = lstm_model(tmp_path)
    out = tmp_path / "w.safetensors"
    code, _, err = run(capsys, "model", path, "-o", out, "--images-only")   # named, each
    assert code == 1 and "3 constant(s) the model needs cannot go on an image" in err, err
    for name in ("'W' (1, 12, 5) (LSTM rnn input 1)", "'R' (1, 12, 3) (LSTM rnn input 2)",
                 "'B' (1, 24) (LSTM rnn input 3)"):
        assert f"clayout: left out: {name}" in err, (name, err)
    code, stdout, err = run(capsys, "model", path, "-o", out, "--verify")   # buffers by default
    assert code == 0, err
    tensors, manifest = read_manifest(out)
    feeds = {"x": RNG.standard_normal((2, 1, INPUT)).astype(np.float32)}
    want = ort_outputs(path, feeds)
    for name in ("W", "R", "B"):
        e = next(e for e in manifest["tensors"] if e["name"] == name)
        assert e["layout"] == "buffer" and e["reason"].startswith("LSTM input")
        assert np.array_equal(bits(tensors[name].reshape(want[f"{name}_out"].shape)),
                              bits(want[f"{name}_out"])), name
        assert " of " in e["origin"] or " -> " in e["origin"], e["origin"]
    a = manifest["accounting"]   # every float element of the four PyTorch tensors, folded
    total = 4 * HIDDEN * INPUT + 4 * HIDDEN * HIDDEN + 2 * 4 * HIDDEN
    assert (a["float_constants"], a["float_elements"], a["folded"]) == (4, total, total)
    assert {c["name"]: c["into"] for c in a["constants"]} == {
        "weight_ih": ["W"], "weight_hh": ["R"], "bias_ih": ["B"], "bias_hh": ["B"]}
    assert f"accounted for: {total} float elements in 4 constants = 0 placed, {total} " \
        "folded, 0 kept, 0 dead" in stdout


def test_folding_inside_if_branches_from_outer_scope_constants(tmp_path, capsys):
    """An If branch slices an outer-scope constant into its Conv's filter (and
    returns it, so that onnxruntime shows its value)."""
    whole = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)

    def branch(name, start):
        nodes = [const("st", np.array([start], np.int64)),
                 const("en", np.array([start + 3], np.int64)),
                 helper.make_node("Slice", ["whole", "st", "en"], ["w"]),
                 helper.make_node("Conv", ["x", "w"], [f"{name}_y"], name="conv"),
                 helper.make_node("Identity", ["w"], [f"{name}_w"])]
        return helper.make_graph(nodes, name, [], [
            helper.make_tensor_value_info(f"{name}_y", F32, None),
            helper.make_tensor_value_info(f"{name}_w", F32, None)])
    nodes = [const("whole", whole),
             helper.make_node("If", ["cond"], ["y", "w_out"], name="gate",
                              then_branch=branch("then", 0), else_branch=branch("else", 3))]
    path = save(tmp_path, nodes, ["y", "w_out"],
                [helper.make_tensor_value_info("x", F32, [1, 2, 5, 5]),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, [])])
    out = tmp_path / "w.safetensors"
    code, _, err = run(capsys, "model", path, "-o", out, "--verify")
    assert code == 0, err
    tensors, manifest = read_manifest(out)
    by = {e["name"]: e for e in manifest["tensors"]}
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    for cond, name in ((True, "gate/then_branch/w"), (False, "gate/else_branch/w")):
        want = ort_outputs(path, {"x": x, "cond": np.array(cond)})["w_out"]
        assert by[name]["layout"] == "conv2d_filter"
        assert np.array_equal(folded(path)[name], want), name
    (c,) = manifest["accounting"]["constants"]
    assert (c["name"], c["elements"], c["fate"]) == ("whole", whole.size, "folded")
    assert sorted(c["into"]) == ["gate/else_branch/w", "gate/then_branch/w"]


def test_a_constant_through_an_op_clayout_does_not_evaluate_is_named(tmp_path, capsys):
    k = RNG.standard_normal((5,)).astype(np.float32)
    nodes = [const("k", k), helper.make_node("Sin", ["k"], ["s"], name="sine"),
             helper.make_node("Add", ["x", "s"], ["y"])]
    path = save(tmp_path, nodes, ["y"], [helper.make_tensor_value_info("x", F32, [5])])
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "w.safetensors",
                       "--images-only")
    assert code == 1 and err.count("\n") == 2, err
    assert "left out: 'k' (5,) (Sin sine input 0): Sin input 0 has no image role; every input " \
        "of Sin sine is a constant, but clayout does not evaluate Sin" in err
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "w.safetensors")
    assert code == 0, err


def test_dead_constants_are_named_and_the_rest_kept(tmp_path, capsys):
    """A constant no output needs is dead; a (1, 4, 4) constant a Mul reads is
    the model's: kept as a buffer by default, named with --images-only."""
    attn = RNG.standard_normal((1, 4, 4)).astype(np.float32)
    nodes = [const("attn", attn), const("unused_w", np.ones((3, 3), np.float32)),
             helper.make_node("Mul", ["x", "attn"], ["y"]),
             helper.make_node("MatMul", ["x", "unused_w"], ["dead_end"])]
    path = save(tmp_path, nodes, ["y"], [helper.make_tensor_value_info("x", F32, [1, 4, 4])])
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "w.safetensors",
                       "--images-only")
    assert code == 1 and "'attn' (1, 4, 4) (Mul Mul#2 input 1)" in err and \
        "is not a per-channel vector" in err, err
    code, out, err = run(capsys, "model", path, "-o", tmp_path / "w.safetensors")
    assert code == 0, err
    tensors, manifest = read_manifest(tmp_path / "w.safetensors")
    assert np.array_equal(tensors["attn"].reshape(1, 4, 4), attn)
    fates = {c["name"]: c["fate"] for c in manifest["accounting"]["constants"]}
    # the MatMul's weight is still placed (a weight, though its output is dead)
    assert fates == {"attn": "kept", "unused_w": "placed"}
    nodes[-1] = helper.make_node("Sin", ["unused_w"], ["dead_end"])
    path = save(tmp_path, nodes, ["y"], [helper.make_tensor_value_info("x", F32, [1, 4, 4])])
    code, out, err = run(capsys, "model", path, "-o", tmp_path / "w.safetensors",
                         "--keep-buffers")
    assert code == 0, err
    _, manifest = read_manifest(tmp_path / "w.safetensors")
    assert {c["name"]: c["fate"] for c in manifest["accounting"]["constants"]} == \
        {"attn": "kept", "unused_w": "dead"}
    assert "accounted for: 25 float elements in 2 constants = 0 placed, 0 folded, 16 kept, " \
        "9 dead" in out


def test_the_accounting_rule():
    """account(): one fate each; a live constant stored nowhere is an error."""
    def c(name, n, **kw):
        return Constant(name, np.zeros(n, np.float32), "float32", (n,), "initializer", **kw)
    placed, dead, empty = c("p", 3), c("d", 2, live=False), c("e", 0)
    src = c("s", 4, folded_into=["made"])
    made = Constant("made", np.zeros(4, np.float32), "float32", (4,), "s -> Reshape",
                    folded_from=("s",))
    lost = c("l", 5)
    a = account([placed, dead, empty, src, made], {"p": "image", "made": "buffer"})
    assert a.totals() == {"float_constants": 4, "float_elements": 9, "placed": 3,
                          "folded": 4, "kept": 0, "dead": 2, "empty": 0}
    with pytest.raises(ClayoutError, match="1 float constant.*'l' .5 elements.*--images-only"):
        account([placed, lost], {"p": "image"})


def test_verify_checks_the_accounting():
    manifest = {"tensors": [{"name": "w"}], "skipped": [{"name": "s"}],
                "accounting": {"float_constants": 2, "float_elements": 10, "placed": 6,
                               "folded": 4, "kept": 0, "dead": 0, "empty": 0,
                               "constants": [{"name": "w", "elements": 6, "fate": "placed"},
                                             {"name": "s", "elements": 4, "fate": "folded",
                                              "into": ["w"]}]}}
    assert accounting_problems(manifest) == []
    wrong = json.loads(json.dumps(manifest))
    wrong["accounting"]["constants"][1]["fate"] = "lost"
    assert any("fate 'lost'" in p for p in accounting_problems(wrong))
    wrong = json.loads(json.dumps(manifest))
    wrong["accounting"]["placed"] = 7
    assert any("do not add up" in p for p in accounting_problems(wrong))
    wrong = json.loads(json.dumps(manifest))
    wrong["accounting"]["constants"][0]["name"] = "v"
    assert any("'v' is placed but not stored" in p for p in accounting_problems(wrong))


def test_a_format_5_manifest_reads_with_todays_keys():
    old = {"format": "clayout-model/5",
           "tensors": [{"name": "w", "onnx_shape": [2], "onnx_dtype": "float32",
                        "onnx_name": "w0"}],
           "skipped": [{"name": "s", "onnx_shape": [], "onnx_dtype": "int64"}]}
    new = upgrade(old)
    assert new["tensors"][0] == {"name": "w", "source_shape": [2], "source_dtype": "float32",
                                 "source_name": "w0"}
    assert new["skipped"][0] == {"name": "s", "source_shape": [], "source_dtype": "int64"}


def test_a_format_6_image_entry_reads_as_storage_and_size():
    old = {"format": "clayout-model/6",
           "tensors": [{"name": "w", "layout": "conv2d_filter", "dims": [4, 3, 3, 3],
                        "width": 9, "height": 4, "dtype": "f32"}], "skipped": []}
    entry = upgrade(old)["tensors"][0]
    assert entry["storage"] == "image2d" and entry["size"] == [9, 4]
    assert "width" not in entry and "height" not in entry


# -- TFLite: the constant operators, against LiteRT's interpreter -------------------------------
tflite_builder = needs("tests.tflite_builder")
TF = tflite_builder.T
TOP = tflite_builder.Op
B = RNG.standard_normal((4, 6)).astype(np.float32)
I32 = np.int32
TFLITE_CASES = {   # name: (the extra constant tensors, the op's name, its inputs, options, out shape)
    "RESHAPE": ([TF("shape", (3,), "int32", data=np.array([2, 3, 4], I32))], "RESHAPE",
                [0, 1], {}, (2, 3, 4)),
    "TRANSPOSE": ([TF("perm", (2,), "int32", data=np.array([1, 0], I32))], "TRANSPOSE",
                  [0, 1], {}, (6, 4)),
    "CONCATENATION": ([], "CONCATENATION", [0, 0], {"axis": -1}, (4, 12)),
    "SLICE": ([TF("begin", (2,), "int32", data=np.array([1, 2], I32)),
               TF("size", (2,), "int32", data=np.array([-1, 3], I32))], "SLICE", [0, 1, 2],
              {}, (3, 3)),
    "STRIDED_SLICE": ([TF("b", (2,), "int32", data=np.array([3, 0], I32)),
                       TF("e", (2,), "int32", data=np.array([0, 5], I32)),
                       TF("s", (2,), "int32", data=np.array([-1, 2], I32))], "STRIDED_SLICE",
                      [0, 1, 2, 3], {"begin_mask": 0, "end_mask": 1}, (4, 3)),
    "STRIDED_SLICE shrink": ([TF("b", (2,), "int32", data=np.array([2, 1], I32)),
                              TF("e", (2,), "int32", data=np.array([3, 6], I32)),
                              TF("s", (2,), "int32", data=np.array([1, 1], I32))],
                             "STRIDED_SLICE", [0, 1, 2, 3], {"shrink_axis_mask": 1}, (5,)),
    "GATHER": ([TF("i", (3,), "int32", data=np.array([3, 0, 3], I32))], "GATHER", [0, 1],
               {"axis": 1}, (4, 3)),
    "PACK": ([], "PACK", [0, 0], {"axis": 1, "values_count": 2}, (4, 2, 6)),
    "CAST": ([], "CAST", [0], {}, (4, 6)),
}


@pytest.mark.parametrize("case", list(TFLITE_CASES))
def test_each_tflite_constant_op_is_what_litert_computes(tmp_path, case):
    extra, op, inputs, options, shape = TFLITE_CASES[case]
    out_type = "int32" if op == "CAST" else "float32"
    tensors = [TF("b", B.shape, data=B)] + extra + [TF("y", shape, out_type)]
    y = len(tensors) - 1
    data = tflite_builder.build(tensors, [TOP(op, inputs, [y], options)], [], [y])
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    want = tflite_builder.run_litert(data)["y"]
    got = folded(path)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert np.array_equal(bits(got), bits(want)), case
