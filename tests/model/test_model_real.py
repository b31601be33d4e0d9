"""clayout model on real exports: PaddleOCR's PP-OCRv4 detector and recognizer.

The models come from PyPI's rapidocr-onnxruntime 1.4.4 wheel (every weight in
a ``Constant`` node, none in initializers), downloaded once with ``pip download
--no-deps`` into $CLAYOUT_TEST_CACHE (default ~/.cache/clayout-test) and
unzipped file by file; the package is never installed or imported. CI reaches
PyPI, so a failed download fails these tests instead of skipping them.

Every weight of every Conv, ConvTranspose, MatMul and BatchNormalization is
counted from the graph here and compared with the reference engine's image of
its logical tensor, computed here from the ONNX weight with numpy.
"""
import os

import numpy as np
import pytest

import runtime
from runtime import model
from runtime.model.manifest import read_manifest
from conftest import needs

onnx = needs("onnx")
from onnx import helper, numpy_helper  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/apply.py",)

WEIGHT_OPS = ("Conv", "ConvTranspose", "MatMul", "BatchNormalization")
COUNTS = {"det": 128, "rec": 103}      # weights of WEIGHT_OPS in each graph


def expected_weights(path):
    """{name: (layout, logical tensor)} of every constant input of WEIGHT_OPS,
    mapped with plain numpy from the ONNX graph."""
    m = onnx.load(path)
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t)
              for n in m.graph.node if n.op_type == "Constant"}
    consts.update({t.name: numpy_helper.to_array(t) for t in m.graph.initializer})
    want = {}
    for node in m.graph.node:
        if node.op_type not in WEIGHT_OPS:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for index, name in enumerate(node.input[1:], 1):
            if name not in consts:
                continue
            w = consts[name]
            if index > 1 or node.op_type == "BatchNormalization":
                want[name] = ("argument", w.reshape(-1))
            elif node.op_type == "MatMul":                       # (K, N) -> (N, K, 1, 1)
                want[name] = ("weight_width", w.T[:, :, None, None])
            elif node.op_type == "ConvTranspose":                # group 1 in these models
                assert attrs.get("group", 1) == 1
                want[name] = ("conv2d_filter", w.transpose(1, 0, 2, 3))
            elif attrs.get("group", 1) > 1 and w.shape[1] == 1:  # depthwise, M = O / group
                group = attrs["group"]
                mult = w.shape[0] // group
                logical = np.empty((mult, group) + w.shape[2:], w.dtype)
                for c in range(group):
                    for mm in range(mult):
                        logical[mm, c] = w[c * mult + mm, 0]
                want[name] = ("dw_conv2d_filter", logical)
            else:
                want[name] = ("conv2d_filter", w)
    return want


@pytest.fixture(scope="session")
def expected(ppocr):
    return {k: expected_weights(p) for k, p in ppocr.items()}


def test_weight_counts(expected):
    assert {k: len(v) for k, v in expected.items()} == COUNTS


def graph_float_elements(path) -> tuple[int, int]:
    """(float constants, their elements) of the ONNX file, counted here from
    its Constant nodes and initializers (subgraphs included)."""
    m = onnx.load(path)
    found = []

    def walk(graph):
        found.extend(numpy_helper.to_array(t) for t in graph.initializer)
        for n in graph.node:
            if n.op_type == "Constant":
                found.extend(numpy_helper.to_array(a.t) for a in n.attribute if a.name == "value")
            for a in n.attribute:
                if a.type == a.GRAPH:
                    walk(a.g)
    walk(m.graph)
    floats = [a for a in found if a.dtype.kind == "f"]
    return len(floats), sum(a.size for a in floats)


def _check(tmp_path, path, want, dtype, engine):
    out = tmp_path / "w.safetensors"
    manifest, verified = model.convert_file(path, str(out), dtype, engine=engine,
                                            verify_all=True, keep_buffers=True)
    images, stored_manifest = read_manifest(out)
    assert stored_manifest == manifest and verified == len(manifest["tensors"])
    by = {e["name"]: e for e in manifest["tensors"]}
    assert set(want) <= set(by), sorted(set(want) - set(by))
    for name, (layout, logical) in want.items():
        e = by[name]
        assert (e["layout"], tuple(e["dims"]), e["dtype"]) == (layout, logical.shape, dtype), name
        ref = runtime.to_image(np.ascontiguousarray(logical), layout, dtype=dtype,
                               engine="reference")
        assert ref.dtype == images[name].dtype and \
            np.array_equal(ref.view(f"u{ref.itemsize}"),
                           images[name].view(f"u{ref.itemsize}")), name
    skipped = {s["name"] for s in manifest["skipped"]}
    assert not skipped & set(want)
    # every float constant accounted for: the totals are the file's float elements
    a = manifest["accounting"]
    assert (a["float_constants"], a["float_elements"]) == graph_float_elements(path)
    assert a["placed"] + a["folded"] + a["kept"] + a["dead"] + a["empty"] == a["float_elements"]
    return manifest


@pytest.mark.parametrize("which", ["det", "rec"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_ppocr_cpu(tmp_path, ppocr, expected, which, dtype):
    manifest = _check(tmp_path, ppocr[which], expected[which], dtype, "cpu")
    # the buffers are the constants no image takes (scalars, Clip bounds, Resize scales),
    # never a weight of the compute ops
    buffers = {e["name"]: e for e in manifest["tensors"] if e["layout"] == "buffer"}
    assert buffers and not set(buffers) & set(expected[which])
    assert all(e["role"] is None for e in buffers.values())


@pytest.mark.parametrize("which", ["det", "rec"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_ppocr_opencl(tmp_path, ppocr, expected, cl_engine, which, dtype):
    _check(tmp_path, ppocr[which], expected[which], dtype, cl_engine)


def test_demo_converts_ppocr_det(ppocr, capsys, monkeypatch):
    from runtime import cli
    monkeypatch.setenv("CLAYOUT_CACHE", os.path.dirname(ppocr["det"]))
    code = cli.main(["demo", "--engine", "cpu", "--ppocr"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "11/11 images exact" in out
    assert "found in the cache: converting" in out and "ch_PP-OCRv4_det_infer.onnx" in out
    assert "129 images, 207 buffers" in out and "129/129 images exact" in out

