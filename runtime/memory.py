"""Memory: one side of a conversion (a MemoryDesc, or an ImageDesc) plus its
storage on an engine, so that an inference engine keeps tensors where they live.

The storage is the engine's (runtime/contract.py): a numpy array on the cpu
and reference engines; a ``cl.Buffer`` or ``cl.Image`` on an OpenCL engine.
Memory is either allocated here (zeroed) or attached to the caller's own
array / buffer / image without a copy (an attached ``cl.Buffer`` or
``cl.Image`` brings its context; pass ``queue=`` to use your own queue).
Conversions between Memory objects run on their engine: on OpenCL nothing
crosses to the host. Attaching to a desc with padding restores the padding
invariants (block tails zero, halo the fill value), as oneDNN's
set_data_handle does.

>>> src = Memory.from_numpy(np.arange(12, dtype=np.float32), MemoryDesc((1, 3, 2, 2)))
>>> runtime.reorder(src, None, MemoryDesc((1, 3, 2, 2), tag="nhwc")).to_numpy()[:3]
array([0., 4., 8.], dtype=float32)
"""
from __future__ import annotations

import contextlib
import warnings

import numpy as np

from . import engine as engines
from .algebra import conversion, dtypes
from .algebra.catalog import image_layout
from .algebra.desc import MemoryDesc
from .algebra.hostarray import check_shape, host_shape, physical_input
from .algebra.layout import ImageDesc
from .errors import BufferCopyWarning, ClayoutError
from .algebra.pitch import pitch_pixels


