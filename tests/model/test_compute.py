"""The compute kernels (cl_kernels/compute.cl), written once against
accessors, against onnxruntime: small graphs built with onnx.helper for each
op and attribute, over several activation, filter and output layouts, and
every Conv node of PP-OCRv4 det run alone with its real weights.

Tolerance: an f32 sum of n products rounded in another order than
onnxruntime's differs by at most about n ulps of the sum of the absolute
terms, and by about sqrt(n) ulps in practice; 1e-5 of that sum (84 ulps)
holds every convolution here (n up to 9 * 256) and fails on any wrong
element (a misplaced weight or input changes the result by a whole term).
The sum of absolute terms is onnxruntime's own output for |x|, |w|, |b|."""
import numpy as np
import pytest

import runtime
from conftest import THOROUGH, needs, tiered
from runtime import Memory, MemoryDesc
from runtime.compute import network, ops

onnx = needs("onnx")
ort = needs("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/demo.py", "runtime/compute/__init__.py", "runtime/compute/network.py",
           "runtime/compute/ops.py", "runtime/model/manifest.py")

TOL = 1e-5
ACTIVATIONS = ["in_out_channel", "texture_2d", "in_out_height", "nhwc"]
FILTERS = ["conv2d_filter", "weight_height", "OIhw8i16o2i"]
OUTPUTS = ["in_out_channel", "in_out_width", "texture_2d", "nchw"]


def place(x: np.ndarray, layout: str, engine) -> Memory:
    """``x`` (logical, f32) as a Memory on ``engine`` in ``layout``: an image
    layout name, or a buffer tag."""
    if layout in runtime.IMAGE_LAYOUTS:
        return Memory.from_numpy(runtime.to_image(x, layout), layout, engine=engine,
                                 dims=x.shape)
    desc = MemoryDesc(x.shape, tag=layout)
    return Memory.from_numpy(runtime.reorder(x, MemoryDesc(x.shape), desc), desc,
                             engine=engine)


def output(layout: str, dims, engine) -> Memory:
    if layout in runtime.IMAGE_LAYOUTS:
        return Memory.image(layout, dims, "f32", engine)
    return Memory(MemoryDesc(dims, tag=layout), engine)


def read(mem: Memory) -> np.ndarray:
    if mem.is_image:
        return runtime.from_image(mem.to_numpy(), mem.layout, mem.dims)
    return runtime.reorder(mem.to_numpy(), mem.desc, MemoryDesc(mem.dims)).reshape(mem.dims)


def onnx_run(nodes, inputs: dict, inits: dict, out_shape):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                     for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def check(got, want, terms):
    assert got.shape == want.shape
    bad = np.abs(got - want) > TOL * terms + 1e-30
    assert not bad.any(), (np.argwhere(bad)[:3], got[bad][:3], want[bad][:3])


def conv_reference(x, w, b, attrs, depthwise_mult=None):
    """onnxruntime's Conv and the sum of its absolute terms."""
    o = w.shape[0]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    shape = [x.shape[0], o, None, None]
    want = onnx_run([node], {"x": x}, {"w": w, "b": b}, shape)
    terms = onnx_run([node], {"x": np.abs(x)}, {"w": np.abs(w), "b": np.abs(b)}, shape)
    return want, terms


def _latin(case) -> bool:
    """A Latin square of the 3 x 3 x 3 grid: every pair of an activation and a
    filter layout, of an activation and an output layout, and of a filter and
    an output layout meets once (9 cases)."""
    act, filt, out = case
    return (ACTIVATIONS.index(act) + FILTERS.index(filt)) % 3 == OUTPUTS.index(out)


# The covering set (every tier): the Latin square. The kernel reads the
# activation and the filter through their accessors and writes the output
# through its own: each layout is read or written by the others of every
# kind. The full 27-case grid runs in the thorough tier.
@pytest.mark.parametrize("act, filt, out", tiered(
    [(act, filt, out) for out in OUTPUTS[:3] for filt in FILTERS for act in ACTIVATIONS[:3]],
    _latin, ids=lambda case: f"{case[2]}-{case[1]}-{case[0]}"))
def test_conv_over_layouts(cl_engine, act, filt, out):
    x, w, b = rand(2, 5, 9, 7), rand(6, 5, 3, 3, seed=1), rand(6, seed=2)
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 1])
    want, terms = conv_reference(x, w, b, attrs)
    y = output(out, want.shape, cl_engine)
    ops.conv(place(x, act, cl_engine), place(w, filt, cl_engine), place(b, "argument", cl_engine),
             y, strides=(2, 1), pads=(1, 1))
    check(read(y), want, terms)


