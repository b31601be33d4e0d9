"""The opencl engine: the engine contract (runtime/contract.py) kept on an
OpenCL device through pyopencl, as a façade over ``device`` (a Device: the
context, queue and facts read once, with the engine's options), ``memory``
(a DeviceMemory: every buffer and image the engine makes, its pool, Memory
storage) and the move plans (runtime/opencl/moves.py: an enqueue applies a
plan; it decides nothing).

``OpenCLEngine(context=None, queue=None, device=None, image_access="auto",
host_in_place=None, tiled=None)`` binds one context and queue (the user's
own, or ``PYOPENCL_CTX``'s / the first device with images). Host arrays
(``move``, runtime/opencl/host.py) reach the kernel in place on a device
that shares host memory, else through pooled device memory, the write, the
kernel and the read chained by events; Memory storage (``convert_storage``)
never leaves the device. A forward transform stage (a Winograd filter's U)
is one more kernel between two moves (runtime/opencl/transform.py).

Threads: one engine serves any number of threads, each getting the
single-threaded bits; only a cached kernel's ``set_args`` with its enqueue
is serialized (the program cache shares a ``cl.Kernel`` between engines).
Order: every command names what it reads and writes and waits for clayout's
earlier commands on those objects (runtime/opencl/events.py), on any queue;
a caller's commands are ordered by ``wait_for`` and the events the doors
give back. A hot shape's baked program is built off the calling thread
(runtime/opencl/baking.py).
"""
from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl

from ..algebra import conversion, dtypes
from ..contract import Engine
from ..errors import ClayoutError
from . import frame as frame_c
from . import events, host, images, programs, tiles
from . import output as output_kernel
from . import transform as transform_kernel
from .contexts import engine_of, live, register, track  # noqa: F401  (live: re-exported)
from .device import IMAGE_ACCESS, Device, EngineOptions, pick_context
from .memory import DeviceMemory
from .moves import access_of, host_path, move_plan
from .plan import ByteCopy
from .shared import alignments

mf = cl.mem_flags
# a cl.Kernel holds its arguments and the program cache shares it between engines:
# set_args + enqueue must not interleave across threads
_LAUNCH_LOCK = threading.Lock()


