"""Which front end reads a model file: ONNX or TensorFlow Lite.

A ``.tflite`` flatbuffer is told by its file identifier (``TFL3`` at byte 4,
whatever the file's name); anything else is read as ONNX, whose reader names
any other known format (runtime.model.formats) or says the protobuf does not
parse. Both front ends fill the same graph record (runtime.model.graph), so
the plan does not ask which one read the model but to record it.

Example::

    >>> model = load("face.tflite")                                   # doctest: +SKIP
    >>> source_format(model), len(read_constants(model, "face.tflite"))  # doctest: +SKIP
    ('tflite', 89)
"""
from __future__ import annotations

from .onnx import constants as onnx_constants, reader as onnx_reader
from .tflite import constants as tflite_constants, file as tflite_file


def load(path: str):
    """The model at ``path``: a runtime.model.tflite.file.TFLiteModel for a
    TensorFlow Lite file, else an ONNX ModelProto; a file that is neither is
    a one-line ClayoutError."""
    if tflite_file.is_tflite(path):
        return tflite_file.load(path)
    return onnx_reader.load(path)


def source_format(model) -> str:
    """"tflite" or "onnx": the format ``model`` was read from."""
    return "tflite" if isinstance(model, tflite_file.TFLiteModel) else "onnx"


def interface(model) -> dict:
    """The model's graph inputs and outputs, as an engine looks them up:
    {"inputs": [...], "outputs": [...]}, each {"name", "shape", "dtype"}
    (an ONNX dim without a value is its symbol, or null; TFLite: subgraph 0's
    tensors, their dtype as clayout names a TFLite type). ONNX inputs that
    are initializers (constants with a default) are left out."""
    if source_format(model) == "tflite":
        sub = model.subgraphs[0] if model.subgraphs else None
        ends = {}
        for key, indices in (("inputs", sub.inputs if sub else ()),
                             ("outputs", sub.outputs if sub else ())):
            ends[key] = [{"name": sub.tensors[i].name, "shape": list(sub.tensors[i].shape),
                          "dtype": sub.tensors[i].dtype} for i in indices]
        return ends
    return onnx_reader.interface(model)


def read_constants(model, path: str) -> list:
    """Every constant of ``model`` (read from ``path``) with the operators
    that read it (runtime.model.graph.Constant records)."""
    if source_format(model) == "tflite":
        return tflite_constants.read_constants(model, path)
    return onnx_constants.read_constants(model, path)
