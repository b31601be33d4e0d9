"""The opencl engine: host arrays in, host arrays out, through pyopencl.

``OpenCLEngine(context=None, queue=None, device=None)`` binds one context
and queue (the user's own, or one chosen by ``PYOPENCL_CTX`` / the first
device with image support). It offers the engine contract of
runtime/engine.py (``reorder``, ``to_image``, ``from_image`` on host arrays,
``image_limits``) and the device-side steps Memory objects use
(``enqueue_reorder``, ``enqueue_to_image``, ``enqueue_from_image``,
``new_buffer``, ``new_image``), which never touch the host.

>>> eng = default()                                   # doctest: +SKIP
>>> eng.reorder(np.arange(4, dtype=np.float32), MemoryDesc((2, 2)),
...             MemoryDesc((2, 2), tag="ba"))         # doctest: +SKIP
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
returns. Conversions of Memory objects are
enqueued without waiting, and on such a queue nothing orders them with one
another, with ``Memory.to_numpy`` / ``map`` or with the user's own commands:
put ``cl.enqueue_barrier(queue)`` (or ``queue.finish()``) between dependent
steps, as for any command on an out-of-order queue.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np
import pyopencl as cl

from ..algebra import dtypes
from ..algebra.desc import MemoryDesc
from ..errors import ClayoutError
from ..algebra.layout import ImageLayout
from . import kernels, programs

CHANNEL_TYPES = {"f32": "FLOAT", "f16": "HALF_FLOAT", "s32": "SIGNED_INT32",
                 "s8": "SIGNED_INT8", "u8": "UNSIGNED_INT8"}
mf = cl.mem_flags
# a cl.Kernel holds its arguments and the program cache shares it between engines:
# set_args + enqueue must not interleave across threads
_LAUNCH_LOCK = threading.Lock()


class OpenCLEngine:
    name = "opencl"

    IMAGE_ACCESS = ("auto", "direct", "staged")

    def __init__(self, context: cl.Context | None = None, queue: cl.CommandQueue | None = None,
                 device: cl.Device | None = None, image_access: str = "auto"):
        """``image_access``: how kernels reach images: ``direct``
        (write_imagef / read_imagef), ``staged`` (a dense buffer plus a
        buffer<->image copy), or ``auto`` (staged on CPU devices, else direct)."""
        if image_access not in self.IMAGE_ACCESS:
            raise ClayoutError(f"image_access {image_access!r}; allowed: "
                               f"{', '.join(self.IMAGE_ACCESS)}")
        self.image_access = image_access
        if queue is not None:
            context = queue.context
        if context is None:
            context = cl.Context([device]) if device is not None else _pick_context()
        self.context = context
        self.queue = queue if queue is not None else cl.CommandQueue(context)
        dev = self.queue.device
        self.device = dev
        # capabilities, read once
        self.image_support = bool(dev.image_support)
        self.image_limits = (int(dev.image2d_max_width), int(dev.image2d_max_height))
        self.max_alloc = int(dev.max_mem_alloc_size)
        self.has_fp16 = "cl_khr_fp16" in dev.extensions
        self.is_cpu = bool(dev.type & cl.device_type.CPU)
        self.in_order = not (self.queue.properties
                             & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        self._stage: cl.Buffer | None = None
        self._stage_lock = threading.Lock()

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

    def __repr__(self) -> str:
        return f"<clayout engine opencl: {self.device.name.strip()} ({self.device.platform.name})>"

    # -- allocation ----------------------------------------------------------------
    def new_buffer(self, nbytes: int, hostbuf: np.ndarray | None = None,
                   flags=mf.READ_WRITE) -> cl.Buffer:
        if nbytes > self.max_alloc:
            raise ClayoutError(f"a buffer of {nbytes} bytes is over the device's max allocation "
                               f"{self.max_alloc} bytes ({self.device.name.strip()})")
        if hostbuf is not None:
            return cl.Buffer(self.context, flags | mf.COPY_HOST_PTR, hostbuf=hostbuf)
        return cl.Buffer(self.context, flags, size=max(1, nbytes))

    def image_format(self, dtype, lanes: int) -> cl.ImageFormat:
        dt = dtypes.image_dtype(dtype)
        order = cl.channel_order.RGBA if lanes == 4 else cl.channel_order.R
        return cl.ImageFormat(order, getattr(cl.channel_type, CHANNEL_TYPES[dt.name]))

    def new_image(self, layout: ImageLayout, dims, dtype, hostbuf=None,
                  flags=mf.READ_WRITE) -> cl.Image:
        """An image for ``layout`` over ``dims``; refused before allocation when
        over the device's 2D limits."""
        layout.check_fits(dims, *self.image_limits)
        width, height = layout.image_shape(dims)
        fmt = self.image_format(dtype, layout.lanes)
        if hostbuf is not None:
            return cl.create_image(self.context, flags | mf.COPY_HOST_PTR, fmt,
                                   shape=(width, height), hostbuf=hostbuf)
        return cl.create_image(self.context, flags, fmt, shape=(width, height))

    # -- device-side conversions (nothing crosses to the host) -----------------------
    def _launch(self, plan: kernels.Kernel, src, dst, wait_for=None) -> cl.Event:
        if plan.copy is not None:   # a byte copy and a zero tail: no program
            count, total = plan.copy
            events = [cl.enqueue_copy(self.queue, dst, src, byte_count=count,
                                      wait_for=wait_for or None)]
            if total > count:
                events.append(cl.enqueue_fill_buffer(self.queue, dst, np.uint8(0), count,
                                                     total - count, wait_for=wait_for or None))
            return cl.enqueue_marker(self.queue, wait_for=events)
        knl = programs.kernel(self.context, plan.source)
        with _LAUNCH_LOCK:  # the kernel object is shared: its args are set per launch
            knl.set_args(src, dst, *plan.args)
            return cl.enqueue_nd_range_kernel(self.queue, knl, plan.launch, plan.local,
                                              wait_for=wait_for or None)

    def enqueue_reorder(self, src_buf, src: MemoryDesc, dst_buf, dst: MemoryDesc,
                        zero_first: bool = False, in_place: bool = False) -> cl.Event | None:
        """Write dst's footprint in ``dst_buf`` from ``src_buf``. ``zero_first``
        also zeroes the rest of dst's span (a fresh output); ``in_place``: the
        same buffer and desc on both sides (rewrites padding, keeps data)."""
        if src.dims != dst.dims:
            raise ClayoutError(f"reorder needs equal dims, got {src.dims} and {dst.dims}")
        if src.is_zero or dst.is_zero:
            return None
        wait = self._zero_rest(dst_buf, dst) if zero_first else []
        return self._launch(kernels.plan_reorder(src, dst, aliased=in_place), src_buf, dst_buf,
                            wait)

    def _zero_rest(self, dst_buf, dst: MemoryDesc) -> list:
        """For a fresh output: zero dst's whole span where the kernel will not
        write all of it (gaps, offset0, a submemory's neighbours); the events
        to wait for."""
        if dst.is_dense and dst.offset0 == 0:
            return []
        return [cl.enqueue_fill_buffer(self.queue, dst_buf, np.uint8(0), 0,
                                       dst.span * dst.dtype.itemsize)]

    def staged(self, layout: ImageLayout, dtype) -> bool:
        """Images the kernels reach through a dense staging buffer and a
        buffer<->image copy instead of write_imagef/read_imagef:
        - ``image_access="staged"``, or ``"auto"`` on a CPU device (PoCL
          emulates image access in software: a buffer kernel plus
          clEnqueueCopyBufferToImage, which runs at memcpy speed, measured
          1.2-2.3x faster than write_imagef there);
        - one-channel half images (PoCL 3.1 writes and reads CL_R +
          CL_HALF_FLOAT wrongly; a plain copy moves the exact bits everywhere)."""
        if dtypes.dtype(dtype).name == "f16" and layout.lanes == 1:
            return True
        return self.image_access == "staged" or (self.image_access == "auto" and self.is_cpu)

    def enqueue_to_image(self, src_buf, src: MemoryDesc, image, layout: ImageLayout,
                         dtype) -> cl.Event | None:
        if src.is_zero:
            return None
        if not self.staged(layout, dtype):
            return self._launch(kernels.plan_to_image(src, layout, dtype), src_buf, image)
        width, height = layout.image_shape(src.dims)
        with self.staging(layout.desc(src.dims, dtype).size) as stage:
            event = self._launch(kernels.plan_to_image(src, layout, dtype, staged=True),
                                 src_buf, stage)
            return cl.enqueue_copy(self.queue, image, stage, offset=0, origin=(0, 0),
                                   region=(width, height), wait_for=[event])

    def enqueue_from_image(self, image, layout: ImageLayout, dtype, dst_buf, dst: MemoryDesc,
                           zero_first: bool = False) -> cl.Event | None:
        if dst.is_zero:
            return None
        wait = self._zero_rest(dst_buf, dst) if zero_first else []
        if not self.staged(layout, dtype):
            return self._launch(kernels.plan_from_image(layout, dtype, dst), image, dst_buf, wait)
        width, height = layout.image_shape(dst.dims)
        with self.staging(layout.desc(dst.dims, dtype).size) as stage:
            wait.append(cl.enqueue_copy(self.queue, stage, image, offset=0, origin=(0, 0),
                                        region=(width, height)))
            return self._launch(kernels.plan_from_image(layout, dtype, dst, staged=True),
                                stage, dst_buf, wait)

    # -- the engine contract: host arrays ------------------------------------------------
    # On a CPU device the kernels work on the host arrays themselves
    # (USE_HOST_PTR, then a map for coherency): at 1x64x512x512 f32 a host
    # call took 125 ms with an upload and a download copy, 55 ms without.
    # Where the engine stages images anyway, a host image array is exactly the
    # staging buffer's contents, so no image object is made at all. ``out``
    # (checked by runtime.api: C-contiguous, writable, the result's shape and
    # dtype) is then the kernel's destination itself.
    def _host_buffer(self, arr: np.ndarray, flags) -> cl.Buffer:
        arr = arr.reshape(-1)
        if self.is_cpu and arr.flags.c_contiguous:
            return cl.Buffer(self.context, flags | mf.USE_HOST_PTR, hostbuf=arr)
        return self.new_buffer(arr.nbytes, np.ascontiguousarray(arr), flags)

    def _read_back(self, buf: cl.Buffer, out: np.ndarray, event) -> np.ndarray:
        """``out`` holding ``buf`` once ``event`` (the last command writing it) is done."""
        wait = [event] if event is not None else None
        if self.is_cpu:  # out is the buffer's memory: a map makes the kernel's writes visible
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
        return out, self._host_buffer(out, mf.WRITE_ONLY) if self.is_cpu else \
            self.new_buffer(out.nbytes)

    def reorder(self, flat_src, src: MemoryDesc, dst: MemoryDesc, out=None) -> np.ndarray:
        if src.is_zero or dst.is_zero:
            return _zeros(out, dst.span, dst.dtype.np)
        out, dst_buf = self._output(out, dst.span, dst.dtype.np)
        event = self.enqueue_reorder(self._host_buffer(flat_src, mf.READ_ONLY), src, dst_buf,
                                     dst, zero_first=True)
        return self._read_back(dst_buf, out, event)

    def to_image(self, flat_src, layout: ImageLayout, src: MemoryDesc, image_dtype,
                 out=None) -> np.ndarray:
        dt = dtypes.image_dtype(image_dtype)
        shape = layout.array_shape(src.dims)
        if math.prod(shape) == 0 or src.is_zero:
            return _zeros(out, shape, dt.np)
        src_buf = self._host_buffer(flat_src, mf.READ_ONLY)
        if self.staged(layout, dt):
            out, buf = self._output(out, shape, dt.np)
            event = self._launch(kernels.plan_to_image(src, layout, dt, staged=True), src_buf, buf)
            return self._read_back(buf, out, event)
        out = np.empty(shape, dtype=dt.np) if out is None else out
        image = self.new_image(layout, src.dims, dt, flags=mf.WRITE_ONLY)
        event = self.enqueue_to_image(src_buf, src, image, layout, dt)
        width, height = layout.image_shape(src.dims)
        cl.enqueue_copy(self.queue, out, image, origin=(0, 0), region=(width, height),
                        wait_for=[event])
        return out

    def from_image(self, image_array, layout: ImageLayout, dst: MemoryDesc,
                   out=None) -> np.ndarray:
        if dst.is_zero:
            return _zeros(out, dst.span, dst.dtype.np)
        arr = np.ascontiguousarray(image_array)
        dt = dtypes.image_dtype(dtypes.of_array(arr))
        out, dst_buf = self._output(out, dst.span, dst.dtype.np)
        if self.staged(layout, dt):
            event = self._launch(kernels.plan_from_image(layout, dt, dst, staged=True),
                                 self._host_buffer(arr, mf.READ_ONLY), dst_buf,
                                 self._zero_rest(dst_buf, dst))
            return self._read_back(dst_buf, out, event)
        image = self.new_image(layout, dst.dims, dt, hostbuf=arr, flags=mf.READ_ONLY)
        event = self.enqueue_from_image(image, layout, dt, dst_buf, dst, zero_first=True)
        return self._read_back(dst_buf, out, event)