class OpenCLEngine(Engine):
    name = "opencl"
    IMAGE_ACCESS = IMAGE_ACCESS

    def __init__(self, context: cl.Context | None = None, queue: cl.CommandQueue | None = None,
                 device: cl.Device | None = None, image_access: str = "auto",
                 host_in_place: bool | None = None, tiled: bool | None = None):
        """``image_access``: how kernels reach images: ``direct``
        (write_imagef / read_imagef), ``staged`` (a dense buffer plus a
        buffer<->image copy), or ``auto`` (staged on CPU devices, else direct).
        ``host_in_place``: kernels work on the caller's host arrays in place
        (USE_HOST_PTR, and a map to read the result) instead of copying them
        to and from device memory; None (default): where the device shares
        host memory (a CPU device, or CL_DEVICE_HOST_UNIFIED_MEMORY).
        ``tiled``: moves that transpose run the tiled kernel family (True) or
        the direct one (False); None (default): ``CLAYOUT_OPENCL_TILED``,
        else the device's facts (runtime/opencl/moves.py)."""
        options = EngineOptions.read(image_access, host_in_place, tiled)
        if queue is not None:
            context = queue.context
        if context is None:
            context = cl.Context([device]) if device is not None else pick_context()
        queue = queue if queue is not None else cl.CommandQueue(context)
        self.device = Device.open(context, queue, options, alignments)
        self.memory = DeviceMemory(self.device)
        self.domain = ("opencl", context.int_ptr)
        track(self)   # waited for at exit

    # -- the device's facts, as the contract and callers ask them ----------------------------
    context = property(lambda self: self.device.context)
    queue = property(lambda self: self.device.queue)
    device_name = property(lambda self: self.device.name)
    image_support = property(lambda self: self.device.image_support)
    limits = property(lambda self: self.device.limits)
    image_access = property(lambda self: self.device.options.image_access)
    host_in_place = property(lambda self: self.device.host_in_place)
    is_cpu = property(lambda self: self.device.kind == "cpu")
    in_order = property(lambda self: self.device.in_order)

    def __repr__(self) -> str:
        return f"<clayout engine opencl: {self.device.name} ({self.device.platform})>"

    # -- what Memory and runtime.engine ask of an engine (runtime/contract.py) -------------
    def view_buffer(self, side, buffer, row_pitch=None):
        return self.memory.view_buffer(side, buffer, row_pitch)

    def pitch_alignment(self) -> int:
        return self.memory.pitch_alignment()

    def image_from_buffer(self) -> str | None:
        return self.memory.image_from_buffer()

    def image_alignments(self) -> tuple[int, int] | None:
        return self.device.alignments

    def empty_pinned(self, shape, dtype) -> np.ndarray:
        return self.memory.pinned_array(shape, dtype)

    def auto_refusal(self) -> str | None:
        """Why engine 'auto' takes cpu rather than this engine for host
        arrays (None: it takes this one): a discrete device, where a host
        array crosses the bus to the device and back (an H100: a 64 MiB
        round trip is 2.5 ms pinned and 14.2 ms pageable, while 16 host
        cores convert it in 2.6 ms)."""
        if self.device.host_unified:
            return None
        return (f"{self.device.name} is a discrete device: a host array would cross the bus "
                "to it and back, which costs more than the cpu engine's conversion; Memory "
                "objects on it still convert there")

    def close(self) -> None:
        """Release the pooled device memory (the engine stays usable)."""
        self.memory.close()

    def last_write(self, storage):
        return events.last_write(storage)

    def staged(self, image) -> bool:
        """True when kernels reach the ImageDesc ``image`` through its dense
        buffer (staged or dense access: runtime/opencl/moves.py)."""
        return access_of(image, self.device)[0] != "direct"

    # -- the device conversion ---------------------------------------------------------------
    def launch(self, kernel, src, dst, wait_for=None, extra=()) -> cl.Event:
        """Enqueue a planned kernel (or byte copy) from ``src`` into ``dst``;
        ``extra``: the buffers a kernel takes after dst (a frame's taps).
        It waits for what it must follow on ``src`` and ``dst`` and for
        ``wait_for`` (runtime/opencl/events.py), and is recorded on them."""
        queue = self.device.queue
        wait = events.after((src, *extra), (dst,), wait_for) or None
        if isinstance(kernel, ByteCopy):   # a byte copy and a zero tail: no program
            count, total = kernel.count, kernel.total
            parts = [cl.enqueue_copy(queue, dst, src, byte_count=count, wait_for=wait)]
            if total > count:
                parts.append(cl.enqueue_fill_buffer(queue, dst, np.uint8(0), count,
                                                    total - count, wait_for=wait))
            return events.done(cl.enqueue_marker(queue, wait_for=parts), (src,), (dst,))
        knl = programs.kernel(self.device.context, kernel.source)
        with _LAUNCH_LOCK:  # the kernel object is shared: its args are set per launch
            programs.set_args(knl, (src, dst, *extra, *kernel.args))
            event = cl.enqueue_nd_range_kernel(queue, knl, kernel.launch, kernel.local,
                                               wait_for=wait)
        return events.done(event, (src, *extra), (dst,))

    def run_plan(self, p, src, dst, wait_for=None) -> cl.Event:
        """Enqueue a move plan's kernel from ``src`` into ``dst`` (a frame's
        kernel also takes the frame's taps buffer, runtime/opencl/frame.py)."""
        if not p.frame:
            return self.launch(p.kernel, src, dst, wait_for)
        with frame_c.taps(self, p.src) as taps:   # leased: back to the pool once enqueued
            return self.launch(p.kernel, src, dst, wait_for, (taps,))

    def run_kernel(self, source: str, name: str, global_size, args, wait_for=None,
                   local_size=None, reads=(), writes=()) -> cl.Event:
        """Launch kernel ``name`` of ``source`` (built once per context and
        cached) over ``global_size`` work items (in groups of ``local_size``,
        None: the device's choice) with ``args``: how the compute kernels of
        runtime/compute and the transform stage run, under the same launch
        lock. ``reads`` / ``writes``: the memory objects it reads and writes
        (ordered and recorded as every command is: runtime/opencl/events.py)."""
        knl = programs.kernel(self.device.context, source, name)
        wait = events.after(reads, writes, wait_for) or None
        with _LAUNCH_LOCK:
            programs.set_args(knl, args)
            event = cl.enqueue_nd_range_kernel(self.device.queue, knl, tuple(global_size),
                                               local_size, wait_for=wait)
        return events.done(event, reads, writes)

    def enqueue(self, src, src_mem, dst, dst_mem, zero_first: bool = False,
                aliased: bool = False, dense: bool = False, wait_for=()) -> cl.Event | None:
        """One move on device memory: write dst's footprint in ``dst_mem`` (a
        cl.Buffer, or a cl.Image for an image side) from ``src_mem``, as
        the move's plan says. ``zero_first`` also zeroes the rest of a
        buffer's span (a fresh output); ``aliased``: the same buffer and
        desc on both sides (rewrites the padding, keeps the data);
        ``dense``: an image side is a cl.Buffer holding the image's dense
        desc, not an image object (always so for the buffer storages).
        ``wait_for``: events its first commands wait for; the staging
        buffer of a staged image goes back to the pool at once, its next
        lease ordered after these commands by their events."""
        if src.is_zero or dst.is_zero:
            return None
        p = move_plan(src, dst, self.device, aliased, dense)
        wait = self.zero_rest(dst_mem, dst.memory) if zero_first and not dst.is_image else []
        return self.apply_plan(p, src_mem, dst_mem, wait + list(wait_for or ()), dense)

    def apply_plan(self, p, src_mem, dst_mem, wait=(), dense: bool = False):
        """Enqueue the move plan ``p`` (runtime/opencl/moves.py) from
        ``src_mem`` into ``dst_mem`` after the events ``wait``: its kernel,
        with a pooled staging buffer and a buffer<->image copy where it
        stages; the event of the last command."""
        image, dst = p.image, p.dst
        if dense or p.access in ("direct", "dense", "buffers"):
            return self.run_plan(p, src_mem, dst_mem, wait)
        queue = self.device.queue
        region = dict(origin=images.origin(image), region=images.region(image))
        with self.memory.lease_buffer(image.memory.size) as stage:
            if dst.is_image:
                self.run_plan(p, src_mem, stage, wait)
                copy = cl.enqueue_copy(queue, dst_mem, stage, offset=0,
                                       wait_for=events.after((stage,), (dst_mem,)), **region)
                return events.done(copy, (stage,), (dst_mem,))
            copy = cl.enqueue_copy(queue, stage, src_mem, offset=0,
                                   wait_for=events.after((src_mem,), (stage,), wait) or None,
                                   **region)
            events.done(copy, (src_mem,), (stage,))
            return self.run_plan(p, stage, dst_mem, wait)

    def storage_executor(self, src, dst):
        """``run(src_storage, dst_storage, wait_for=())``: a conversion
        between two storages of this device planned once (its move plan
        looked up once; a transform's stages as ``convert_storage``)."""
        if len(conversion.stages(src, dst)) != 1 or src.is_zero or dst.is_zero:
            return super().storage_executor(src, dst)
        p = move_plan(src, dst, self.device)

        def run(src_storage, dst_storage, wait_for=()):
            return self.apply_plan(p, src_storage, dst_storage, list(wait_for))
        return run

    def zero_rest(self, dst_buf, dst) -> list:
        """For a fresh output: zero dst's whole span where the kernel will not
        write all of it (gaps, offset0, a submemory's neighbours); the events
        to wait for."""
        if dst.is_dense and dst.offset0 == 0:
            return []
        fill = cl.enqueue_fill_buffer(self.device.queue, dst_buf, np.uint8(0), 0,
                                      dst.span_bytes,
                                      wait_for=events.after((), (dst_buf,)) or None)
        return [events.done(fill, (), (dst_buf,))]

    def convert_storage(self, src, src_storage, dst, dst_storage, fresh: bool,
                        wait_for=()) -> cl.Event | None:
        """The conversion between two storages of this engine, enqueued (its
        commands ordered by events: runtime/opencl/events.py, after
        ``wait_for``); the event of its last command."""
        steps = conversion.stages(src, dst)
        if len(steps) == 1:
            return self.enqueue(src, src_storage, dst, dst_storage, wait_for=wait_for)
        if steps[1].inverse:   # the inverse transform runs on the host
            if wait_for:   # the read and the write wait for clayout's own commands
                cl.wait_for_events(list(wait_for))
            self.write(dst_storage, dst, self.convert(src, dst, self.read(src_storage, src)))
            return events.last_write(dst_storage)
        if src.is_zero or dst.is_zero:
            return None
        return transform_kernel.on_device(self, steps, src_storage, dst_storage, wait_for)

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
        out = np.empty(kernel.total, np.float32)
        path = host_path(self.device)
        with host.array_in(self, values, path) as (src_buf, wait), \
                host.array_out(self, out, path) as (dst_buf, back):
            back(transform_kernel.launch(self, kernel, src_buf, dst_buf, wait or None))
        return out

    # -- outputs: one kernel reads the output's layout, only the result comes back ----------
    def read_output(self, side, data, rule, out=None, wait_for=()):
        """``data``: the output's device storage on this engine's context
        (runtime/opencl/output.py)."""
        return output_kernel.read(self, side, data, rule, out, wait_for)

    def host_input(self, side, array: np.ndarray):
        return host.held(self, side, array)

    # -- frames: the frame kernel (runtime/opencl/frame.py) is a move from the frame's bytes --
    def from_frame(self, frame, dst, data, out=None) -> np.ndarray:
        return self.move(frame, dst, data, out)

    def frame_storage(self, frame, src, src_storage, dst, dst_storage, fresh: bool,
                      wait_for=()) -> cl.Event | None:
        return self.enqueue(frame, src_storage, dst, dst_storage, wait_for=wait_for)

    # -- host arrays: runtime/opencl/host.py ------------------------------------------------
    def move(self, src, dst, data, out=None) -> np.ndarray:
        return host.move(self, src, dst, data, out)

    # -- tiles: the whole image's dense buffer on the device, cut by rectangle copies --------
    def to_tiles(self, src, dst, data, tile_plan):
        if dst.transform is not None:
            return super().to_tiles(src, dst, data, tile_plan)
        return tiles.to_tiles(self, src, dst, np.ascontiguousarray(data).reshape(-1), tile_plan)

    def from_tiles(self, src, parts, tile_plan, dst):
        if src.transform is not None:
            return super().from_tiles(src, parts, tile_plan, dst)
        return tiles.from_tiles(self, src, parts, tile_plan, dst)

    # -- the storage of Memory objects: the device memory's ----------------------------------
    def allocate(self, side, zeroed: bool = True):
        return self.memory.allocate(side, zeroed)

    def attach(self, side, data):
        storage = self.memory.attach(side, data)
        if storage is not None and not side.is_image and side.has_fixed_elements:
            self.enqueue(side, storage, side, storage, aliased=True)   # padding restored
        return storage

    def read(self, storage, side) -> np.ndarray:
        return self.memory.read(storage, side)

    def write(self, storage, side, array, wait: bool = True) -> None:
        self.memory.write(storage, side, array, wait)

    def map(self, storage, side, write: bool = True):
        return self.memory.map(storage, side, write)

    def same(self, a, b) -> bool:
        return self.memory.same(a, b)

    def image_view(self, storage, side):
        return self.memory.image_view(storage, side)


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
