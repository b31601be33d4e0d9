"""clayout model on synthetic ONNX graphs: every weight source, every role,
names, oversize tensors, not-a-model files, --verify, --quiet, progress.

Each converted weight is compared with the reference engine's image of a
logical tensor computed here, independently, from the ONNX weight (index by
index where the mapping is not a plain copy); every failure exits 1 with one
line on stderr, no traceback and no file left behind.
"""
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

import runtime
import runtime.cli.demo
from runtime import cli, model
from runtime.model import apply as model_convert
from runtime.algebra import dtypes
from runtime.errors import ClayoutError
from runtime.cli.progress import Progress

from conftest import needs  # noqa: E402
onnx = needs("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
needs("safetensors")
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

from conftest import bits, run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/model_command.py", "runtime/cli/progress.py", "runtime/errors.py",
           "runtime/loader.py", "runtime/model/__init__.py", "runtime/model/apply.py",
           "runtime/model/onnx/reader.py", "runtime/model/onnx/roles.py",
           "runtime/model/stream.py", "runtime/model/tensor.py", "runtime/model/weights.py")

RNG = np.random.default_rng(11)


def values(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) * 4).astype(dtype)


def files(folder):
    return sorted(p.name for p in folder.iterdir())


def build(tmp_path, nodes, inits=(), opset=13, name="m.onnx", inputs=None, **save):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(
        nodes[-1].output[0], TensorProto.FLOAT, None)], initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    onnx.save(m, str(path), **save)
    return path


def const(name, array, node_name=None):
    return helper.make_node("Constant", [], [name], name=node_name or f"c_{name}",
                            value=numpy_helper.from_array(np.asarray(array), name))


def convert(tmp_path, capsys, path, *extra):
    out = tmp_path / "w.safetensors"
    code, stdout, err = run(capsys, "model", path, "-o", out, "--verify", *extra)
    assert code == 0, err
    assert "verified" in stdout and "Traceback" not in err
    with safe_open(str(out), "np") as f:
        manifest = json.loads(f.metadata()["clayout"])
    return load_file(str(out)), manifest, stdout


def expect(images, manifest, name, layout, logical, dtype="f32"):
    """The stored image of ``name`` is the reference's image of ``logical``."""
    entry = {e["name"]: e for e in manifest["tensors"]}[name]
    assert entry["layout"] == layout and tuple(entry["dims"]) == logical.shape
    want = runtime.to_image(np.ascontiguousarray(logical), layout, dtype=dtype,
                            engine="reference")
    assert np.array_equal(bits(images[name]), bits(want)), name
    return entry


def fails(tmp_path, capsys, argv, *words):
    """Exit 1, one error line holding ``words`` (with --images-only after one
    ``left out`` line per constant, which may hold them), no traceback,
    nothing written."""
    before = files(tmp_path)
    code, out, err = run(capsys, "model", *argv)
    assert code == 1, (out, err)
    *listed, last = err.splitlines()
    assert last.startswith("clayout: error: ") and err.endswith("\n"), err
    assert all(line.startswith("clayout: left out: ") for line in listed), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)
    assert files(tmp_path) == before
    return err


# -- weight sources --------------------------------------------------------------------------
W = values(4, 3, 3, 3)


def conv(w="w"):
    return helper.make_node("Conv", ["x", w], ["y"], name="conv")


