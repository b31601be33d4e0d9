"""Memory: a descriptor (or an image layout with its dims) plus its storage on
an engine, so that an inference engine keeps tensors where they live.

Storage: on the ``cpu`` (or ``reference``) engine a numpy array; on an OpenCL
engine a ``cl.Buffer`` or a ``cl.Image``. Memory is either allocated here or
attached to the caller's own array / buffer / image without a copy (an
attached ``cl.Buffer`` or ``cl.Image`` brings its context; pass ``queue=`` to
use your own queue). Conversions between Memory objects run on their engine:
on OpenCL nothing crosses to the host.

Attaching a buffer to a desc with padding restores the padding invariants
(block tails zero, halo the fill value), as oneDNN's set_data_handle does.

>>> src = Memory.from_numpy(np.arange(12, dtype=np.float32), MemoryDesc((1, 3, 2, 2)))
>>> runtime.reorder(src, None, MemoryDesc((1, 3, 2, 2), tag="nhwc")).to_numpy()[:3]
array([0., 4., 8.], dtype=float32)
"""
from __future__ import annotations

import contextlib

import numpy as np

from .cpu import engine as cpu
from .algebra import dtypes
from . import engine as engines
from .algebra.desc import MemoryDesc, _ints
from .errors import ClayoutError
from .algebra.hostarray import physical_input
from .algebra.layout import ImageLayout, image_layout
from .limits import check_host_bytes

# pyopencl and runtime.opencl are imported where a device is involved (_cl,
# _engine_for), so that Memory on the cpu engine works without pyopencl.


def _cl():
    import pyopencl
    return pyopencl


def _is_cl(obj, kind: str) -> bool:
    try:
        cl = _cl()
    except ImportError:
        return False
    return isinstance(obj, cl.Buffer if kind == "buffer" else cl.Image)


def _engine_for(engine, data, queue):
    """The engine a Memory lives on: the user's queue/context when the data is
    theirs, else ``engine`` (a name or an engine object)."""
    if queue is not None and not hasattr(queue, "context"):
        raise ClayoutError(f"queue= takes a pyopencl CommandQueue, got {type(queue).__name__}")
    if queue is not None or _is_cl(data, "buffer") or _is_cl(data, "image"):
        from .opencl.engine import OpenCLEngine, default
        context = queue.context if queue is not None else data.context
        eng = default() if engine is None and queue is None else engines.get(engine)
        if getattr(eng, "context", None) == context and (queue is None or eng.queue == queue):
            return eng
        return OpenCLEngine(context=context, queue=queue)
    return engines.get(engine)


def _on_device(eng) -> bool:
    return hasattr(eng, "context")