class Memory:
    """A buffer Memory: ``Memory(desc, engine=None, data=None, queue=None)``;
    an image Memory: ``Memory.image(layout, dims, dtype, engine=None, data=None)``
    or ``Memory.from_buffer(buffer, layout, dims, ...)``.
    ``data`` is None (allocate, zeroed), a numpy array (attached on a host
    engine; used in place through USE_HOST_PTR on OpenCL), or the user's
    ``cl.Buffer`` / ``cl.Image``. ``side`` is the MemoryDesc or ImageDesc it
    holds (``Memory(side)`` takes either); ``desc`` its memory (an image's
    dense desc). ``zero_copy``, ``copy_reason`` and ``row_pitch`` (bytes
    from one row of a 2-D image to the next in the caller's buffer) are set
    by ``from_buffer`` (None otherwise; ``row_pitch`` None for a layout on a
    buffer storage).

    Every constructor ends in ``__init__``: the side, the engine it lives on
    (runtime.engine.engine_for: a device object or queue brings its
    context's one engine), and the storage that engine gives for the data.
    How a caller's device object is taken in (used in place, viewed, or
    copied, and why) is the engine's to decide."""

    def __init__(self, desc, engine=None, data=None, queue=None, *, row_pitch=None,
                 view: bool = False, zeroed: bool = True):
        if not isinstance(desc, (MemoryDesc, ImageDesc)):
            raise ClayoutError(f"Memory takes a MemoryDesc, got {type(desc).__name__}; "
                               "for an image use Memory.image(layout, dims, dtype)")
        self.side = desc
        self.engine = engines.engine_for(engine, data, queue)
        self.zero_copy = self.copy_reason = self.row_pitch = None
        if view:   # Memory.from_buffer: the engine views the buffer or copies it, and says why
            pitch = None if row_pitch is None else \
                pitch_pixels(desc, row_pitch, "Memory.from_buffer")   # bytes -> pixels
            taken = self.engine.view_buffer(desc, data, pitch)
            self.storage, self.copy_reason = taken.storage, taken.reason
            self.row_pitch = taken.row_pitch
            self.zero_copy = taken.reason is None
            if taken.first:
                warnings.warn(f"clayout: Memory.from_buffer: {taken.reason}", BufferCopyWarning,
                              stacklevel=3)
        elif data is None:   # zeroed=False: from_numpy writes every byte
            self.storage = self.engine.allocate(desc, zeroed)
        else:
            self.storage = self.engine.attach(desc, self._checked(data))

    @classmethod
    def image(cls, layout, dims, dtype="f32", engine=None, data=None, queue=None) -> "Memory":
        return cls(ImageDesc(image_layout(layout), dims, dtype), engine, data, queue)

    @classmethod
    def from_numpy(cls, array, desc, engine=None, dims=None, queue=None,
                   wait: bool = True) -> "Memory":
        """New storage holding a copy of ``array``: ``desc`` is a MemoryDesc
        (array: its physical elements) or an image layout (array: (height,
        width[, 4]), with ``dims``). ``wait=False`` enqueues the copy on a
        device and returns at once: ``array`` must then stay as it is until
        the Memory's ``event`` is complete (a loader's many uploads, one
        wait at the end)."""
        arr = np.asarray(array)
        if isinstance(desc, MemoryDesc):
            mem = cls(desc, engine, queue=queue, zeroed=False)
            mem._write(physical_input(arr, desc, "Memory.from_numpy array"), wait)
            return mem
        if dims is None:
            raise ClayoutError("Memory.from_numpy of an image needs dims= (the logical dims)")
        side = ImageDesc(image_layout(desc), dims, dtypes.of_array(arr))
        mem = cls(side, engine, queue=queue, zeroed=False)
        mem._write(mem._checked(arr), wait)
        return mem

    @classmethod
    def from_buffer(cls, buffer, layout, dims, dtype="f32", engine=None, queue=None,
                    row_pitch=None) -> "Memory":
        """An image Memory of ``layout`` at ``dims`` whose pixels are the
        caller's ``cl.Buffer``, without a copy where the device allows it
        (runtime/opencl/shared.py): a layout on a buffer storage holds the
        buffer itself. ``row_pitch``: BYTES from one row of a 2-D image to
        the next, as clCreateImage's image_row_pitch, a whole number of
        pixels; by default the row's own bytes (dense rows), on every
        device. A 2-D image views the buffer where the device has
        cl_khr_image2d_from_buffer and the pitch and the buffer's start are
        multiples of its alignments (runtime.image_pitch gives an aligned
        pitch). Elsewhere the buffer's bytes are copied into a new image on
        the device, and a BufferCopyWarning says why (once per engine and
        reason); a buffer too small for the rows is refused. ``zero_copy``
        tells which; ``copy_reason`` why not; ``row_pitch`` the pitch in
        bytes it read."""
        side = ImageDesc(image_layout(layout), dims, dtype)
        if not engines.is_device_object(buffer):
            raise ClayoutError(f"Memory.from_buffer takes a pyopencl Buffer, got "
                               f"{type(buffer).__name__}; for a host array use "
                               "Memory.image(layout, dims, dtype, data=array)")
        if engine is not None and engines.get(engine).domain == "host":
            raise ClayoutError(f"Memory.from_buffer needs an OpenCL engine (engine='opencl', "
                               f"an OpenCLEngine, or None), not engine "
                               f"{engines.get(engine).name!r}, which keeps host arrays")
        return cls(side, engine, buffer, queue, row_pitch=row_pitch, view=True)

    def _checked(self, data):
        """The caller's data, a host array checked against the side (a
        device object is the engine's to check)."""
        if engines.is_device_object(data):
            return data
        arr = np.asarray(data)
        side = self.side
        if side.is_image:
            if arr.shape != side.array_shape or dtypes.of_array(arr) != side.dtype:
                raise ClayoutError(f"array {arr.shape} {arr.dtype} does not match layout "
                                   f"{side.layout.name!r} for dims {side.dims}: expected "
                                   f"{side.array_shape} {side.dtype.name}")
            return arr
        if dtypes.of_array(arr) != side.dtype or arr.size != side.span \
                or not arr.flags.c_contiguous:
            raise ClayoutError(f"array of dtype {arr.dtype}, {arr.size} elements cannot hold "
                               f"{side!r}: it needs a C-contiguous {side.dtype.name} array "
                               f"of {side.span} elements")
        check_shape(arr.shape, side, "Memory data")
        return arr

    # -- what it holds --------------------------------------------------------------------
    @property
    def desc(self) -> MemoryDesc:
        return self.side.memory

    @property
    def is_image(self) -> bool:
        return self.side.is_image

    @property
    def layout(self):
        return self.side.layout if self.side.is_image else None

    @property
    def dims(self) -> tuple[int, ...]:
        return self.side.dims

    @property
    def dtype(self) -> dtypes.DType:
        return self.side.dtype

    # -- host access ---------------------------------------------------------------------
    def to_numpy(self) -> np.ndarray:
        """A host copy: the physical 1-D array of a buffer, (height, width[, 4]) of an image."""
        if self.storage is None:
            return np.zeros(host_shape(self.side), dtype=self.dtype.np)
        return self.engine.read(self.storage, self.side)

    def _write(self, arr: np.ndarray, wait: bool = True) -> None:
        if self.storage is not None:
            self.engine.write(self.storage, self.side, arr, wait)

    @contextlib.contextmanager
    def map(self, write: bool = True):
        """Host access as a numpy array (lock on enter, unlock on exit): a
        buffer's 1-D physical array, mapped in place (no copy on a CPU
        device); an image's (height, width[, 4]) array, read out and, with
        ``write``, written back on exit."""
        if self.storage is None:
            yield np.zeros(host_shape(self.side), self.dtype.np)
            return
        with self.engine.map(self.storage, self.side, write) as arr:
            yield arr

    @property
    def event(self):
        """The device event of the last command clayout enqueued that writes
        this Memory (a pyopencl Event: put it in your kernel's wait list
        before reading the Memory on an out-of-order queue); None on a host
        engine, or when nothing is pending from clayout. Your own commands
        writing it are yours to pass to the next door as ``wait_for=``
        (docs/engines.md, "Inside an engine")."""
        return self.engine.last_write(self.storage)

    def same_buffer(self, other: "Memory") -> bool:
        """True when both Memory objects use the same storage."""
        if self.storage is None or other.storage is None or \
                self.engine.domain != other.engine.domain:
            return False
        return self.engine.same(self.storage, other.storage)

    def __repr__(self) -> str:
        what = f"image {self.layout.name} dims={self.dims}" if self.is_image else repr(self.desc)
        return f"<clayout Memory {what} on {self.engine.name}>"


