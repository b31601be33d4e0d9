"""The weights ``clayout model --winograd ENGINE`` places in a Winograd layout
(docs/winograd.md), and how ``--verify`` checks them.

A float Conv filter goes in the engine's Winograd layout (runtime.winograd)
when its kernel is square, of a size the engine takes, and every node reading
it is a Conv with strides 1, dilations 1 and group 1 (ONNX's defaults where
absent). Its image holds U = G·g·Gᵀ, so ``--verify`` reads it back with
``from_image`` (G⁺·U·G⁺ᵀ) and compares within the transform's documented
``inverse_bound``, not bit for bit. When no filter of the model qualifies,
:func:`winograd_note` says what the layouts take and why each filter is not
that (``clayout model`` prints it after the summary; the manifest is that of
a run without ``--winograd``).
"""
from __future__ import annotations

import numpy as np

from ..algebra.catalog import image_layout
from ..algebra.layout import ImageLayout
from ..api import from_image
from ..errors import ClayoutError
from ..winograd import engine_layouts
from . import manifest as mf
from .graph import printable
from .tensor import logical_weight
from .weights import ROLE_TABLES, Weight, stored_values


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


CONV_OPS = ("Conv", "CONV_2D")   # the 2-D convolutions of ONNX and TFLite


def conv_settings(use) -> tuple[tuple, tuple, int]:
    """(strides, dilations, group) of the convolution ``use`` reads a filter
    for, in ONNX's terms, by the role table of its format."""
    return ROLE_TABLES[use.front].conv_settings(use)


def conv_allows(use) -> bool:
    """Whether a convolution is one a Winograd convolution computes: every
    stride 1, every dilation 1, group 1 (ONNX's defaults when absent)."""
    strides, dilations, group = conv_settings(use)
    return all(int(s) == 1 for s in strides) and all(int(d) == 1 for d in dilations) \
        and group == 1


def winograd_layout(w: Weight, uses, layouts) -> ImageLayout | None:
    """The Winograd layout of ``layouts`` that the float Conv weight ``w`` goes
    in, or None: a 2-D Conv filter of a square kernel size the engine takes,
    read only by Conv nodes with strides 1, dilations 1 and group 1 (a weight
    shared with another kind of convolution keeps its usual layout)."""
    if not layouts or winograd_refusal(w, uses, layouts) != "":
        return None
    return layouts[w.dims[2]]


def winograd_refusal(w: Weight, uses, layouts) -> str | None:
    """Why the weight ``w`` does not go in a Winograd layout of ``layouts``:
    "" when it does, None when it is no Conv node's filter at all."""
    if w.use is None or w.use.op not in CONV_OPS or w.use.index != 1:
        return None
    if w.store_dtype:
        return "an integer weight"
    if w.role != "filter":
        return (f"depthwise (group {conv_settings(w.use)[2]})" if w.role == "depthwise"
                else "a filter with no image role")
    if len(w.tensor.shape) != 4:
        return "a 1-D convolution's filter"
    k_h, k_w = w.dims[2], w.dims[3]
    if k_h != k_w or k_h not in layouts:
        return f"a {k_h}x{k_w} kernel"
    for u in uses:
        if u.op not in CONV_OPS or u.index != 1 or u.proto is None:
            return f"also read by {printable(str(u))}"
        if not conv_allows(u):
            strides, dilations, group = conv_settings(u)
            found = [f"{key} {','.join(map(str, values))}" for key, values in
                     (("strides", strides), ("dilations", dilations))
                     if any(int(v) != 1 for v in values)]
            return (", ".join(found + ([f"group {group}"] if group != 1 else []))
                    + f" ({printable(str(u))})")
    return ""


def winograd_note(weights, uses, winograd: str, layouts) -> str:
    """The note of ``--winograd`` when no Conv filter qualified: what the
    engine's layouts take, and why each filter of the model is not that."""
    refused = [(w, why) for w in weights
               if (why := winograd_refusal(w, uses.get(w.name, ()), layouts))]
    sizes = " or ".join(f"{k}x{k}" for k in sorted(layouts))
    shown = "; ".join(f"{printable(w.name)!r}: {why}" for w, why in refused[:4]) + \
        (f"; and {len(refused) - 4} more" if len(refused) > 4 else "")
    here = f"here {shown}" if refused else "this model has no Conv filter"
    return (f"--winograd {winograd}: no Conv filter qualified, so no Winograd image: its "
            f"layouts take float Conv filters of a square {sizes} kernel, with strides 1, "
            f"dilations 1 and group 1, read by Conv nodes only; {here}; every weight is placed "
            "as without --winograd")


def fits(layout: ImageLayout, dims, limits) -> tuple[bool, str]:
    """(whether the image of ``dims`` in ``layout`` is within ``limits``'
    2-D bound, its size)."""
    width, height = layout.image_shape(dims)
    return width <= limits.image2d[0] and height <= limits.image2d[1], f"{width}x{height}"


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