@pytest.mark.parametrize("case", [
    dict(strides=(1, 1), pads=(0, 0), dil=(1, 1), groups=1, k=(1, 1)),
    dict(strides=(2, 2), pads=(2, 1), dil=(2, 1), groups=1, k=(3, 3)),
    dict(strides=(1, 2), pads=(1, 1), dil=(1, 1), groups=2, k=(3, 2)),
    dict(strides=(1, 1), pads=(1, 1), dil=(1, 1), groups=17, k=(3, 3), depthwise=1),
    dict(strides=(2, 2), pads=(2, 2), dil=(1, 1), groups=17, k=(5, 5), depthwise=2),
])
def test_conv_attributes(cl_engine, case):
    c, o = 17, 17 * case.get("depthwise", 2 if case["groups"] == 2 else 1)
    if case["groups"] == 2:
        c, o = 6, 10
    x = rand(1, c, 11, 10)
    w = rand(o, c // case["groups"], *case["k"], seed=3)
    b = rand(o, seed=4)
    attrs = dict(kernel_shape=list(case["k"]), pads=[*case["pads"], *case["pads"]],
                 strides=list(case["strides"]), dilations=list(case["dil"]),
                 group=case["groups"])
    want, terms = conv_reference(x, w, b, attrs)
    depthwise = "depthwise" in case
    if depthwise:   # ONNX (C*M, 1, kH, kW) -> (M, C, kH, kW), as clayout model places it
        m = case["depthwise"]
        wm = place(np.ascontiguousarray(w.reshape(c, m, *case["k"]).transpose(1, 0, 2, 3)),
                   "dw_conv2d_filter", cl_engine)
    else:
        wm = place(w, "conv2d_filter", cl_engine)
    y = output("in_out_channel", want.shape, cl_engine)
    ops.conv(place(x, "in_out_channel", cl_engine), wm, place(b, "argument", cl_engine), y,
             case["strides"], case["pads"], case["dil"], case["groups"], depthwise)
    check(read(y), want, terms)


@pytest.mark.parametrize("act, out", [("in_out_channel", "in_out_channel"),
                                      ("nhwc", "texture_2d"), ("in_out_height", "nchw")])
def test_gemm(cl_engine, act, out):
    x, w, b = rand(3, 37), rand(10, 37, seed=1), rand(10, seed=2)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    want = onnx_run([node], {"x": x}, {"w": w, "b": b}, [3, 10])
    terms = onnx_run([node], {"x": np.abs(x)}, {"w": np.abs(w), "b": np.abs(b)}, [3, 10])
    y = output(out, (3, 10, 1, 1), cl_engine)
    ops.gemm(place(x.reshape(3, 37, 1, 1), act, cl_engine),
             place(w.reshape(10, 37, 1, 1), "weight_width", cl_engine),
             place(b, "argument", cl_engine), y)
    check(read(y).reshape(3, 10), want, terms)


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 2], strides=[1, 2], pads=[1, 0, 1, 0])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1)),
    ("GlobalAveragePool", {}),
])
@pytest.mark.parametrize("act, out", [("in_out_channel", "texture_2d"), ("nhwc", "nchw")])
def test_pools(cl_engine, op, attrs, act, out):
    x = rand(2, 6, 9, 8)
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    want = onnx_run([node], {"x": x}, {}, None)
    terms = onnx_run([node], {"x": np.abs(x)}, {}, None)
    y = output(out, want.shape, cl_engine)
    if op == "GlobalAveragePool":
        kernel, strides, pads = (9, 8), (1, 1), (0, 0)
    else:
        kernel, strides = tuple(attrs["kernel_shape"]), tuple(attrs["strides"])
        pads = tuple(attrs["pads"][:2])
    ops.pool(place(x, act, cl_engine), y, kernel, strides, pads, op == "MaxPool",
             bool(attrs.get("count_include_pad", 0)))
    check(read(y), want, terms if op != "MaxPool" else np.abs(want))


