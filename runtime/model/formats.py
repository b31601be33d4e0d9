"""Files that are not ONNX models but another format a model comes in,
told apart by their first bytes, so that ``clayout model`` names the format
instead of passing on the protobuf parser's complaint (which says nothing of
what the file is).

None of these signatures starts an ONNX model: its protobuf ModelProto
begins with the tag of ``ir_version`` (0x08) and a small version number, so
its first bytes are not a zip's ``PK``, a .npy's ``\\x93``, ``TFL3`` at offset
4, nor a safetensors header length that fits the file.

==================  ==================================================
format              first bytes
==================  ==================================================
TensorFlow Lite     ``TFL3`` at byte offset 4 (the flatbuffer's file identifier)
zip (PyTorch .pt)   ``PK\\x03\\x04``; a PyTorch checkpoint holds ``.../data.pkl``
NumPy .npy          ``\\x93NUMPY``
safetensors         an 8-byte little-endian header length N that fits the
                    file, then a JSON object: ``{``
==================  ==================================================
"""
from __future__ import annotations

import os
import zipfile

from ..errors import ClayoutError


def _zip_kind(path: str) -> str:
    """What a zip archive holds, when it says so: PyTorch saves ``torch.save``
    checkpoints as a zip with a ``data.pkl``, NumPy ``savez`` as .npy members."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        names = []
    if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
        return "a PyTorch checkpoint (a zip archive)"
    if names and all(n.endswith(".npy") for n in names):
        return "a NumPy .npz archive"
    return "a zip archive"


def foreign_format(path: str) -> str | None:
    """The format of ``path`` in words ("a TensorFlow Lite flatbuffer", ...)
    when its first bytes say it is one of this module's, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:   # unreadable: the ONNX reader says why
        return None
    if head[4:8] == b"TFL3":
        return "a TensorFlow Lite flatbuffer"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(path)
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array"
    if len(head) > 8 and head[8:9] == b"{" and \
            2 <= int.from_bytes(head[:8], "little") <= os.path.getsize(path) - 8:
        return "a safetensors file"
    return None


def refuse_foreign(path: str) -> None:
    """A one-line ClayoutError when ``path`` is a file of another format."""
    kind = foreign_format(path)
    if kind is not None:
        raise ClayoutError(f"{path} is {kind}, not an ONNX model; clayout model reads ONNX "
                           "(.onnx) and TensorFlow Lite (.tflite) models")
