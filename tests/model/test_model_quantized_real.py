"""clayout model on PP-OCRv4 det quantized by onnxruntime (the ground truth).

The detector (the pinned PyPI wheel of tests/model/test_model_real.py) is quantized
twice, once per session, into the test's own temporary folder:

- ``quantize_static``: QDQ, per-channel int8 weights, calibrated on a few
  random inputs; every Conv / ConvTranspose weight and bias is then a
  DequantizeLinear of integer constants;
- ``quantize_dynamic``: integer operators; every Conv becomes a ConvInteger
  after a DynamicQuantizeLinear, its weight int8 and its scale applied by a
  Mul after it.

For every conv weight of the quantized graphs the test computes the expected
value itself from the ONNX arrays: the folded float ``(q - zero_point) * scale``
in f32, or with ``--quantized keep`` (and always for ConvInteger) q itself with
the scale and zero point the graph gives it, and compares it with the stored
image bit for bit (the reference engine's image of the logical tensor).
"""
import numpy as np
import pytest

from conftest import needs

onnx = needs("onnx")
needs("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,  # noqa: E402
                                      quantize_dynamic, quantize_static)

import runtime
from runtime import model
from runtime.model.manifest import read_manifest

from conftest import bits

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/integer_weights.py",)

CONV_OPS = ("Conv", "ConvTranspose", "ConvInteger")


class RandomImages(CalibrationDataReader):
    """A few random 64x64 inputs: enough for onnxruntime to pick activation scales."""

    def __init__(self, name: str, count: int = 3):
        rng = np.random.default_rng(4)
        self.feeds = iter([{name: rng.random((1, 3, 64, 64), dtype=np.float32)}
                           for _ in range(count)])

    def get_next(self):
        return next(self.feeds, None)