SOURCES = {  # name: (nodes, initializers, opset) that deliver W as the Conv's input "w"
    "initializer": ([conv()], [numpy_helper.from_array(W, "w")], 13),
    "Constant value": ([const("w", W), conv()], [], 13),
    "Identity": ([const("w0", W), helper.make_node("Identity", ["w0"], ["w"]), conv()], [], 13),
    "Cast f16": ([const("w0", W.astype(np.float16)),
                  helper.make_node("Cast", ["w0"], ["w"], to=TensorProto.FLOAT), conv()], [], 13),
    "Reshape": ([const("w0", W.reshape(4, 27)), const("s", np.array([0, 3, -1, 3], np.int64)),
                 helper.make_node("Reshape", ["w0", "s"], ["w"]), conv()], [], 13),
    "Squeeze 13": ([const("w0", W[None]), const("ax", np.array([0], np.int64)),
                    helper.make_node("Squeeze", ["w0", "ax"], ["w"]), conv()], [], 13),
    "Squeeze 11": ([const("w0", W[None]), helper.make_node("Squeeze", ["w0"], ["w"], axes=[0]),
                    conv()], [], 11),
    "Unsqueeze 13": ([const("w0", W[0]), const("ax", np.array([0], np.int64)),
                      helper.make_node("Unsqueeze", ["w0", "ax"], ["w"]),
                      helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [], 13),
    "Transpose": ([const("w0", W.transpose(2, 3, 1, 0)),            # hwio
                   helper.make_node("Transpose", ["w0"], ["w"], perm=[3, 2, 0, 1]), conv()], [], 13),
    "chain": ([const("w0", W.transpose(2, 3, 1, 0).reshape(9, 12).astype(np.float16)),
               helper.make_node("Cast", ["w0"], ["w1"], to=TensorProto.FLOAT),
               const("s", np.array([3, 3, 3, 4], np.int64)),
               helper.make_node("Reshape", ["w1", "s"], ["w2"]),
               helper.make_node("Identity", ["w2"], ["w3"]),
               helper.make_node("Transpose", ["w3"], ["w"], perm=[3, 2, 0, 1]), conv()], [], 13),
}


@pytest.mark.parametrize("source", list(SOURCES))
def test_weight_sources(tmp_path, capsys, source):
    nodes, inits, opset = SOURCES[source]
    images, manifest, _ = convert(tmp_path, capsys, build(tmp_path, nodes, inits, opset))
    want = W[:1] if source == "Unsqueeze 13" else W
    if source in ("Cast f16", "chain"):
        want = want.astype(np.float16).astype(np.float32)
    entry = expect(images, manifest, "w", "conv2d_filter", want)
    assert entry["consumer"] == "Conv conv input 1"
    if source != "initializer":
        assert entry["origin"].startswith("Constant node c_w")
    # the chain's steps are accounted for: skipped, pointing at what they became
    for s in manifest["skipped"]:
        assert s["consumer"] == "(folded)" and s["folded_into"], s


def test_flatten_and_value_floats(tmp_path, capsys):
    fc = values(5, 2, 3)
    nodes = [const("b0", fc), helper.make_node("Flatten", ["b0"], ["b"], axis=1),
             helper.make_node("Gemm", ["x", "b"], ["g"], transB=1, name="fc"),
             helper.make_node("Constant", [], ["bias"], value_floats=[1.5, -2.0, 3.25, 0.5, 7.0]),
             helper.make_node("Add", ["g", "bias"], ["h"]),
             helper.make_node("Constant", [], ["k"], value_float=2.0),
             helper.make_node("Mul", ["h", "k"], ["y"])]
    path = build(tmp_path, nodes)
    # the scalar the Mul reads has no image: a buffer by default; named, and the run
    # refused, with --images-only
    err = fails(tmp_path, capsys, [path, "-o", tmp_path / "w.safetensors", "--images-only"],
                "--images-only: 1 constant(s) the model needs cannot go on an image",
                "clayout: left out: 'k' () (Mul Mul#6 input 1): scalar", "drop --images-only")
    assert err.count("left out:") == 1, err
    images, manifest, _ = convert(tmp_path, capsys, path)
    expect(images, manifest, "b", "weight_width", fc.reshape(5, 6, 1, 1))
    expect(images, manifest, "bias", "argument", np.array([1.5, -2.0, 3.25, 0.5, 7.0], np.float32))
    (k,) = [e for e in manifest["tensors"] if e["name"] == "k"]
    assert "scalar" in k["reason"] and k["consumer"].startswith("Mul") and k["dims"] == [1]
    assert k["layout"] == "buffer" and images["k"].tolist() == [2.0]
    a = manifest["accounting"]
    assert (a["float_elements"], a["placed"], a["folded"], a["kept"], a["dead"]) == \
        (36, 5, 30, 1, 0)   # b0 folded into b (placed), bias placed, k kept


def test_if_branch_weights(tmp_path, capsys):
    w_then, w_else, outer = values(4, 3, 1, 1), values(2, 3, 1, 1), values(6, 3, 1, 1)

    def branch(name, w):
        node = helper.make_node("Conv", ["x", "bw"], [f"{name}_y"], name=f"{name}_conv")
        return helper.make_graph([const("bw", w, node_name="bw"), node,
                                  helper.make_node("Conv", ["x", "outer"], [f"{name}_z"])],
                                 name, [], [helper.make_tensor_value_info(
                                     f"{name}_y", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], name="gate",
                              then_branch=branch("then", w_then), else_branch=branch("else", w_else))]
    path = build(tmp_path, nodes, [numpy_helper.from_array(outer, "outer")],
                 inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])])
    images, manifest, out = convert(tmp_path, capsys, path)
    e = expect(images, manifest, "gate/then_branch/bw", "conv2d_filter", w_then)
    assert e["consumer"] == "Conv gate/then_branch/then_conv input 1"
    expect(images, manifest, "gate/else_branch/bw", "conv2d_filter", w_else)
    e = expect(images, manifest, "outer", "conv2d_filter", outer)   # read from inside the branch
    assert e["consumer"].startswith("Conv gate/") and "_branch/" in e["consumer"]
    assert "gate/then_branch/bw" in out


