"""Which OpenCL device the opencl engine runs on, and what it is.

``PYOPENCL_CTX`` names a platform[:device] (pyopencl's own rule); without it
the first device with image support is taken, GPUs first; no device at all
is one clear line that names the cpu engine.

A :class:`Device` is the engine's device as a frozen record: its context
and queue, the facts the engine's choices depend on (type, host-unified
memory, local memory, image limits, alignments, allocation sizes), read
once, and the engine's :class:`EngineOptions`, read once from its arguments and
the environment. Everything the engine decides (runtime/opencl/moves.py:
the access, the kernel family, the host path) is a function of these.
"""
from __future__ import annotations

import functools

import os
from dataclasses import dataclass, field

import pyopencl as cl

from ..algebra.storage import Limits
from ..errors import ClayoutError
from ..settings import env_choice, env_int

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


def pick_context() -> cl.Context:
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


def device_list():
    """([(platform, device, {info})] of every OpenCL device, "") or (None,
    why there is none), for ``clayout devices``."""
    try:
        platforms = cl.get_platforms()
    except Exception as exc:  # no ICD loader or platform (-1001)
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    found = []
    for p_index, plat in enumerate(platforms):
        try:
            devices = plat.get_devices()
        except Exception:
            continue
        for d_index, dev in enumerate(devices):
            info = {"type": cl.device_type.to_string(dev.type),
                    "image_support": bool(dev.image_support),
                    "image2d": (dev.image2d_max_width, dev.image2d_max_height)
                    if dev.image_support else None,
                    "max_alloc": dev.max_mem_alloc_size, "global_mem": dev.global_mem_size,
                    "fp16": "cl_khr_fp16" in dev.extensions, "version": dev.version,
                    "ctx": f"{p_index}:{d_index}",
                    "from_buffer": "cl_khr_image2d_from_buffer" in dev.extensions}
            found.append((plat.name, dev.name, info))
    return found, "" if found else "no OpenCL device found"


def read_limits(dev: cl.Device) -> Limits:
    """The device's limits for every storage (runtime.algebra.storage)."""
    def get(name, default=0):
        try:
            return int(getattr(dev, name))
        except (cl.Error, AttributeError):
            return default
    return Limits((get("image2d_max_width"), get("image2d_max_height")),
                  (get("image3d_max_width"), get("image3d_max_height"),
                   get("image3d_max_depth")),
                  get("image_max_array_size"), get("image_max_buffer_size"),
                  get("max_mem_alloc_size") or None)


# -- the device as the engine's choices see it ------------------------------------------------
IMAGE_ACCESS = ("auto", "direct", "staged")
HOST_PATHS = ("auto", "driver", "staging")
DEFAULT_SPECIALIZE_BYTES = 16 << 20
DEFAULT_SPECIALIZE_AFTER = 8


@dataclass(frozen=True)
class EngineOptions:
    """What an engine's caller (or the environment) chose, read once when the
    engine is made: ``image_access`` (auto, direct, staged), ``host_in_place``
    (None: the device decides), ``tiled`` (the tiled kernel family:
    CLAYOUT_OPENCL_TILED=0|1, None: the device decides), ``pool_bytes``
    (CLAYOUT_OPENCL_POOL_BYTES: the most bytes of device memory kept for
    reuse; None: a quarter of the device's global memory), ``host_path``
    (CLAYOUT_OPENCL_HOST_PATH: how a host array that is not pinned crosses to
    a discrete device: auto, driver (the driver's copy from pageable memory)
    or staging (pipelined in chunks through pinned stages)), ``chunk_bytes``
    (CLAYOUT_OPENCL_CHUNK_BYTES: a pipelined transfer's chunk; None: the
    plan's), and the thresholds of a baked program (CLAYOUT_SPECIALIZE_BYTES,
    CLAYOUT_SPECIALIZE_AFTER)."""
    image_access: str = "auto"
    host_in_place: bool | None = None
    tiled: bool | None = None
    pool_bytes: int | None = None
    host_path: str = "auto"
    specialize_bytes: int = DEFAULT_SPECIALIZE_BYTES
    specialize_after: int = DEFAULT_SPECIALIZE_AFTER
    chunk_bytes: int | None = None

    @classmethod
    def read(cls, image_access: str = "auto", host_in_place: bool | None = None,
             tiled: bool | None = None) -> "EngineOptions":
        """The options of an engine made with these arguments (None: the
        environment's, else the device decides)."""
        if image_access not in IMAGE_ACCESS:
            raise ClayoutError(f"image_access {image_access!r}; allowed: "
                               f"{', '.join(IMAGE_ACCESS)}")
        if tiled is None:
            chosen = env_choice("CLAYOUT_OPENCL_TILED", "", ("0", "1"))
            tiled = None if chosen == "" else chosen == "1"
        return cls(image_access, None if host_in_place is None else bool(host_in_place),
                   bool(tiled) if tiled is not None else None,
                   env_int("CLAYOUT_OPENCL_POOL_BYTES", None, "a byte count (0 or more)",
                           minimum=0),
                   env_choice("CLAYOUT_OPENCL_HOST_PATH", "auto", HOST_PATHS),
                   env_int("CLAYOUT_SPECIALIZE_BYTES", DEFAULT_SPECIALIZE_BYTES, "a byte count"),
                   env_int("CLAYOUT_SPECIALIZE_AFTER", DEFAULT_SPECIALIZE_AFTER,
                           "a count of calls"),
                   env_int("CLAYOUT_OPENCL_CHUNK_BYTES", None, "a byte count (1 or more)",
                           minimum=1))


