"""The public call the benchmarks time on a host array (the cpu rows of
runtime.bench and the host_out column of runtime.opencl.bench): a module of
its own below both, so that neither benchmark imports the other for it.
"""
from __future__ import annotations

import numpy as np

from . import api, hostarray
from .desc import MemoryDesc


def public_call(x: np.ndarray, src: MemoryDesc, target, engine):
    """A call of runtime.reorder (``target`` a MemoryDesc) or runtime.to_image
    (``target`` an ImageLayout) on host array ``x`` (src's physical elements)
    writing into one reused ``out=`` array."""
    if isinstance(target, MemoryDesc):
        out = np.empty(target.span, target.dtype.np)
        return lambda: api.reorder(x, src, target, engine=engine, out=out)
    layout = target
    tag = next(t for t in ("nchw", "nhwc", "oihw") if MemoryDesc(src.dims, tag=t) == src)
    arr = x.reshape(hostarray.physical_shape(src))
    out = np.empty(layout.array_shape(src.dims), src.dtype.np)
    return lambda: api.to_image(arr, layout, src=tag, engine=engine, out=out)
