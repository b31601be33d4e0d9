"""The weights ``clayout model --winograd ENGINE`` places in a Winograd layout
(docs/winograd.md), and how ``--verify`` checks them.

A float Conv filter goes in the engine's Winograd layout (runtime.winograd)
when its kernel is square, of a size the engine takes, and every node reading
it is a Conv with strides 1, dilations 1 and group 1 (ONNX's defaults where
absent). Its image holds U = G·g·Gᵀ, so ``--verify`` reads it back with
``from_image`` (G⁺·U·G⁺ᵀ) and compares within the transform's documented
``inverse_bound``, not bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..algebra.catalog import image_layout
from ..algebra.layout import ImageLayout
from ..api import from_image
from ..errors import ClayoutError
from ..winograd import engine_layouts
from . import manifest as mf
from .onnx_graph import attr
from .roles import Weight, logical_weight, stored_values


def winograd_layouts(winograd, dtype=None) -> dict[int, ImageLayout]:
    """``--winograd``: {kernel size: Winograd layout} of an engine of
    runtime.winograd.ENGINES or of one Winograd layout's name ({} for None);
    its images hold transformed values, so ``dtype`` must be a float one."""
    if winograd is None:
        return {}
    try:
        layouts = engine_layouts(winograd)
    except ClayoutError as exc:
        raise ClayoutError(f"--winograd: {exc}") from None
    if dtype is not None and dtype not in ("f32", "f16"):
        raise ClayoutError(f"--dtype {dtype!r} with --winograd {winograd}: Winograd images hold "
                           "transformed filter values, U = G·g·Gᵀ, and are f32 or f16 only")
    return layouts


def conv_allows(node) -> bool:
    """Whether a Conv node is one a Winograd convolution computes: every
    stride 1, every dilation 1, group 1 (ONNX's defaults when absent)."""
    strides = attr(node, "strides") or ()
    dilations = attr(node, "dilations") or ()
    return (all(int(s) == 1 for s in strides) and all(int(d) == 1 for d in dilations)
            and int(attr(node, "group", 1)) == 1)


def winograd_layout(w: Weight, uses, layouts) -> ImageLayout | None:
    """The Winograd layout of ``layouts`` that the float Conv weight ``w`` goes
    in, or None: a 2-D Conv filter of a square kernel size the engine takes,
    read only by Conv nodes with strides 1, dilations 1 and group 1 (a weight
    shared with another kind of convolution keeps its usual layout)."""
    if not layouts or w.role != "filter" or w.store_dtype or len(w.onnx_shape) != 4 \
            or w.use is None or w.use.op != "Conv" or w.use.index != 1:
        return None
    k_h, k_w = w.dims[2], w.dims[3]
    if k_h != k_w or k_h not in layouts:
        return None
    if not all(u.op == "Conv" and u.index == 1 and u.proto is not None
               and conv_allows(u.proto) for u in uses):
        return None
    return layouts[k_h]


def fits(layout: ImageLayout, dims, max_image) -> tuple[bool, str]:
    """(whether the image of ``dims`` in ``layout`` is within ``max_image``, its size)."""
    width, height = layout.image_shape(dims)
    return width <= max_image[0] and height <= max_image[1], f"{width}x{height}"


def winograd_ok(image, entry: dict, original: np.ndarray, engine=None) -> bool:
    """Whether a Winograd image reads back (``from_image``: G⁺·U·G⁺ᵀ in
    float64, rounded to f32) to its weight g within the documented bound,
    ``transform.inverse_bound(g, image dtype, "f32")``, element by element
    (g: the weight as f32, in the logical OIHW dims)."""
    layout = image_layout(entry["layout"])
    g = logical_weight(stored_values(original, "f32"), mf.steps_of(entry)).astype(np.float32)
    back = np.asarray(from_image(image, layout, entry["dims"], dtype="f32", engine=engine))
    if back.shape != g.shape:
        return False
    bound = layout.transform.inverse_bound(g, entry["dtype"], "f32")
    return bool(np.all(np.abs(back.astype(np.float64) - g.astype(np.float64)) <= bound))
