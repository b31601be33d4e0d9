"""A small ONNX CNN run end to end through the compute kernels (runtime/compute/ops.py):
the weights as ``clayout model`` placed them (read from its safetensors file),
the activations placed by ``to_image`` (or the input already on the device,
e.g. a camera frame ``from_frame`` converted there), every op through the
accessor kernels.

The runner takes the ops a small CNN is made of: Conv (any group, stride,
padding, dilation; a depthwise weight on ``dw_conv2d_filter``),
BatchNormalization, Relu, MaxPool, AveragePool, GlobalAveragePool, Add, a
Reshape or Flatten of an (N, C, 1, 1) tensor to (N, C), and Gemm with
transB = 1; anything else is refused by name. Nodes whose inputs are all
constants (the chains ``clayout model`` folded) are skipped.

>>> run("sample_cnn.onnx", "sample_cnn.safetensors", x, engine)        # doctest: +SKIP
array([[...]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..algebra.desc import MemoryDesc
from ..api import from_frame, from_image, to_image
from ..errors import ClayoutError
from ..memory import Memory
from ..doors.read_output import read_output
from ..model.onnx import reader as onnx_reader
from ..model.manifest import read_manifest
from . import ops

OPS = ("Conv", "BatchNormalization", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool",
       "Add", "Reshape", "Flatten", "Gemm", "Identity")


def _attrs(node) -> dict:
    import onnx.helper   # the model extra: a model is being read
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _pads(attrs, rank=2):
    pads = list(attrs.get("pads", [0] * 2 * rank))
    if pads[:rank] != pads[rank:]:
        raise ClayoutError(f"asymmetric pads {pads}: the reference runner takes symmetric ones")
    return tuple(pads[:rank])


def weights_on(engine, images: dict, manifest: dict) -> dict:
    """Every image of a ``clayout model`` file as an image Memory on ``engine``."""
    out = {}
    for e in manifest["tensors"]:
        if e["layout"] == "buffer" or "tiles" in e:
            continue
        out[e["name"]] = Memory.from_numpy(images[e["name"]], e["layout"], engine=engine,
                                           dims=e["dims"])
    return out


def input_shape(model) -> tuple[int, ...]:
    """The shape of ``model``'s first input as its ONNX file declares it (a
    symbolic or unknown dimension taken as 1)."""
    return tuple(d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim)


def run_memory(model, images: dict, manifest: dict, x, engine,
               activations: str = "in_out_channel") -> Memory:
    """The output of ``model`` (an ONNX ModelProto with one input and one
    output) for the input ``x``, every op on ``engine``'s device with
    activations on ``activations`` images. ``x`` is NCHW float32 on the host
    (placed on an ``activations`` image by ``to_image``), or a Memory
    already on ``engine``'s device (an image in any activation layout, e.g.
    what ``from_frame`` made there, or a buffer), used as it is: no host
    work before the first op. Its dims must be the ones the model declares.
    The output stays on the device: an image Memory of ``activations``."""
    weights = weights_on(engine, images, manifest)
    layouts = {e["name"]: e["layout"] for e in manifest["tensors"]}
    graph = model.graph
    values = {graph.input[0].name: input_memory(model, x, activations, engine)}
    for node in graph.node:
        ins = [i for i in node.input if i]
        if not any(i in values for i in ins):
            continue   # a constant, or a chain of constants clayout model folded
        if node.op_type not in OPS:
            raise ClayoutError(f"node {node.name or node.op_type!r}: the reference runner takes "
                               f"{', '.join(OPS)}; not {node.op_type}")
        values[node.output[0]] = _node(node, ins, values, weights, layouts, engine, activations)
    return values[graph.output[0].name]


def run(model, images: dict, manifest: dict, x, engine,
        activations: str = "in_out_channel") -> np.ndarray:
    """``run_memory``'s output read back to the host as NCHW (N, C) when
    its spatial dims are 1x1."""
    out = run_memory(model, images, manifest, x, engine, activations)
    host = from_image(out.to_numpy(), out.layout, out.dims)
    return host.reshape(host.shape[:2]) if host.shape[2:] == (1, 1) else host


def input_memory(model, x, activations: str, engine) -> Memory:
    """The model's input as a Memory on ``engine``: ``x`` itself when it is
    a Memory there, else the host array placed on an ``activations`` image;
    its dims checked against the ones ``model`` declares (those not symbolic)."""
    declared = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    if isinstance(x, Memory):
        if x.engine.domain != engine.domain:
            raise ClayoutError(f"the input {x!r} is not on the engine the model runs on "
                               f"({engine.name}); make it there, or pass a host array")
        mem = x
    else:
        mem = to_image_memory(x, activations, engine)
    if len(mem.dims) != len(declared) or \
            any(d and d != got for d, got in zip(declared, mem.dims)):
        raise ClayoutError(f"the input's dims {tuple(mem.dims)}; the model declares "
                           f"{tuple(d or '?' for d in declared)}")
    return mem


def to_image_memory(x: np.ndarray, layout: str, engine) -> Memory:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return Memory.from_numpy(to_image(x, layout), layout, engine=engine, dims=x.shape)


def _zeros(n: int, engine) -> Memory:
    return Memory.image("argument", (n,), "f32", engine)


def _node(node, ins, values, weights, layouts, engine, activations) -> Memory:
    op, a = node.op_type, _attrs(node)
    x = values[ins[0]]
    if op in ("Identity", "Reshape", "Flatten"):
        if op != "Identity" and x.dims[2:] != (1, 1):
            raise ClayoutError(f"{op} {node.name!r} of dims {x.dims}: the reference runner "
                               "reshapes only (N, C, 1, 1) to (N, C)")
        return x
    if op == "Add" and ins[1] in values:
        other = values[ins[1]]
    elif op == "Add":
        other = weights[ins[1]]
    y_dims = x.dims
    if op == "Conv":
        w = weights[ins[1]]
        depthwise = layouts[ins[1]] == "dw_conv2d_filter"
        strides, dil = tuple(a.get("strides", (1, 1))), tuple(a.get("dilations", (1, 1)))
        pads = _pads(a)
        y_dims = ops.conv_out_dims(x.dims, w.dims, strides, pads, dil, depthwise)
        b = weights[ins[2]] if len(ins) > 2 else _zeros(y_dims[1], engine)
        y = Memory.image(activations, y_dims, "f32", engine)
        ops.conv(x, w, b, y, strides, pads, dil, int(a.get("group", 1)), depthwise)
        return y
    if op == "Gemm":
        if not a.get("transB", 0) or a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or \
                a.get("beta", 1.0) != 1.0:
            raise ClayoutError(f"Gemm {node.name!r}: the reference runner takes transB=1, "
                               "alpha=beta=1 (a fully connected layer)")
        w = weights[ins[1]]
        y = Memory.image(activations, (x.dims[0], w.dims[0], 1, 1), "f32", engine)
        b = weights[ins[2]] if len(ins) > 2 else _zeros(w.dims[0], engine)
        ops.gemm(x, w, b, y)
        return y
    if op in ("MaxPool", "AveragePool", "GlobalAveragePool"):
        n, c, h, w_ = x.dims
        if op == "GlobalAveragePool":
            kernel, strides, pads = (h, w_), (1, 1), (0, 0)
        else:
            kernel, strides, pads = tuple(a["kernel_shape"]), tuple(a.get("strides", (1, 1))), \
                _pads(a)
        y_dims = (n, c, (h + 2 * pads[0] - kernel[0]) // strides[0] + 1,
                  (w_ + 2 * pads[1] - kernel[1]) // strides[1] + 1)
        y = Memory.image(activations, y_dims, "f32", engine)
        ops.pool(x, y, kernel, strides, pads, op == "MaxPool",
                 bool(a.get("count_include_pad", 0)))
        return y
    y = Memory.image(activations, y_dims, "f32", engine)
    if op == "BatchNormalization":
        scale, bias, mean, var = (weights[i] for i in ins[1:5])
        ops.batchnorm(x, scale, bias, mean, var, y, float(a.get("epsilon", 1e-5)))
    elif op == "Relu":
        ops.relu(x, y)
    else:
        ops.add(x, other, y)
    return y


__all__ = ["run", "weights_on", "to_image_memory", "input_memory", "input_shape",
           "compare_with_onnxruntime", "compare_frame_with_onnxruntime"]


def _onnxruntime_session(model_path: str):
    """An onnxruntime CPU session of the model, or None without onnxruntime."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])