def convert(mem: Memory, target, engine=None, wait_for=()) -> Memory:
    """``mem`` converted into ``target``: a side (MemoryDesc or ImageDesc:
    a new Memory on the engine) or a Memory to write into, on ``engine``
    (default: mem's; another on the same device context runs it on its own
    queue, ordered after mem's commands by their events), after the events
    ``wait_for``. runtime.doors.parse checked the engines. Returns the destination
    Memory (its ``event``: the conversion's last command)."""
    engine = mem.engine if engine is None else engine
    out, fresh = _destination(target, engine)
    conversion.check(mem.side, out.side)
    if mem.storage is not None and out.storage is not None:
        engine.convert_storage(mem.side, mem.storage, out.side, out.storage, fresh,
                               wait_for=wait_for)
    return out


def from_frame(frame, mem: Memory, target, engine=None, wait_for=()) -> Memory:
    """The frame ``frame`` (a runtime.algebra.frame.FramePlan) held in the
    u8 buffer Memory ``mem``, converted into ``target``: a side (a new Memory
    on the engine) or a Memory to write into (runtime.doors.parse checked it), on
    ``engine`` (default: mem's), after the events ``wait_for``."""
    engine = mem.engine if engine is None else engine
    out, fresh = _destination(target, engine)
    if mem.storage is not None and out.storage is not None:
        engine.frame_storage(frame, mem.side, mem.storage, out.side, out.storage, fresh,
                             wait_for=wait_for)
    return out


def _destination(target, engine) -> tuple[Memory, bool]:
    """(the Memory a conversion writes, whether it is fresh): ``target``
    itself, or a new zeroed Memory of the side ``target`` on ``engine``."""
    if isinstance(target, Memory):
        return target, False
    return Memory(target, engine), True