def test_batchnorm_add_relu(cl_engine):
    x = rand(2, 7, 5, 6)
    s, b, m, v = rand(7, seed=1), rand(7, seed=2), rand(7, seed=3), np.abs(rand(7, seed=4)) + 0.5
    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    want = onnx_run([bn], {"x": x}, {"s": s, "b": b, "m": m, "v": v}, list(x.shape))
    y = output("texture_2d", x.shape, cl_engine)
    ops.batchnorm(place(x, "in_out_channel", cl_engine),
                  *(place(a, "argument", cl_engine) for a in (s, b, m, v)), y, 1e-3)
    check(read(y), want, np.abs(want) + np.abs(x) * np.abs(s / np.sqrt(v + 1e-3))[:, None, None])
    per = rand(7, seed=5)
    add = helper.make_node("Add", ["x", "p"], ["y"])
    want = onnx_run([add], {"x": x}, {"p": per.reshape(7, 1, 1)}, list(x.shape))
    y = output("in_out_width", x.shape, cl_engine)
    ops.add(place(x, "nhwc", cl_engine), place(per, "argument", cl_engine), y)
    check(read(y), want, np.abs(x) + np.abs(per)[:, None, None])
    other = rand(*x.shape, seed=6)
    y = output("in_out_channel", x.shape, cl_engine)
    ops.add(place(x, "in_out_channel", cl_engine), place(other, "texture_2d", cl_engine), y)
    check(read(y), x + other, np.abs(x) + np.abs(other))
    y = output("nchw", x.shape, cl_engine)
    ops.relu(place(x, "in_out_height", cl_engine), y)
    assert np.array_equal(read(y), np.maximum(x, 0))


def _covering_convs(convs, consts, roles) -> list[int]:
    """The Conv nodes the ci tier runs: for each kind of Conv in the model (its
    kernel size, strides, pads, dilations, grouped or not, its weight's role
    and layout, with a bias or not: 8 kinds in PP-OCRv4 det), its first and
    its last node, which differ in their channel counts."""
    kinds = {}
    for k, node in enumerate(convs):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        role = roles[node.input[1]].role
        kind = (consts[node.input[1]].shape[2:], tuple(attrs.get("strides", [1, 1])),
                tuple(attrs.get("pads", [0] * 4)), tuple(attrs.get("dilations", [1, 1])),
                attrs.get("group", 1) > 1, role, runtime.algebra.catalog.own_layout(role),
                len(node.input) > 2)
        kinds.setdefault(kind, []).append(k)
    return sorted({k for ks in kinds.values() for k in (ks[0], ks[-1])})


@pytest.mark.slow
def test_every_conv_of_ppocr_det_alone(cl_engine, ppocr):
    """Each Conv node of PP-OCRv4 det with its real weights (as clayout
    model places them) on a random 12x12 input: all 62 in the thorough tier,
    the first and last of each kind of Conv in ci (``_covering_convs``)."""
    from runtime import model as clayout_model
    path = ppocr["det"]
    proto = onnx.load(path)
    consts = clayout_model.weight_arrays(path)
    roles = {w.name: w for w in clayout_model.plan(
        clayout_model.front_ends.read_constants(clayout_model.load(path), path))}
    convs = [n for n in proto.graph.node if n.op_type == "Conv"]
    assert len(convs) > 50
    chosen = range(len(convs)) if THOROUGH else _covering_convs(convs, consts, roles)
    for k in chosen:
        node = convs[k]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = consts[node.input[1]].astype(np.float32)
        b = consts[node.input[2]].astype(np.float32).reshape(-1) if len(node.input) > 2 \
            else np.zeros(w.shape[0], np.float32)
        groups = attrs.get("group", 1)
        x = rand(1, w.shape[1] * groups, 12, 12, seed=k)
        pads = attrs.get("pads", [0, 0, 0, 0])
        onnx_attrs = dict(kernel_shape=list(w.shape[2:]), pads=pads,
                          strides=attrs.get("strides", [1, 1]),
                          dilations=attrs.get("dilations", [1, 1]), group=groups)
        want, terms = conv_reference(x, w, b, onnx_attrs)
        role = roles[node.input[1]]
        logical = clayout_model.logical_weight(w, role.steps)
        layout = runtime.algebra.catalog.own_layout(role.role)
        wm = place(np.ascontiguousarray(logical), layout, cl_engine)
        y = output("in_out_channel", want.shape, cl_engine)
        ops.conv(place(x, "in_out_channel", cl_engine), wm, place(b, "argument", cl_engine), y,
                 tuple(onnx_attrs["strides"]), tuple(pads[:2]), tuple(onnx_attrs["dilations"]),
                 groups, role.role == "depthwise")
        check(read(y), want, terms)


def test_the_sample_cnn_end_to_end(cl_engine, tmp_path):
    """The bundled sample: weights by clayout model, activations by
    to_image, every op through the accessor kernels, against onnxruntime."""
    from runtime import model
    from runtime.cli import demo
    from runtime.model.manifest import read_manifest
    path = demo.sample_path()
    out = tmp_path / "w.safetensors"
    model.convert_file(path, str(out), engine="cpu")
    images, manifest = read_manifest(out)
    x = rand(1, 3, 16, 16)
    got = network.run(onnx.load(path), images, manifest, x, cl_engine)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None,
                                                                             {"input": x})[0]
    assert got.shape == want.shape and np.abs(got - want).max() < 1e-5 * np.abs(want).max() + 1e-6