NO_ONNXRUNTIME = "onnxruntime is not installed (pip install onnxruntime), so the sample CNN " \
    "was not compared"


def _against(session, model, weights_path: str, x, x_host: np.ndarray, engine):
    """(largest difference, largest |output|, agrees): ``model`` run on
    ``engine`` for ``x`` (a host array or a Memory there) against
    onnxruntime's ``session`` for ``x_host`` (the same values, f32), agreeing
    within 1e-4 of the largest output."""
    images, manifest = read_manifest(weights_path)
    out = run_memory(model, images, manifest, x, engine)
    got = from_image(out.to_numpy(), out.layout, out.dims).reshape(-1)
    want = session.run(None, {model.graph.input[0].name: x_host})[0]
    diff = float(np.abs(got - want.reshape(got.shape)).max())
    top = float(np.abs(want).max())
    # the output read back as a user would: its argmax over the classes, on the device
    arg = read_output(out, argmax=True).reshape(-1)
    want_arg = np.argmax(want.reshape(want.shape[0], want.shape[1], -1), axis=1).reshape(-1)
    return diff, top, diff <= 1e-4 * top + 1e-6 and (arg == want_arg).all(), \
        (arg.tolist(), want_arg.tolist())


def compare_with_onnxruntime(model_path: str, weights_path: str, engine,
                             seed: int = 0) -> tuple[str, bool]:
    """(one line for ``clayout demo``, whether it agrees): the model run end
    to end on ``engine`` through the accessor kernels against onnxruntime on
    one random input (agreeing within 1e-4 of the largest output), or why it
    was not run (which agrees: nothing was wrong)."""
    session = _onnxruntime_session(model_path)
    if session is None:
        return f"end to end: {NO_ONNXRUNTIME}", True
    model = onnx_reader.load(model_path)
    x = np.random.default_rng(seed).standard_normal(input_shape(model)).astype(np.float32)
    diff, top, same, (arg, want_arg) = _against(session, model, weights_path, x, x, engine)
    return (f"end to end: the sample CNN on {engine.name} through accessor kernels (weights "
            f"placed by clayout model, activations by to_image): largest difference to "
            f"onnxruntime {diff:.2g} (outputs up to {top:.3g}); read_output's argmax on the "
            f"device {arg}, onnxruntime's {want_arg}"), same


