"""Read a TensorFlow Lite model file (a ``.tflite`` flatbuffer) into frozen
records: its subgraphs, their tensors (shape, type, constant bytes,
quantization and sparsity parameters) and operators (name, inputs, outputs,
the builtin options clayout uses).

Our own bounded reader (:mod:`runtime.model.tflite.flatbuffer`) checks every offset,
vector and string against the file's size, so a truncated or corrupt file is
one ClayoutError line naming what is wrong and where. Tensor and buffer
indices are checked too, and a dense constant's byte count must be what its
shape and type need. Facts of the schema (field slots, enum values, operator
names) live in :mod:`runtime.model.tflite.schema`.

Example::

    >>> m = load("face_detection_short_range.tflite")                  # doctest: +SKIP
    >>> t = m.subgraphs[0].tensors[1]                                  # doctest: +SKIP
    >>> t.name, t.shape, t.dtype, tensor_array(t).shape                # doctest: +SKIP
    ('conv2d/Kernel', (24, 5, 5, 3), 'float16', (24, 5, 5, 3))
    >>> m.subgraphs[0].operators[0].op                                 # doctest: +SKIP
    'DEQUANTIZE'
"""
from __future__ import annotations

import math
import mmap
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from . import schema
from ...errors import ClayoutError
from ...fileio import input_size
from ..tensor_data import LAZY_BYTES, FileSpan, release_pages
from .flatbuffer import FlatBuffer, Table
from .sparse import DimMeta, Sparsity

IDENTIFIER = b"TFL3"
NO_OPTIONS: Mapping[str, object] = MappingProxyType({})
NUMPY_TYPES = frozenset(name for name, _ in schema.TENSOR_TYPES.values()
                        if name not in schema.NOT_NUMPY)


@dataclass(frozen=True)
class Quantization:
    """A tensor's quantization parameters: real = (q - zero_point) * scale."""
    scale: np.ndarray          # float32, possibly empty
    zero_point: np.ndarray     # int64, possibly empty
    quantized_dimension: int


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a subgraph; ``data`` holds its buffer's bytes when it is a constant."""
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str                 # numpy name, else the TFLite type in lower case, or "type N"
    buffer: int                # buffer index
    data: bytes | FileSpan | None   # its buffer's bytes (a large one's FileSpan in the
    #                                 model file), None when the buffer is empty
    quantization: Quantization | None   # None when absent or with no scale
    sparsity: Sparsity | None
    is_variable: bool


@dataclass(frozen=True)
class Operator:
    """One operator: its name (a builtin's, or a custom op's code), tensor indices, options."""
    index: int
    op: str                    # "CONV_2D", ...; a custom op's custom_code; else "BUILTIN_N"
    custom: bool
    inputs: tuple[int, ...]    # tensor indices, -1 = optional input absent
    outputs: tuple[int, ...]
    options: Mapping[str, object]   # decoded builtin options (schema.OPTIONS), else empty