class Memory:
    """A buffer Memory: ``Memory(desc, engine=None, data=None, queue=None)``;
    an image Memory: ``Memory.image(layout, dims, dtype, engine=None, data=None)``.
    ``data`` is None (allocate, zeroed), a numpy array (attached on a host
    engine; used in place through USE_HOST_PTR on OpenCL), or the user's
    ``cl.Buffer`` / ``cl.Image``."""

    def __init__(self, desc: MemoryDesc, engine=None, data=None, queue=None, *,
                 _layout: ImageLayout | None = None, _dims=None):
        if not isinstance(desc, MemoryDesc):
            raise ClayoutError(f"Memory takes a MemoryDesc, got {type(desc).__name__}; "
                               "for an image use Memory.image(layout, dims, dtype)")
        self.desc = desc
        self.layout = _layout
        self.dims = tuple(_dims) if _dims is not None else desc.dims
        self.engine = _engine_for(engine, data, queue)
        self.storage = None
        if self.layout is not None:
            self._init_image(data)
        else:
            self._init_buffer(data)

    # -- construction ----------------------------------------------------------------
    @classmethod
    def image(cls, layout, dims, dtype="f32", engine=None, data=None, queue=None) -> "Memory":
        layout = image_layout(layout)
        dt = dtypes.image_dtype(dtype)
        dims = _ints(dims, "dims")
        dims = layout.logical_dims(dims) if len(dims) == layout.ndims else dims
        layout.logical_dims(dims)
        return cls(layout.desc(dims, dt), engine, data, queue, _layout=layout, _dims=dims)

    @classmethod
    def from_numpy(cls, array, desc, engine=None, dims=None, queue=None) -> "Memory":
        """New storage holding a copy of ``array``: ``desc`` is a MemoryDesc
        (array: its physical elements) or an image layout (array: (height,
        width[, 4]), with ``dims``)."""
        arr = np.asarray(array)
        if isinstance(desc, MemoryDesc):
            mem = cls(desc, engine, queue=queue)
            mem._write(physical_input(arr, desc))
            return mem
        if dims is None:
            raise ClayoutError("Memory.from_numpy of an image needs dims= (the logical dims)")
        mem = cls.image(desc, dims, dtypes.of_array(arr), engine, queue=queue)
        mem._write(mem._check_image_array(arr))
        return mem

    def _init_buffer(self, data) -> None:
        desc = self.desc
        nbytes = desc.span * desc.dtype.itemsize
        if data is None:
            if desc.is_zero:
                return
            if not _on_device(self.engine):
                check_host_bytes(nbytes, f"Memory {desc.describe()}")
            if _on_device(self.engine):
                self.storage = self.engine.new_buffer(nbytes)
                fill = _cl().enqueue_fill_buffer(self.engine.queue, self.storage, np.uint8(0), 0,
                                                 nbytes)
                # the zeroing is part of making this Memory: on an out-of-order queue
                # nothing else would order it before the first write or kernel
                if not self.engine.in_order:
                    fill.wait()
            else:
                self.storage = np.zeros(desc.span, dtype=desc.dtype.np)
            return
        if _is_cl(data, "buffer"):
            if data.size < nbytes:
                raise ClayoutError(f"cl.Buffer of {data.size} bytes is too small for "
                                   f"{desc!r}: it needs {nbytes} bytes")
            self.storage = data
        else:
            arr = np.asarray(data)
            if dtypes.of_array(arr) != desc.dtype or arr.size != desc.span \
                    or not arr.flags.c_contiguous:
                raise ClayoutError(f"array of dtype {arr.dtype}, {arr.size} elements cannot hold "
                                   f"{desc!r}: it needs a C-contiguous {desc.dtype.name} array "
                                   f"of {desc.span} elements")
            if _on_device(self.engine):
                cl = _cl()
                self.storage = cl.Buffer(self.engine.context,
                                         cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                                         hostbuf=arr.reshape(-1))
            else:
                self.storage = arr.reshape(-1)
        self._restore_padding()

    def _init_image(self, data) -> None:
        dt = self.desc.dtype
        if _on_device(self.engine):
            self.layout.check_fits(self.dims, *self.engine.image_limits)
        if self.desc.is_zero:
            return
        if data is None:
            if _on_device(self.engine):
                self.storage = self.engine.new_image(self.layout, self.dims, dt)
                self._write(np.zeros(self.layout.array_shape(self.dims), dt.np))
            else:
                check_host_bytes(self.desc.span * dt.itemsize,
                                 f"image Memory {self.layout.name} of dims {self.dims}")
                self.storage = np.zeros(self.layout.array_shape(self.dims), dt.np)
        elif _is_cl(data, "image"):
            want = self.layout.image_shape(self.dims)
            fmt = self.engine.image_format(dt, self.layout.lanes)
            if (data.width, data.height) != want or data.format != fmt:
                raise ClayoutError(f"cl.Image {data.width}x{data.height} {data.format} does not "
                                   f"match layout {self.layout.name!r} for dims {self.dims}: "
                                   f"expected {want[0]}x{want[1]} {fmt}")
            self.storage = data
        elif _on_device(self.engine):
            arr = self._check_image_array(np.asarray(data))
            self.storage = self.engine.new_image(self.layout, self.dims, dt,
                                                 hostbuf=np.ascontiguousarray(arr))
        else:
            self.storage = self._check_image_array(np.asarray(data))

    def _check_image_array(self, arr: np.ndarray) -> np.ndarray:
        want = self.layout.array_shape(self.dims)
        if arr.shape != want or dtypes.of_array(arr) != self.desc.dtype:
            raise ClayoutError(f"array {arr.shape} {arr.dtype} does not match layout "
                               f"{self.layout.name!r} for dims {self.dims}: expected {want} "
                               f"{self.desc.dtype.name}")
        return arr

    def _restore_padding(self) -> None:
        """Block tails back to zero, halo back to the fill (oneDNN zero-pads an
        attached handle), leaving the data in place."""
        desc = self.desc
        halo = any(desc.halo_lower) or any(desc.halo_upper)
        if desc.is_zero or not (desc.has_padding or halo):
            return
        if _on_device(self.engine):
            self.engine.enqueue_reorder(self.storage, desc, self.storage, desc, in_place=True)
        else:
            cpu.reorder_into(self.storage.copy(), desc, self.storage, desc)

    # -- host access ---------------------------------------------------------------------
    @property
    def is_image(self) -> bool:
        return self.layout is not None

    @property
    def dtype(self) -> dtypes.DType:
        return self.desc.dtype

    def _host_shape(self):
        return self.layout.array_shape(self.dims) if self.is_image else (self.desc.span,)

    def to_numpy(self) -> np.ndarray:
        """A host copy: the physical 1-D array of a buffer, (height, width[, 4]) of an image."""
        out = np.zeros(self._host_shape(), dtype=self.dtype.np)
        if self.storage is None:
            return out
        if not _on_device(self.engine):
            out[...] = self.storage
        elif self.is_image:
            width, height = self.layout.image_shape(self.dims)
            _cl().enqueue_copy(self.engine.queue, out, self.storage, origin=(0, 0),
                               region=(width, height))
        else:
            _cl().enqueue_copy(self.engine.queue, out, self.storage)
        return out

    def _write(self, arr: np.ndarray) -> None:
        if self.storage is None:
            return
        arr = np.ascontiguousarray(arr).reshape(self._host_shape())
        if not _on_device(self.engine):
            self.storage[...] = arr
        elif self.is_image:
            width, height = self.layout.image_shape(self.dims)
            _cl().enqueue_copy(self.engine.queue, self.storage, arr, origin=(0, 0),
                               region=(width, height))
        else:
            _cl().enqueue_copy(self.engine.queue, self.storage, arr)

    @contextlib.contextmanager
    def map(self, write: bool = True):
        """Host access as a numpy array (lock on enter, unlock on exit). A
        buffer is mapped in place (no copy on a CPU device); an image is read
        out and, with ``write``, written back on exit."""
        if self.storage is None or not _on_device(self.engine):
            yield self.storage if self.storage is not None else np.zeros(
                self._host_shape(), self.dtype.np)
            return
        if self.is_image:
            arr = self.to_numpy()
            yield arr
            if write:
                self._write(arr)
            return
        cl = _cl()
        flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
        arr, _ = cl.enqueue_map_buffer(self.engine.queue, self.storage, flags, 0,
                                       (self.desc.span,), self.dtype.np)
        try:
            yield arr
        finally:
            arr.base.release(self.engine.queue)

    def same_buffer(self, other: "Memory") -> bool:
        """True when both Memory objects use the same storage."""
        a, b = self.storage, other.storage
        if a is None or b is None:
            return False
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return np.shares_memory(a, b)
        return getattr(a, "int_ptr", None) is not None and \
            getattr(a, "int_ptr", None) == getattr(b, "int_ptr", None)

    def __repr__(self) -> str:
        what = f"image {self.layout.name} dims={self.dims}" if self.is_image else repr(self.desc)
        return f"<clayout Memory {what} on {self.engine.name}>"


