"""The safetensors file ``clayout model`` writes, laid out before any tensor exists.

safetensors is an 8-byte little-endian header length N, N bytes of JSON
(``{"__metadata__": {...}, "KEY": {"dtype", "shape", "data_offsets"}, ...}``,
padded with spaces to a multiple of 8), then every tensor's bytes, one after
the other. Everything in the header follows from each tensor's key, dtype and
shape, so :func:`layout` plans the whole file from the model's plan alone, and
the tensors can then be converted and written one at a time, in the file's
order, each freed before the next (runtime.model.stream).

The file is byte for byte the one ``safetensors.numpy.save`` writes for the
same tensors and metadata (the tests hold this): tensors ordered by dtype
(safetensors' own dtype order, largest first: F32 before I32 before F16
before I8 before U8) and then by key, the header's JSON compact, in that
order, non-ASCII characters as they are, padded with spaces.

Example::

    >>> plan = layout([("w", np.dtype("f4"), (2, 4)), ("q", np.dtype("i1"), (3,))],
    ...               {"clayout": "{}"})
    >>> [(s.key, s.begin, s.end) for s in plan.slots], len(plan.header) % 8
    ([('w', 0, 32), ('q', 32, 35)], 0)
"""
from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import ClayoutError

# numpy's dtype names -> safetensors' names
NAMES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
         "float16": "F16", "bfloat16": "BF16", "int32": "I32", "uint32": "U32",
         "float32": "F32", "float64": "F64", "int64": "I64", "uint64": "U64"}
# safetensors' Dtype enum in its declared order: the file holds the later ones first
ORDER = ("BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
         "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64")


@dataclass(frozen=True)
class Slot:
    """Where one tensor's bytes lie: ``begin`` and ``end`` counted from the
    end of the header (safetensors' ``data_offsets``)."""
    key: str
    dtype: np.dtype
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class FileLayout:
    """The header's bytes (length field included) and every tensor's slot,
    in the file's order."""
    header: bytes
    slots: tuple[Slot, ...]

    @property
    def size(self) -> int:
        """The whole file's size in bytes."""
        return len(self.header) + (self.slots[-1].end if self.slots else 0)


def _name(dtype: np.dtype) -> str:
    try:
        return NAMES[np.dtype(dtype).name]
    except KeyError:
        raise ClayoutError(f"a {np.dtype(dtype).name} tensor has no safetensors dtype") from None


def layout(tensors, metadata: dict[str, str]) -> FileLayout:
    """The file holding ``tensors`` ([(key, numpy dtype, shape), ...], any
    order) and ``metadata`` (string to string)."""
    items = sorted(((key, np.dtype(dtype), tuple(int(d) for d in shape))
                    for key, dtype, shape in tensors),
                   key=lambda t: (-ORDER.index(_name(t[1])), t[0]))
    slots, offset = [], 0
    for key, dtype, shape in items:
        end = offset + math.prod(shape) * dtype.itemsize
        slots.append(Slot(key, dtype, shape, offset, end))
        offset = end
    head = {"__metadata__": dict(metadata)} if metadata else {}
    head.update((s.key, {"dtype": _name(s.dtype), "shape": list(s.shape),
                         "data_offsets": [s.begin, s.end]}) for s in slots)
    text = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return FileLayout(struct.pack("<Q", len(text)) + text, tuple(slots))


def read_slot(fd: int, header_bytes: int, slot: Slot) -> np.ndarray:
    """The tensor in ``slot`` of the open file ``fd`` (read now, an array
    of its own)."""
    out = np.empty(slot.shape, slot.dtype)
    view = memoryview(out.reshape(-1).view(np.uint8))
    done = 0
    while done < slot.nbytes:
        got = os.preadv(fd, [view[done:]], header_bytes + slot.begin + done)
        if not got:
            raise ClayoutError(f"the file ends inside tensor {slot.key!r}")
        done += got
    return out