def test_loop_body_weight(tmp_path, capsys):
    w = values(6, 5)
    body = helper.make_graph(
        [const("lw", w, node_name="lw"), helper.make_node("MatMul", ["v", "lw"], ["v2"]),
         helper.make_node("Identity", ["c"], ["c2"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v2", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)]
    path = build(tmp_path, nodes, [numpy_helper.from_array(np.array(2, np.int64), "n")])
    images, manifest, _ = convert(tmp_path, capsys, path)
    e = expect(images, manifest, "Loop#0/body/lw", "weight_width", w.T[:, :, None, None].copy())
    assert e["consumer"] == "MatMul Loop#0/body/MatMul#1 input 1"
    assert [s["name"] for s in manifest["skipped"]] == ["n"]


def test_external_data(tmp_path, capsys):
    path = build(tmp_path, [conv()], [numpy_helper.from_array(W, "w")],
                 save_as_external_data=True, location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").stat().st_size == W.nbytes
    images, manifest, _ = convert(tmp_path, capsys, path)
    expect(images, manifest, "w", "conv2d_filter", W)


def _with_external(tmp_path, location, length=None):
    m = onnx.load(str(build(tmp_path, [conv()], [numpy_helper.from_array(W, "w")])))
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"),
                       ("length", str(length if length is not None else W.nbytes))):
        t.external_data.add(key=key, value=value)
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())


def test_external_data_outside_the_folder(tmp_path, capsys):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    _with_external(inner, "../secret.bin")
    fails(inner, capsys, [inner / "m.onnx", "-o", inner / "o.safetensors"],
          "'../secret.bin', outside the model's folder", "tensor 'w'")
    _with_external(inner, str(tmp_path / "secret.bin"))          # absolute path
    fails(inner, capsys, [inner / "m.onnx", "-o", inner / "o.safetensors"], "outside")


def test_external_data_too_short(tmp_path, capsys):
    (tmp_path / "w.bin").write_bytes(W.tobytes()[:100])
    _with_external(tmp_path, "w.bin")
    fails(tmp_path, capsys, [tmp_path / "m.onnx", "-o", tmp_path / "o.safetensors"],
          "tensor 'w' with dims (4, 3, 3, 3) needs 432 bytes", "100-byte file")


@pytest.mark.parametrize("dims, raw, words", [
    ((8, 3, 3, 3), b"\0" * 100, "tensor 'w' with dims (8, 3, 3, 3) needs 864 bytes of float32, "
     "its data has 100"),
    ((2, 2), b"\0" * 20, "needs 16 bytes of float32, its data has 20"),
    ((100000, 100000, 100000, 1000), b"\0" * 4, "needs 4000000000000000000 bytes"),
])
def test_raw_data_of_the_wrong_size(tmp_path, capsys, dims, raw, words):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, raw_data=raw)
    path = build(tmp_path, [conv()], [t])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"], words)


def test_typed_data_of_the_wrong_size(tmp_path, capsys):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=(4, 3, 3, 3), float_data=[1.0] * 7)
    path = build(tmp_path, [conv()], [t])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"],
          "needs 108 values", "float_data has 7")


