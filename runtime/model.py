"""Offline conversion of an ONNX model's weights into image layouts (``clayout model``).

Plan, then apply: :func:`plan` reads the graph and gives every initializer a
role from the op that consumes it; :func:`convert_model` places each weight on
its image with :func:`runtime.to_image` and writes one safetensors file (one
tensor per image, named after the ONNX tensor) with a JSON manifest in the
file's metadata under the key ``clayout``.

Roles (the logical dims are clayout's canonical ones, DESIGN §2):

=====================  ==================================  =========================================
consumer (input)       role / layout                       logical dims from the ONNX tensor
=====================  ==================================  =========================================
Conv (W), group 1      conv2d_filter                       (O, I, kH, kW) as stored
Conv (W), grouped      conv2d_filter                       (O, I/group, kH, kW) as stored
Conv (W), depthwise    dw_conv2d_filter                    ONNX (C*M, 1, kH, kW) -> (M, C, kH, kW),
  group == C_in                                            element [m, c] = onnx[c*M + m]
ConvTranspose (W)      conv2d_filter                       ONNX (I, O, kH, kW) -> (O, I, kH, kW)
                                                           (group 1 only)
Gemm (B)               weight_width                        (O, I, 1, 1): B.T if transB=0, else B
MatMul (2-D B)         weight_width                        (O, I, 1, 1) = B.T  (B is (I, O))
Conv/ConvTranspose/    argument                            (W,) ; a Gemm C of shape (1, W) or an
Gemm bias, BatchNorm                                       Add/Mul constant of shape (1, W, 1, 1)
params, Add/Mul consts                                     is flattened (one non-unit dim)
=====================  ==================================  =========================================

Anything else is skipped and listed in the manifest's ``skipped`` list with a
reason: integer tensors (shapes, indices), scalars, tensors of other ops, and
ranks the image layouts do not take. When an image is larger than the
``max_image`` limit, the first named layout of the same kind that fits is
used instead and recorded (``fallback_from``); if none fits, nothing is
written and the error names the tensor.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

from . import dtypes
from .api import from_image, to_image
from .errors import ClayoutError
from .image import ImageLayout, image_layout

MAX_IMAGE = (8192, 8192)   # the OpenCL 1.2 minimum of IMAGE2D_MAX_WIDTH/HEIGHT: fits every device
MANIFEST_KEY = "clayout"
FORMAT = "clayout-model/1"


def _need_onnx():
    try:
        import onnx
        import onnx.numpy_helper
    except ImportError:
        raise ClayoutError("clayout model needs the onnx and safetensors packages: "
                           "pip install 'clayout[model]'") from None
    return onnx


@dataclass
class Weight:
    """One initializer and what clayout does with it."""
    name: str
    onnx_shape: tuple[int, ...]
    onnx_dtype: str
    consumer: str                 # "Conv conv1 input 1", or "" when unused
    role: str = "skipped"         # a named image layout, or "skipped"
    dims: tuple[int, ...] = ()    # clayout's logical dims
    mapping: str = ""             # how the logical tensor is read from the ONNX one
    reason: str = ""              # why it was skipped
    params: dict = field(default_factory=dict)  # what the mapping needs (M, transpose, ...)


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            import onnx.helper
            return onnx.helper.get_attribute_value(a)
    return default


def _one_axis(shape) -> int | None:
    """The length of a tensor with at most one non-unit dim, else None."""
    big = [d for d in shape if d != 1]
    if len(big) > 1:
        return None
    return big[0] if big else 1


def _role(w: Weight, op: str, index: int, node) -> None:
    """Fill in w's role, dims and mapping for being input ``index`` of ``node``."""
    shape = w.onnx_shape
    if op in ("Conv", "ConvTranspose") and index == 1:
        if len(shape) != 4:
            w.reason = f"{op} weight of rank {len(shape)}: image layouts take 2-D convolutions only"
            return
        group = int(_attr(node, "group", 1))
        if op == "ConvTranspose":
            if group != 1:
                w.reason = f"ConvTranspose with group {group}: only group 1 is mapped"
                return
            w.role, w.dims = "conv2d_filter", (shape[1], shape[0], shape[2], shape[3])
            w.mapping, w.params = "ONNX (I,O,kH,kW) transposed to (O,I,kH,kW)", {"transpose": True}
        elif group > 1 and shape[1] == 1 and shape[0] % group == 0:
            mult = shape[0] // group
            w.role, w.dims = "dw_conv2d_filter", (mult, group, shape[2], shape[3])
            w.mapping = f"ONNX (C*M,1,kH,kW) with C={group}, M={mult}: [m,c] = onnx[c*M+m]"
            w.params = {"multiplier": mult}
        else:
            w.role, w.dims = "conv2d_filter", tuple(shape)
            w.mapping = "ONNX (O,I,kH,kW) as stored" + (f" (group {group}: I per group)"
                                                       if group > 1 else "")
        return
    if op == "Gemm" and index == 1:
        if len(shape) != 2:
            w.reason = f"Gemm B of rank {len(shape)}"
            return
        trans = bool(_attr(node, "transB", 0))
        out, inp = (shape[0], shape[1]) if trans else (shape[1], shape[0])
        w.role, w.dims = "weight_width", (out, inp, 1, 1)
        w.mapping = "Gemm B (O,I) with transB=1, as stored" if trans else \
            "Gemm B (I,O) with transB=0, transposed to (O,I)"
        w.params = {"transpose": not trans}
        return
    if op == "MatMul" and index == 1:
        if len(shape) != 2:
            w.reason = f"MatMul weight of rank {len(shape)}: only 2-D weights are mapped"
            return
        w.role, w.dims = "weight_width", (shape[1], shape[0], 1, 1)
        w.mapping, w.params = "MatMul B (I,O) transposed to (O,I)", {"transpose": True}
        return
    is_param = ((op in ("Conv", "ConvTranspose", "Gemm") and index == 2)
                or (op == "BatchNormalization" and 1 <= index <= 4)
                or op in ("Add", "Mul"))
    if not is_param:
        w.reason = f"{op} input {index} has no image role"
        return
    if math.prod(shape) == 1 and op in ("Add", "Mul"):
        w.reason = "scalar constant: pass it as a kernel argument"
        return
    length = _one_axis(shape)
    if length is None or (len(shape) == 0):
        w.reason = f"{op} input {index} of shape {shape} is not a per-channel vector"
        return
    w.role, w.dims = "argument", (length,)
    w.mapping = "as stored" if len(shape) == 1 else f"ONNX {shape} flattened"


