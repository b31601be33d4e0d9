"""Which OpenCL device the opencl engine runs on.

``PYOPENCL_CTX`` names a platform[:device] (pyopencl's own rule); without it
the first device with image support is taken, GPUs first; no device at all
is one clear line that names the cpu engine.
"""
from __future__ import annotations

import os

import pyopencl as cl

from ..algebra.storage import Limits
from ..errors import ClayoutError

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


def storage_limits(dev: cl.Device) -> Limits:
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
