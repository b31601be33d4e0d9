"""A large tensor's bytes left in its file until a conversion needs them.

Models at full size do not fit in memory several times over, so a front end
hands out a :class:`FileSpan` (file, offset, shape, dtype) for every tensor
of at least :data:`LAZY_BYTES` that lies in a file: ONNX external data, a
large inline ``.onnx`` tensor (runtime.model.onnx.inline), a ``.tflite``
buffer. Nothing is read until :func:`values` asks, and then that tensor
alone, into an array of its own that is freed when its conversion is done
(``clayout model`` streams: runtime.model.stream). Smaller tensors are
arrays at once, as are the values folding makes (they stay in memory:
``--dry-run`` counts them).

A FileSpan answers what the plan asks of an array without reading it
(``shape``, ``dtype``, ``size``, ``nbytes``, ``ndim``).

Example::

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "w.bin")
    >>> _ = open(path, "wb").write(b"\\0" * 8 + np.arange(6, dtype="<f4").tobytes())
    >>> span = FileSpan(path, 8, (2, 3), np.dtype("<f4"))
    >>> span.shape, span.nbytes, values(span).tolist()
    ((2, 3), 24, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
"""
from __future__ import annotations

import math
import mmap
from dataclasses import dataclass

import numpy as np

from ..errors import ClayoutError

LAZY_BYTES = 1 << 20   # a tensor this large (bytes) is read when converted, not when found


@dataclass(frozen=True)
class FileSpan:
    """``shape`` values of ``dtype`` (the file's byte order) at byte
    ``offset`` of the file ``path``; checked against the file's size when
    made (runtime.model.onnx.reader, runtime.model.tflite.file)."""
    path: str
    offset: int
    shape: tuple[int, ...]
    stored: np.dtype        # the dtype as the file stores it ("<f4")

    @property
    def dtype(self) -> np.dtype:
        """The array's dtype, in the host's byte order (what :meth:`read` gives)."""
        return self.stored.newbyteorder("=")

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.stored.itemsize

    def __len__(self) -> int:   # a buffer's length in bytes, as bytes would say
        return self.nbytes

    def view(self, dtype, shape) -> FileSpan:
        """The same bytes as ``shape`` values of ``dtype`` (little-endian)."""
        return FileSpan(self.path, self.offset, tuple(shape), np.dtype(dtype).newbyteorder("<"))

    def read(self) -> np.ndarray:
        """The tensor, read now into an array of its own (native byte order)."""
        out = np.empty(self.shape, self.stored)
        view = memoryview(out.reshape(-1).view(np.uint8))
        try:
            with open(self.path, "rb", buffering=0) as f:
                f.seek(self.offset)
                done = 0
                while done < len(view):
                    got = f.readinto(view[done:])
                    if not got:
                        raise ClayoutError(f"{self.path}: ends {len(view) - done} bytes short "
                                           f"of a tensor at offset {self.offset}; was the file "
                                           "changed while clayout read it?")
                    done += got
        except OSError as exc:
            raise ClayoutError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        return out.astype(self.dtype, copy=False)


def values(array):
    """The array of ``array`` (a FileSpan read now; anything else as it is)."""
    return array.read() if isinstance(array, FileSpan) else array


def held_bytes(arrays) -> int:
    """The bytes of the arrays held in memory among ``arrays`` (FileSpans
    are not: they are read one at a time)."""
    return sum(int(a.nbytes) for a in arrays
               if a is not None and not isinstance(a, FileSpan) and hasattr(a, "nbytes"))


def release_pages(data, start: int, size: int) -> None:
    """Unmap the pages of ``data[start:start + size]`` if ``data`` is a
    read-only memory map (a no-op for bytes): touching a tensor's first
    bytes maps the page cache's whole folio around them (up to 2 MiB here),
    which would count as this process's memory until the map is closed; the
    page cache keeps them, a later read finds them there."""
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED") or size <= 0:
        return
    first = start - start % mmap.PAGESIZE
    last = min(start + size, len(data))
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)