def plan(model) -> list[Weight]:
    """Every initializer of the main graph with its role, in graph order."""
    onnx = _need_onnx()
    graph = model.graph
    consumers: dict[str, tuple] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name and name not in consumers:
                consumers[name] = (node, index)
    weights = []
    for init in graph.initializer:
        dtype_name = onnx.helper.tensor_dtype_to_np_dtype(init.data_type).name \
            if init.data_type else "undefined"
        w = Weight(init.name, tuple(int(d) for d in init.dims), dtype_name, "")
        if init.name in consumers:
            node, index = consumers[init.name]
            w.consumer = f"{node.op_type} {node.name or '(unnamed)'} input {index}"
            _role(w, node.op_type, index, node)
        else:
            w.reason = "not used by any node of the main graph"
        if w.consumer and dtype_name not in ("float32", "float16", "float64", "bfloat16"):
            w.role, w.reason = "skipped", (f"{dtype_name} tensor (shape, index or quantized data): "
                                           "only float weights go on images")
        elif w.role != "skipped" and math.prod(w.onnx_shape) == 0:
            w.role, w.reason = "skipped", "empty tensor (0 elements)"
        weights.append(w)
    return weights


def logical_weight(array: np.ndarray, w: Weight) -> np.ndarray:
    """The ONNX tensor as clayout's logical tensor of dims ``w.dims``."""
    if w.role == "dw_conv2d_filter":          # (C*M, 1, kh, kw) -> (M, C, kh, kw)
        mult, chans, kh, kw = w.dims
        return array.reshape(chans, mult, kh, kw).transpose(1, 0, 2, 3)
    if w.params.get("transpose"):
        perm = (1, 0) + tuple(range(2, array.ndim))
        return array.transpose(perm).reshape(w.dims)
    return array.reshape(w.dims)


def onnx_weight(logical: np.ndarray, w: Weight) -> np.ndarray:
    """The inverse of :func:`logical_weight`: back to the ONNX tensor's shape."""
    if w.role == "dw_conv2d_filter":
        mult, chans, kh, kw = w.dims
        return logical.transpose(1, 0, 2, 3).reshape(w.onnx_shape)
    if w.params.get("transpose"):
        s = w.onnx_shape
        swapped = (s[1], s[0]) + tuple(s[2:])
        perm = (1, 0) + tuple(range(2, len(s)))
        return logical.reshape(swapped).transpose(perm)
    return logical.reshape(w.onnx_shape)


def _choose_layout(w: Weight, max_image) -> tuple[ImageLayout, str]:
    """The role's layout, or the first of its kind that fits ``max_image``."""
    layout = image_layout(w.role)
    width, height = layout.image_shape(w.dims)
    if width <= max_image[0] and height <= max_image[1]:
        return layout, ""
    fits = layout.fitting(w.dims, *max_image)
    if not fits:
        raise ClayoutError(f"tensor {w.name!r} ({w.role}, dims {w.dims}) needs a {width}x{height} "
                           f"image, over --max-image {max_image[0]},{max_image[1]}, and no named "
                           f"{layout.kind} layout fits; raise --max-image or keep it in a buffer")
    return fits[0], w.role