def _zeros(out, shape, dtype) -> np.ndarray:
    """The result of a conversion with nothing to convert: all zero."""
    if out is None:
        return np.zeros(shape, dtype=dtype)
    out[...] = 0
    return out


# -- device choice -----------------------------------------------------------------------
CPU_HINT = "engine='cpu' (--engine cpu) works without OpenCL"


def _all_devices() -> list:
    """Every OpenCL device of every platform; no platform at all is an empty list
    (the ICD loader reports that as an error)."""
    try:
        platforms = cl.get_platforms()
    except (cl.Error, RuntimeError, OSError):
        return []
    found = []
    for platform in platforms:
        try:
            found.extend(platform.get_devices())
        except (cl.Error, RuntimeError):
            continue
    return found


def describe_devices(devices) -> str:
    """'PoCL cpu-x86 (CPU, images), ...' for messages; 'none' when empty."""
    def one(d):
        kind = ("GPU" if d.type & cl.device_type.GPU else "CPU" if d.type & cl.device_type.CPU
                else cl.device_type.to_string(d.type))
        return (f"{d.platform.name.strip()}: {d.name.strip()} ({kind}, "
                f"{'images' if d.image_support else 'no image support'})")
    return "; ".join(one(d) for d in devices) or "none"


def _devices_with_images():
    found = [d for d in _all_devices() if d.image_support]
    # GPUs first: the CPU device is the fallback
    return sorted(found, key=lambda d: not d.type & cl.device_type.GPU)


