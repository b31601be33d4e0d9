"""clayout model --winograd ENGINE: which Conv filters go in the engine's
Winograd layout, what their manifest entries say, and how --verify checks them.

A synthetic graph holds one weight of each kind the rule must tell apart (3x3
convolutions with stride 1, stride 2, dilation 2, groups and depthwise, a 5x5
and a 1x1 convolution, a Gemm). For every engine of runtime.winograd.ENGINES
the weights expected in a Winograd layout are worked out here from the
graph's own attributes; each stored image is compared byte for byte with
``runtime.to_image`` of the ONNX weight in the layout the engine names. The
real PP-OCRv4 detector is converted with ``--winograd mace --verify``, its
eligible weights counted from the ONNX graph.
"""

import numpy as np
import pytest

import runtime
from runtime import model
from runtime.algebra.catalog import image_layout
from runtime.algebra.transform import Transform
from runtime.winograd import ENGINES

from conftest import needs  # noqa: E402
onnx = needs("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
needs("safetensors")
from safetensors.numpy import load_file  # noqa: E402

from conftest import bits
from model.test_model_quantized import convert, fails  # noqa: E402  (the same CLI helpers)

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/transform.py", "runtime/model/winograd_weights.py",
           "runtime/winograd.py")

RNG = np.random.default_rng(5)


def values(*shape):
    return (RNG.standard_normal(shape) * 3).astype(np.float32)


# name: (weight, Conv attributes or None for the Gemm, whether a Winograd
# convolution computes it: strides 1, dilations 1, group 1)
CONVS = {
    "w3": (values(6, 4, 3, 3), {}, True),                          # ONNX defaults
    "w3_attrs": (values(5, 4, 3, 3), {"strides": [1, 1], "dilations": [1, 1], "group": 1,
                                      "pads": [1, 1, 1, 1]}, True),
    "w3_stride2": (values(6, 4, 3, 3), {"strides": [2, 2]}, False),
    "w3_stride21": (values(6, 4, 3, 3), {"strides": [2, 1]}, False),
    "w3_dilated": (values(6, 4, 3, 3), {"dilations": [2, 2]}, False),
    "w3_grouped": (values(6, 2, 3, 3), {"group": 2}, False),
    "w3_depthwise": (values(4, 1, 3, 3), {"group": 4}, False),
    "w5": (values(3, 4, 5, 5), {}, True),
    "w1": (values(8, 4, 1, 1), {}, True),
    "w3x1": (values(6, 4, 3, 1), {}, True),                         # not square
    "fc": (values(10, 16), None, False),
}


def synthetic(tmp_path, convs=CONVS, name="wino.onnx"):
    nodes, inits = [], []
    for i, (w_name, (w, attrs, _)) in enumerate(convs.items()):
        inits.append(numpy_helper.from_array(w, w_name))
        if attrs is None:
            nodes.append(helper.make_node("Gemm", ["f", w_name], [f"y{i}"], name=f"gemm_{w_name}",
                                          transB=1))
        else:
            nodes.append(helper.make_node("Conv", ["x", w_name], [f"y{i}"],
                                          name=f"conv_{w_name}", **attrs))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "f")]
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None)
               for n in nodes]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def expected_winograd(engine):
    """{weight: layout name} the engine's --winograd puts in a Winograd layout."""
    sizes = ENGINES[engine]
    return {n: sizes[w.shape[2]] for n, (w, _, ok) in CONVS.items()
            if ok and w.ndim == 4 and w.shape[2] == w.shape[3] and w.shape[2] in sizes}


def test_engines_table():
    """The kernel sizes each engine takes (docs/cli.md's table)."""
    assert {e: sorted(s) for e, s in ENGINES.items()} == \
        {"mace": [3], "mnn": [3, 5], "tflite": [3], "cldnn": [3]}
    for sizes in ENGINES.values():
        for k, name in sizes.items():
            assert image_layout(name).transform.taps == k


@pytest.mark.parametrize("engine", list(ENGINES))
def test_each_engine(tmp_path, capsys, engine):
    path = synthetic(tmp_path)
    images, manifest, stdout = convert(tmp_path, capsys, path, "--winograd", engine)
    want = expected_winograd(engine)
    assert want and "w3" in want and "w3_attrs" in want
    assert ("w5" in want) == (engine == "mnn")
    by = {e["name"]: e for e in manifest["tensors"]}
    got = {n: e["layout"] for n, e in by.items() if "transform" in e}
    assert got == want
    assert manifest["winograd"] == engine and manifest["format"] == "clayout-model/7"
    for name, layout_name in want.items():
        e, layout = by[name], image_layout(layout_name)
        assert e["transform"] == layout.transform.name
        assert e["role"] == "filter" and e["dims"] == list(CONVS[name][0].shape)
        assert e["choice"].startswith(f"--winograd {engine}:") and layout_name in e["choice"]
        assert "fallback_from" not in e
        want_image = runtime.to_image(CONVS[name][0], layout_name)
        assert images[name].shape == want_image.shape
        assert np.array_equal(bits(images[name]), bits(want_image)), name
        assert e["size"] == list(layout.image_shape(e["dims"])) and e["storage"] == "image2d"
    for name, e in by.items():   # every other weight as without --winograd
        if name in want:
            continue
        assert "transform" not in e and "winograd" not in e.get("choice", "")
        assert e["layout"] in ("conv2d_filter", "dw_conv2d_filter", "weight_width")
    assert f"({len(want)} Winograd)" in stdout
    assert f"verified {len(by)} tensors: {len(want)} Winograd filter image(s)" in stdout


