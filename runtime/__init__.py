"""clayout: tensor layouts on OpenCL images and buffers, with a numpy fallback.

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
from .algebra.tags import parse_tag
from .algebra.tiles import TilePlan, tile_plan
from .algebra.transform import Transform
from .api import from_image, reorder, to_image
from .errors import BufferCopyWarning, ClayoutError
from .memory import Memory
from .placement import LayoutChoice, choose_layout, layout_choice
from .version import __version__


def __getattr__(name: str):
    """``runtime.accessor`` / ``runtime.Accessor``: OpenCL C that reads and
    writes a layout by logical index (runtime/opencl/accessor.py), loaded when
    first asked for: it needs pyopencl and mako, the rest of clayout does not."""
    if name in ("accessor", "Accessor"):
        from .opencl import accessor as accessors
        return getattr(accessors, name)
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")


__all__ = ["accessor", "Accessor", "MemoryDesc", "Axis", "ImageLayout", "ImageDesc",
           "image_layout", "IMAGE_LAYOUTS", "Transform", "reorder", "to_image", "from_image",
           "physical_shape", "convert", "parse_tag", "ClayoutError", "BufferCopyWarning",
           "Memory", "choose_layout", "layout_choice", "LayoutChoice", "tile_plan", "TilePlan", "__version__"]
