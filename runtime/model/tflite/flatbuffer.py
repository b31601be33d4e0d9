"""A bounded reader of FlatBuffers tables: every offset, vtable, vector and
string is checked against the file's size before it is read, so a truncated
or corrupt file is one ClayoutError line naming what is wrong and where,
never a struct.error, IndexError or a huge allocation.

The layout read (the FlatBuffers binary format): a table starts with an int32
``soffset``; its vtable lies at ``table - soffset`` and holds uint16s: the
vtable's size, the table's size, then one offset per field slot (0: absent,
the default applies). A reference field holds a uint32 counted from the
field's own position, so references only point forward; a vector is a
uint32 count then its elements; a string is a vector of bytes ending in a 0.
A budget of tables (one per four bytes of the file) bounds the work that
shared references could multiply.

Example::

    >>> buf = FlatBuffer(open("m.tflite", "rb").read(), "m.tflite",
    ...                  "TensorFlow Lite model")                       # doctest: +SKIP
    >>> model = buf.root("the model")                                    # doctest: +SKIP
    >>> model.scalar(0, "I", 0, "version")                               # doctest: +SKIP
    3
"""
from __future__ import annotations

import struct

import numpy as np

from ...errors import ClayoutError

WIDTH = {"b": 1, "B": 1, "?": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8, "f": 4, "d": 8}


