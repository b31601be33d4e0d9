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
``CLAYOUT_SPECIALIZE_BYTES``), or of at least ``HOT_BYTES`` converted more
than ``specialize_after()`` times (8, ``CLAYOUT_SPECIALIZE_AFTER``), bakes its
numbers in instead: one program for that shape, whose divisions by constants
the compiler turns into multiplications and whose 3-D launch the compiler
vectorizes; a model's weights, converted once, share programs. A generic
kernel divides by its arguments with magic numbers (``c_index.magic``) and
launches in one dimension with one work-group size (PoCL compiles a kernel
again for each local size).

>>> k = plan_reorder(MemoryDesc((1, 8, 2, 2), tag="nchw"), MemoryDesc((1, 8, 2, 2), tag="nhwc"))
>>> k.vector, k.sizes, k.generic
(8, (1, 2, 2), True)
"""
from __future__ import annotations

import threading

from ..algebra import dtypes
from ..cache import LRU
from ..algebra.c_index import image_names, logical_names, unchanged_dims
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageLayout, image_layout
from ..settings import env_int
from .render import Kernel, Source, copy_kernel, render_kernel

DEFAULT_SPECIALIZE_BYTES = 16 << 20


def specialize_bytes() -> int:
    """Conversions of at least this many bytes bake their numbers in
    (``CLAYOUT_SPECIALIZE_BYTES``; 0 bakes everything, a negative value nothing)."""
    return env_int("CLAYOUT_SPECIALIZE_BYTES", DEFAULT_SPECIALIZE_BYTES, "a byte count")


# A conversion of at least this many bytes converted more than
# ``specialize_after()`` times with the same shape gets its baked program: the
# per-frame activation of an inference engine pays one build for a kernel
# 2-5x faster (at 1x64x224x224 f32 a staged image took 2.1 ms generic, 0.6 ms
# baked); a weight converted once never does.
HOT_BYTES = 256 << 10
DEFAULT_SPECIALIZE_AFTER = 8


def specialize_after() -> int:
    """Conversions of one shape (of at least ``HOT_BYTES``) after which its
    numbers are baked in (``CLAYOUT_SPECIALIZE_AFTER``; 0: never by use)."""
    return env_int("CLAYOUT_SPECIALIZE_AFTER", DEFAULT_SPECIALIZE_AFTER, "a count of calls")


USES = LRU("OpenCL conversion counts", "CLAYOUT_PLAN_CACHE", 4096)
_USES_LOCK = threading.Lock()


def _bake(kind, key, *descs: MemoryDesc) -> bool:
    """The one place that chooses a specialized program over the generic
    one: at least ``specialize_bytes()``, or at least ``HOT_BYTES`` and
    converted more than ``specialize_after()`` times."""
    limit = specialize_bytes()
    if limit < 0:
        return False
    size = max(d.size for d in descs)
    if size >= limit:
        return True
    after = specialize_after()
    if after <= 0 or size < HOT_BYTES:
        return False
    count = USES.get((kind, key), lambda: [0])
    with _USES_LOCK:
        count[0] += 1
        return count[0] > after


# -- the three kinds -------------------------------------------------------------

PLANS = LRU("OpenCL kernel plans", "CLAYOUT_PLAN_CACHE", 4096)


def _cached(kind, key, descs, make, copy=None) -> Kernel:
    """Plans by exactly what changes the kernel or its arguments: kind and the
    exact fields of both sides (strides too: descs equal under oneDNN's rules
    can differ in unit strides) and whether numbers are baked (``make(bake)``).
    ``copy``: the (source, destination) buffer descs, when the conversion
    may be a plain byte copy (``copy_kernel``), which needs no kernel."""
    bake = _bake(kind, key, *descs)
    return PLANS.get((kind, key, bake),
                     lambda: (copy is not None and copy_kernel(*copy)) or make(bake))


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
    def make(bake):
        source = Source(src, None, src.dims, _identity, {d: d for d in range(src.ndims)})
        return render_kernel(source, dst, None, aliased=aliased, bake=bake)
    return _cached("reorder", (_key(src), _key(dst), aliased), (src, dst), make,
                   copy=None if aliased else (src, dst))


def plan_to_image(src: MemoryDesc, layout: ImageLayout, image_dtype,
                  staged: bool = False) -> Kernel:
    """buffer ``src`` -> an image of ``layout`` holding ``image_dtype``; with
    ``staged`` the kernel writes the image's dense buffer instead (to be copied
    into the image with clEnqueueCopyBufferToImage)."""
    dt = dtypes.image_dtype(image_dtype)
    image = layout.desc(src.dims, dt)

    def make(bake):
        def to_src(names, num):   # image index -> the source's logical index
            return logical_names(layout, src.dims, names, num, src.ndims)
        mapped = {g: d for d, g in unchanged_dims(layout).items() if d < src.ndims}
        source = Source(src, None, src.dims, to_src, mapped)
        return render_kernel(source, image, None if staged else layout,
                             layout.placement(src.dims), bake=bake)
    # staged, the destination is the image's dense buffer: maybe a byte copy
    return _cached("to_image", (_key(src), layout, dt.name, staged), (src, image), make,
                   copy=(src, image) if staged else None)


def plan_from_image(layout: ImageLayout, image_dtype, dst: MemoryDesc,
                    staged: bool = False) -> Kernel:
    """an image of ``layout`` holding ``image_dtype`` -> buffer ``dst``; with
    ``staged`` the kernel reads the image's dense buffer (copied out of the
    image with clEnqueueCopyImageToBuffer)."""
    dt = dtypes.image_dtype(image_dtype)
    image = layout.desc(dst.dims, dt)

    def make(bake):
        if staged:
            def to_src(names, num):   # logical index -> the image dims' index
                return image_names(layout, dst.dims, names, num)
            mapped = {d: g for d, g in unchanged_dims(layout).items() if d < dst.ndims}
            return render_kernel(Source(image, None, image.dims, to_src, mapped), dst, None,
                                 bake=bake)
        return render_kernel(Source(image, layout, dst.dims, _identity, {}), dst, None, bake=bake)
    return _cached("from_image", (layout, dt.name, _key(dst), staged), (image, dst), make,
                   copy=(image, dst) if staged else None)


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
    """Forget every planned kernel and how often each shape was converted."""
    PLANS.clear()
    USES.clear()