# -- roles ----------------------------------------------------------------------------------
def test_argument_roles(tmp_path, capsys):
    c = 5
    consts = {"slope": values(c, 1, 1), "in.s": values(c), "in.b": values(c), "ln.s": values(c),
              "ln.b": values(1, c), "add": values(1, c, 1, 1), "sub": values(c, 1, 1),
              "mul": values(1, c, 1, 1), "div": values(c, 1, 1), "bn.s": values(c),
              "bn.b": values(c), "bn.m": values(c), "bn.v": values(c) ** 2}
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["a"]),
             helper.make_node("InstanceNormalization", ["a", "in.s", "in.b"], ["b"]),
             helper.make_node("LayerNormalization", ["b", "ln.s", "ln.b"], ["c"], axis=-1),
             helper.make_node("Add", ["c", "add"], ["d"]),
             helper.make_node("Sub", ["sub", "d"], ["e"]),          # constant first: c - x
             helper.make_node("Mul", ["e", "mul"], ["f"]),
             helper.make_node("Div", ["f", "div"], ["g"]),
             helper.make_node("BatchNormalization", ["g", "bn.s", "bn.b", "bn.m", "bn.v"], ["y"])]
    path = build(tmp_path, nodes, [numpy_helper.from_array(v, k) for k, v in consts.items()],
                 opset=17)
    images, manifest, _ = convert(tmp_path, capsys, path)
    for name, v in consts.items():
        expect(images, manifest, name, "argument", v.reshape(-1))
    assert manifest["skipped"] == []


def test_conv_transpose_grouped_and_depthwise(tmp_path, capsys):
    g, i_per, o_per = 2, 3, 4
    grouped = values(g * i_per, o_per, 2, 3)             # ONNX (I, O/g, kH, kW)
    c, m = 4, 2
    dw = values(c, m, 3, 3)                              # ONNX (C, M, kH, kW), group = C
    nodes = [helper.make_node("ConvTranspose", ["x", "gw"], ["a"], group=g),
             helper.make_node("ConvTranspose", ["a", "dw"], ["y"], group=c)]
    path = build(tmp_path, nodes, [numpy_helper.from_array(grouped, "gw"),
                                   numpy_helper.from_array(dw, "dw")])
    images, manifest, _ = convert(tmp_path, capsys, path)
    want = np.zeros((g * o_per, i_per, 2, 3), np.float32)   # output o of group gi reads inputs gi*I/g+i
    for gi in range(g):
        for o in range(o_per):
            for i in range(i_per):
                want[gi * o_per + o, i] = grouped[gi * i_per + i, o]
    expect(images, manifest, "gw", "conv2d_filter", want)
    want = np.zeros((m, c, 3, 3), np.float32)               # [m, c] = onnx[c, m]
    for mm in range(m):
        for cc in range(c):
            want[mm, cc] = dw[cc, mm]
    expect(images, manifest, "dw", "dw_conv2d_filter", want)


def test_matmul_rank3_constant(tmp_path, capsys):
    b = values(3, 5, 6)                                   # (G, K, N)
    path = build(tmp_path, [helper.make_node("MatMul", ["x", "b"], ["y"])],
                 [numpy_helper.from_array(b, "b")])
    images, manifest, _ = convert(tmp_path, capsys, path)
    want = np.zeros((18, 5, 1, 1), np.float32)            # [g*N + n, k] = B[g, k, n]
    for gg in range(3):
        for n in range(6):
            want[gg * 6 + n, :, 0, 0] = b[gg, :, n]
    expect(images, manifest, "b", "weight_width", want)


def test_f16_rounds_like_dtypes_convert(tmp_path, capsys):
    w = np.array([1 + 2 ** -11, 65520.0, -1e-8, 3.0], np.float32).reshape(4, 1, 1, 1)
    path = build(tmp_path, [conv()], [numpy_helper.from_array(w, "w")])
    images, manifest, _ = convert(tmp_path, capsys, path, "--dtype", "f16")
    expect(images, manifest, "w", "conv2d_filter", dtypes.convert(w, "f16"), dtype="f16")


