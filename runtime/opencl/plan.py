"""Plan the kernel of one conversion between two sides, and cache it.

``plan(src, dst, staged)`` takes the conversion's two sides (a MemoryDesc
or an ImageDesc each) and gives the ``Kernel`` that runs it: which side is
read or written as an image (``staged``: both through buffers, the image's
dense buffer copied to or from the image object by the engine), whether
its numbers are baked in, and, where the conversion moves nothing, a plain
byte copy instead of a kernel. runtime/opencl/render.py builds a kernel.

**Generic or specialized.** The numbers that depend on the dims (sizes,
strides, offsets, halo, fill, image width) are kernel arguments, so one
program serves every shape of a conversion *family*: the structure of both
sides (axis order, blocking, strided or not, halo or not, image layout), the
dtype pair, the image access (direct or staged), the vector width, the axis
the launch tiles along, the run length of the loads and the index type. A
conversion of at least the engine's specialize bytes (16 MiB by default,
``CLAYOUT_SPECIALIZE_BYTES``), or of at least ``HOT_BYTES`` converted more
than its specialize count (8, ``CLAYOUT_SPECIALIZE_AFTER``), bakes its
numbers in instead (``bake_after``, asked by the move plan:
runtime/opencl/moves.py): one program for that shape, whose divisions by constants
the compiler turns into multiplications and whose 3-D launch the compiler
vectorizes; a model's weights, converted once, share programs. A generic
kernel divides by its arguments with magic numbers (``c_index.magic``) and
launches in one dimension with one work-group size (PoCL compiles a kernel
again for each local size).

>>> k = plan(MemoryDesc((1, 8, 2, 2), tag="nchw"), MemoryDesc((1, 8, 2, 2), tag="nhwc"))
>>> k.vector, k.sizes, k.generic
(8, (1, 2, 2), True)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..algebra.c_index import logical_names, own_names, unchanged_dims
from ..algebra.desc import MemoryDesc
from ..cache import LRU
from . import frame as frame_c
from .render import Kernel, render_kernel
from .sides import Source, Target


@dataclass(frozen=True)
class ByteCopy:
    """The plan of a conversion that moves nothing (every element at the same
    offset, the same dtype): copy ``count`` bytes, zero the rest up to
    ``total`` (dst's padding). No program is built for it."""
    count: int
    total: int
    generic = False   # class constants, as a Kernel has them: no program, so no family
    family = ()
    tiled = False

    @property
    def chosen(self) -> str:
        return f"a byte copy of {self.count} bytes, zero up to {self.total}: no program"

# A conversion of at least this many bytes converted more than the engine's
# specialize count (CLAYOUT_SPECIALIZE_AFTER) with the same shape gets its baked
# program: the per-frame activation of an inference engine pays one build for a
# kernel 2-5x faster (at 1x64x224x224 f32 a staged image took 2.1 ms generic, 0.6 ms
# baked); a weight converted once never does.
HOT_BYTES = 256 << 10


# a planned kernel holds its source (5-20 KiB): bounded in bytes too; the texts themselves
# are kept once each (``TEXTS``: every shape of a generic family has the same text)
PLANS = LRU("OpenCL kernel plans", "CLAYOUT_PLAN_CACHE", 4096,
            weigh=lambda k: 1024 + len(getattr(k, "source", "")), budget=32 << 20)
TEXTS = LRU("OpenCL kernel texts", "CLAYOUT_TEXT_CACHE", 4096, weigh=len, budget=32 << 20)


def shared_text(kernel):
    """``kernel`` with its source the one kept copy of that text."""
    source = getattr(kernel, "source", None)
    if source is None:
        return kernel
    text = TEXTS.get(source, lambda: source)
    return kernel if text is source else replace(kernel, source=text)


def bake_after(descs, rule) -> int | None:
    """When a conversion of these descs gets its baked program, by the rule
    (bytes, after): 0 at once (at least the rule's bytes), n on its n-th use
    (at least ``HOT_BYTES``: after the rule's count of uses), None never."""
    limit, after = rule
    if limit < 0:
        return None
    size = max(d.size for d in descs)
    if size >= limit:
        return 0
    if after <= 0 or size < HOT_BYTES:
        return None
    return after + 1


def side_key(side):
    """Exactly what of a side changes a kernel or its arguments: every field
    of a desc (strides too: descs equal under oneDNN's rules can differ in
    unit strides), or an image's layout, dims and dtype."""
    if side.is_image:
        return ("image", side.layout, side.dims, side.dtype.name)
    return (side.dims, side.dtype.name, side.padded_dims, side.strides, side.inner_blks,
            side.inner_idxs, side.offset0, side.halo_lower, side.halo_upper,
            repr(side.fill), side.order)


def plan(src, dst, staged: bool = False, aliased: bool = False, bake: bool = False,
         tiled: bool = False, trace: bool = False) -> Kernel | ByteCopy:
    """The kernel of the conversion ``src`` -> ``dst`` (two sides, no
    transform: runtime.algebra.conversion splits those into stages). An
    image side is read or written with read_image*/write_image*, or with
    ``staged`` through its dense buffer. ``aliased``: src and dst may be the
    same buffer (no ``restrict``); each element is then read and written by
    the same work item, so an in-place same-desc pass is safe. Cached by
    exactly what changes the kernel; a conversion that moves nothing is a
    ``ByteCopy`` and needs no program. ``bake``: the baked program (its
    numbers in the text) or the generic one; when a move bakes is the move
    plan's rule (runtime/opencl/moves.py ``baking``). ``tiled``: the tiled family where the move transposes
    (runtime/opencl/launch.py; the device's choice: runtime/opencl/moves.py),
    else the direct one. ``trace``: the same kernel with every access recorded
    (runtime/opencl/trace.py, for the access model); not cached."""
    if src.is_frame:
        return frame_kernel(src, dst, staged, bool(bake), trace)
    # a buffer storage is its dense buffer: kernels always reach it as one
    staged = staged or any(s.is_image and s.storage.on_buffer for s in (src, dst))
    key = (side_key(src), side_key(dst), staged, aliased, bool(tiled))
    bake = bool(bake)

    def make():
        through_buffers = staged or not (src.is_image or dst.is_image)
        copy = copy_kernel(src.memory, dst.memory) if through_buffers and not aliased else None
        return copy or shared_text(render_kernel(_source(src, dst, staged), _target(dst, staged),
                                                 aliased, bake, tiled, trace))
    return make() if trace else PLANS.get((key, bake), make)


def frame_kernel(frame, dst, staged: bool = False, bake: bool = False,
                 trace: bool = False) -> Kernel:
    """The kernel writing ``dst`` from the bytes of a camera frame (a
    runtime.algebra.frame.FramePlan): the frame is read as its plain f32
    input tensor whose every element is computed in place of a load
    (runtime/opencl/frame.py), its numbers and taps from the taps buffer.
    Generic, one program per frame family (format, channel order) and
    destination structure, whatever the crop and sizes; ``bake``: the
    frame's own program (a frame converted again and again)."""
    staged = staged or (dst.is_image and dst.storage.on_buffer)

    def make():
        plain = _source(frame.plain, dst, staged)
        return shared_text(render_kernel(replace(plain, frame=frame), _target(dst, staged),
                                         False, bake, trace=trace))
    key = frame if bake else (frame_c.family(frame), frame.dims)
    return make() if trace else PLANS.get(("frame", key, side_key(dst), staged, bake), make)


def _target(dst, staged: bool) -> Target:
    return Target(dst.memory, dst if dst.is_image and not staged else None)


def _source(src, dst, staged: bool) -> Source:
    """How the kernel reads ``src``, indexed by the destination's own dims:
    their names go to logical names (``dst``'s groups undone), and those to
    the source's own (its groups made), or to the image's pixel."""
    as_image = src.is_image and not staged

    def to_src(names, num):
        logical = logical_names(dst, names, num, len(src.dims))
        return logical if as_image else own_names(src, logical, num)
    into_logical = {own: d for d, own in unchanged_dims(dst).items()}
    from_logical = unchanged_dims(src)
    dim_map = {own: from_logical[d] for own, d in into_logical.items() if d in from_logical}
    return Source(src.memory, src if as_image else None, to_src, dim_map)


def copy_kernel(src: MemoryDesc, dst: MemoryDesc) -> ByteCopy | None:
    """A conversion that is a byte copy, or None: the same dims (an image's
    dims may group a layout's logical ones) and dtype on both sides, every
    element at the same offset (``linear_strides``), those offsets filling
    [0, n) (row-major in some order), so the first n elements move as they
    are and the rest of dst, its padding, is zero (a bias onto an
    ``argument`` image: the vector plus a zero tail)."""
    if src.dims != dst.dims or src.dtype != dst.dtype or src.offset0 or dst.offset0 \
            or src.is_zero:
        return None
    a, b = src.linear_strides(), dst.linear_strides()
    if a is None or a != b:
        return None
    expect = 1
    for stride, n in sorted((s, n) for s, n in zip(a, src.dims) if n > 1):
        if stride != expect:
            return None
        expect *= n
    item = src.dtype.itemsize
    return ByteCopy(src.nelems * item, dst.span * item)


def clear_cache() -> None:
    """Forget every planned kernel."""
    PLANS.clear()
    TEXTS.clear()