def load(path):
    """Read an ONNX model, with clayout errors for missing or invalid files."""
    onnx = _need_onnx()
    if not os.path.isfile(path):
        raise ClayoutError(f"{path}: no such file")
    try:
        return onnx.load(path)
    except Exception as exc:  # protobuf DecodeError, external data errors, ...
        raise ClayoutError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None


def initializer_arrays(model) -> dict[str, np.ndarray]:
    from onnx import numpy_helper
    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}


def convert_model(model, dtype="f32", max_image=MAX_IMAGE, engine=None, source=""):
    """Place every weight of ``model`` on its image. Returns (images, manifest):
    ``images`` maps tensor names to host image arrays, ``manifest`` is the
    JSON-ready description stored under the key ``clayout``."""
    dt = dtypes.image_dtype(dtype)
    if dt.name not in ("f32", "f16"):
        raise ClayoutError(f"model images are f32 or f16, got {dt.name}")
    arrays = initializer_arrays(model)
    images, entries, skipped = {}, [], []
    for w in plan(model):
        if w.role == "skipped":
            skipped.append({"name": w.name, "role": "skipped", "onnx_shape": list(w.onnx_shape),
                            "onnx_dtype": w.onnx_dtype, "consumer": w.consumer,
                            "reason": w.reason})
            continue
        array = arrays[w.name]
        if array.dtype == np.float64:  # not a clayout dtype: round to f32 first (nearest even)
            array = array.astype(np.float32)
        layout, fallback_from = _choose_layout(w, max_image)
        logical = np.ascontiguousarray(logical_weight(array, w))
        try:
            image = to_image(logical, layout, dtype=dt.name, engine=engine)
        except ClayoutError as exc:
            raise ClayoutError(f"tensor {w.name!r}: {exc}") from None
        width, height = layout.image_shape(w.dims)
        images[w.name] = image
        entry = {"name": w.name, "role": w.role, "layout": layout.name, "dims": list(w.dims),
                 "width": width, "height": height, "dtype": dt.name, "bytes": int(image.nbytes),
                 "onnx_shape": list(w.onnx_shape), "onnx_dtype": w.onnx_dtype,
                 "consumer": w.consumer, "mapping": w.mapping,
                 "transposed": bool(w.params.get("transpose"))}
        if fallback_from:
            entry["fallback_from"] = fallback_from
        entries.append(entry)
    eng_name = getattr(engine, "name", engine) if engine is not None else \
        os.environ.get("CLAYOUT_ENGINE", "cpu")
    manifest = {"format": FORMAT, "source": source, "dtype": dt.name,
                "max_image": list(max_image), "engine": str(eng_name),
                "tensors": entries, "skipped": skipped}
    return images, manifest


def manifest_table(manifest: dict) -> str:
    """The manifest as a text table, skipped tensors listed after it."""
    head = ("name", "role", "layout", "dims", "image", "dtype", "bytes")
    rows = [head]
    for e in manifest["tensors"]:
        layout = e["layout"] + (f" (not {e['fallback_from']}: too big)" if "fallback_from" in e
                                else "")
        rows.append((e["name"], e["role"], layout, ",".join(map(str, e["dims"])),
                     f"{e['width']}x{e['height']}", e["dtype"], str(e["bytes"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i == 6 else c.ljust(w) for i, (c, w) in
                       enumerate(zip(r, widths))).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for s in manifest["skipped"]:
        shape = ",".join(map(str, s["onnx_shape"])) or "scalar"
        lines.append(f"skipped {s['name']} ({s['onnx_dtype']} [{shape}], "
                     f"{s['consumer'] or 'unused'}): {s['reason']}")
    return "\n".join(lines)


def safetensors_bytes(images: dict, manifest: dict) -> bytes:
    """The safetensors file: the images plus the manifest under metadata key ``clayout``."""
    from safetensors.numpy import save
    return save(images, metadata={MANIFEST_KEY: json.dumps(manifest)})


def read_manifest(path) -> tuple[dict, dict]:
    """(images, manifest) of a file written by ``clayout model``."""
    from safetensors import safe_open
    from safetensors.numpy import load_file
    with safe_open(path, "np") as f:
        meta = f.metadata() or {}
    if MANIFEST_KEY not in meta:
        raise ClayoutError(f"{path}: no clayout manifest in the safetensors metadata")
    return load_file(path), json.loads(meta[MANIFEST_KEY])


def weight_of(entry: dict) -> Weight:
    """A manifest entry back as a Weight (for onnx_weight)."""
    w = Weight(entry["name"], tuple(entry["onnx_shape"]), entry["onnx_dtype"], entry["consumer"],
               entry["role"], tuple(entry["dims"]), entry["mapping"])
    w.params = {"transpose": bool(entry.get("transposed"))}
    return w


def round_trip(image: np.ndarray, entry: dict, engine=None) -> np.ndarray:
    """The ONNX tensor read back from a stored image (in the image's dtype)."""
    logical = from_image(image, entry["layout"], entry["dims"], engine=engine)
    return onnx_weight(np.asarray(logical), weight_of(entry))