def test_same_as_without_winograd(tmp_path, capsys):
    """Weights not taken by the engine are stored exactly as without --winograd."""
    path = synthetic(tmp_path)
    plain, plain_m, _ = convert(tmp_path, capsys, path, out="plain.safetensors")
    wino, _, _ = convert(tmp_path, capsys, path, "--winograd", "mnn")
    taken = expected_winograd("mnn")
    for e in plain_m["tensors"]:
        if e["name"] not in taken:
            assert np.array_equal(bits(plain[e["name"]]), bits(wino[e["name"]])), e["name"]
    assert "winograd" not in plain_m
    assert not any("transform" in e for e in plain_m["tensors"])


def test_f16_and_layout_name(tmp_path, capsys):
    path = synthetic(tmp_path)
    images, manifest, _ = convert(tmp_path, capsys, path, "--winograd", "winograd_2x3_mace",
                                  "--dtype", "f16")
    by = {e["name"]: e for e in manifest["tensors"]}
    assert {n for n, e in by.items() if "transform" in e} == {"w3", "w3_attrs"}
    for name in ("w3", "w3_attrs"):
        assert by[name]["layout"] == "winograd_2x3_mace" and by[name]["dtype"] == "f16"
        assert by[name]["transform"] == "F(2,3) MACE"
        want = runtime.to_image(CONVS[name][0], "winograd_2x3_mace", dtype="f16")
        assert want.dtype == np.float16 and np.array_equal(bits(images[name]), bits(want))
    # a 5x5 layout's name takes the 5x5 convolution only
    _, manifest, _ = convert(tmp_path, capsys, path, "--winograd", "winograd_2x5_mnn")
    assert {e["name"] for e in manifest["tensors"] if "transform" in e} == {"w5"}


def test_shared_weight_stays(tmp_path, capsys):
    """A weight read by a stride-1 and a stride-2 Conv keeps its usual layout."""
    w = values(4, 4, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="s1"),
             helper.make_node("Conv", ["a", "w"], ["b"], name="s2", strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, None)],
                              [helper.make_tensor_value_info("b", 1, None)],
                              initializer=[numpy_helper.from_array(w, "w")])
    path = tmp_path / "shared.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    _, manifest, _ = convert(tmp_path, capsys, path, "--winograd", "mace")
    (e,) = manifest["tensors"]
    assert e["layout"] == "conv2d_filter" and "transform" not in e


def test_over_max_image_falls_back(tmp_path, capsys):
    """A Winograd image over --max-image: the usual choice, and its entry says so."""
    path = synthetic(tmp_path, {"w3": CONVS["w3"]})
    layout = image_layout(ENGINES["mace"][3])
    width, height = layout.image_shape(CONVS["w3"][0].shape)
    limit = f"{max(width, height) - 1},{max(width, height) - 1}"
    assert min(width, height) <= 16 < max(width, height)
    _, manifest, stdout = convert(tmp_path, capsys, path, "--winograd", "mace",
                                  "--max-image", limit)
    (e,) = manifest["tensors"]
    assert e["layout"] != layout.name and "transform" not in e
    assert e["choice"].startswith(f"--winograd mace: {layout.name} needs a {width}x{height} "
                                  f"image, over --max-image {limit}")
    assert "Winograd" not in stdout.splitlines()[-2]   # the summary line counts none


def test_quantized(tmp_path, capsys):
    """A folded QDQ Conv weight is a float weight (Winograd); a kept one stays integer."""
    import importlib.resources as r
    path = tmp_path / "q.onnx"
    path.write_bytes((r.files("runtime") / "data/sample_quantized.onnx").read_bytes())
    images, manifest, _ = convert(tmp_path, capsys, path, "--winograd", "mace", "--keep-buffers")
    by = {e["name"]: e for e in manifest["tensors"]}
    assert {n for n, e in by.items() if "transform" in e} == {"conv1.weight"}
    e = by["conv1.weight"]
    assert e["layout"] == ENGINES["mace"][3] and "dequantized" in e
    folded = model.weight_arrays(str(path))["conv1.weight"]
    assert np.array_equal(bits(images["conv1.weight"]),
                          bits(runtime.to_image(folded, ENGINES["mace"][3])))
    _, manifest, _ = convert(tmp_path, capsys, path, "--winograd", "mace", "--quantized", "keep",
                             "--keep-buffers", out="keep.safetensors")
    by = {e["name"]: e for e in manifest["tensors"]}
    assert not any("transform" in e for e in manifest["tensors"])
    assert by["conv1.weight"]["layout"] == "conv2d_filter" and by["conv1.weight"]["dtype"] == "s8"


