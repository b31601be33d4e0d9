"""What a conversion reads and writes: a side.

Three kinds of side exist, each a frozen record that owns its own numbers:

* ``MemoryDesc`` (runtime/algebra/desc.py): a tensor in a buffer, by tag,
  strides, blocks and halo;
* ``ImageDesc`` (runtime/algebra/layout.py): a tensor placed on an image
  storage by an image layout;
* ``FramePlan`` (runtime/algebra/frame.py): a camera or decoded frame and
  what is asked of it (crop, resize, normalize), a source only.

Code below the doors asks a side the questions of ``Side`` and never its
class: ``is_image`` and ``is_frame`` say which kind it is where that matters
(what a kernel binds, what a plan samples).

>>> from runtime.algebra.desc import MemoryDesc
>>> isinstance(MemoryDesc((1, 3, 2, 2), "f32"), Side)
True
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Side(Protocol):
    """The questions every side answers (its memory is each kind's own: a
    desc's strides, an image's storage, a frame's format)."""
    is_image: bool       # placed on an image storage (ImageDesc)
    is_frame: bool       # a frame to be sampled (FramePlan)

    @property
    def dims(self) -> tuple[int, ...]:
        """The logical dims, outer first."""

    @property
    def dtype(self):
        """The element type it holds (runtime.algebra.dtypes.DType; a frame: u8)."""

    @property
    def is_zero(self) -> bool:
        """True when the side holds no element (a zero dim)."""

    def describe(self) -> str:
        """One line naming the side, as messages write it."""


__all__ = ["Side"]
