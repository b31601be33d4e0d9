"""The contract every engine keeps (docs/architecture.md).

* one conversion: ``convert(src, dst, data, out=None)`` between two sides
  (runtime.algebra.conversion), host arrays in and out;
* the storage of Memory objects: ``allocate``, ``attach``, ``read``,
  ``write``, ``map``, ``same``, and ``convert_storage`` (a conversion between
  two storages of the engine; on a device nothing crosses to the host);
* tiles of an image over a limit: ``to_tiles`` / ``from_tiles``.

``Engine`` states it (and runs the stages of a conversion, the same for
every engine); ``HostEngine`` keeps it with numpy arrays for storage and one
buffer-to-buffer reorder per move, which the cpu and reference engines give.
runtime.opencl.engine keeps it on a device.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .algebra import conversion, dtypes, output_math
from .algebra import frame_sample as frame_stages
from .algebra.conversion import Move
from .algebra.desc import MemoryDesc
from .algebra.storage import Limits
from .algebra.hostarray import host_shape, physical_shape
from .algebra.output import Pending
from .errors import ClayoutError
from .limits import check_host_bytes


class Engine:
    """The contract of every engine. ``data`` and results are host arrays
    holding a side's memory: a buffer's physical elements (any shape, read
    in order; results 1-D of ``span`` elements) or an image array (height,
    width[, 4]). ``out``, where given, is the result's array (checked by the
    caller: its shape and dtype, C-contiguous) and is written whatever it held.
    ``limits``: the bounds of every storage (runtime.algebra.storage.Limits,
    read from the device), None where nothing is bounded: the one question
    every limit check asks. ``domain``: where its storage lives; Memory
    objects convert together only within one domain. ``reads_views``: the
    engine reads a host source through strides (a numpy view of a plain
    tensor is then handed over as it is, with a strided desc:
    runtime.algebra.hostarray.host_input); where False, a view is first
    copied once into a contiguous array."""
    name = "engine"
    limits: Limits | None = None
    domain = "host"
    reads_views = False

    # -- the one conversion -------------------------------------------------------------
    # a device engine whose host conversions can return before their result
    # (``move(..., wait=False)``: a Pending, the input consumed); a host engine
    # finishes the work first and its Pending is done
    enqueues = False

    def convert(self, src, dst, data, out=None, wait: bool = True):
        """``data`` (src's memory) converted into dst's memory; ``wait=False``
        (an engine that ``enqueues``): a Pending of it (runtime/algebra/output.py),
        ``data`` consumed on return."""
        conversion.check(src, dst)
        return self.run_stages(src, dst, data,
                               lambda s, d, value: self.move(s, d, value, out) if wait else
                               self.move(s, d, value, out, wait=False))

    def executor(self, src, dst):
        """``run(data, out=None)``: this conversion of host arrays planned once,
        what a prepared call runs (runtime/doors/prepare.py); the sides are
        checked already. By default the conversion as ``convert`` makes it."""
        def run(data, out=None):
            return self.convert(src, dst, data, out)
        return run

    def output_executor(self, side, rule):
        """``read(data, out=None, wait_for=()) -> Pending``: read_output of
        ``side`` by ``rule`` planned once (a prepared call's); by default
        the engine's read_output."""
        def read(data, out=None, wait_for=()):
            return self.read_output(side, data, rule, out, wait_for)
        return read

    def storage_executor(self, src, dst):
        """``run(src_storage, dst_storage, wait_for=())``: the conversion
        between two storages of the engine planned once (a prepared call on
        Memory objects); by default as ``convert_storage`` makes it."""
        def run(src_storage, dst_storage, wait_for=()):
            return self.convert_storage(src, src_storage, dst, dst_storage, False, wait_for)
        return run

    def run_stages(self, src, dst, data, last):
        """Run the stages of src -> dst (runtime.algebra.conversion) on host
        arrays; the final move is ``last(src side, dst side, value)``."""
        steps = conversion.stages(src, dst)
        value = data
        for step in steps[:-1]:
            value = self.move(step.src, step.dst, value) if isinstance(step, Move) else \
                self.apply(step, np.asarray(value))
        return last(steps[-1].src, steps[-1].dst, value)

    def move(self, src, dst, data, out=None) -> np.ndarray:
        """One Move stage: every element of src to its place in dst."""
        raise NotImplementedError

    def apply(self, step, data: np.ndarray) -> np.ndarray:
        """One Apply stage, on the host: the transform's one evaluation
        (runtime.algebra.transform), its result 1-D (a plain tensor)."""
        values = np.asarray(data).reshape(step.src.dims)
        if step.inverse:
            return step.transform.invert(values, step.dst.dtype, step.dst.dims).reshape(-1)
        return step.transform.apply(values).reshape(-1)

    # -- frames ----------------------------------------------------------------------------
    def from_frame(self, frame, dst, data, out=None) -> np.ndarray:
        """A camera frame (``frame``: a runtime.algebra.frame.FramePlan;
        ``data``: its u8 array) as the model input ``dst``: the frame's
        stages on the host in float32 (``sample``), then one conversion from
        the plain f32 NCHW tensor they give (a frame's layout is an
        activation layout or a tag: that conversion is one move). An engine
        that ``enqueues`` takes ``wait=False`` too (a Pending, as ``convert``'s)."""
        return self.move(frame.plain, dst, self.sample(frame, data), out)

    def sample(self, frame, data) -> np.ndarray:
        """The frame's colour, sample and normalize stages: (C, H, W) float32
        (runtime.algebra.frame.sample, the one host evaluation)."""
        return frame_stages.sample(frame, np.asarray(data).reshape(frame.shape))

    def frame_storage(self, frame, src, src_storage, dst, dst_storage, fresh: bool,
                      wait_for=()):
        """``from_frame`` between two storages of the engine: ``src`` (a u8
        buffer side) holding the frame's bytes, into dst's, after the events
        ``wait_for``; the event of its last command (None on the host)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def host_input(self, side, array: np.ndarray):
        """Storage of the buffer ``side`` holding the host ``array``'s values
        for a ``with`` block, the array consumed when it is entered: the
        caller may overwrite or free it at once (a host engine reads it in
        place, within the call)."""
        yield array.reshape(-1)

    # -- outputs -----------------------------------------------------------------------------
    exact_outputs = False   # the reference: float64 from the formulas

    def read_output(self, side, data, rule, out=None, wait_for=()) -> Pending:
        """``read_output`` (runtime/algebra/output.py) of ``side`` whose memory
        ``data`` holds (a host array, a device engine's Memory): its logical
        values by one conversion, then the rule's stages on the host
        (runtime/algebra/output_math.py), after ``wait_for``. A Pending,
        finished here."""
        wait_events(wait_for)
        plain = MemoryDesc(side.dims, side.dtype)
        values = np.asarray(self.convert(side, plain, data)).reshape(side.dims)
        result = output_math.evaluate(rule, values, exact=self.exact_outputs)
        if rule.result == "tensor":
            values = dtypes.host_array(result, rule.dst.dtype, "read_output") \
                if result.dtype == np.float64 else dtypes.convert(result, rule.dst.dtype)
            result = self.convert(MemoryDesc(rule.shape, rule.dst.dtype), rule.dst, values, out)
            result = result.reshape(physical_shape(rule.dst)) if out is None else out
        elif out is not None:
            out[...] = result
            result = out
        return Pending.of(result)

    # -- tiles ------------------------------------------------------------------------------
    def to_tiles(self, src, dst, data, plan) -> tuple[np.ndarray, ...]:
        """The image ``dst`` cut into the tiles of ``plan`` (runtime.algebra.tiles)."""
        return plan.cut(self.convert(src, dst, data))

    def from_tiles(self, src, tiles, plan, dst) -> np.ndarray:
        """The buffer ``dst`` read from the tiles of the image ``src``."""
        return self.convert(src, dst, plan.join(tiles))

    # -- storage of Memory objects ---------------------------------------------------------
    def allocate(self, side, zeroed: bool = True):
        """New storage for ``side`` (None for a side with no elements),
        zeroed unless ``zeroed`` is False (the caller writes every byte)."""
        raise NotImplementedError

    def attach(self, side, data):
        """``data`` (the caller's own storage) used in place for ``side``."""
        raise NotImplementedError

    def read(self, storage, side) -> np.ndarray:
        """A host copy of the storage: 1-D for a buffer, the image array for an image."""
        raise NotImplementedError

    def write(self, storage, side, array: np.ndarray, wait: bool = True) -> None:
        """``array`` into the storage; ``wait=False`` may leave a device's
        copy running (the array must then stay as it is until it is done)."""
        raise NotImplementedError

    def map(self, storage, side, write: bool = True):
        """A context manager giving the storage as a host array."""
        raise NotImplementedError

    def same(self, a, b) -> bool:
        """True when two storages are the same memory."""
        raise NotImplementedError

    def convert_storage(self, src, src_storage, dst, dst_storage, fresh: bool, wait_for=()):
        """Write dst's footprint in ``dst_storage`` from ``src_storage``
        (``fresh``: dst_storage is known to be zero) after the events
        ``wait_for``; the event of its last command (None on the host)."""
        raise NotImplementedError

    def pitch_alignment(self) -> int:
        """The row pitch alignment, in pixels, of a 2-D image over a buffer
        (CL_DEVICE_IMAGE_PITCH_ALIGNMENT; runtime.image_pitch); 0: none, as
        for host arrays."""
        return 0

    def view_buffer(self, side, buffer, row_pitch=None):
        """The storage of the ImageDesc ``side`` on the caller's device
        ``buffer`` (Memory.from_buffer): a view, or a copy and why; a
        runtime.opencl.shared.BufferView. Only a device engine has one."""
        raise ClayoutError(f"engine {self.name!r} keeps host arrays: a device buffer needs "
                           "the opencl engine (Memory.from_buffer)")

    def empty_pinned(self, shape, dtype) -> np.ndarray:
        """A host array the engine's device reaches at its full transfer rate
        (runtime.empty_pinned); a host engine has no device: a plain array."""
        return np.empty(shape, dtype)

    def close(self) -> None:
        """Release what the engine keeps for reuse (a host engine: nothing)."""

    def last_write(self, storage):
        """The device event of the last command that wrote ``storage``
        (Memory.event); a host engine's work is done when its call returns: None."""
        return None

    def __repr__(self) -> str:
        return f"<clayout engine {self.name}>"


class HostEngine(Engine):
    """An engine whose storage is numpy arrays (cpu, reference), and whose
    moves are each one buffer-to-buffer reorder: an image is the dense buffer
    of its layout's desc. Subclasses give ``reorder`` (a fresh result: zero
    outside dst's footprint) and ``reorder_into`` (dst's footprint only).
    Stateless, so any number of threads may share it. A reorder reads any
    strided desc in place, so views of host arrays are read through their
    strides (``reads_views``)."""
    reads_views = True

    def reorder(self, data, src: MemoryDesc, dst: MemoryDesc, out=None) -> np.ndarray:
        raise NotImplementedError

    def reorder_into(self, data, src: MemoryDesc, target, dst: MemoryDesc, zeroed: bool) -> None:
        raise NotImplementedError

    def move(self, src, dst, data, out=None) -> np.ndarray:
        data, s = self._regroup(np.asarray(data).reshape(-1), src.memory, dst.memory)
        flat = self.reorder(data, s, dst.memory, None if out is None else out.reshape(-1))
        return out if out is not None else flat.reshape(host_shape(dst))

    def _regroup(self, data, s: MemoryDesc, d: MemoryDesc) -> tuple[np.ndarray, MemoryDesc]:
        """``data`` in ``s`` seen with d's dims, the same logical tensor
        (a row-major regrouping: an image's grouped dims, a 2-D activation):
        free when ``s`` allows the reshape, else through a plain copy."""
        if s.dims == d.dims:
            return data, s
        try:
            return data, s.reshape(d.dims)
        except ClayoutError:
            plain = MemoryDesc(s.dims, d.dtype)
            return self.reorder(data, s, plain), MemoryDesc(d.dims, d.dtype)

    # -- storage: numpy arrays --------------------------------------------------------------
    def allocate(self, side, zeroed: bool = True):
        if side.is_zero:
            return None
        nbytes = side.memory.span_bytes
        what = f"image Memory {side.layout.name} of dims {side.dims}" if side.is_image else \
            f"Memory {side.describe()}"
        check_host_bytes(nbytes, what)
        return np.zeros(host_shape(side), side.dtype.np)

    def attach(self, side, data):
        arr = np.asarray(data)
        if side.is_image:
            return arr
        arr = arr.reshape(-1)
        if side.has_fixed_elements:
            self.reorder_into(arr.copy(), side, arr, side, False)   # padding restored in place
        return arr

    def read(self, storage, side) -> np.ndarray:
        return np.array(storage, copy=True)

    def write(self, storage, side, array, wait: bool = True) -> None:
        storage[...] = np.asarray(array).reshape(storage.shape)

    @contextlib.contextmanager
    def map(self, storage, side, write: bool = True):
        yield storage

    def same(self, a, b) -> bool:
        return np.shares_memory(a, b)

    def frame_storage(self, frame, src, src_storage, dst, dst_storage, fresh: bool,
                      wait_for=()) -> None:
        wait_events(wait_for)
        values = self.sample(frame, self.read(src_storage, src))
        self.convert_storage(frame.plain, values.reshape(-1), dst, dst_storage, fresh)

    def convert_storage(self, src, src_storage, dst, dst_storage, fresh: bool,
                        wait_for=()) -> None:
        wait_events(wait_for)

        def last(s, d, value):
            data, sm = self._regroup(np.asarray(value).reshape(-1), s.memory, d.memory)
            self.reorder_into(data, sm, dst_storage.reshape(-1), d.memory, fresh)
        self.run_stages(src, dst, src_storage, last)


def wait_events(events) -> None:
    """Wait on the host for the device events ``events`` (a host engine's
    ``wait_for``: what the caller's device commands must finish first)."""
    for event in events or ():
        event.wait()
