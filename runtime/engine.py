"""Engines: where a conversion runs (docs/engines.md, docs/architecture.md).

Every engine keeps one contract (runtime/contract.py): one conversion
between two sides, and the storage of Memory objects. The engines:

* ``cpu``: the fast path on the host, compiled moves or numpy (runtime/cpu/;
  ``runtime.cpu.engine.ENGINE``, on CLAYOUT_CPU's path, read when it is made);
* ``reference``: the slow, obvious evaluation of the formulas (runtime/reference/);
* ``opencl``: kernels rendered from templates (runtime/opencl/), when
  pyopencl finds a device;
* ``auto``: ``opencl`` when a device with image support exists that shares
  host memory (a CPU device, an integrated GPU), else ``cpu``: for host
  arrays on a discrete GPU the bus costs more than the conversion.

The default engine of the Python API is ``cpu`` unless ``CLAYOUT_ENGINE``
names another: a host array in, a host array out is what the cpu engine does
best; Memory objects keep their own engine.

Threads: every engine object, the process-wide defaults included, may be
used from any number of threads at once, and each call returns exactly the
bits a single-threaded run returns (runtime/opencl/engine.py says what the
opencl engine serializes, and what a user's out-of-order queue means).
"""
from __future__ import annotations

import logging

import numpy as np

from .algebra.catalog import image_layout
from .algebra.checks import as_ints, round_up
from .algebra.layout import ImageDesc
from .contract import Engine
from .cpu import engine as cpu_engine
from .errors import ClayoutError
from .reference.engine import ENGINE as REFERENCE
from .settings import setting

log = logging.getLogger("clayout")
NAMES = ("auto", "cpu", "opencl", "reference")


def is_device_object(data) -> bool:
    """True for a caller's device object (a pyopencl Buffer or Image), told
    by its module so that nothing outside runtime/opencl imports pyopencl."""
    return type(data).__module__.split(".")[0] == "pyopencl"


def engine_for(engine, data=None, queue=None) -> Engine:
    """The engine a Memory lives on: the device's when ``data`` is the
    caller's device object (a pyopencl Buffer or Image) or a ``queue`` is
    given (``engine`` where it is on that context and queue, else the one
    engine every Memory on that context, or (context, queue), shares:
    runtime.opencl.engine.shared), else ``engine`` (a name or an engine
    object)."""
    if queue is not None or is_device_object(data):
        try:
            from .opencl.engine import engine_for as device_engine
        except ImportError as exc:
            raise ClayoutError(f"a device buffer, image or queue needs the opencl engine: "
                               f"{exc}") from None
        return device_engine(None if engine is None else get(engine), data, queue)
    return get(engine)


def device_pitch_alignment(device) -> int:
    """CL_DEVICE_IMAGE_PITCH_ALIGNMENT in pixels of a pyopencl Device (0: none)."""
    from .opencl.shared import device_pitch_alignment as read
    return read(device)


def device_memory_lines() -> list[str]:
    """What each OpenCL engine of this process keeps for reuse: its device
    memory pool (runtime/opencl/pool.py), for ``clayout caches``; the
    process-wide engine's where none was made yet (a new process: empty)."""
    if not opencl_available():
        return ["device memory pools: no OpenCL device here"]
    from .opencl import engine as cl_engine
    cl_engine.default()
    lines = []
    for eng in cl_engine.live():
        st = eng.memory.stats()
        lines.append(f"device memory pool of {eng.device.describe()}: {st['objects']} free "
                     f"objects, {st['bytes']} bytes of a {st['bound']}-byte bound "
                     f"(CLAYOUT_OPENCL_POOL_BYTES); made {st['made']}, reused {st['reused']}, "
                     f"released {st['released']}; engine.close() releases them")
    return lines


def opencl_available() -> bool:
    """True when the opencl engine can run here: it loads and finds a device
    with image support (``opencl_missing`` says why not)."""
    return opencl_missing() is None


def get(name=None) -> Engine:
    """The engine named ``name`` (None: $CLAYOUT_ENGINE or 'cpu'), or
    ``name`` itself when it is an engine object."""
    if name is None:
        name = setting("CLAYOUT_ENGINE") or "cpu"
    if isinstance(name, Engine):   # e.g. an OpenCL engine on the user's context
        return name
    if not isinstance(name, str):
        raise ClayoutError(f"engine {name!r}: expected an engine name ({', '.join(NAMES)}) "
                           "or an engine object (runtime.engine.Engine)")
    if name not in NAMES:
        raise ClayoutError(f"unknown engine {name!r}; allowed: {', '.join(NAMES)}")
    if name == "auto":
        name = "opencl" if auto_fallback() is None else "cpu"
        log.info("clayout: engine auto chose %s", name)
    if name == "opencl":
        try:
            from .opencl import engine as cl_engine
        except ImportError as exc:
            raise ClayoutError(f"engine 'opencl' is not available: {exc}; engine='cpu' "
                               "(--engine cpu) works without OpenCL") from None
        return cl_engine.default()
    return REFERENCE if name == "reference" else cpu_engine.ENGINE


