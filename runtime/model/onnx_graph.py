"""Every constant tensor of an ONNX model, wherever the exporter put it.

Exporters store weights in several ways: graph initializers (PyTorch), ``Constant``
nodes (Paddle, tf2onnx, older PyTorch), constants reached through a chain of
``Identity``/``Cast``/``Reshape``/``Flatten``/``Squeeze``/``Unsqueeze``/``Transpose``
nodes, tensors inside the subgraphs of ``If``/``Loop``/``Scan``, and external
data files. :func:`read_constants` finds all of them and folds the chains on the
host with numpy (exact: they only move or cast elements), so the weight a
``Conv`` reads is the folded tensor under the name the ``Conv`` uses. A
``DequantizeLinear`` of constants (a QDQ model's weight) folds the same way, by
the rule of :mod:`runtime.model.quantization`, and the folded constant keeps its integer
tensor and parameters (``Constant.quant``).

Subgraph tensors get qualified names: ``<node>/<attribute>/<tensor>``, for
example ``cond/then_branch/w`` (an unnamed node is ``<op>#<position>``).

Every tensor is read with its size checked before anything is allocated: raw or
external data whose byte count differs from what the dims say is an error naming
the tensor, its dims and both byte counts. External data must lie inside the
model's folder.

Example::

    >>> model = load("model.onnx")                                  # doctest: +SKIP
    >>> [(t.name, t.array.shape, t.origin) for t in read_constants(model, "model.onnx")]
    [('conv.w', (8, 3, 3, 3), 'Constant node c0'), ...]             # doctest: +SKIP
"""
from __future__ import annotations

import math
import os
from collections import ChainMap
import numpy as np

from . import quantization
from ..errors import ClayoutError
from ..fileio import input_size
from ..limits import check_host_bytes
from .formats import refuse_foreign
from .graph import Constant, GraphIndex, Use, printable  # noqa: F401  (printable: re-exported)

# onnx (the optional model extra) is imported inside functions: need_onnx() says
# what to install; the others run only on a model it loaded.

FOLDED_OPS = ("Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
              "DequantizeLinear")


def need_onnx():
    """The onnx module, or a clear error naming the extra to install."""
    try:
        import onnx
        import onnx.numpy_helper  # noqa: F401
    except ImportError:
        raise ClayoutError("clayout model needs the onnx and safetensors packages: "
                           "pip install 'clayout[model]'") from None
    return onnx


# -- reading one tensor ------------------------------------------------------------------
_TYPED_FIELD = {"float32": "float_data", "complex64": "float_data", "float64": "double_data",
                "complex128": "double_data", "int64": "int64_data", "uint32": "uint64_data",
                "uint64": "uint64_data"}


def _np_dtype(tensor, where: str):
    onnx = need_onnx()
    if tensor.data_type == onnx.TensorProto.STRING:
        return None
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, ValueError, TypeError):
        raise ClayoutError(f"{where}: tensor {tensor.name!r} has ONNX data type "
                           f"{tensor.data_type}, which clayout cannot read") from None


def _external_bytes(tensor, nbytes: int, folder: str, where: str) -> bytes:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    shown = f"tensor {tensor.name!r}"
    real_folder = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(real_folder, location))
    if not location or os.path.isabs(location) or \
            os.path.commonpath([real_folder, path]) != real_folder:
        raise ClayoutError(f"{where}: {shown} keeps its data in {location!r}, outside the "
                           f"model's folder {folder}; only files inside it are read")
    try:
        offset, length = int(info.get("offset", 0)), int(info.get("length", nbytes))
        size = os.path.getsize(path)
    except ValueError:
        raise ClayoutError(f"{where}: {shown} has a bad external data offset or length") from None
    except OSError as exc:
        raise ClayoutError(f"{where}: {shown} keeps its data in {location!r}: "
                           f"{exc.strerror}") from None
    if not os.path.isfile(path):
        raise ClayoutError(f"{where}: {shown} keeps its data in {location!r}, which is not a "
                           "regular file")
    needs = f"{where}: {shown} with dims {tuple(tensor.dims)} needs {nbytes} bytes of external data"
    if length != nbytes or offset < 0:
        raise ClayoutError(f"{needs}, but its external data entry says length {length} at offset "
                           f"{offset} of {location!r}; a corrupt model?")
    if offset + nbytes > size:   # what the file holds, not what the entry claims
        raise ClayoutError(f"{needs} from offset {offset} of {location!r}, a {size}-byte file "
                           f"that holds only {max(size - offset, 0)} bytes from that offset; a "
                           "truncated data file?")
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(nbytes)


