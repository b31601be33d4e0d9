"""The opencl engine: the engine contract (runtime/contract.py) kept on an
OpenCL device through pyopencl, as a façade that wires ``device`` (a Device:
the context, queue and facts read once, with the engine's options),
``memory`` (a DeviceMemory: every buffer and image the engine makes, its
pool, Memory storage) and ``launcher`` (runtime/opencl/launcher.py: what
enqueues on the device, applying the move plans of runtime/opencl/moves.py;
an enqueue decides nothing). The modules that do the work take the
launcher: host.py (host arrays), frame.py, output.py, tiles.py,
transform.py.

``OpenCLEngine(context=None, queue=None, device=None, image_access="auto",
host_in_place=None, tiled=None)`` binds one context and queue (the user's
own, or ``PYOPENCL_CTX``'s / the first device with images).
``image_access``: how kernels reach images: ``direct`` (write_imagef /
read_imagef), ``staged`` (a dense buffer plus a buffer<->image copy), or
``auto`` (staged on CPU devices, else direct). ``host_in_place``: kernels
work on the caller's host arrays in place (USE_HOST_PTR, and a map to read
the result) instead of copying them to and from device memory; None
(default): where the device shares host memory (a CPU device, or
CL_DEVICE_HOST_UNIFIED_MEMORY). ``tiled``: moves that transpose run the
tiled kernel family (True) or the direct one (False); None (default):
``CLAYOUT_OPENCL_TILED``, else the device's facts (runtime/opencl/moves.py).

Host arrays
reach the kernel in place on a device that shares host memory, else through
pooled device memory, the write, the kernel and the read chained by events;
Memory storage (``convert_storage``) never leaves the device. A forward
transform stage (a Winograd filter's U) is one more kernel between two
moves.

Threads: one engine serves any number of threads, each getting the
single-threaded bits. Order: every command names what it reads and writes
and waits for clayout's earlier commands on those objects
(runtime/opencl/events.py), on any queue; a caller's commands are ordered
by ``wait_for`` and the events the doors give back. A hot shape's baked
program is built off the calling thread (runtime/opencl/baking.py).
"""
from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl

from ..algebra import conversion
from ..contract import Engine
from ..errors import ClayoutError
from . import events, host, tiles
from . import output as output_kernel
from . import transform as transform_kernel
from .contexts import engine_of, live, register, track  # noqa: F401  (live: re-exported)
from .device import Device, EngineOptions, pick_context
from .launcher import Launcher
from .memory import DeviceMemory
from .moves import access_of, move_plan
from .shared import alignments


