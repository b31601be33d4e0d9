"""A large inline ``.onnx`` read without its tensors' bytes.

An ONNX file under protobuf's 2 GB holds its weights inline, as the
``raw_data`` of TensorProto messages (graph initializers, ``Constant``
nodes, subgraphs). Parsing it with protobuf copies every byte of them into
memory, and reading a tensor from the parsed message copies it again. So
:func:`stripped` walks the file's wire format (memory-mapped: only the pages
holding message headers are touched) and writes a copy of the model in
which each ``raw_data`` of at least ``threshold`` bytes is replaced by an
external-data reference to where those bytes already lie in the model file
itself (location :data:`IN_MODEL_FILE`, which no real file can be named: it
holds a NUL); runtime.model.onnx.reader then reads each such tensor from
the model file when its conversion needs it, like external data.

Only messages that can hold a tensor are walked (ModelProto.graph,
GraphProto.node / initializer, NodeProto.attribute, AttributeProto.t / g /
tensors / graphs), and only those at least ``threshold`` bytes long (a
smaller one cannot hold such a tensor); every other field is copied as it
is, in order, so the parsed model is the original one but for where those
bytes are. A tensor that already names external data or a location is left
alone. Anything the walk does not understand (a truncated file, a field of
a wire type protobuf no longer writes) returns None: the caller parses the
file as it is, and protobuf's own error says what is wrong.

Example::

    >>> data = stripped("big.onnx", threshold=1 << 20)            # doctest: +SKIP
    >>> model = onnx.ModelProto.FromString(data)                   # doctest: +SKIP
"""
from __future__ import annotations

import mmap
import os

from ..tensor_data import release_pages

IN_MODEL_FILE = "\0clayout: this model file"   # the location of a tensor left in the model

# (message, field number) -> the message type that field holds, for the fields walked
MODEL, GRAPH, NODE, ATTRIBUTE, TENSOR = "model", "graph", "node", "attribute", "tensor"
WALKED = {(MODEL, 7): GRAPH, (GRAPH, 1): NODE, (GRAPH, 5): TENSOR, (NODE, 5): ATTRIBUTE,
          (ATTRIBUTE, 5): TENSOR, (ATTRIBUTE, 6): GRAPH, (ATTRIBUTE, 10): TENSOR,
          (ATTRIBUTE, 11): GRAPH}
RAW_DATA, EXTERNAL_DATA, DATA_LOCATION = 9, 13, 14
EXTERNAL = 1


class _Unreadable(Exception):
    """The wire format is not what this walk reads: parse the file as it is."""


def _varint(data, at: int, end: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= end or shift > 63:
            raise _Unreadable
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _fields(data, start: int, end: int):
    """(number, wire type, field start, payload start, payload end) of each
    field of the message in ``data[start:end]``."""
    at = start
    while at < end:
        begin = at
        key, at = _varint(data, at, end)
        number, kind = key >> 3, key & 7
        if kind == 0:
            _, at = _varint(data, at, end)
            yield number, kind, begin, at, at
            continue
        if kind == 1:
            size = 8
        elif kind == 5:
            size = 4
        elif kind == 2:
            size, at = _varint(data, at, end)
        else:   # groups (3, 4): not written by ONNX
            raise _Unreadable
        if at + size > end:
            raise _Unreadable
        yield number, kind, begin, at, at + size
        at += size


def _message(data, kind: str, start: int, end: int, threshold: int) -> bytes:
    """The message ``kind`` in ``data[start:end]``, its large tensors moved out."""
    if kind == TENSOR:
        made = _tensor(data, start, end, threshold)
        release_pages(data, start, end - start)   # what reading its header mapped
        return made
    out = []
    for number, wire, begin, payload, stop in _fields(data, start, end):
        inner = WALKED.get((kind, number))
        if wire == 2 and inner is not None and stop - payload >= threshold:
            out.append(_field(number, _message(data, inner, payload, stop, threshold)))
        else:
            out.append(bytes(data[begin:stop]))
    return b"".join(out)


def _tensor(data, start: int, end: int, threshold: int) -> bytes:
    fields = list(_fields(data, start, end))
    raw = [f for f in fields if f[0] == RAW_DATA and f[1] == 2]
    if len(raw) != 1 or raw[0][4] - raw[0][3] < threshold or \
            any(f[0] in (EXTERNAL_DATA, DATA_LOCATION) for f in fields):
        return bytes(data[start:end])
    _, _, _, payload, stop = raw[0]
    out = [bytes(data[begin:fin]) for number, _, begin, _, fin in fields if number != RAW_DATA]
    for key, value in (("location", IN_MODEL_FILE), ("offset", str(payload)),
                       ("length", str(stop - payload))):
        out.append(_field(EXTERNAL_DATA, _field(1, key.encode()) + _field(2, value.encode())))
    out.append(_encode_varint(DATA_LOCATION << 3 | 0) + _encode_varint(EXTERNAL))
    return b"".join(out)


def stripped(path: str, threshold: int) -> bytes | None:
    """The ONNX model at ``path`` as protobuf bytes whose tensors of at least
    ``threshold`` bytes point back into the file, or None when the file is
    not one this walk reads (the caller parses it as it is)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < threshold:
                return None
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _message(data, MODEL, 0, size, threshold)
    except (_Unreadable, OSError, ValueError):
        return None