# -- conversions between Memory objects (called by runtime.api) -----------------------------
def _check_engine(mem: Memory, engine) -> None:
    if engine is None or engine is mem.engine:
        return
    want = engines.get(engine)
    if _on_device(want) != _on_device(mem.engine) or (
            _on_device(want) and want.context != mem.engine.context):
        raise ClayoutError(f"{mem!r} lives on engine {mem.engine.name}; it cannot be converted "
                           f"on engine {want.name} (use to_numpy() or a Memory on that engine)")


def _target(dst, like: Memory) -> tuple[Memory, bool]:
    """(the destination Memory, whether it is fresh)."""
    if isinstance(dst, Memory):
        if _on_device(dst.engine) != _on_device(like.engine):
            raise ClayoutError(f"destination {dst!r} and source {like!r} are on different engines")
        return dst, False
    return Memory(dst, like.engine), True


def reorder_memory(mem: Memory, dst_desc, engine=None) -> Memory:
    """``mem`` reordered into ``dst_desc`` (a MemoryDesc: a new Memory on the
    same engine; or a Memory to write into). Returns the destination."""
    _check_engine(mem, engine)
    if mem.is_image:
        raise ClayoutError(f"reorder takes a buffer Memory; {mem!r} is an image: use from_image")
    out, fresh = _target(dst_desc, mem)
    if out.desc.dims != mem.desc.dims:
        raise ClayoutError(f"reorder from {mem.desc!r} to {out.desc!r}: dims differ")
    if mem.storage is None or out.storage is None:
        return out
    if _on_device(mem.engine):
        mem.engine.enqueue_reorder(mem.storage, mem.desc, out.storage, out.desc)
    else:
        cpu.reorder_into(mem.storage, mem.desc, out.storage, out.desc, zeroed=fresh)
    return out


