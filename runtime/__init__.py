"""clayout: tensors on OpenCL images and buffers, with a numpy fallback.

The public API (docs/ has every detail; the command line is ``clayout``):

* conversions: ``to_image``, ``from_image`` (host arrays or ``Memory``, with
  ``max_image=`` tiles), ``reorder`` between two ``MemoryDesc``;
  ``from_frame``: a camera frame (RGB, gray, NV12/NV21/I420) to a model
  input in one pass (colour, crop, resize, normalize, layout);
  ``read_output``: a network's output to the result (dequantize,
  sigmoid/softmax, the tensor, argmax or a threshold) in one pass, only the
  result read back from a device (``Pending`` with ``wait=False``);
  ``row_pitch=`` and ``image_pitch``: 2-D images over pitched buffers;
* layouts: ``image_layout(name)``, ``IMAGE_LAYOUTS`` (the named ones),
  ``ImageLayout``, ``ImageDesc``, ``physical_shape``; tags: ``parse_tag``;
* buffers: ``MemoryDesc``, ``Axis``, ``Memory`` (data on an engine, e.g. a
  device), ``convert`` (the dtype rules); ``empty_pinned``: a host array
  the device transfers at its full rate;
* models: ``load_images(path, engine=None)``: the images a ``clayout model``
  file holds, as ``Memory`` on an engine;
* placement: ``choose_layout`` / ``layout_choice`` (``LayoutChoice``): which
  layout a role takes under a device's limits; ``tile_plan`` (``TilePlan``) of an image under ``Limits``,
  ``Transform`` (Winograd);
* ``accessor`` / ``Accessor``: OpenCL C that reads and writes a layout by
  logical index (loaded on first use: it needs pyopencl and mako);
* ``prepare``: a conversion planned once and called with the data
  (``prepare.to_image(shape, dtype, layout, ...)`` and the other doors);
* errors: ``ClayoutError`` (a ValueError, one line), ``BufferCopyWarning``,
  ``FrameArgumentWarning``;
  ``__version__``.

>>> import numpy as np, runtime
>>> x = np.arange(2 * 5 * 3 * 3, dtype=np.float32).reshape(2, 5, 3, 3)
>>> img = runtime.to_image(x, "in_out_channel")          # NCHW -> RGBA image
>>> img.shape                                             # (N*H, ceil(C/4)*W, 4)
(6, 6, 4)
>>> back = runtime.from_image(img, "in_out_channel", dims=x.shape)
>>> bool((back == x).all())
True
"""
from .algebra.catalog import NAMED as IMAGE_LAYOUTS
from .algebra.catalog import image_layout
from .algebra.desc import Axis, MemoryDesc
from .algebra.dtypes import convert
from .algebra.hostarray import physical_shape
from .algebra.layout import ImageDesc, ImageLayout
from .algebra.storage import Limits
from .algebra.tags import parse_tag
from .algebra.tiles import TilePlan, tile_plan
from .algebra.transform import Transform
from .api import empty_pinned, from_frame, from_image, image_pitch, reorder, to_image
from .errors import BufferCopyWarning, ClayoutError, FrameArgumentWarning
from .loader import load_images
from .memory import Memory
from .doors import prepare
from .doors.read_output import Pending, read_output
from .placement import LayoutChoice, choose_layout, layout_choice
from .version import __version__


_LAZY = ("accessor", "Accessor")


def __getattr__(name: str):
    """``runtime.accessor`` / ``runtime.Accessor``: OpenCL C that reads and
    writes a layout by logical index (runtime/opencl/accessor.py), loaded when
    first asked for: it needs pyopencl and mako, the rest of clayout does not
    (without them the AttributeError says so, as ``hasattr`` and ``help``
    expect)."""
    if name in _LAZY:
        try:
            from .opencl import accessor as accessors
        except ImportError as exc:
            raise AttributeError(f"runtime.{name} needs pyopencl and mako: {exc}") from None
        return getattr(accessors, name)
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the lazy ones (``accessor``, ``Accessor``)."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["accessor", "Accessor", "MemoryDesc", "Axis", "ImageLayout", "ImageDesc",
           "image_layout", "IMAGE_LAYOUTS", "Transform", "reorder", "to_image", "from_image",
           "from_frame", "read_output", "Pending", "prepare", "image_pitch", "empty_pinned",
           "physical_shape", "convert", "parse_tag", "ClayoutError", "BufferCopyWarning", "FrameArgumentWarning",
           "Memory", "load_images", "choose_layout", "layout_choice", "LayoutChoice", "tile_plan", "TilePlan", "Limits", "__version__"]
