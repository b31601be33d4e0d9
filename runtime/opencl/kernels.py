"""Plan one conversion kernel from the two descriptors and render it.

Each kind of conversion (buffer->buffer, buffer->image, image->buffer) is
planned here: its source side, whether its numbers are baked in, and a cache
keyed by exactly what changes the kernel. runtime.opencl.render builds the
kernel itself (what each work item computes, the launch geometry, the source).

**Generic or specialized.** The numbers that depend on the dims (sizes,
strides, offsets, halo, fill, image width) are kernel arguments, so one
program serves every shape of a conversion *family*: the structure of both
sides (axis order, blocking, strided or not, halo or not, image layout), the
dtype pair, the image access (direct or staged), the vector width, the axis
the launch tiles along, the run length of the loads and the index type. A
conversion of at least ``specialize_bytes()`` (16 MiB by default,
``CLAYOUT_SPECIALIZE_BYTES``) bakes its numbers in instead: one program for
that shape, whose divisions by constants the compiler turns into
multiplications; small tensors (a model's weights) share programs.

>>> k = plan_reorder(MemoryDesc((1, 8, 2, 2), tag="nchw"), MemoryDesc((1, 8, 2, 2), tag="nhwc"))
>>> k.vector, k.sizes, k.generic
(8, (1, 2, 2), True)
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict

from .. import dtypes
from ..c_index import image_names, logical_names, unchanged_dims
from ..desc import MemoryDesc
from ..errors import ClayoutError
from ..image import ImageLayout, image_layout
from .render import Kernel, Source, render_kernel

DEFAULT_SPECIALIZE_BYTES = 16 << 20


def specialize_bytes() -> int:
    """Conversions of at least this many bytes bake their numbers in
    (``CLAYOUT_SPECIALIZE_BYTES``; 0 bakes everything, a negative value nothing)."""
    env = os.environ.get("CLAYOUT_SPECIALIZE_BYTES")
    if env is None:
        return DEFAULT_SPECIALIZE_BYTES
    try:
        return int(env)
    except ValueError:
        raise ClayoutError(f"CLAYOUT_SPECIALIZE_BYTES={env!r} is not a byte count") from None


def _bake(*descs: MemoryDesc) -> bool:
    """The one place that chooses a specialized program over the generic one."""
    limit = specialize_bytes()
    return limit >= 0 and max(d.size for d in descs) >= limit


# -- the three kinds -------------------------------------------------------------

class LRU:
    """A bounded, thread-safe cache: least recently used entries go first."""

    def __init__(self, size: int):
        self.size = size
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, key):
        """The value of ``key`` (now most recently used), or None."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def get(self, key, make):
        """The value of ``key``, made by ``make()`` and kept when missing."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = make()
        with self._lock:
            self._data[key] = value
            while len(self._data) > max(0, self.size):
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


def cache_size(env: str, default: int) -> int:
    try:
        return int(os.environ.get(env, default))
    except ValueError:
        raise ClayoutError(f"{env}={os.environ[env]!r} is not a count") from None


PLANS = LRU(cache_size("CLAYOUT_PLAN_CACHE", 4096))


def _cached(kind, key, make) -> Kernel:
    """Plans by exactly what changes the kernel or its arguments: kind and the
    exact fields of both sides (strides too: descs equal under oneDNN's rules
    can differ in unit strides) and whether numbers are baked."""
    return PLANS.get((kind, key, specialize_bytes()), make)


def _key(desc: MemoryDesc):
    return (desc.dims, desc.dtype.name, desc.padded_dims, desc.strides, desc.inner_blks,
            desc.inner_idxs, desc.offset0, desc.halo_lower, desc.halo_upper,
            repr(desc.fill), desc.order)


def _identity(names, num):
    return list(names)


def plan_reorder(src: MemoryDesc, dst: MemoryDesc, aliased: bool = False) -> Kernel:
    """buffer ``src`` -> buffer ``dst`` (same dims). ``aliased``: src and dst
    may be the same buffer (no ``restrict``); each element is then read and
    written by the same work item, so an in-place same-desc pass is safe."""
    def make():
        source = Source(src, None, src.dims, _identity, {d: d for d in range(src.ndims)})
        return render_kernel(source, dst, None, aliased=aliased, bake=_bake(src, dst))
    return _cached("reorder", (_key(src), _key(dst), aliased), make)


def plan_to_image(src: MemoryDesc, layout: ImageLayout, image_dtype,
                  staged: bool = False) -> Kernel:
    """buffer ``src`` -> an image of ``layout`` holding ``image_dtype``; with
    ``staged`` the kernel writes the image's dense buffer instead (to be copied
    into the image with clEnqueueCopyBufferToImage)."""
    dt = dtypes.image_dtype(image_dtype)
    image = layout.desc(src.dims, dt)

    def make():
        def to_src(names, num):   # image index -> the source's logical index
            return logical_names(layout, src.dims, names, num, src.ndims)
        mapped = {g: d for d, g in unchanged_dims(layout).items() if d < src.ndims}
        source = Source(src, None, src.dims, to_src, mapped)
        return render_kernel(source, image, None if staged else layout,
                             layout.image_shape(src.dims), bake=_bake(src, image))
    return _cached("to_image", (_key(src), layout, dt.name, staged), make)


def plan_from_image(layout: ImageLayout, image_dtype, dst: MemoryDesc,
                    staged: bool = False) -> Kernel:
    """an image of ``layout`` holding ``image_dtype`` -> buffer ``dst``; with
    ``staged`` the kernel reads the image's dense buffer (copied out of the
    image with clEnqueueCopyImageToBuffer)."""
    dt = dtypes.image_dtype(image_dtype)
    image = layout.desc(dst.dims, dt)

    def make():
        bake = _bake(image, dst)
        if staged:
            def to_src(names, num):   # logical index -> the image dims' index
                return image_names(layout, dst.dims, names, num)
            mapped = {d: g for d, g in unchanged_dims(layout).items() if d < dst.ndims}
            return render_kernel(Source(image, None, image.dims, to_src, mapped), dst, None,
                                 bake=bake)
        return render_kernel(Source(image, layout, dst.dims, _identity, {}), dst, None, bake=bake)
    return _cached("from_image", (layout, dt.name, _key(dst), staged), make)


def render_source(src=None, dst=None, *, layout=None, image_dtype=None,
                  staged: bool = False) -> str:
    """The OpenCL C source of one conversion, for inspection:
    ``render_source(src_desc, dst_desc)`` (reorder),
    ``render_source(src_desc, layout=..., image_dtype=...)`` (to an image),
    ``render_source(dst=dst_desc, layout=..., image_dtype=...)`` (from an image);
    ``staged``: the buffer kernel a CPU device runs instead of the image access."""
    return plan_for(src, dst, layout=layout, image_dtype=image_dtype, staged=staged).source


def plan_for(src=None, dst=None, *, layout=None, image_dtype=None,
             staged: bool = False) -> Kernel:
    """The planned kernel of one conversion (see ``render_source``)."""
    if layout is None:
        return plan_reorder(src, dst)
    layout = image_layout(layout)
    if src is not None:
        return plan_to_image(src, layout, image_dtype or src.dtype, staged)
    return plan_from_image(layout, image_dtype or dst.dtype, dst, staged)


def clear_cache() -> None:
    PLANS.clear()
