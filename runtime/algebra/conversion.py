"""A conversion: two sides, and the stages an engine runs between them.

A *side* is a ``MemoryDesc`` (a buffer) or an ``ImageDesc`` (an image).
``reorder`` converts buffer to buffer, ``to_image`` buffer to image,
``from_image`` image to buffer; below those three public doors every engine
implements the one conversion ``convert(src, dst, data, out)``.

Most conversions are one ``Move``: every logical element goes from its place
in ``src`` to its place in ``dst``, converted by the dtype rules. A side
whose layout has a ``transform`` (runtime.algebra.transform) adds an
``Apply`` stage on plain float32 tensors between two moves:

    to an image:    src -> plain logical f32 -> Apply -> plain placed f32 -> image
    from an image:  image -> plain placed f32 -> Apply (inverse) -> plain logical -> dst

>>> from runtime.algebra.desc import MemoryDesc
>>> [type(s).__name__ for s in stages(MemoryDesc((2, 3)), MemoryDesc((2, 3), tag="ba"))]
['Move']
"""
from __future__ import annotations

from dataclasses import dataclass

from .desc import MemoryDesc
from ..errors import ClayoutError
from .layout import ImageDesc
from .transform import Transform


@dataclass(frozen=True)
class Move:
    """Every element of ``src`` to its place in ``dst`` (dtype rules applied)."""
    src: MemoryDesc | ImageDesc
    dst: MemoryDesc | ImageDesc


@dataclass(frozen=True)
class Apply:
    """``transform`` of the plain tensor ``src`` into the plain tensor ``dst``
    (forward: f32 to f32; ``inverse``: to dst's dtype, rounded once)."""
    transform: Transform
    src: MemoryDesc
    dst: MemoryDesc
    inverse: bool = False


def check(src, dst) -> None:
    """Refuse two sides that do not hold the same logical tensor: equal dims
    for two buffers; a buffer's dims as the image layout reads them (a 2-D
    activation N,C is N,C,1,1) equal to the image's logical dims."""
    if src.is_image and dst.is_image:
        raise ClayoutError(f"a conversion goes between a buffer and an image or two buffers; "
                           f"got two images ({src.describe()} and {dst.describe()})")
    image = src if src.is_image else dst if dst.is_image else None
    buffer = dst if src.is_image else src
    if image is None:
        if src.dims != dst.dims:
            raise ClayoutError(f"reorder from {src.describe()} to {dst.describe()}: dims differ; "
                               "use desc.reshape() for a logical reshape")
        return
    if image.layout.logical_dims(buffer.dims) != image.dims:
        raise ClayoutError(f"{buffer.describe()} and the image {image.describe()} do not hold "
                           "the same logical tensor (their dims differ)")


def stages(src, dst) -> tuple[Move | Apply, ...]:
    """The stages of the conversion src -> dst (this module's docstring)."""
    if dst.is_image and dst.transform is not None:
        _float_only(dst)
        logical = MemoryDesc(dst.dims, "f32")
        placed = MemoryDesc(dst.placed, "f32")
        return (Move(src, logical), Apply(dst.transform, logical, placed),
                Move(placed, dst.stored()))
    if src.is_image and src.transform is not None:
        _float_only(src)
        if not dst.dtype.is_float:
            raise ClayoutError(f"{src.layout.name} holds transformed values; read it back into "
                               f"a float buffer (f32, f16, bf16), not {dst.dtype.name}")
        placed = MemoryDesc(src.placed, "f32")
        logical = MemoryDesc(src.dims, dst.dtype)
        return (Move(src.stored(), placed), Apply(src.transform, placed, logical, True),
                Move(logical, dst))
    return (Move(src, dst),)


def _float_only(image: ImageDesc) -> None:
    if not image.dtype.is_float:
        raise ClayoutError(f"layout {image.layout.name!r} holds transformed values "
                           f"({image.transform.name}): its images are f32 or f16, not "
                           f"{image.dtype.name}")
