"""The opencl engine: the engine contract (runtime/contract.py) kept on an
OpenCL device through pyopencl.

``OpenCLEngine(context=None, queue=None, device=None, image_access="auto")``
binds one context and queue (the user's own, or one chosen by
``PYOPENCL_CTX`` / the first device with image support: runtime/opencl/device.py).
Every conversion is one ``enqueue``: the kernel runtime/opencl/plan.py
plans for the two sides, launched on device memory; host arrays
(``move``) are put on the device around it, Memory storage
(``convert_storage``, runtime/opencl/storage.py) never leaves it. A
layout's forward transform stage (a Winograd filter's U = G·g·Gᵀ) is one
more kernel between two moves (runtime/opencl/transform.py); the inverse
stage runs on the host, as in every engine.

>>> eng = default()                                             # doctest: +SKIP
>>> eng.convert(MemoryDesc((2, 2)), MemoryDesc((2, 2), tag="ba"),
...             np.arange(4, dtype=np.float32))                 # doctest: +SKIP
array([0., 2., 1., 3.], dtype=float32)

Threads: one engine may serve any number of threads at once, each getting
the bits a single-threaded run gives. Two things are serialized, each only
while commands are enqueued, never while they run: a cached kernel's
``set_args`` with its enqueue (a ``cl.Kernel`` holds its arguments, and the
program cache shares it between engines on one context), and the two
commands of a staged image access (kernel + buffer<->image copy), so that no
other conversion's commands fall between them in the engine's staging
buffer. On an in-order queue the device runs commands one after another
anyway, so neither lock costs device parallelism. Host-array calls wait for
their own commands only.

A user's out-of-order queue: each conversion gets a staging buffer of its
own and chains its own commands by events, a new Memory is zeroed before it
is returned, and a host-array call waits for its own commands before it
returns. Conversions of Memory objects are enqueued without waiting, and on
such a queue nothing orders them with one another, with ``Memory.to_numpy``
/ ``map`` or with the user's own commands: put ``cl.enqueue_barrier(queue)``
(or ``queue.finish()``) between dependent steps, as for any command on an
out-of-order queue.
"""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np
import pyopencl as cl

from ..algebra import conversion, dtypes
from ..algebra.hostarray import host_shape
from ..contract import Engine
from ..errors import ClayoutError
from . import images, programs, tiles
from .device import pick_context, storage_limits
from .contexts import engine_of, register, track
from .shared import SharedStorage
from . import transform as transform_kernel
from .plan import ByteCopy, plan
from .storage import DeviceStorage

mf = cl.mem_flags
# a cl.Kernel holds its arguments and the program cache shares it between engines:
# set_args + enqueue must not interleave across threads
_LAUNCH_LOCK = threading.Lock()