class OpenCLEngine(Engine):
    name = "opencl"
    enqueues = True   # wait=False host calls leave the kernel and read back running

    def __init__(self, context: cl.Context | None = None, queue: cl.CommandQueue | None = None,
                 device: cl.Device | None = None, image_access: str = "auto",
                 host_in_place: bool | None = None, tiled: bool | None = None):
        """The options as the module docstring says."""
        options = EngineOptions.read(image_access, host_in_place, tiled)
        if queue is not None:
            context = queue.context
        if context is None:
            context = cl.Context([device]) if device is not None else pick_context()
        queue = queue if queue is not None else cl.CommandQueue(context)
        self.device = Device.open(context, queue, options, alignments)
        self.memory = DeviceMemory(self.device)
        self.launcher = Launcher(self.device, self.memory)
        self.domain = ("opencl", context.int_ptr)
        track(self)   # waited for at exit

    context = property(lambda self: self.device.context)
    queue = property(lambda self: self.device.queue)
    limits = property(lambda self: self.device.limits)
    image_support = property(lambda self: self.device.image_support)

    def __repr__(self) -> str:
        return f"<clayout engine opencl: {self.device.name} ({self.device.platform})>"

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

    def staged(self, image) -> bool:
        """True when kernels reach the ImageDesc ``image`` through its dense
        buffer (staged or dense access: runtime/opencl/moves.py)."""
        return access_of(image, self.device)[0] != "direct"

    # -- host arrays (runtime/opencl/host.py), frames, tiles, outputs --------------------------
    def move(self, src, dst, data, out=None, wait: bool = True):
        return host.move(self.launcher, src, dst, data, out, wait)

    def from_frame(self, frame, dst, data, out=None, wait: bool = True):
        return host.move(self.launcher, frame, dst, data, out, wait)   # the frame's kernel

    def apply(self, step, data) -> np.ndarray:
        """A forward transform stage as one kernel; the inverse on the host."""
        if step.inverse:
            return super().apply(step, data)
        return transform_kernel.on_host(self.launcher, step, data)

    def host_input(self, side, array: np.ndarray):
        return host.held(self.launcher, side, array)

    def to_tiles(self, src, dst, data, tile_plan):
        if dst.transform is not None:
            return super().to_tiles(src, dst, data, tile_plan)
        return tiles.to_tiles(self.launcher, src, dst, np.ascontiguousarray(data).reshape(-1),
                              tile_plan)

    def from_tiles(self, src, parts, tile_plan, dst):
        if src.transform is not None:
            return super().from_tiles(src, parts, tile_plan, dst)
        return tiles.from_tiles(self.launcher, src, parts, tile_plan, dst)

    def read_output(self, side, data, rule, out=None, wait_for=()):
        """``data``: the output's device storage on this engine's context."""
        return output_kernel.read(self.launcher, side, data, rule, out, wait_for)

    # -- Memory storage: the device memory's; conversions between storages enqueued ------------
    def convert_storage(self, src, src_storage, dst, dst_storage, fresh: bool,
                        wait_for=()) -> cl.Event | None:
        """The conversion between two storages, enqueued after ``wait_for``;
        the event of its last command."""
        steps = conversion.stages(src, dst)
        if len(steps) == 1:
            return self.launcher.enqueue(src, src_storage, dst, dst_storage, wait_for=wait_for)
        if steps[1].inverse:   # the inverse transform runs on the host
            if wait_for:   # the read and the write wait for clayout's own commands
                cl.wait_for_events(list(wait_for))
            self.write(dst_storage, dst, self.convert(src, dst, self.read(src_storage, src)))
            return events.last_write(dst_storage)
        if src.is_zero or dst.is_zero:
            return None
        return transform_kernel.on_device(self.launcher, steps, src_storage, dst_storage,
                                          wait_for)

    def storage_executor(self, src, dst):
        """A conversion between two storages planned once (its move plan)."""
        if len(conversion.stages(src, dst)) != 1 or src.is_zero or dst.is_zero:
            return super().storage_executor(src, dst)
        p, apply_plan = move_plan(src, dst, self.device), self.launcher.apply_plan
        return lambda src_storage, dst_storage, wait_for=(): \
            apply_plan(p, src_storage, dst_storage, list(wait_for))

    def frame_storage(self, frame, src, src_storage, dst, dst_storage, fresh: bool,
                      wait_for=()) -> cl.Event | None:
        return self.launcher.enqueue(frame, src_storage, dst, dst_storage, wait_for=wait_for)

    def attach(self, side, data):
        storage = self.memory.attach(side, data)
        if storage is not None and not side.is_image and side.has_fixed_elements:
            self.launcher.enqueue(side, storage, side, storage, aliased=True)   # padding
        return storage

    def allocate(self, side, zeroed: bool = True):
        return self.memory.allocate(side, zeroed)

    def read(self, storage, side) -> np.ndarray:
        return self.memory.read(storage, side)

    def write(self, storage, side, array, wait: bool = True) -> None:
        self.memory.write(storage, side, array, wait)

    def map(self, storage, side, write: bool = True):
        return self.memory.map(storage, side, write)

    def same(self, a, b) -> bool:
        return self.memory.same(a, b)

    def view_buffer(self, side, buffer, row_pitch=None):
        return self.memory.view_buffer(side, buffer, row_pitch)

    def pitch_alignment(self) -> int:
        return self.memory.pitch_alignment()

    def empty_pinned(self, shape, dtype) -> np.ndarray:
        return self.memory.pinned_array(shape, dtype)

    def last_write(self, storage):
        return events.last_write(storage)

    def close(self) -> None:
        """Release the pooled device memory (the engine stays usable)."""
        self.memory.close()


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
