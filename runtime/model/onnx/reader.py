"""Reading an ONNX model file: the protobuf, each tensor's bytes (raw, typed
fields or external data, every byte count checked before anything is
allocated), node attributes, and the graph's inputs and outputs.

External data must lie inside the model's folder. A tensor of at least
runtime.model.tensor_data.LAZY_BYTES in a file (external data, or a large
inline tensor that runtime.model.onnx.inline left in the model file) is a
FileSpan, read when its conversion needs it.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ...errors import ClayoutError
from ...fileio import input_size
from ...limits import check_host_bytes
from ..formats import refuse_foreign
from ..graph import printable
from ..tensor_data import LAZY_BYTES, FileSpan
from . import inline

# onnx (the optional model extra) is imported inside functions: need_onnx() says
# what to install; the others run only on a model it loaded.


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


def _external_span(tensor, nbytes: int, folder: str, where: str,
                   dtype: np.dtype) -> tuple[str, int]:
    """(file, offset) of an external tensor's ``nbytes`` bytes, every claim
    checked against the file; a tensor inline.py moved out of a large inline
    model lies in the model's own file (``where``)."""
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    shown = f"tensor {tensor.name!r}"
    if location == inline.IN_MODEL_FILE:   # its raw_data, where the model file holds it
        if int(info["length"]) != nbytes:
            raise ClayoutError(f"{where}: tensor {tensor.name!r} with dims "
                               f"{tuple(tensor.dims)} needs {nbytes} bytes of {dtype.name}, "
                               f"its data has {info['length']}")
        return where, int(info["offset"])
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
    return path, offset


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
        span = FileSpan(*_external_span(tensor, nbytes, folder, where, dtype), dims,
                        dtype.newbyteorder("<"))
        return span if nbytes >= LAZY_BYTES else span.read()   # large: read when converted
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


# -- nodes and the graph's ends -------------------------------------------------------------
def attr(node, name, default=None):
    """The value of the attribute ``name`` of ``node``, or ``default``."""
    import onnx.helper
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


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
    try:   # large inline tensors stay in the file (inline.py), read when converted
        data = inline.stripped(path, LAZY_BYTES)
        model = onnx.load(path, load_external_data=False) if data is None else \
            onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf DecodeError and friends
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ClayoutError(f"{path}: not an ONNX model (the protobuf does not parse: "
                           f"{text[:200]}), nor a TensorFlow Lite one (no TFL3 at byte 4)") from None
    if not model.HasField("graph") or not model.ir_version or not len(model.graph.node):
        raise ClayoutError(f"{path}: not an ONNX model (no graph with nodes; a truncated or "
                           "foreign file?)")
    return model
