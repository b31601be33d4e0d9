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
from .api import from_image, reorder, to_image
from .desc import Axis, MemoryDesc
from .dtypes import convert
from .errors import ClayoutError
from .hostarray import physical_shape
from .image import NAMED as IMAGE_LAYOUTS
from .image import ImageLayout, image_layout
from .memory import Memory
from .placement import LayoutChoice, choose_layout, layout_choice
from .tags import parse_tag
from .tiles import TilePlan, tile_plan
from .version import __version__

__all__ = ["MemoryDesc", "Axis", "ImageLayout", "image_layout", "IMAGE_LAYOUTS", "reorder",
           "to_image", "from_image", "physical_shape", "convert", "parse_tag", "ClayoutError",
           "Memory", "choose_layout", "layout_choice", "LayoutChoice", "tile_plan", "TilePlan",
           "__version__"]