# -- names -----------------------------------------------------------------------------------
def test_duplicate_names_are_refused(tmp_path, capsys):
    path = build(tmp_path, [conv()], [numpy_helper.from_array(W, "w"),
                                      numpy_helper.from_array(W * 2, "w")])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"],
          "tensor name 'w' is defined twice (initializer and initializer)", "unique")
    path = build(tmp_path, [const("w", W), conv()], [numpy_helper.from_array(W, "w")])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"],
          "defined twice (initializer and Constant node c_w)")


def test_safetensors_reserved_name_is_refused(tmp_path, capsys):
    path = build(tmp_path, [conv("__metadata__")], [numpy_helper.from_array(W, "__metadata__")])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"],
          "named '__metadata__', the key safetensors reserves")


def test_control_characters_are_escaped(tmp_path, capsys):
    evil = "w\x1b[2J\r\nbias\u202e"
    nodes = [helper.make_node("Conv", ["x", evil, "sc\x07"], ["y"], name="n\x1b]0;x\x07")]
    path = build(tmp_path, nodes, [numpy_helper.from_array(W, evil),
                                   numpy_helper.from_array(np.float32([1.0]), "sc\x07")])
    images, manifest, out = convert(tmp_path, capsys, path)
    assert evil in images                                   # the data keeps the real name
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out and "\u202e" not in out
    assert "w\\x1b[2J\\r\\nbias\\u202e" in out
    # the same name twice: the error line escapes it too
    path = build(tmp_path, [const(evil, W), helper.make_node("Conv", ["x", evil], ["y"])],
                 [numpy_helper.from_array(W, evil)], name="dup.onnx")
    err = fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors"], "defined twice")
    assert "\x1b" not in err and "\\x1b[2J" in err


# -- oversize tensors ---------------------------------------------------------------------------
def _oversize_model(tmp_path):
    big = values(16, 16, 3, 3)          # conv2d_filter 16 x 36; no filter layout fits 8x8
    conv3d = values(4, 3, 2, 2, 2)      # a 3-D convolution: no image layout takes it
    nodes = [helper.make_node("Conv", ["x", "big", "bias"], ["a"]),
             helper.make_node("Conv", ["a", "c3d"], ["y"], name="conv3d")]
    path = build(tmp_path, nodes, [numpy_helper.from_array(big, "big"),
                                   numpy_helper.from_array(values(16), "bias"),
                                   numpy_helper.from_array(conv3d, "c3d")])
    return path, big, conv3d


def test_oversize_images_only(tmp_path, capsys):
    path, _, _ = _oversize_model(tmp_path)
    # 'big' is split into tiles; the 3-D convolution has no image layout to split
    err = fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--max-image", "8,8",
                                   "--images-only"],
                "1 constant(s) the model needs cannot go on an image", "'c3d' (4, 3, 2, 2, 2)",
                "(a 3-D convolution)", "drop --images-only")
    assert "'big'" not in err and "--no-tiles" not in err
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--max-image", "8,8",
                             "--no-tiles", "--images-only"],
          "2 constant(s) the model needs cannot go on an image", "'big' (16, 16, 3, 3)",
          "over --max-image 8,8", "'c3d' (4, 3, 2, 2, 2)", "drop --no-tiles",
          "drop --images-only")


