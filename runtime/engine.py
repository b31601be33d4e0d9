"""Engines: where a conversion runs (docs/engines.md).

An engine turns physical host arrays into physical host arrays for three
operations; every engine gives the same bits.

* ``reference``: the slow, obvious evaluation of the formulas (runtime.reference);
* ``cpu``: the numpy fast path (runtime.cpu);
* ``opencl``: kernels rendered from templates (runtime.opencl), registered
  when pyopencl finds a device;
* ``auto``: ``opencl`` when a device with image support exists, else ``cpu``.

The default engine of the Python API is ``cpu`` unless ``CLAYOUT_ENGINE``
names another: a host array in, a host array out is what the numpy path does
best; Memory objects keep their own engine.

Threads: every engine object, the process-wide defaults included, may be
used from any number of threads at once, and each call returns exactly the
bits a single-threaded run returns (runtime/opencl/engine.py says what the
opencl engine serializes, and what a user's out-of-order queue means).
"""
from __future__ import annotations

import logging
import os

import numpy as np

from .cpu import engine as cpu
from .reference import engine as reference
from .algebra.desc import MemoryDesc
from .errors import ClayoutError
from .algebra.layout import ImageLayout

# runtime.opencl (pyopencl, mako) is imported inside the functions that ask for
# it, so that the cpu and reference engines work without those packages.

log = logging.getLogger("clayout")
NAMES = ("auto", "cpu", "opencl", "reference")


def _as_dims(data: np.ndarray, desc: MemoryDesc, dims, engine) -> tuple[np.ndarray, MemoryDesc]:
    """The same logical tensor viewed with other dims (a row-major logical
    reshape): free when the desc allows it, else through a plain copy."""
    if desc.dims == tuple(dims):
        return data, desc
    try:
        return data, desc.reshape(dims)
    except ClayoutError:
        flat = engine.reorder(data, desc, MemoryDesc(desc.dims, desc.dtype))
        return flat, MemoryDesc(dims, desc.dtype)


class HostEngine:
    """An engine made of one reorder function over host arrays; images are
    dense buffers of their layout's desc. ``reorder_fn(data, src, dst, out)``
    writes into ``out`` (dst.span elements, contiguous) when it is given.

    Every method takes ``out``: the result's array, written whatever it held
    (runtime.api checks it), else a new one. Stateless, so any number of
    threads may share it."""

    def __init__(self, name: str, reorder_fn):
        self.name = name
        self._reorder = reorder_fn

    def reorder(self, data, src: MemoryDesc, dst: MemoryDesc, out=None) -> np.ndarray:
        return self._reorder(data, src, dst, out)

    def to_image(self, data, layout: ImageLayout, src: MemoryDesc, dtype,
                 out=None) -> np.ndarray:
        image = layout.desc(src.dims, dtype)
        shape = layout.array_shape(src.dims)
        data, src = _as_dims(data, src, image.dims, self)
        flat = self._reorder(data, src, image, None if out is None else out.reshape(-1))
        return flat.reshape(shape) if out is None else out

    def from_image(self, image_array, layout: ImageLayout, dst: MemoryDesc,
                   out=None) -> np.ndarray:
        image = layout.desc(dst.dims, image_array.dtype)
        if dst.dims == image.dims:
            return self._reorder(image_array.reshape(-1), image, dst, out)
        flat = self._reorder(image_array.reshape(-1), image, MemoryDesc(image.dims, dst.dtype),
                             None)
        return self._reorder(flat, MemoryDesc(dst.dims, dst.dtype), dst, out)

    def __repr__(self) -> str:
        return f"<clayout engine {self.name}>"


def _copied(result: np.ndarray, out) -> np.ndarray:
    """``result`` written into ``out`` when one is given: the reference builds
    its arrays from index tables, so it only copies into ``out`` at the end."""
    if out is None:
        return result
    out.reshape(-1)[...] = result.reshape(-1)
    return out


class ReferenceEngine(HostEngine):
    """The reference evaluates the pixel formulas of docs/layouts.md for named image layouts."""

    def __init__(self):
        super().__init__("reference",
                         lambda data, src, dst, out: _copied(reference.reorder(data, src, dst),
                                                             out))

    def to_image(self, data, layout, src, dtype, out=None):
        return _copied(reference.to_image(data, layout, src, dtype), out)

    def from_image(self, image_array, layout, dst, out=None):
        return _copied(reference.from_image(image_array, layout, dst), out)


_ENGINES = {"cpu": HostEngine("cpu", cpu.reorder), "reference": ReferenceEngine()}


def opencl_available() -> bool:
    try:
        from .opencl import engine as cl_engine
    except ImportError:
        return False
    return cl_engine.available()


def get(name=None):
    """The engine named ``name`` (None: $CLAYOUT_ENGINE or 'cpu')."""
    if name is None:
        name = os.environ.get("CLAYOUT_ENGINE", "cpu")
    if not isinstance(name, str):  # an engine object (e.g. an OpenCL engine on the user's context)
        if not all(callable(getattr(name, m, None)) for m in ("reorder", "to_image", "from_image")):
            raise ClayoutError(f"engine {name!r}: expected an engine name ({', '.join(NAMES)}) "
                               "or an engine object with reorder, to_image and from_image")
        return name
    if name not in NAMES:
        raise ClayoutError(f"unknown engine {name!r}; allowed: {', '.join(NAMES)}")
    if name == "auto":
        name = "opencl" if opencl_available() else "cpu"
        log.info("clayout: engine auto chose %s", name)
    if name == "opencl":
        try:
            from .opencl import engine as cl_engine
        except ImportError as exc:
            raise ClayoutError(f"engine 'opencl' is not available: {exc}; engine='cpu' "
                               "(--engine cpu) works without OpenCL") from None
        return cl_engine.default()
    return _ENGINES[name]


def choose_engine(name):
    """(engine, sentence): the engine ``name`` gives and why ('auto' says what it chose)."""
    if name is None:
        name = os.environ.get("CLAYOUT_ENGINE", "cpu")
        why = "CLAYOUT_ENGINE" if "CLAYOUT_ENGINE" in os.environ else "the default"
        eng = get(name)
        return eng, f"{getattr(eng, 'name', name)} ({why})"
    if name != "auto":
        eng = get(name)
        return eng, f"{getattr(eng, 'name', name)} (asked for)"
    try:
        from .opencl import engine as cl_engine
    except ImportError as exc:
        return get("cpu"), f"cpu (auto: the OpenCL engine could not be loaded: {exc})"
    try:
        ok = cl_engine.available()
    except Exception as exc:
        return get("cpu"), f"cpu (auto: the OpenCL engine failed to start: {exc})"
    if not ok:
        return get("cpu"), f"cpu (auto: {cl_engine.why_not() or 'no OpenCL device with image support was found'})"
    eng = get("opencl")
    device = getattr(getattr(eng, "device", None), "name", None)
    return eng, "opencl (auto: found an OpenCL device with image support" + \
        (f": {device.strip()})" if device else ")")