@pytest.fixture(scope="session")
def quantized(ppocr, tmp_path_factory):
    """{"qdq": path, "dynamic": path} of PP-OCRv4 det quantized by onnxruntime.
    Its weights live in Constant nodes, which onnxruntime's quantizer does not
    take as weights: they are made initializers first (same tensors)."""
    folder = tmp_path_factory.mktemp("quantized")
    m = onnx.load(ppocr["det"])
    nodes = []
    for node in m.graph.node:
        if node.op_type == "Constant" and node.attribute[0].name == "value":
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            m.graph.initializer.append(tensor)
        else:
            nodes.append(node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    source = folder / "det.onnx"
    onnx.save(m, str(source))
    paths = {"qdq": folder / "det_qdq.onnx", "dynamic": folder / "det_dynamic.onnx"}
    quantize_static(str(source), str(paths["qdq"]), RandomImages(m.graph.input[0].name),
                    quant_format=QuantFormat.QDQ, per_channel=True,
                    weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
    quantize_dynamic(str(source), str(paths["dynamic"]), weight_type=QuantType.QInt8)
    return paths


def graph_of(path):
    m = onnx.load(str(path))
    arrays = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    made_by = {out: node for node in m.graph.node for out in node.output}
    return m, arrays, made_by


def logical(op, attrs, index, w):
    """The logical tensor of input ``index`` of a conv op (docs/model.md's role table)."""
    if index == 2:
        return "argument", w.reshape(-1)
    group = attrs.get("group", 1)
    if op == "ConvTranspose":
        assert group == 1
        return "conv2d_filter", w.transpose(1, 0, 2, 3)
    if group > 1 and w.shape[1] == 1:                     # depthwise, multiplier 1 here
        assert w.shape[0] == group
        return "dw_conv2d_filter", w.transpose(1, 0, 2, 3)
    return "conv2d_filter", w


def dequantized(q, scale, zero, axis):
    """(q - zero) * scale in f32, the per-axis parameters along ``axis``."""
    shape = [1] * q.ndim
    if scale.size > 1:
        shape[axis % q.ndim] = -1
    d = q.astype(np.int64) - zero.astype(np.int64).reshape(shape if zero.size > 1 else ())
    return (d.astype(np.float32) * scale.astype(np.float32).reshape(
        shape if scale.size > 1 else ())).astype(np.float32)


def same_image(images, entry, layout, value):
    assert entry["layout"] == layout and tuple(entry["dims"]) == value.shape, entry["name"]
    want = runtime.to_image(np.ascontiguousarray(value), layout, dtype=entry["dtype"],
                            engine="reference")
    got = images[entry["name"]]
    return got.dtype == want.dtype and np.array_equal(bits(got), bits(want))


def nothing_conv_related_skipped(manifest):
    skipped = [s for s in manifest["skipped"] if s["consumer"].split(" ")[0] in CONV_OPS]
    assert skipped == []
    # buffers hold what no image takes (activations' scales, scalars), never a Conv's weight
    assert not [e for e in manifest["tensors"] if e["layout"] == "buffer" and
                e["consumer"].split(" ")[0] in CONV_OPS and "activation" not in e["reason"]]


def convert(path, out, quantized="fold"):
    manifest, verified = model.convert_file(str(path), str(out), verify_all=True,
                                            engine="cpu", quantized=quantized, keep_buffers=True)
    images, stored = read_manifest(out)
    assert stored == manifest and verified == len(manifest["tensors"])
    return images, {e["name"]: e for e in manifest["tensors"]}, manifest


@pytest.mark.parametrize("form", ["fold", "keep"])
def test_ppocr_det_qdq(quantized, tmp_path, form):
    m, arrays, made_by = graph_of(quantized["qdq"])
    images, by, manifest = convert(quantized["qdq"], tmp_path / "w.safetensors", form)
    checked = 0
    for node in m.graph.node:
        if node.op_type not in CONV_OPS:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for index, name in enumerate(node.input[1:], 1):
            dq = made_by[name]
            assert dq.op_type == "DequantizeLinear", (node.name, name)
            q, scale, zero = (arrays[n] for n in dq.input)
            axis = {a.name: helper.get_attribute_value(a) for a in dq.attribute}.get("axis", 1)
            e = by[name]
            if form == "fold":
                layout, value = logical(node.op_type, attrs, index,
                                        dequantized(q, scale, zero, axis))
                assert e["dtype"] == "f32" and e["dequantized"]["q"] == dq.input[0]
            else:
                layout, value = logical(node.op_type, attrs, index, q)
                assert e["dtype"] == {"int8": "s8", "int32": "s32"}[q.dtype.name]
                for kind, want in (("scale", scale), ("zero_point", zero)):
                    key = e["quantization"][kind]
                    assert key == f"{name}.{kind}" and by[key]["source_name"] == \
                        dq.input[1 if kind == "scale" else 2]
                    back = model.read_back(images[key], by[key])
                    assert np.array_equal(bits(back), bits(want)), key
                assert e["quantization"]["axis"] == (axis % q.ndim if scale.size > 1 else None)
            assert same_image(images, e, layout, value), name
            checked += 1
    assert checked == 116                 # 62 Conv and 2 ConvTranspose: weights and biases
    nothing_conv_related_skipped(manifest)


def test_ppocr_det_dynamic(quantized, tmp_path):
    m, arrays, made_by = graph_of(quantized["dynamic"])
    images, by, manifest = convert(quantized["dynamic"], tmp_path / "w.safetensors")
    checked, parameters = 0, set()
    for node in m.graph.node:
        if node.op_type not in CONV_OPS:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "ConvTranspose":     # not quantized by quantize_dynamic: float
            for index, name in enumerate(node.input[1:], 1):
                assert same_image(images, by[name], *logical(node.op_type, attrs, index,
                                                             arrays[name]))
                checked += 1
            continue
        name, zero_name = node.input[1], node.input[3]
        q, zero = arrays[name], arrays[zero_name]
        scale = arrays[name.replace("_quantized", "_scale")]   # onnxruntime's names
        parameters |= {zero_name, name.replace("_quantized", "_scale")}
        e = by[name]
        assert e["dtype"] == "s8" and same_image(images, e, *logical("Conv", attrs, 1, q)), name
        quant = e["quantization"]
        assert (quant["scale"], quant["zero_point"]) == (f"{name}.scale", f"{name}.zero_point")
        for key, want in ((quant["scale"], scale), (quant["zero_point"], zero)):
            assert by[key]["dims"] == [want.size]
            assert np.array_equal(bits(model.read_back(images[key], by[key])), bits(want)), key
        checked += 1
    assert checked == 62 + 2               # the ConvIntegers, the ConvTransposes' weights
    nothing_conv_related_skipped(manifest)
    assert len(parameters) == 2 * 62
    assert not parameters & {s["name"] for s in manifest["skipped"]}   # stored with their weight