def test_oversize_with_keep_buffers(tmp_path, capsys):
    path, big, conv3d = _oversize_model(tmp_path)
    stored, manifest, out = convert(tmp_path, capsys, path, "--max-image", "8,8",
                                    "--keep-buffers", "--no-tiles", "--dtype", "f16")
    by = {e["name"]: e for e in manifest["tensors"]}
    assert by["big"]["layout"] == "buffer" and by["big"]["role"] == "filter"
    assert by["big"]["tag"] == "abcd" and by["big"]["dims"] == [16, 16, 3, 3]
    assert np.array_equal(bits(stored["big"]), bits(dtypes.convert(big, "f16")))
    assert by["c3d"]["layout"] == "buffer" and by["c3d"]["role"] is None
    assert by["c3d"]["tag"] == "abcde" and by["c3d"]["dims"] == [4, 3, 2, 2, 2]
    assert np.array_equal(bits(stored["c3d"]), bits(dtypes.convert(conv3d, "f16")))
    assert by["bias"]["layout"] == "argument"                  # 4x1 fits
    assert "buffer abcd" in out and "1 images, 2 buffers" in out
    # without --no-tiles only the 3-D convolution is a buffer; 'big' comes in tiles
    stored, manifest, out = convert(tmp_path, capsys, path, "--max-image", "8,8",
                                    "--keep-buffers", "--dtype", "f16")
    by = {e["name"]: e for e in manifest["tensors"]}
    assert by["c3d"]["layout"] == "buffer" and "big" not in stored
    assert by["big"]["layout"] == "conv2d_filter" and len(by["big"]["tiles"]) == 10
    assert "2 images (1 in 10 tiles), 1 buffers" in out


# -- tiles -----------------------------------------------------------------------------------
def _tiled_model(tmp_path):
    """A Conv weight and a Gemm (fc) weight over --max-image 8,8 in every layout of
    their kind, and the Conv's bias, which fits."""
    big = values(16, 16, 3, 3)          # conv2d_filter 16 x 36 pixels
    fc = values(40, 12)                 # Gemm B, transB=1: weight_width (40, 12, 1, 1), 3 x 40
    bias = values(16)                   # argument 4 x 1
    nodes = [helper.make_node("Conv", ["x", "big", "bias"], ["a"], name="conv"),
             helper.make_node("Flatten", ["a"], ["b"]),
             helper.make_node("Gemm", ["b", "fc"], ["y"], transB=1, name="fc")]
    path = build(tmp_path, nodes, [numpy_helper.from_array(big, "big"),
                                   numpy_helper.from_array(bias, "bias"),
                                   numpy_helper.from_array(fc, "fc")])
    return path, {"big": big, "fc": fc.reshape(40, 12, 1, 1)}, bias


@pytest.mark.parametrize("engine", ["cpu", "opencl"])
def test_oversize_weights_are_tiled(tmp_path, capsys, request, engine):
    if engine == "opencl":
        request.getfixturevalue("cl_engine")
    path, logical, bias = _tiled_model(tmp_path)
    stored, manifest, out = convert(tmp_path, capsys, path, "--max-image", "8,8",
                                    "--engine", engine)
    assert manifest["engine"] == engine
    by = {e["name"]: e for e in manifest["tensors"]}
    assert set(by) == {"big", "fc", "bias"}
    keys = {t["key"] for name in logical for t in by[name]["tiles"]}
    assert set(stored) == {"bias"} | keys                # no whole image of a split weight
    for name, want in logical.items():
        e = by[name]
        assert (e["role"], e["layout"], tuple(e["dims"])) == \
            {"big": ("filter", "conv2d_filter"), "fc": ("fc_weight", "weight_width")}[name] + \
            (want.shape,)
        assert "fallback_from" not in e and "over --max-image 8,8, and no" in e["choice"]
        whole = runtime.to_image(want, e["layout"], engine=engine)       # without a limit
        assert np.array_equal(bits(whole), bits(runtime.to_image(want, e["layout"],
                                                                 engine="reference")))
        assert e["size"] == [whole.shape[1], whole.shape[0]]
        cover = np.zeros(whole.shape[:2], np.int64)
        for t in e["tiles"]:
            assert t["key"] == f"{name}.tile-{t['row']}-{t['col']}"
            tile = stored[t["key"]]
            assert tile.shape == (t["height"], t["width"], 4) and tile.dtype == np.float32
            assert 1 <= t["width"] <= 8 and 1 <= t["height"] <= 8
            y, x = slice(t["y0"], t["y0"] + t["height"]), slice(t["x0"], t["x0"] + t["width"])
            cover[y, x] += 1
            assert np.array_equal(bits(tile), bits(whole[y, x])), t["key"]
        assert (cover == 1).all(), name                  # no overlap, every pixel covered
        rows = 1 + max(t["row"] for t in e["tiles"])
        cols = 1 + max(t["col"] for t in e["tiles"])
        assert len(e["tiles"]) == rows * cols
        joined = np.concatenate([np.concatenate([stored[f"{name}.tile-{r}-{c}"]
                                                 for c in range(cols)], axis=1)
                                 for r in range(rows)], axis=0)
        assert np.array_equal(bits(joined), bits(whole)), name
        assert e["bytes"] == sum(stored[k].nbytes for k in keys if k.startswith(name + "."))
        tiles = tuple(stored[t["key"]] for t in e["tiles"])
        back = model.read_back(tiles, e, engine=engine)
        assert np.array_equal(bits(back), bits(want.reshape(e["source_shape"])))
    assert [len(by[n]["tiles"]) for n in ("big", "fc")] == [10, 5]   # 2 x 5 and 1 x 5
    expect(stored, manifest, "bias", "argument", bias)
    assert "16x36 in 10 tiles" in out and "3x40 in 5 tiles" in out
    assert "3 images (2 in 15 tiles), 0 buffers" in out