def to_image_memory(mem: Memory, layout, dtype=None, engine=None, out: Memory | None = None):
    """A buffer Memory placed on an image of ``layout`` (a new image Memory of
    ``dtype``, default the buffer's, or ``out``)."""
    _check_engine(mem, engine)
    layout = image_layout(layout)
    if out is None:
        out = Memory.image(layout, mem.desc.dims, dtype or mem.dtype.name, mem.engine)
    if mem.storage is None or out.storage is None:
        return out
    if _on_device(mem.engine):
        mem.engine.enqueue_to_image(mem.storage, mem.desc, out.storage, layout, out.dtype)
    else:
        out.storage[...] = mem.engine.to_image(mem.storage, layout, mem.desc, out.dtype)
    return out


def from_image_memory(mem: Memory, layout, dims, dst=None, dtype=None, engine=None) -> Memory:
    """An image Memory read back into a buffer: ``dst`` is a tag (default by
    the layout's kind), a MemoryDesc, or a Memory to write into."""
    _check_engine(mem, engine)
    layout = image_layout(layout)
    if not mem.is_image or mem.layout != layout or \
            layout.logical_dims(dims) != layout.logical_dims(mem.dims):
        raise ClayoutError(f"{mem!r} is not an image of layout {layout.name!r} with dims "
                           f"{tuple(dims)}")
    if isinstance(dst, (Memory, MemoryDesc)):
        target = dst
    else:
        tag = dst or layout.default_tag(len(tuple(dims)))
        target = MemoryDesc(dims, dtype or mem.dtype.name, tag=tag)
    out, fresh = _target(target, mem)
    if mem.storage is None or out.storage is None:
        return out
    if _on_device(mem.engine):
        mem.engine.enqueue_from_image(mem.storage, layout, mem.dtype, out.storage, out.desc)
    else:
        flat = mem.engine.from_image(mem.storage, layout, out.desc)
        cpu.reorder_into(flat, out.desc, out.storage, out.desc, zeroed=fresh)
    return out
