"""Engines: where a conversion runs (DESIGN §4).

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
"""
from __future__ import annotations

import logging
import os

import numpy as np

from . import cpu, reference
from .desc import MemoryDesc
from .errors import ClayoutError
from .image import ImageLayout

log = logging.getLogger("clayout")
NAMES = ("auto", "cpu", "opencl", "reference")


def plain(desc_dims, dtype) -> MemoryDesc:
    return MemoryDesc(desc_dims, dtype)


def _as_dims(data: np.ndarray, desc: MemoryDesc, dims, engine) -> tuple[np.ndarray, MemoryDesc]:
    """The same logical tensor viewed with other dims (a row-major logical
    reshape): free when the desc allows it, else through a plain copy."""
    if desc.dims == tuple(dims):
        return data, desc
    try:
        return data, desc.reshape(dims)
    except ClayoutError:
        flat = engine.reorder(data, desc, plain(desc.dims, desc.dtype))
        return flat, plain(dims, desc.dtype)


class HostEngine:
    """An engine made of one reorder function over host arrays; images are
    dense buffers of their layout's desc."""

    def __init__(self, name: str, reorder_fn):
        self.name = name
        self._reorder = reorder_fn

    def reorder(self, data, src: MemoryDesc, dst: MemoryDesc) -> np.ndarray:
        return self._reorder(data, src, dst)

    def to_image(self, data, layout: ImageLayout, src: MemoryDesc, dtype) -> np.ndarray:
        image = layout.desc(src.dims, dtype)
        shape = layout.array_shape(src.dims)
        data, src = _as_dims(data, src, image.dims, self)
        return self._reorder(data, src, image).reshape(shape)

    def from_image(self, image_array, layout: ImageLayout, dst: MemoryDesc) -> np.ndarray:
        image = layout.desc(dst.dims, image_array.dtype)
        if dst.dims == image.dims:
            return self._reorder(image_array.reshape(-1), image, dst)
        flat = self._reorder(image_array.reshape(-1), image, plain(image.dims, dst.dtype))
        return self._reorder(flat, plain(dst.dims, dst.dtype), dst)

    def __repr__(self) -> str:
        return f"<clayout engine {self.name}>"


class ReferenceEngine(HostEngine):
    """The reference evaluates §2's pixel formulas for named image layouts."""

    def __init__(self):
        super().__init__("reference", reference.reorder)

    def to_image(self, data, layout, src, dtype):
        return reference.to_image(data, layout, src, dtype)

    def from_image(self, image_array, layout, dst):
        return reference.from_image(image_array, layout, dst)


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
    if not isinstance(name, str):
        return name  # an engine object (e.g. an OpenCL engine on the user's context)
    if name not in NAMES:
        raise ClayoutError(f"unknown engine {name!r}; allowed: {', '.join(NAMES)}")
    if name == "auto":
        name = "opencl" if opencl_available() else "cpu"
        log.info("clayout: engine auto chose %s", name)
    if name == "opencl":
        try:
            from .opencl import engine as cl_engine
        except ImportError as exc:
            raise ClayoutError(f"engine 'opencl' is not available: {exc}") from None
        return cl_engine.default()
    return _ENGINES[name]