def _pick_context() -> cl.Context:
    """The context of the device PYOPENCL_CTX names, else of the first device
    with image support (GPUs first); one clear line when there is none."""
    chosen = os.environ.get("PYOPENCL_CTX")
    if chosen is not None or os.environ.get("PYOPENCL_TEST"):
        try:
            context = cl.create_some_context(interactive=False)
        except (cl.Error, RuntimeError, ValueError, IndexError) as exc:
            raise ClayoutError(
                f"PYOPENCL_CTX={chosen!r} names no usable OpenCL device "
                f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); devices "
                f"found: {describe_devices(_all_devices())}; give a platform[:device] index or "
                f"name from that list, or {CPU_HINT}") from None
        device = context.devices[0]
        if not device.image_support:
            raise ClayoutError(f"PYOPENCL_CTX={chosen!r} picks {device.name.strip()}, which has "
                               f"no image support; devices found: "
                               f"{describe_devices(_all_devices())}; {CPU_HINT}")
        return context
    devices = _devices_with_images()
    if not devices:
        every = _all_devices()
        what = ("no OpenCL platform or device found" if not every else
                f"no OpenCL device with image support (found: {describe_devices(every)})")
        raise ClayoutError(f"{what}; {CPU_HINT} (on Debian: apt-get install pocl-opencl-icd)")
    return cl.Context([devices[0]])


_DEFAULT: OpenCLEngine | None = None
_AVAILABLE: bool | None = None
_DEFAULT_LOCK = threading.RLock()  # first calls from many threads make one engine


_WHY_NOT = ""


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
    with image support (GPUs first)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = OpenCLEngine()
        return _DEFAULT