class FlatBuffer:
    """The bytes of one flatbuffer file, with the checked reads of its numbers."""

    def __init__(self, data: bytes, path: str, kind: str):
        self.data, self.path, self.kind = data, path, kind
        self.size = len(data)
        self.tables_left = self.size // 4 + 16
        self.bytes_left = 2 * self.size + 65536   # what vectors copied out may take

    def spend(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` copied out of the file for ``what``: more than twice
        the file's size means references shared over and over."""
        self.bytes_left -= nbytes
        if self.bytes_left < 0:
            raise self.error(f"{what} is read after more than twice the {self.size}-byte "
                             "file's bytes were (references shared over and over?)")

    def error(self, detail: str) -> ClayoutError:
        """The one-line error of a corrupt file: ``detail`` says what and where."""
        return ClayoutError(f"{self.path}: not a valid {self.kind}: {detail} "
                            "(truncated or corrupt?)")

    def past_end(self, what: str, at: int, nbytes: int) -> None:
        """Raise unless ``nbytes`` bytes at byte ``at`` lie inside the file."""
        if at < 0 or at + nbytes > self.size:
            raise self.error(f"{what} at byte {at} runs past the end of the "
                             f"{self.size}-byte file")

    def number(self, code: str, at: int, what: str):
        """The little-endian number of struct ``code`` at byte ``at``, checked."""
        self.past_end(what, at, WIDTH[code])
        return struct.unpack_from("<" + code, self.data, at)[0]

    def root(self, what: str) -> Table:
        """The root table, found by the uint32 at byte 0."""
        return Table(self, self.number("I", 0, "the root offset"), what)


class Table:
    """One table of a FlatBuffer at byte ``pos``; ``what`` names it in errors
    (e.g. "tensor 12 of subgraph 0")."""

    __slots__ = ("buf", "pos", "what", "vtable", "slots", "tsize")

    def __init__(self, buf: FlatBuffer, pos: int, what: str):
        self.buf, self.pos, self.what = buf, pos, what
        buf.tables_left -= 1
        if buf.tables_left < 0:
            raise buf.error(f"{what} at byte {pos} is one table more than the {buf.size}-byte "
                            "file can hold (references shared over and over?)")
        soffset = buf.number("i", pos, what)
        self.vtable = pos - soffset
        if self.vtable < 0 or self.vtable + 4 > buf.size:
            raise buf.error(f"{what} at byte {pos} has its vtable at byte {self.vtable}, "
                            f"outside the {buf.size}-byte file")
        vsize = buf.number("H", self.vtable, f"the vtable of {what}")
        self.tsize = buf.number("H", self.vtable + 2, f"the vtable of {what}")
        if vsize < 4 or vsize % 2:
            raise buf.error(f"the vtable of {what} at byte {self.vtable} has a bad size {vsize}")
        buf.past_end(f"the {vsize}-byte vtable of {what}", self.vtable, vsize)
        if self.tsize < 4:
            raise buf.error(f"the vtable of {what} at byte {self.vtable} gives its table a "
                            f"bad size {self.tsize}")
        buf.past_end(f"the {self.tsize}-byte {what}", pos, self.tsize)
        self.slots = (vsize - 4) // 2

    def field(self, slot: int, width: int, name: str) -> int:
        """The byte where field ``slot`` lies, or 0 when the table lacks it."""
        if slot >= self.slots:
            return 0
        offset = self.buf.number("H", self.vtable + 4 + 2 * slot, f"the vtable of {self.what}")
        if offset == 0:
            return 0
        if offset < 4 or offset + width > self.tsize:
            raise self.buf.error(f"field {name} of {self.what} at byte {self.pos} lies at "
                                 f"offset {offset}, outside its {self.tsize}-byte table")
        return self.pos + offset

    def scalar(self, slot: int, code: str, default, name: str):
        """The number in field ``slot`` (struct ``code``), else ``default``."""
        at = self.field(slot, WIDTH[code], name)
        if not at:
            return default
        value = self.buf.number(code, at, f"field {name} of {self.what}")
        return bool(value) if code == "?" else value

    def target(self, slot: int, name: str) -> int:
        """The byte that reference field ``slot`` points at, or 0 when absent."""
        at = self.field(slot, 4, name)
        if not at:
            return 0
        to = at + self.buf.number("I", at, f"field {name} of {self.what}")
        if to + 4 > self.buf.size:
            raise self.buf.error(f"field {name} of {self.what} points at byte {to}, past the "
                                 f"end of the {self.buf.size}-byte file")
        return to

    def table(self, slot: int, name: str, what: str) -> Table | None:
        """The table that field ``slot`` refers to (named ``what``), or None."""
        to = self.target(slot, name)
        return Table(self.buf, to, what) if to else None

    def vector(self, slot: int, itemsize: int, name: str) -> tuple[int, int]:
        """(byte of the first element, element count) of the vector in field
        ``slot``, its whole length checked; (0, 0) when absent."""
        to = self.target(slot, name)
        if not to:
            return 0, 0
        count = self.buf.number("I", to, f"the {name} vector of {self.what}")
        if to + 4 + count * itemsize > self.buf.size:
            unit = f"{itemsize} byte{'s' * (itemsize > 1)}"
            raise self.buf.error(f"the {name} vector of {self.what} at byte {to} claims "
                                 f"{count} elements of {unit}, which run past the end of the "
                                 f"{self.buf.size}-byte file")
        return to + 4, count

    def array(self, slot: int, dtype: str, name: str) -> np.ndarray:
        """The vector of numbers in field ``slot`` (little-endian numpy
        ``dtype``) as a native array of its own; empty when absent."""
        dt = np.dtype(dtype)
        start, count = self.vector(slot, dt.itemsize, name)
        self.buf.spend(count * dt.itemsize, f"the {name} vector of {self.what}")
        values = np.frombuffer(self.buf.data, dtype=dt, count=count, offset=start) if count \
            else np.zeros(0, dt)
        return values.astype(dt.newbyteorder("="))

    def ints(self, slot: int, name: str) -> tuple[int, ...]:
        """The [int32] vector in field ``slot`` as a tuple (empty when absent)."""
        return tuple(int(v) for v in self.array(slot, "<i4", name))

    def string(self, slot: int, name: str) -> str:
        """The string in field ``slot`` (UTF-8, bad bytes replaced), '' when absent."""
        start, count = self.vector(slot, 1, name)
        if not start:
            return ""
        end = start + count
        self.buf.spend(count, f"the {name} string of {self.what}")
        if end >= self.buf.size or self.buf.data[end] != 0:
            raise self.buf.error(f"the {name} string of {self.what} at byte {start - 4} has "
                                 f"no terminating zero byte at byte {end}")
        return self.buf.data[start:end].decode("utf-8", errors="replace")

    def tables(self, slot: int, name: str, label: str) -> list[Table]:
        """The tables of the vector of tables in field ``slot``, the k-th
        named ``label.format(k)``; empty when absent."""
        start, count = self.vector(slot, 4, name)
        found = []
        for k in range(count):
            at = start + 4 * k
            to = at + self.buf.number("I", at, f"the {name} vector of {self.what}")
            found.append(Table(self.buf, to, label.format(k)))
        return found