def test_errors(tmp_path, capsys):
    path = synthetic(tmp_path)
    out = tmp_path / "w.safetensors"
    err = fails(tmp_path, capsys, [path, "-o", out, "--winograd", "nope"],
                "--winograd", "'nope'", "mace, mnn, tflite, cldnn", "winograd_2x3_mace")
    assert "unknown Winograd engine" in err
    for dtype in ("s8", "u8", "s32", "bf16"):
        fails(tmp_path, capsys, [path, "-o", out, "--winograd", "mace", "--dtype", dtype],
              f"--dtype {dtype!r}", "--winograd mace", "f32 or f16")
    with pytest.raises(runtime.ClayoutError, match="--winograd"):
        model.convert_file(str(path), str(out), winograd="mace4")
    with pytest.raises(runtime.ClayoutError, match="f32 or f16"):
        model.convert_file(str(path), str(out), dtype="s8", winograd="mace")
    assert not out.exists()


def test_verify_uses_the_bound(tmp_path, capsys, monkeypatch):
    """--verify checks a Winograd image against inverse_bound: a corrupted
    image fails, and with a zero bound the round trip's rounding fails too."""
    path = synthetic(tmp_path)
    m = model.load(str(path))
    stored, manifest, originals = model.convert_model(m, str(path), winograd="tflite")
    assert model.verify(stored, manifest, originals) == []
    name = ENGINES["tflite"][3]
    bad = {k: v.copy() for k, v in stored.items()}
    bad["w3"].reshape(-1)[5] += 1e-3 * max(1.0, abs(float(bad["w3"].reshape(-1)[5])))
    assert model.verify(bad, manifest, originals) == ["w3"]
    e = {x["name"]: x for x in manifest["tensors"]}["w3"]
    g = CONVS["w3"][0]
    back = runtime.from_image(stored["w3"], name, e["dims"], dtype="f32")
    bound = image_layout(name).transform.inverse_bound(g, "f32", "f32")
    assert np.all(np.abs(back.astype(np.float64) - g) <= bound)
    assert not np.array_equal(back, g)   # not bit for bit: a zero bound fails

    monkeypatch.setattr(Transform, "inverse_bound",
                        lambda self, values, *args: np.zeros(np.shape(values)))
    out = tmp_path / "w.safetensors"
    fails(tmp_path, capsys, [path, "-o", out, "--winograd", "tflite", "--verify"],
          "--verify", "do not read back", "inverse_bound", "'w3'", "not written")


def eligible_3x3(path):
    """Names of the weights of the ONNX graph read only by Conv nodes with a
    3x3 kernel, strides 1, dilations 1 and group 1 (counted from the graph)."""
    m = onnx.load(str(path))
    shapes = {n.output[0]: tuple(n.attribute[0].t.dims)
              for n in m.graph.node if n.op_type == "Constant"}
    shapes.update({t.name: tuple(t.dims) for t in m.graph.initializer})
    readers = {}
    for node in m.graph.node:
        for index, name in enumerate(node.input):
            if name in shapes:
                readers.setdefault(name, []).append((node, index))
    def ok(name, node, index):
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        return (node.op_type == "Conv" and index == 1 and shapes[name][2:] == (3, 3)
                and all(s == 1 for s in a.get("strides", [1, 1]))
                and all(d == 1 for d in a.get("dilations", [1, 1]))
                and a.get("group", 1) == 1)
    return {name for name, uses in readers.items() if all(ok(name, n, i) for n, i in uses)}


def test_ppocr_det_mace(tmp_path, capsys, ppocr):
    want = eligible_3x3(ppocr["det"])
    assert want
    images, manifest, stdout = convert(tmp_path, capsys, ppocr["det"], "--winograd", "mace",
                                       "--keep-buffers")
    by = {e["name"]: e for e in manifest["tensors"]}
    got = {n for n, e in by.items() if "transform" in e}
    assert got == want
    assert f"({len(want)} Winograd)" in stdout
    assert f"verified {len(by)} tensors: {len(want)} Winograd filter image(s)" in stdout
    weights = model.weight_arrays(str(ppocr["det"]))
    for name in sorted(want)[:3]:
        assert by[name]["layout"] == "winograd_4x3_mace"
        assert by[name]["transform"] == "F(4,3) MACE"
        assert np.array_equal(bits(images[name]),
                              bits(runtime.to_image(weights[name], "winograd_4x3_mace")))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_opencl_engine(tmp_path, cl_engine, dtype):
    """On the OpenCL engine: the same image bytes as the host's to_image, and
    --verify passes (read back on that engine)."""
    path = synthetic(tmp_path)
    out = tmp_path / "w.safetensors"
    manifest, verified = model.convert_file(str(path), str(out), dtype, engine=cl_engine,
                                            verify_all=True, winograd="mnn")
    assert verified == len(manifest["tensors"])
    images = load_file(str(out))
    want = expected_winograd("mnn")
    assert {e["name"] for e in manifest["tensors"] if "transform" in e} == set(want)
    for name, layout_name in want.items():
        host = runtime.to_image(CONVS[name][0], layout_name, dtype=dtype, engine="cpu")
        assert np.array_equal(bits(images[name]), bits(host)), name
