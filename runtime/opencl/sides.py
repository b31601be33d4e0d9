"""How a conversion kernel reaches its two sides, and the facts about the
source that its launch and loads depend on (runtime/opencl/render.py
renders the kernel from them): which source own dims each destination
dim feeds, how far in the source a step of a destination axis moves
(``source_step``: what tells a transposing move, runtime/opencl/launch.py),
and how many vector elements one load serves (``run_length``)."""
from __future__ import annotations

from dataclasses import dataclass

from ..algebra.c_index import Numbers, offset_expr, paren
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageDesc


@dataclass(frozen=True)
class Source:
    """How the kernel reads its source side: from the buffer ``desc`` (a
    buffer, or the dense desc of a staged image), with read_image* from
    ``image``, or from a camera ``frame`` (``desc`` its f32 input:
    runtime/opencl/frame.py). ``to_src(names, num)`` turns the destination's
    own index names into what the source is indexed by (its own dims' names;
    an image's logical names, which its pixel expression takes); ``dim_map``
    says which source own dim each destination own dim feeds unchanged."""
    desc: MemoryDesc
    image: ImageDesc | None
    to_src: object
    dim_map: dict
    frame: object = None     # a FramePlan: elements computed from the frame's bytes

    def offset(self, names, num: Numbers) -> str:
        return offset_expr(self.desc, [paren(n) for n in names], num)

    def pixel(self, names, num: Numbers):
        return self.image.c_pixel(names, num)


@dataclass(frozen=True)
class Target:
    """What the kernel writes: the buffer ``desc`` (a buffer, or a staged
    image's dense desc), with write_image* into ``image`` when it is set."""
    desc: MemoryDesc
    image: ImageDesc | None = None


def element_axis(desc: MemoryDesc, d: int):
    """The axis of dim d that one step of its index moves (div 1: the
    innermost block, or the outer part of an unblocked dim)."""
    return next(a for a in desc.axes if a.dim == d and a.div == 1)


def source_step(src: Source, axis, elements: int) -> int | None:
    """How far apart (in source elements) two elements lie whose destination
    index differs by one digit of ``axis`` (``elements`` digits: a vector's
    cells): the source's axis of that dim with the largest div the move
    covers; None where the source is an image or a frame, or the dim is not
    one of the source's, unchanged."""
    if src.image is not None or src.frame is not None:
        return None
    sd = src.dim_map.get(axis.dim)
    if sd is None:
        return None
    move = axis.div * elements
    fits = [a for a in src.desc.axes if a.dim == sd and a.div <= move]
    if not fits:
        return None
    a = max(fits, key=lambda a: a.div)
    return a.stride * (move // a.div)


def gather_stride(src: Source, vec_axis) -> int:
    """Bytes between the source elements of consecutive vector lanes (0 when
    unknown: an image source, or a dim the source does not have)."""
    if src.image or src.frame or vec_axis is None or vec_axis.dim not in src.dim_map:
        return 0
    return element_axis(src.desc, src.dim_map[vec_axis.dim]).stride * src.desc.dtype.itemsize


def run_length(src: Source, dst: MemoryDesc, vec_axis, vector, bake: bool) -> int:
    """How many consecutive vector elements one source load serves: V for a
    buffer whose element offsets are consecutive along the vector (vloadV),
    4 for an image whose lanes 0..3 are the vector's next four elements
    (one read_image), else 1. The vector axis always has div 1 (it is the
    innermost axis of its dim), so element j is logical index i + j."""
    if vec_axis is None or vector == 1 or src.frame is not None:
        return 1
    d = vec_axis.dim
    dst_halo = dst.has_halo
    sd = src.dim_map.get(d)
    if src.image is not None:
        lane = src.desc.axes[-1]
        if sd is None or src.image.lanes != 4 or vector % 4:
            return 1
        aligned = dst.halo_lower[d] % 4 == 0 if bake else not dst_halo
        return 4 if lane.dim == sd and lane.div == 1 and aligned else 1
    if sd is None:
        return 1
    if bake:
        if (src.desc.halo_lower[sd] - dst.halo_lower[d]) % vector:
            return 1
    elif dst_halo or src.desc.has_halo:
        return 1
    a = element_axis(src.desc, sd)
    # a plain desc's innermost stride is 1 by its structure only when it has a tag
    unit = a.stride == 1 and (bake or not a.outer or src.desc.tag is not None)
    ok = unit and (a.outer or a.size % vector == 0)
    return vector if ok else 1