def tensor_array(tensor, where: str, folder: str) -> np.ndarray | None:
    """The host array of a TensorProto, every byte count checked first."""
    onnx = need_onnx()
    dims = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in dims):
        raise ClayoutError(f"{where}: tensor {tensor.name!r} has negative dims {dims}")
    dtype = _np_dtype(tensor, where)
    if dtype is None:
        return None
    count = math.prod(dims)
    nbytes = count * dtype.itemsize
    if tensor.data_location == onnx.TensorProto.EXTERNAL:   # read into memory: checked first
        check_host_bytes(nbytes, f"{where}: tensor {printable(tensor.name)!r} with dims {dims}",
                         "a corrupt model?")
        raw = _external_bytes(tensor, nbytes, folder, where)
    elif tensor.HasField("raw_data"):
        raw = tensor.raw_data
    else:
        name = _TYPED_FIELD.get(dtype.name, "int32_data")
        have = len(getattr(tensor, name))
        want = count * (2 if dtype.kind == "c" else 1)
        if have != want:
            raise ClayoutError(f"{where}: tensor {tensor.name!r} with dims {dims} needs {want} "
                               f"values ({nbytes} bytes of {dtype.name}), its {name} has {have}")
        return onnx.numpy_helper.to_array(tensor)
    if len(raw) != nbytes:
        raise ClayoutError(f"{where}: tensor {tensor.name!r} with dims {dims} needs {nbytes} bytes "
                           f"of {dtype.name}, its data has {len(raw)}")
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False) \
        .reshape(dims)


# -- folding -----------------------------------------------------------------------------------
def attr(node, name, default=None):
    """The value of the attribute ``name`` of ``node``, or ``default``."""
    import onnx.helper
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _axes(node, inputs, rank) -> list[int] | None:
    """Squeeze/Unsqueeze axes: the attribute (opset < 13) or the second input."""
    axes = attr(node, "axes")
    if axes is None and len(inputs) > 1:
        axes = inputs[1].tolist()
    return None if axes is None else sorted(int(a) % rank if rank else 0 for a in axes)


def fold(node, inputs: list[np.ndarray]) -> np.ndarray:
    """The output of a FOLDED_OPS node but DequantizeLinear (runtime.model.quantization)
    whose inputs are all constant."""
    op, x = node.op_type, inputs[0]
    if op == "Identity":
        return x
    if op == "Cast":
        return x.astype(_cast_type(node))
    if op == "Transpose":
        perm = attr(node, "perm") or list(range(x.ndim))[::-1]
        return np.transpose(x, perm)
    if op == "Flatten":
        axis = int(attr(node, "axis", 1)) % (x.ndim + 1) if x.ndim else 0
        return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    if op == "Squeeze":
        axes = _axes(node, inputs, x.ndim)
        return np.squeeze(x, axis=None if axes is None else tuple(axes))
    if op == "Unsqueeze":
        rank = x.ndim + len(_axes(node, inputs, 1) or ())
        axes = _axes(node, inputs, rank)
        return np.expand_dims(x, tuple(axes))
    if op == "Reshape":
        shape = [int(d) for d in inputs[1].reshape(-1)]
        if not attr(node, "allowzero", 0):
            shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
        return x.reshape(shape)
    raise AssertionError(op)


def _cast_type(node) -> np.dtype:
    import onnx.helper
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attr(node, "to")))


def _foldable(node, data) -> bool:
    """Every input of ``node`` is a constant (DequantizeLinear: its optional
    zero point may be absent)."""
    if node.op_type == "DequantizeLinear":
        named = [d for name, d in zip(node.input, data) if name]
        return len(data) >= 2 and data[0] is not None and all(d is not None for d in named)
    return bool(data) and all(d is not None for d in data) and len(data) == len(node.input)