def choose_engine(name) -> tuple[Engine, str]:
    """(engine, sentence): the engine ``name`` gives and why ('auto' says what it chose)."""
    if name is None:
        name = setting("CLAYOUT_ENGINE") or "cpu"
        why = "CLAYOUT_ENGINE" if setting("CLAYOUT_ENGINE") is not None else "the default"
        eng = get(name)
        return eng, f"{eng.name} ({why})"
    if name != "auto":
        eng = get(name)
        return eng, f"{eng.name} (asked for)"
    fallback = auto_fallback()
    if fallback is not None:
        return get("cpu"), f"cpu (auto: {fallback})"
    eng = get("opencl")
    return eng, f"opencl (auto: found an OpenCL device with image support: {eng.device.name})"


def opencl_missing() -> str | None:
    """Why the opencl engine cannot run here (it cannot be loaded or
    started, or there is no device with image support), None when it can."""
    try:
        from .opencl import engine as cl_engine
    except ImportError as exc:
        return f"the OpenCL engine could not be loaded: {exc}"
    try:
        ok = cl_engine.available()
    except Exception as exc:
        return f"the OpenCL engine failed to start: {exc}"
    if not ok:
        return cl_engine.why_not() or "no OpenCL device with image support was found"
    return None


def auto_fallback() -> str | None:
    """Why 'auto' falls back to cpu, None when it chooses opencl: the
    opencl engine cannot run here (``opencl_missing``), or its device is
    discrete, where a host array crosses the bus twice and the cpu engine
    converts host arrays faster (docs/engines.md, "auto"). A Memory on a
    device keeps its own engine whatever 'auto' says."""
    missing = opencl_missing()
    if missing is not None:
        return missing
    from .opencl import engine as cl_engine
    return cl_engine.default().auto_refusal()


# -- the row pitch a device needs (docs/engines.md, "Row pitch") -------------------------
def image_pitch(layout, dims, dtype="f32", device=None) -> int:
    """The row pitch in bytes a device needs for the 2-D image of ``layout``
    at ``dims`` over a buffer: the row's bytes rounded up to the device's
    CL_DEVICE_IMAGE_PITCH_ALIGNMENT, which OpenCL gives in pixels (so
    ``align * pixel_bytes`` bytes). ``device``: None (the default opencl
    engine's device where there is one, else no alignment), an engine, a
    pyopencl Device, or the alignment in pixels as an int (0: none)."""
    side = ImageDesc(image_layout(layout), as_ints(dims, "dims"), dtype)
    if not side.storage.views_buffer:
        raise ClayoutError(f"image_pitch: layout {side.layout.name!r} is on "
                           f"{side.storage.name} storage; a row pitch applies to layouts on "
                           "image2d storage (a 2-D image over a buffer)")
    return round_up(side.width, max(1, pitch_alignment(device))) * side.pixel_bytes


def pitch_alignment(device) -> int:
    """CL_DEVICE_IMAGE_PITCH_ALIGNMENT in pixels of ``device`` (see
    image_pitch); 0 where there is none."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, (bool, np.bool_)):
        if device < 0:
            raise ClayoutError(f"image_pitch: device={device}: an alignment in pixels is >= 0 "
                               "(0: none)")
        return int(device)
    if device is None:
        return get("opencl").pitch_alignment() if opencl_available() else 0
    if isinstance(device, Engine) or (isinstance(device, str) and device in NAMES):
        return get(device).pitch_alignment()
    if is_device_object(device):
        return device_pitch_alignment(device)
    raise ClayoutError(f"image_pitch: device={device!r}; allowed: None (the default opencl "
                       "engine's device, if any), an engine or its name, a pyopencl Device, "
                       "or an int alignment in pixels")


__all__ = ["NAMES", "get", "choose_engine", "auto_fallback", "engine_for", "is_device_object",
           "opencl_available", "opencl_missing", "device_pitch_alignment",
           "image_pitch", "pitch_alignment"]