def test_a_bad_tile_fails_verify(tmp_path, capsys, monkeypatch):
    path, _, _ = _tiled_model(tmp_path)
    real = model_convert.to_image

    def one_bad_tile(*args, **kw):
        out = real(*args, **kw)
        if isinstance(out, tuple) and out[0].shape == (8, 8, 4):     # the Conv weight's
            out[3].reshape(-1).view(np.uint32)[7] ^= 1
        return out
    monkeypatch.setattr(model_convert, "to_image", one_bad_tile)
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--max-image", "8,8",
                             "--verify"],
          "--verify: 1 of 3 tensors do not read back bit for bit: 'big'", "not written")


def test_no_tiles(tmp_path, capsys):
    path, logical, _ = _tiled_model(tmp_path)
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--max-image", "8,8",
                             "--no-tiles", "--images-only"],
          "2 constant(s) the model needs cannot go on an image", "'big' (16, 16, 3, 3)",
          "'fc' (40, 12)", "over --max-image 8,8")
    stored, manifest, out = convert(tmp_path, capsys, path, "--max-image", "8,8", "--no-tiles",
                                    "--keep-buffers")
    by = {e["name"]: e for e in manifest["tensors"]}
    assert [by[n]["layout"] for n in ("big", "fc", "bias")] == ["buffer", "buffer", "argument"]
    assert not [e for e in manifest["tensors"] if "tiles" in e] and set(stored) == set(by)
    assert np.array_equal(bits(stored["fc"]), bits(logical["fc"]))
    assert "1 images, 2 buffers" in out


def test_tile_keys_must_not_take_a_weight_name(tmp_path, capsys):
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"]),
             helper.make_node("Conv", ["a", "w.tile-1-0"], ["y"])]
    path = build(tmp_path, nodes, [numpy_helper.from_array(values(16, 16, 3, 3), "w"),
                                   numpy_helper.from_array(W, "w.tile-1-0")])
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--max-image", "8,8"],
          "tile 'w.tile-1-0' of the weight 'w'", "unique", "--no-tiles")
    # a weight whose name looks like a tile key is only a problem beside a split weight
    stored, manifest, _ = convert(tmp_path, capsys, path)
    assert set(stored) == {"w", "w.tile-1-0"}