def _info(dev: cl.Device, name: str, default=0):
    try:
        return getattr(dev, name)
    except (cl.Error, AttributeError):
        return default


@dataclass(frozen=True, eq=False)
class Device:
    """One engine's device, context and queue, and the facts read from them
    once. ``kind``: "cpu", "gpu" or "other"; ``host_unified``: the device
    works on host memory (a CPU device, or CL_DEVICE_HOST_UNIFIED_MEMORY);
    ``local_memory``: bytes of __local memory, ``local_is_dedicated``: of
    type CL_LOCAL (on-chip), not emulated in global memory;
    ``alignments``: CL_DEVICE_IMAGE_PITCH_ALIGNMENT and
    _BASE_ADDRESS_ALIGNMENT in pixels (None where they cannot be read)."""
    context: cl.Context
    queue: cl.CommandQueue
    cl_device: cl.Device
    name: str
    platform: str
    kind: str
    host_unified: bool
    in_order: bool
    image_support: bool
    limits: Limits
    max_alloc: int
    global_memory: int
    local_memory: int
    local_is_dedicated: bool
    max_work_group: int
    extensions: frozenset
    alignments: tuple[int, int] | None
    options: EngineOptions = field(default_factory=EngineOptions)

    @classmethod
    def open(cls, context: cl.Context, queue: cl.CommandQueue, options: EngineOptions,
             alignments=None) -> "Device":
        """The record of ``queue``'s device (``alignments``: a function
        reading the image alignments of a cl.Device, runtime.opencl.shared)."""
        dev = queue.device
        kind = "gpu" if dev.type & cl.device_type.GPU else "cpu" \
            if dev.type & cl.device_type.CPU else "other"
        in_order = not (queue.properties
                        & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return cls(context, queue, dev, dev.name.strip(), dev.platform.name.strip(), kind,
                   kind == "cpu" or bool(_info(dev, "host_unified_memory", False)), in_order,
                   bool(dev.image_support), read_limits(dev),
                   int(dev.max_mem_alloc_size), int(_info(dev, "global_mem_size")),
                   int(_info(dev, "local_mem_size")),
                   _info(dev, "local_mem_type", 0) == cl.device_local_mem_type.LOCAL,
                   int(_info(dev, "max_work_group_size", 1)),
                   frozenset(str(_info(dev, "extensions", "")).split()),
                   None if alignments is None else alignments(dev), options)

    @property
    def host_in_place(self) -> bool:
        """Kernels work on the caller's host arrays in place (USE_HOST_PTR)
        instead of copies on the device: the option, else where the device
        shares host memory."""
        chosen = self.options.host_in_place
        return self.host_unified if chosen is None else chosen

    @functools.cached_property
    def upload_queue(self) -> cl.CommandQueue:
        """A second in-order queue on the device's context, for the uploads of
        calls that do not wait (``wait=False``): the caller's array is
        consumed when the call returns, so its upload is waited for, and on
        this queue it waits only for itself, while the main queue goes on
        with the previous call's kernel and read back (a discrete device
        copies both ways and computes at once). Made at its first use."""
        return cl.CommandQueue(self.context, self.cl_device)

    @property
    def stages_images(self) -> bool:
        """Kernels reach images through a dense buffer and one copy (the
        option ``staged``, or ``auto`` on a CPU device, which emulates image
        access in software), else with read_image*/write_image*."""
        access = self.options.image_access
        return access == "staged" or (access == "auto" and self.kind == "cpu")

    @property
    def pool_bytes(self) -> int:
        """The most bytes of device memory kept for reuse between calls."""
        chosen = self.options.pool_bytes
        return self.global_memory // 4 if chosen is None else chosen

    @property
    def key(self) -> tuple:
        """What tells this device record from another in a cache: the
        device, its context and queue, and the options (a context's address
        may be reused once it is gone, never by another device's facts)."""
        return (self.platform, self.name, self.context.int_ptr, self.queue.int_ptr,
                self.options)

    @property
    def fp16(self) -> bool:
        return "cl_khr_fp16" in self.extensions

    def describe(self) -> str:
        """'NVIDIA H100 (NVIDIA CUDA; gpu, discrete)', for messages."""
        where = "host-unified" if self.host_unified else "discrete"
        return f"{self.name} ({self.platform}; {self.kind}, {where})"