class OpenCLEngine(SharedStorage, DeviceStorage, Engine):
    name = "opencl"

    IMAGE_ACCESS = ("auto", "direct", "staged")

    def __init__(self, context: cl.Context | None = None, queue: cl.CommandQueue | None = None,
                 device: cl.Device | None = None, image_access: str = "auto",
                 host_in_place: bool | None = None):
        """``image_access``: how kernels reach images: ``direct``
        (write_imagef / read_imagef), ``staged`` (a dense buffer plus a
        buffer<->image copy), or ``auto`` (staged on CPU devices, else direct).
        ``host_in_place``: kernels work on the caller's host arrays in place
        (USE_HOST_PTR, and a map to read the result) instead of copying them
        to and from device buffers; None (default): where the device shares
        host memory (a CPU device, or CL_DEVICE_HOST_UNIFIED_MEMORY)."""
        if image_access not in self.IMAGE_ACCESS:
            raise ClayoutError(f"image_access {image_access!r}; allowed: "
                               f"{', '.join(self.IMAGE_ACCESS)}")
        self.image_access = image_access
        if queue is not None:
            context = queue.context
        if context is None:
            context = cl.Context([device]) if device is not None else pick_context()
        self.context = context
        self.queue = queue if queue is not None else cl.CommandQueue(context)
        dev = self.queue.device
        self.device = dev
        # capabilities, read once
        self.image_support = bool(dev.image_support)
        self.image_limits = (int(dev.image2d_max_width), int(dev.image2d_max_height))
        self.max_alloc = int(dev.max_mem_alloc_size)
        self.storage_limits = storage_limits(dev)
        self.is_cpu = bool(dev.type & cl.device_type.CPU)
        self.host_in_place = (self.is_cpu or bool(dev.host_unified_memory)) \
            if host_in_place is None else bool(host_in_place)
        self.in_order = not (self.queue.properties
                             & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        self.domain = ("opencl", self.context.int_ptr)
        self._stage: cl.Buffer | None = None
        self._stage_lock = threading.Lock()
        track(self)   # waited for at exit

    device_name = property(lambda self: self.device.name.strip())

    def __repr__(self) -> str:
        return f"<clayout engine opencl: {self.device_name} ({self.device.platform.name})>"

    @contextlib.contextmanager
    def staging(self, nbytes: int):
        """A dense buffer for one staged image access, held while its two
        commands are enqueued. On an in-order queue one buffer is kept and
        reused (a fresh one per call costs an allocation and its page faults)
        under a lock, so that the next conversion's commands queue after both
        of this one's; an out-of-order queue gets a new buffer each time."""
        if not self.in_order:
            yield self.new_buffer(nbytes)
            return
        with self._stage_lock:
            if self._stage is None or self._stage.size < nbytes:
                self._stage = self.new_buffer(nbytes)
            yield self._stage

    def new_buffer(self, nbytes: int, hostbuf: np.ndarray | None = None,
                   flags=mf.READ_WRITE) -> cl.Buffer:
        if nbytes > self.max_alloc:
            raise ClayoutError(f"a buffer of {nbytes} bytes is over the device's max allocation "
                               f"{self.max_alloc} bytes ({self.device_name})")
        if hostbuf is not None:
            return cl.Buffer(self.context, flags | mf.COPY_HOST_PTR, hostbuf=hostbuf)
        return cl.Buffer(self.context, flags, size=max(1, nbytes))

    def staged(self, image) -> bool:
        """True when kernels reach the ImageDesc ``image`` through a dense
        staging buffer and a buffer<->image copy instead of write_imagef/read_imagef:
        - ``image_access="staged"``, or ``"auto"`` on a CPU device (PoCL
          emulates image access in software: a buffer kernel plus
          clEnqueueCopyBufferToImage, which runs at memcpy speed, measured
          1.2-2.3x faster than write_imagef there);
        - one-channel half images (PoCL 3.1 writes and reads CL_R +
          CL_HALF_FLOAT wrongly; a plain copy moves the exact bits everywhere);
        - an image no image object can hold here (a single texture of 3 lanes;
          a format the device lacks: images.unsupported): a host array of it is
          its dense buffer, so its conversions need none (a Memory of it is refused);
        - the buffer storages (``buffer``, ``image_buffer``): their memory
          is a buffer of the dense desc, which kernels read and write
          directly (``on_buffer``: no copy at all)."""
        if image.storage.on_buffer or (image.dtype.name == "f16" and image.lanes == 1) or \
                images.unsupported(self.context, image):
            return True
        return self.image_access == "staged" or (self.image_access == "auto" and self.is_cpu)

    def _staged_pair(self, src, dst) -> bool:
        image = src if src.is_image else dst if dst.is_image else None
        return image is not None and self.staged(image)

    # -- the device conversion ---------------------------------------------------------------
    def _launch(self, kernel, src, dst, wait_for=None) -> cl.Event:
        if isinstance(kernel, ByteCopy):   # a byte copy and a zero tail: no program
            count, total = kernel.count, kernel.total
            events = [cl.enqueue_copy(self.queue, dst, src, byte_count=count,
                                      wait_for=wait_for or None)]
            if total > count:
                events.append(cl.enqueue_fill_buffer(self.queue, dst, np.uint8(0), count,
                                                     total - count, wait_for=wait_for or None))
            return cl.enqueue_marker(self.queue, wait_for=events)
        knl = programs.kernel(self.context, kernel.source)
        with _LAUNCH_LOCK:  # the kernel object is shared: its args are set per launch
            programs.set_args(knl, (src, dst, *kernel.args))
            return cl.enqueue_nd_range_kernel(self.queue, knl, kernel.launch, kernel.local,
                                              wait_for=wait_for or None)

    def run_kernel(self, source: str, name: str, global_size, args, wait_for=None,
                   local_size=None) -> cl.Event:
        """Launch kernel ``name`` of ``source`` (built once per context and
        cached) over ``global_size`` work items (in groups of ``local_size``,
        None: the device's choice) with ``args``: how the compute kernels of
        runtime/compute and the transform stage run, under the same launch lock."""
        knl = programs.kernel(self.context, source, name)
        with _LAUNCH_LOCK:
            programs.set_args(knl, args)
            return cl.enqueue_nd_range_kernel(self.queue, knl, tuple(global_size), local_size,
                                              wait_for=wait_for or None)

    def enqueue(self, src, src_mem, dst, dst_mem, zero_first: bool = False,
                aliased: bool = False, dense: bool = False, wait_for=()) -> cl.Event | None:
        """One move on device memory: write dst's footprint in ``dst_mem`` (a
        cl.Buffer, or a cl.Image for an image side) from ``src_mem``.
        ``zero_first`` also zeroes the rest of a buffer's span (a fresh
        output); ``aliased``: the same buffer and desc on both sides (rewrites
        the padding, keeps the data); ``dense``: an image side is a cl.Buffer
        holding the image's dense desc, not an image object (always so for
        the buffer storages, ``buffer`` and ``image_buffer``). ``wait_for``:
        events its commands wait for."""
        if src.is_zero or dst.is_zero:
            return None
        staged = self._staged_pair(src, dst)
        wait = self._zero_rest(dst_mem, dst.memory) if zero_first and not dst.is_image else []
        wait += list(wait_for)
        kernel = plan(src, dst, staged=staged or dense, aliased=aliased)
        image = src if src.is_image else dst
        if not staged or dense or image.storage.on_buffer:   # a buffer storage is its buffer
            return self._launch(kernel, src_mem, dst_mem, wait)
        with self.staging(image.memory.size) as stage:
            if dst.is_image:
                event = self._launch(kernel, src_mem, stage, wait)
                return cl.enqueue_copy(self.queue, dst_mem, stage, offset=0,
                                       origin=images.origin(dst), region=images.region(dst),
                                       wait_for=[event])
            wait.append(cl.enqueue_copy(self.queue, stage, src_mem, offset=0,
                                        origin=images.origin(src), region=images.region(src),
                                        wait_for=wait or None))
            return self._launch(kernel, stage, dst_mem, wait)

    def _zero_rest(self, dst_buf, dst) -> list:
        """For a fresh output: zero dst's whole span where the kernel will not
        write all of it (gaps, offset0, a submemory's neighbours); the events
        to wait for."""
        if dst.is_dense and dst.offset0 == 0:
            return []
        return [cl.enqueue_fill_buffer(self.queue, dst_buf, np.uint8(0), 0,
                                       dst.span_bytes)]

    def convert_storage(self, src, src_storage, dst, dst_storage, fresh: bool) -> None:
        steps = conversion.stages(src, dst)
        if len(steps) == 1:
            self.enqueue(src, src_storage, dst, dst_storage)
        elif steps[1].inverse:   # the inverse transform runs on the host
            self.write(dst_storage, dst, self.convert(src, dst, self.read(src_storage, src)))
        elif not (src.is_zero or dst.is_zero):   # move, forward transform, move: on the device
            first, step, last = steps
            kernel = transform_kernel.render(step.transform, step.src.dims)
            placed = self.new_buffer(kernel.total * 4)
            if first.src == first.dst:   # already the plain f32 tensor: read in place
                logical, event = src_storage, None
            else:
                logical = self.new_buffer(math.prod(step.src.dims) * 4)
                event = self.enqueue(first.src, src_storage, first.dst, logical)
            event = transform_kernel.launch(self, kernel, logical, placed,
                                            [event] if event is not None else None)
            self.enqueue(last.src, placed, last.dst, dst_storage,
                         wait_for=[event] if event is not None else ())

    def apply(self, step, data) -> np.ndarray:
        """A forward transform stage as one kernel (runtime/opencl/transform.py)
        on the host arrays; the inverse on the host, as every engine runs it."""
        if step.inverse:
            return super().apply(step, data)
        kernel = transform_kernel.render(step.transform, step.src.dims)
        values = np.ascontiguousarray(data).reshape(-1)
        if values.dtype != np.float32:
            values = dtypes.convert(values, "f32")
        if kernel.total == 0:
            return np.zeros(0, np.float32)
        out, dst_buf = self._output(None, (kernel.total,), np.float32)
        event = transform_kernel.launch(self, kernel, self._host_buffer(values, mf.READ_ONLY),
                                        dst_buf)
        return self._read_back(dst_buf, out, event)

    # -- frames: the frame kernel (runtime/opencl/frame.py) is a move from the frame's bytes --
    def from_frame(self, frame, dst, data, out=None) -> np.ndarray:
        return self.move(frame, dst, data, out)

    def frame_storage(self, frame, src, src_storage, dst, dst_storage, fresh: bool) -> None:
        self.enqueue(frame, src_storage, dst, dst_storage)

    # -- host arrays ---------------------------------------------------------------------------
    # On a CPU device the kernels work on the host arrays themselves
    # (USE_HOST_PTR, then a map for coherency): at 1x64x512x512 f32 a host
    # call took 125 ms with an upload and a download copy, 55 ms without.
    # Where the engine stages images anyway, a host image array is exactly the
    # staging buffer's contents, so no image object is made at all. ``out``
    # (checked by runtime.api: C-contiguous, writable, the result's shape and
    # dtype) is then the kernel's destination itself.
    def move(self, src, dst, data, out=None) -> np.ndarray:
        shape = host_shape(dst)
        if src.is_zero or dst.is_zero or math.prod(shape) == 0:
            return _zeros(out, shape, dst.dtype.np)
        arr = np.ascontiguousarray(data)
        staged = self._staged_pair(src, dst)
        if src.is_image and not staged:
            src_mem = images.create(self.context, src, self.storage_limits, mf.READ_ONLY,
                                    hostbuf=arr.reshape(src.array_shape))
        else:
            src_mem = self._host_buffer(arr, mf.READ_ONLY)
        if dst.is_image and not staged:
            out = np.empty(shape, dtype=dst.dtype.np) if out is None else out
            image = images.create(self.context, dst, self.storage_limits, mf.WRITE_ONLY)
            event = self._launch(plan(src, dst), src_mem, image)
            cl.enqueue_copy(self.queue, out, image, origin=images.origin(dst),
                            region=images.region(dst), wait_for=[event])
            return out
        out, dst_buf = self._output(out, shape, dst.dtype.np)
        wait = [] if dst.is_image else self._zero_rest(dst_buf, dst)
        event = self._launch(plan(src, dst, staged=staged), src_mem, dst_buf, wait)
        return self._read_back(dst_buf, out, event)

    def _host_buffer(self, arr: np.ndarray, flags) -> cl.Buffer:
        arr = arr.reshape(-1)
        if self.host_in_place and arr.flags.c_contiguous:
            return cl.Buffer(self.context, flags | mf.USE_HOST_PTR, hostbuf=arr)
        return self.new_buffer(arr.nbytes, np.ascontiguousarray(arr), flags)

    def _read_back(self, buf: cl.Buffer, out: np.ndarray, event) -> np.ndarray:
        """``out`` holding ``buf`` once ``event`` (the last command writing it) is done."""
        wait = [event] if event is not None else None
        if self.host_in_place:  # out is the buffer's memory: a map makes the kernel's writes visible
            mapped, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ, 0,
                                              out.shape, out.dtype, wait_for=wait)
            mapped.base.release(self.queue).wait()
            return out
        cl.enqueue_copy(self.queue, out, buf, wait_for=wait)
        return out

    def _output(self, out, shape, dtype) -> tuple[np.ndarray, cl.Buffer]:
        """The result array (``out``, or a new one) and the buffer kernels write it through."""
        if out is None:
            out = np.empty(shape, dtype=dtype)
        return out, self._host_buffer(out, mf.WRITE_ONLY) if self.host_in_place else \
            self.new_buffer(out.nbytes)

    # -- tiles: the whole image's dense buffer on the device, cut by rectangle copies --------
    def to_tiles(self, src, dst, data, tile_plan):
        if dst.transform is not None:
            return super().to_tiles(src, dst, data, tile_plan)
        return tiles.to_tiles(self, src, dst, np.ascontiguousarray(data).reshape(-1), tile_plan)

    def from_tiles(self, src, parts, tile_plan, dst):
        if src.transform is not None:
            return super().from_tiles(src, parts, tile_plan, dst)
        return tiles.from_tiles(self, src, parts, tile_plan, dst)