@dataclass(frozen=True)
class Subgraph:
    """One subgraph: its tensors, input and output tensor indices, operators in order."""
    index: int
    name: str
    tensors: tuple[TensorEntry, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: tuple[Operator, ...]


@dataclass(frozen=True)
class TFLiteModel:
    """A whole model file."""
    path: str
    version: int
    description: str
    subgraphs: tuple[Subgraph, ...]


def shape_text(shape: tuple[int, ...]) -> str:
    """A shape for a message: whole up to 8 dims, else its first 8 and its rank."""
    if len(shape) <= 8:
        return str(tuple(shape))
    return "(" + ", ".join(map(str, shape[:8])) + f", ... {len(shape)} dims)"


def is_tflite(path: str) -> bool:
    """Whether ``path`` is a regular file with the TFL3 identifier at byte 4."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            return f.read(8)[4:8] == IDENTIFIER
    except (OSError, ValueError):
        return False


def load(path: str) -> TFLiteModel:
    """Read and check the TensorFlow Lite model at ``path``; anything that is
    not one (missing, a folder, empty, another format, truncated, corrupt) is a
    one-line ClayoutError."""
    input_size(path, "a TensorFlow Lite model")
    try:   # mapped, not read: the tables are parsed, a buffer's bytes read when converted
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return parse(data, path, in_file=True)
    except (OSError, ValueError) as exc:
        raise ClayoutError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None


def parse(data, path: str = "<bytes>", in_file: bool = False) -> TFLiteModel:
    """The model in ``data`` (the bytes of a .tflite file, or the file mapped
    into memory; ``path`` names it in errors). ``in_file``: ``data`` is the
    file at ``path``, so a buffer of at least LAZY_BYTES is a FileSpan, read
    when converted, instead of bytes copied now."""
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise ClayoutError(f"{path}: not a TensorFlow Lite model (no TFL3 identifier at byte 4)")
    buf = FlatBuffer(data if in_file else bytes(data), path, "TensorFlow Lite model")
    fields = schema.MODEL
    model = buf.root("the model")
    version = model.scalar(fields["version"], "I", 0, "version")
    codes = [_opcode(t) for t in model.tables(fields["operator_codes"], "operator_codes",
                                               "operator code {}")]
    buffers = _Buffers(buf, model.tables(fields["buffers"], "buffers", "buffer {}"), in_file)
    description = model.string(fields["description"], "description")
    subgraphs = tuple(_subgraph(t, k, codes, buffers)
                      for k, t in enumerate(model.tables(fields["subgraphs"], "subgraphs",
                                                         "subgraph {}")))
    buffers.check_unused()
    _check_extras(model)
    return TFLiteModel(path, version, description, subgraphs)


def tensor_array(tensor: TensorEntry) -> np.ndarray | None:
    """The numeric array of a constant tensor (little-endian bytes, read
    as the host's numbers): shaped for a dense one, the 1-D packed values of
    a sparse one; None for a non-constant or a type numpy has no dtype for
    (string, int4, bfloat16, resource, variant, unknown)."""
    if tensor.data is None or tensor.dtype not in NUMPY_TYPES:
        return None
    dtype = np.dtype(tensor.dtype)
    if len(tensor.data) % dtype.itemsize:
        raise ClayoutError(f"tensor {tensor.name!r}: its {len(tensor.data)} bytes are not a "
                           f"whole number of {tensor.dtype} values")
    if isinstance(tensor.data, FileSpan) and tensor.sparsity is None:   # read when converted
        if len(tensor.data) != math.prod(tensor.shape) * dtype.itemsize:
            raise ClayoutError(f"tensor {tensor.name!r} with shape {tensor.shape} of "
                               f"{tensor.dtype} needs {math.prod(tensor.shape)} values, its "
                               f"data holds {len(tensor.data) // dtype.itemsize}")
        return tensor.data.view(dtype, tensor.shape)
    data = tensor.data.read().tobytes() if isinstance(tensor.data, FileSpan) else tensor.data
    values = np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False)
    if tensor.sparsity is not None:
        return values
    if values.size != math.prod(tensor.shape):
        raise ClayoutError(f"tensor {tensor.name!r} with shape {tensor.shape} of {tensor.dtype} "
                           f"needs {math.prod(tensor.shape)} values, its data holds {values.size}")
    return values.reshape(tensor.shape)


# -- the tables -----------------------------------------------------------------------------
class _Buffers:
    """The model's buffers, each read (its bytes sliced) once, when a tensor
    uses it; with ``in_file`` one of at least LAZY_BYTES is a FileSpan of the
    model file instead (its bytes read when converted)."""

    def __init__(self, buf: FlatBuffer, tables: list[Table], in_file: bool = False):
        self.buf, self.spans, self.bytes, self.in_file = buf, [], {}, in_file
        for t in tables:
            fields = schema.BUFFER
            start, count = t.vector(fields["data"], 1, "data")
            offset = t.scalar(fields["offset"], "Q", 0, "offset")
            size = t.scalar(fields["size"], "Q", 0, "size")
            # TFLite's rule: offset/size (counted from the file's start) win when
            # offset > 1 and size > 0; offset 1 / size 0 are sentinels
            self.spans.append((offset, size, True) if offset > 1 and size > 0
                              else (start, count, False))
            if in_file and count >= LAZY_BYTES:   # its data is read when converted
                release_pages(buf.data, start, count)

    def __len__(self) -> int:
        return len(self.spans)

    def data(self, index: int, user: str) -> bytes | None:
        """The bytes of buffer ``index`` (None when empty); ``user`` names the
        tensor that reads it, in errors."""
        if index not in self.bytes:
            start, size, outside = self.spans[index]
            if outside and start + size > self.buf.size:
                raise ClayoutError(f"{self.buf.path}: buffer {index}{user} claims {size} bytes "
                                   f"at offset {start}, past the end of the {self.buf.size}-byte "
                                   "file (truncated?)")
            if self.in_file and size >= LAZY_BYTES:
                self.bytes[index] = FileSpan(self.buf.path, start, (size,), np.dtype("u1"))
            else:
                self.bytes[index] = bytes(self.buf.data[start:start + size]) if size else None
        return self.bytes[index]

    def check_unused(self) -> None:
        """Check the buffers no tensor uses (their spans lie inside the file)."""
        for index in range(len(self.spans)):
            self.data(index, "")


def _opcode(t: Table) -> tuple[str, bool]:
    """(operator name, custom) of an OperatorCode table."""
    fields = schema.OPERATOR_CODE
    code = max(t.scalar(fields["deprecated_builtin_code"], "b", 0, "deprecated_builtin_code"),
               t.scalar(fields["builtin_code"], "i", 0, "builtin_code"))
    custom_code = t.string(fields["custom_code"], "custom_code")
    if code == schema.CUSTOM:
        return custom_code or "CUSTOM", True
    if 0 <= code < len(schema.BUILTIN_OPERATORS):
        return schema.BUILTIN_OPERATORS[code], False
    return f"BUILTIN_{code}", False


def _subgraph(t: Table, index: int, codes: list, buffers: _Buffers) -> Subgraph:
    fields = schema.SUBGRAPH
    where = f"subgraph {index}"
    tensors = tuple(_tensor(tt, k, buffers, index) for k, tt in enumerate(
        t.tables(fields["tensors"], "tensors", f"tensor {{}} of {where}")))
    ends = {}
    for end in ("inputs", "outputs"):
        ends[end] = t.ints(fields[end], end)
        _check_indices(ends[end], len(tensors), f"{where} {end[:-1]}", buffers.buf.path, False)
    operators = tuple(_operator(ot, k, codes, len(tensors), where, buffers.buf.path)
                      for k, ot in enumerate(t.tables(fields["operators"], "operators",
                                                      f"operator {{}} of {where}")))
    name = t.string(fields["name"], "name")
    return Subgraph(index, name, tensors, ends["inputs"], ends["outputs"], operators)


def _check_extras(model: Table) -> None:
    """Check the model's parts clayout does not keep (metadata, signatures):
    they lie inside the file."""
    fields = schema.MODEL
    model.vector(fields["metadata_buffer"], 4, "metadata_buffer")
    for t in model.tables(fields["metadata"], "metadata", "metadata {}"):
        t.string(schema.METADATA["name"], "name")
    for t in model.tables(fields["signature_defs"], "signature_defs", "signature {}"):
        t.string(schema.SIGNATURE_DEF["signature_key"], "signature_key")
        for end in ("inputs", "outputs"):
            for m in t.tables(schema.SIGNATURE_DEF[end], end, f"{end[:-1]} {{}} of {t.what}"):
                m.string(schema.TENSOR_MAP["name"], "name")


def _check_indices(indices, count: int, what: str, path: str, optional: bool) -> None:
    for position, i in enumerate(indices):
        if not (0 <= i < count or (optional and i == -1)):
            raise ClayoutError(f"{path}: {what} {position} is tensor {i}, but the subgraph has "
                               f"{count} tensors (0..{count - 1}); a corrupt model?")


def _operator(t: Table, index: int, codes: list, count: int, where: str, path: str) -> Operator:
    fields = schema.OPERATOR
    code = t.scalar(fields["opcode_index"], "I", 0, "opcode_index")
    if code >= len(codes):
        raise ClayoutError(f"{path}: operator {index} of {where} uses operator code {code}, but "
                           f"the model has {len(codes)} operator codes; a corrupt model?")
    op, custom = codes[code]
    label = f"operator {index} ({op}) of {where}"
    inputs, outputs = t.ints(fields["inputs"], "inputs"), t.ints(fields["outputs"], "outputs")
    _check_indices(inputs, count, f"{label}: input", path, True)
    _check_indices(outputs, count, f"{label}: output", path, False)
    kind = t.scalar(fields["builtin_options_type"], "B", 0, "builtin_options_type")
    table = t.table(fields["builtin_options"], "builtin_options", f"the options of {label}")
    for unused, size in (("custom_options", 1), ("mutating_variable_inputs", 1),
                         ("intermediates", 4)):
        t.vector(fields[unused], size, unused)   # checked, not kept
    options = NO_OPTIONS
    member, spec = schema.OPTIONS.get(op, (None, ()))
    if table is not None and not custom and kind == member:
        options = MappingProxyType({name: table.scalar(slot, code, default, name)
                                    for name, slot, code, default in spec})
    return Operator(index, op, custom, inputs, outputs, options)


def _tensor(t: Table, index: int, buffers: _Buffers, subgraph: int) -> TensorEntry:
    fields = schema.TENSOR
    path = buffers.buf.path
    name = t.string(fields["name"], "name")
    shown = f"tensor {name!r}" + (f" of subgraph {subgraph}" if subgraph else "")
    shape = t.ints(fields["shape"], "shape")
    t.vector(fields["shape_signature"], 4, "shape_signature")   # checked, not kept
    if any(d < 0 for d in shape):
        position = next(k for k, d in enumerate(shape) if d < 0)
        raise ClayoutError(f"{path}: {shown} has a negative dim {shape[position]} at position "
                           f"{position} of its shape {shape_text(shape)}")
    code = t.scalar(fields["type"], "b", 0, "type")
    dtype, itemsize = schema.TENSOR_TYPES.get(code, (f"type {code}", 0))
    number = t.scalar(fields["buffer"], "I", 0, "buffer")
    if number >= len(buffers):
        raise ClayoutError(f"{path}: {shown} uses buffer {number}, but the model has "
                           f"{len(buffers)} buffers; a corrupt model?")
    quantization = _quantization(t.table(fields["quantization"], "quantization",
                                         f"the quantization of tensor {index}"))
    sparsity = _sparsity(t.table(fields["sparsity"], "sparsity",
                                 f"the sparsity of tensor {index}"), shown, path)
    data = buffers.data(number, f" of {shown}")
    if data is not None:
        _check_size(data, shape, dtype, itemsize, sparsity is not None, f"{path}: {shown}", number)
    return TensorEntry(index, name, shape, dtype, number, data, quantization, sparsity,
                  t.scalar(fields["is_variable"], "?", False, "is_variable"))


def _check_size(data: bytes, shape, dtype: str, itemsize: int, sparse: bool, shown: str,
                number: int) -> None:
    """A dense constant holds exactly what its shape needs, a sparse one whole values."""
    if sparse:
        if itemsize and len(data) % itemsize:
            raise ClayoutError(f"{shown}, sparse, of {dtype} has {len(data)} bytes of packed "
                               f"values in its buffer {number}, not a multiple of {itemsize}")
        return
    count = math.prod(shape)
    need = (count + 1) // 2 if dtype == "int4" else count * itemsize
    if (itemsize or dtype == "int4") and len(data) != need:
        raise ClayoutError(f"{shown} with shape {shape_text(shape)} of {dtype} needs {need} "
                           f"bytes, its buffer {number} holds {len(data)}")


def _quantization(t: Table | None) -> Quantization | None:
    if t is None:
        return None
    fields = schema.QUANTIZATION
    for unused in ("min", "max"):
        t.vector(fields[unused], 4, unused)   # checked, not kept
    scale = t.array(fields["scale"], "<f4", "scale")
    zero_point = t.array(fields["zero_point"], "<i8", "zero_point")
    dimension = t.scalar(fields["quantized_dimension"], "i", 0, "quantized_dimension")
    return Quantization(scale, zero_point, dimension) if scale.size else None


def _sparsity(t: Table | None, shown: str, path: str) -> Sparsity | None:
    if t is None:
        return None
    fields = schema.SPARSITY
    dims = []
    for k, d in enumerate(t.tables(fields["dim_metadata"], "dim_metadata",
                                   f"dimension metadata {{}} of the sparsity of {shown}")):
        f = schema.DIMENSION_METADATA
        form = d.scalar(f["format"], "b", 0, "format")
        dense_size = d.scalar(f["dense_size"], "i", 0, "dense_size")
        if form == schema.DENSE:
            dims.append(DimMeta(False, dense_size, None, None))
            continue
        if form != schema.SPARSE_CSR:
            raise ClayoutError(f"{path}: {shown}: sparse dimension {k} has format {form}, "
                               "neither DENSE (0) nor SPARSE_CSR (1)")
        arrays = [_index_vector(d, f[f"array_{part}_type"], f[f"array_{part}"], part, k, shown,
                                path) for part in ("segments", "indices")]
        dims.append(DimMeta(True, dense_size, *arrays))
    return Sparsity(t.ints(fields["traversal_order"], "traversal_order"),
                    t.ints(fields["block_map"], "block_map"), tuple(dims))


def _index_vector(d: Table, type_slot: int, slot: int, part: str, k: int, shown: str,
                  path: str) -> np.ndarray:
    """The array_segments or array_indices of a SPARSE_CSR dimension, as int64."""
    kind = d.scalar(type_slot, "B", 0, f"array_{part}_type")
    table = d.table(slot, f"array_{part}", f"the array_{part} of dimension {k} of {shown}")
    if kind not in schema.SPARSE_INDEX_VECTORS or table is None:
        raise ClayoutError(f"{path}: {shown}: SPARSE_CSR dimension {k} has no array_{part} "
                           f"(its type is {kind}); a corrupt model?")
    return table.array(0, schema.SPARSE_INDEX_VECTORS[kind], "values").astype(np.int64)