def test_the_tiled_entry_in_the_docs(tmp_path, capsys):
    """docs/placement.md shows the sample CNN's fc.weight under --max-image 8,8."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "placement.md").read_text()
    (shown,) = re.findall(r"```json\n(.*?)```", doc, re.S)
    path = Path(runtime.__file__).parent / "data" / "sample_cnn.onnx"
    stored, manifest, out = convert(tmp_path, capsys, path, "--max-image", "8,8")
    (fc,) = [e for e in manifest["tensors"] if e["name"] == "fc.weight"]
    assert json.loads(shown) == fc
    assert "11 images (3 in 7 tiles)" in out


def test_stored_image_checks_the_tiles_against_the_manifest(tmp_path, capsys):
    path, _, _ = _tiled_model(tmp_path)
    stored, manifest, _ = convert(tmp_path, capsys, path, "--max-image", "8,8")
    (e,) = [e for e in manifest["tensors"] if e["name"] == "fc"]
    assert len(runtime.model.manifest.stored_image(stored, e)) == 5
    moved = json.loads(json.dumps(e))
    moved["tiles"][1]["y0"] += 1
    with pytest.raises(ClayoutError, match="do not match the tile plan"):
        runtime.model.manifest.stored_image(stored, moved)
    with pytest.raises(ClayoutError, match="'fc.tile-4-0' listed in the manifest is not in"):
        runtime.model.manifest.stored_image({k: v for k, v in stored.items() if k != "fc.tile-4-0"}, e)
    short = dict(stored, **{"fc.tile-2-0": stored["fc.tile-2-0"][:5]})
    with pytest.raises(ClayoutError, match="tensor 'fc': tiles of layout 'weight_width'"):
        runtime.model.manifest.stored_image(short, e)


# -- not a model ---------------------------------------------------------------------------------
def _not_models(tmp_path):
    good = build(tmp_path, [conv()], [numpy_helper.from_array(W, "w")], name="good.onnx")
    data = good.read_bytes()
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "text.onnx").write_bytes(b"this is not a model\n" * 10)
    (tmp_path / "png.onnx").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (tmp_path / "cut.onnx").write_bytes(data[:len(data) // 2])
    ints = [numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    build(tmp_path, [helper.make_node("Reshape", ["x", "shape"], ["y"])], ints, name="ints.onnx")


@pytest.mark.parametrize("name, words", [
    ("empty.onnx", "empty file, not an ONNX model"),
    ("text.onnx", "not an ONNX model"),
    ("png.onnx", "not an ONNX model"),
    ("cut.onnx", "not an ONNX model"),
    ("ints.onnx", "no floating-point tensor among its 1 constants"),
    ("missing.onnx", "no such file"),
])
def test_not_a_model(tmp_path, capsys, name, words):
    _not_models(tmp_path)
    err = fails(tmp_path, capsys, [tmp_path / name, "-o", tmp_path / "o.safetensors"], words)
    assert name in err


# -- verify, quiet, progress -------------------------------------------------------------------
def test_verify_failure_writes_nothing(tmp_path, capsys, monkeypatch):
    path = build(tmp_path, [conv()], [numpy_helper.from_array(W, "w")])
    real = model_convert.from_image

    def off_by_one_bit(*args, **kw):
        out = np.array(real(*args, **kw))
        out.reshape(-1).view(np.uint32)[5] ^= 1
        return out
    monkeypatch.setattr(model_convert, "from_image", off_by_one_bit)
    fails(tmp_path, capsys, [path, "-o", tmp_path / "o.safetensors", "--verify"],
          "--verify: 1 of 1 tensors do not read back bit for bit: 'w'", "not written")


def test_quiet(tmp_path, capsys):
    path = build(tmp_path, [conv()], [numpy_helper.from_array(W, "w")])
    code, out, err = run(capsys, "model", path, "-o", tmp_path / "o.safetensors", "--quiet")
    assert (code, out, err) == (0, "", "")
    assert (tmp_path / "o.safetensors").exists()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal():
    pipe, tty = io.StringIO(), _Terminal()
    for stream in (pipe, tty):
        bar = Progress("clayout model", stream=stream)
        bar(1, 3, 1000)
        bar(3, 3, 3_000_000)
        bar.close()
    assert pipe.getvalue() == ""
    assert "3/3 tensors, 3.0 MB" in tty.getvalue() and tty.getvalue().endswith("\r\x1b[K")


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path, capsys):
    path = build(tmp_path, [conv()], [numpy_helper.from_array(W, "w")])
    code, out, err = run(capsys, "model", path, "-o", tmp_path / "o.safetensors")
    assert code == 0 and err == "" and "1 images, 0 buffers" in out


def test_demo_offline(capsys, monkeypatch):

    def offline(cache, timeout=60):
        raise ClayoutError("pip download rapidocr-onnxruntime==1.4.4 failed (exit 1): "
                           "No matching distribution found")
    monkeypatch.setattr(runtime.cli.demo, "fetch_ppocr", offline)
    code = cli.main(["demo", "--engine", "cpu", "--ppocr"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "11/11 images exact" in out and "PyPI not reachable" in out
    assert "the bundled sample above is the offline demo" in out