def _zeros(out, shape, dtype) -> np.ndarray:
    """The result of a conversion with nothing to convert: all zero."""
    if out is None:
        return np.zeros(shape, dtype=dtype)
    out[...] = 0
    return out


# -- the process-wide engine, and one engine per caller's context ------------------------------
_DEFAULT: OpenCLEngine | None = None
_AVAILABLE: bool | None = None
_WHY_NOT = ""
_DEFAULT_LOCK = threading.RLock()  # first calls from many threads make one engine


def available() -> bool:
    """True when an OpenCL device with image support can be used (checked
    once); when not, ``why_not()`` says why."""
    global _AVAILABLE, _WHY_NOT
    with _DEFAULT_LOCK:
        if _AVAILABLE is None:
            try:
                _AVAILABLE = default().image_support
            except (cl.Error, ClayoutError, RuntimeError, OSError) as exc:
                _AVAILABLE, _WHY_NOT = False, str(exc).splitlines()[0] if str(exc) else \
                    type(exc).__name__
        return _AVAILABLE


def why_not() -> str:
    """Why ``available()`` said no ('' when it said yes or was not asked)."""
    return _WHY_NOT


def default() -> OpenCLEngine:
    """The process-wide engine: PYOPENCL_CTX's device, else the first device
    with image support (GPUs first); ``shared`` of its context and queue."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = register(OpenCLEngine())
        return _DEFAULT


def shared(context: cl.Context, queue: cl.CommandQueue | None = None) -> OpenCLEngine:
    """The one engine of ``context`` (its own queue), or of (context, ``queue``)."""
    return engine_of(context, queue, OpenCLEngine)


def engine_for(engine, data, queue) -> OpenCLEngine:
    """The engine a Memory on the caller's device object or queue lives on:
    ``engine`` (None: the process-wide one) when it has that context (and
    queue), else the ``shared`` engine of the context (and queue)."""
    if queue is not None and not isinstance(queue, cl.CommandQueue):
        raise ClayoutError(f"queue= takes a pyopencl CommandQueue, got {type(queue).__name__}")
    context = queue.context if queue is not None else data.context
    eng = _DEFAULT if engine is None else engine   # (a default not made yet is on no context)
    if isinstance(eng, OpenCLEngine) and eng.context == context and \
            (queue is None or eng.queue == queue):
        return eng
    return shared(context, queue)