# -- walking the graphs ----------------------------------------------------------------
class _Reader:
    def __init__(self, where: str, folder: str):
        self.where, self.folder = where, folder
        self.found: dict[str, Constant] = {}

    def add(self, local: dict, name: str, qualified: str, array, dtype, shape, origin: str):
        if name in local or qualified in self.found:
            first = self.found.get(local.get(name, qualified))
            raise ClayoutError(
                f"{self.where}: tensor name {printable(qualified)!r} is defined twice "
                f"({printable(first.origin) if first else 'a node output'} and "
                f"{printable(origin)}); ONNX names must "
                "be unique, so clayout cannot tell which one a node reads")
        local[name] = qualified
        self.found[qualified] = Constant(qualified, array, dtype, tuple(shape), origin)
        return self.found[qualified]

    def tensor(self, local, prefix, proto, origin, name=None):
        array = tensor_array(proto, self.where, self.folder)
        dtype = array.dtype.name if array is not None else "string"
        name = proto.name if name is None else name
        self.add(local, name, prefix + name, array, dtype, proto.dims, origin)

    def constant_node(self, local, prefix, node, label):
        import onnx.helper
        out = node.output[0] if node.output else ""
        origin = f"Constant node {label}"
        for a in node.attribute:
            if a.name == "value":
                return self.tensor(local, prefix, a.t, origin, name=out)
            if a.name in ("value_float", "value_floats", "value_int", "value_ints"):
                value = onnx.helper.get_attribute_value(a)
                kind = np.float32 if "float" in a.name else np.int64
                array = np.asarray(value, dtype=kind)
                return self.add(local, out, prefix + out, array, array.dtype.name, array.shape,
                                origin)
            if a.name in ("sparse_value", "value_string", "value_strings"):
                dims = a.sparse_tensor.dims if a.name == "sparse_value" else ()
                return self.add(local, out, prefix + out, None, a.name, dims, origin)
        raise ClayoutError(f"{self.where}: Constant node {printable(label)!r} has no value")

    def fold(self, node, label: str, sources, data):
        """(array, QuantSource or None) of a FOLDED_OPS node of constants."""
        first = printable(sources[0].name)
        if node.op_type == "DequantizeLinear":
            zero = data[2] if len(data) > 2 else None
            names = [s.name if s is not None else "" for s in sources] + [""]
            try:
                return quantization.fold_dequantize(
                    data[0], data[1], zero, int(attr(node, "axis", 1)),
                    int(attr(node, "block_size", 0)), f"DequantizeLinear {printable(label)!r}",
                    names[:3])
            except ClayoutError as exc:
                raise ClayoutError(f"{self.where}: {exc}") from None
        try:
            array = fold(node, data)
            quant = sources[0].quant
            if quant is not None:
                to = _cast_type(node) if node.op_type == "Cast" else None
                quant = quantization.follow(node.op_type, quant, lambda a: fold(node, [a] + data[1:]),
                                         to)
        except (ValueError, TypeError, IndexError) as exc:
            raise ClayoutError(f"{self.where}: cannot fold {node.op_type} {printable(label)!r} "
                               f"of constant {first!r}: {exc}") from None
        return array, quant

    def graph(self, graph, prefix: str, scope: dict) -> None:
        local: dict[str, str] = {}
        index = GraphIndex(names=ChainMap(local, scope), found=self.found)
        for init in graph.initializer:
            self.tensor(local, prefix, init, "initializer" if not prefix else
                        f"initializer of {prefix[:-1]}")
        for inp in graph.input:     # a subgraph input (a Loop counter, ...) hides an outer name
            if inp.name not in local and inp.name in scope:
                local[inp.name] = ""
        for position, node in enumerate(graph.node):
            label = prefix + (node.name or f"{node.op_type}#{position}")
            visible = {**scope, **local}
            if node.op_type == "Constant":
                self.constant_node(local, prefix, node, label)
                continue
            sources = [self.found.get(visible.get(name, "")) if name else None
                       for name in node.input]
            data = [s.array if s is not None else None for s in sources]
            for out in node.output:
                if out:
                    index.producers[out] = (node, label)
            for name in node.input:
                if name:
                    index.consumers.setdefault(name, []).append((node, label))
            if node.op_type in FOLDED_OPS and node.output and _foldable(node, data):
                array, quant = self.fold(node, label, sources, data)
                out = node.output[0]
                made = self.add(local, out, prefix + out, array, array.dtype.name, array.shape,
                                f"{sources[0].origin} -> {node.op_type} {label}")
                made.quant = quant
                for s in sources:
                    if s is not None:
                        s.folded_into.append(made.name)
                continue
            for position_in, source in enumerate(sources):
                if source is not None:
                    source.uses.append(Use(node.op_type, label, position_in, node, index))
            for a in node.attribute:
                if a.type == a.GRAPH:
                    self.graph(a.g, f"{label}/{a.name}/", visible)
                for i, g in enumerate(a.graphs):
                    self.graph(g, f"{label}/{a.name}{i}/", visible)
            for out in node.output:      # a node output shadows an outer constant of that name
                if out and out in visible and out not in local:
                    local[out] = ""


def read_constants(model, path: str) -> list[Constant]:
    """Every constant tensor of ``model`` (loaded from ``path``), in graph order,
    with the nodes that read it. Folded chains appear once per step; each step's
    input lists what it was ``folded_into``."""
    reader = _Reader(path, os.path.dirname(os.path.abspath(path)))
    reader.graph(model.graph, "", {})
    return list(reader.found.values())


def interface(model) -> dict:
    """{"inputs": [...], "outputs": [...]} of the main graph, each {"name",
    "shape", "dtype"}: a dim is its value, its symbol (dim_param) or None;
    inputs that are initializers are left out."""
    onnx = need_onnx()
    constant = {t.name for t in model.graph.initializer}

    def describe(value) -> dict:
        kind = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in kind.shape.dim] if kind.HasField("shape") else None
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(kind.elem_type)).name
        except (KeyError, ValueError, TypeError):
            dtype = f"type {kind.elem_type}"
        return {"name": value.name, "shape": shape, "dtype": dtype}

    return {"inputs": [describe(v) for v in model.graph.input if v.name not in constant],
            "outputs": [describe(v) for v in model.graph.output]}


def load(path: str):
    """Read an ONNX model (external data is read later, checked, by
    :func:`tensor_array`); anything that is not one is a one-line error."""
    onnx = need_onnx()
    input_size(path, "an ONNX model")
    refuse_foreign(path)   # a .tflite, .pt, .npy, .safetensors: named, not a protobuf error
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # protobuf DecodeError and friends
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ClayoutError(f"{path}: not an ONNX model (the protobuf does not parse: "
                           f"{text[:200]}), nor a TensorFlow Lite one (no TFL3 at byte 4)") from None
    if not model.HasField("graph") or not model.ir_version or not len(model.graph.node):
        raise ClayoutError(f"{path}: not an ONNX model (no graph with nodes; a truncated or "
                           "foreign file?)")
    return model