def compare_frame_with_onnxruntime(model_path: str, weights_path: str, engine, frame, *,
                                   format: str = "nv21", mean=0.0, std=1.0,
                                   activations: str = "in_out_channel") -> tuple[str, bool]:
    """(one line for ``clayout demo``, whether it agrees): the model run end
    to end from a camera frame (a u8 host array in ``format``). The frame
    goes into a u8 buffer Memory on ``engine``, ``from_frame`` turns it on
    the device into the model's input (an ``activations`` image of the
    declared (W, H); ``mean``, ``std`` as from_frame takes them), and that
    image goes through the accessor kernels as it is. onnxruntime gets the
    reference engine's ``from_frame`` of the same frame (float64, rounded to
    f32), so the comparison covers the frame kernel and the network together
    (agreeing within 1e-4 of the largest output)."""
    session = _onnxruntime_session(model_path)
    if session is None:
        return f"end to end from a frame: {NO_ONNXRUNTIME}", True
    model = onnx_reader.load(model_path)
    n, c, h, w = input_shape(model)
    opts = dict(format=format, size=(w, h), mean=mean, std=std)
    src = Memory(MemoryDesc(frame.shape, "u8"), engine=engine, data=frame)
    x = from_frame(src, activations, engine=engine, **opts)
    x_host = from_frame(frame, "nchw", engine="reference", **opts)
    diff, top, same, (arg, want_arg) = _against(session, model, weights_path, x, x_host,
                                                engine)
    fh, fw = (frame.shape[0] * 2 // 3, frame.shape[1]) if format in ("nv12", "nv21", "i420") \
        else frame.shape[:2]
    made = from_image(x.to_numpy(), x.layout, x.dims)   # read back after the run, to report
    how = "one kernel" + (" and a buffer-to-image copy" if engine.staged(x.side) else "")
    return (f"end to end from a frame: {fw}x{fh} {format.upper()} -> from_frame ({how}, "
            f"to a {w}x{h} {activations} image on {engine.name}) -> sample CNN through "
            f"accessor kernels: largest difference to onnxruntime {diff:.2g} (outputs up to "
            f"{top:.3g}; the device's input against the reference's "
            f"{float(np.abs(made - x_host).max()):.2g}); read_output's argmax on the device "
            f"{arg}, onnxruntime's {want_arg}"), same
