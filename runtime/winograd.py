"""Winograd filter images (docs/winograd.md): which layout each engine uses,
and a filter image of one engine converted to another's.

The layouts themselves are rows of the catalog (runtime.algebra.catalog:
``winograd_2x3_mace`` ... ``image_2d_weights_winograd_6x3_s1_xfbyb``), each
an image layout with a ``Transform``; ``to_image`` / ``from_image`` take them
like any other. This room adds what is particular to Winograd filters:

* ``ENGINES``: the layout an engine's Winograd convolution reads, by kernel
  size (``clayout model --winograd ENGINE``);
* ``convert_winograd``: the image of one Winograd layout as the image of
  another, U_B = M·U_A·Mᵀ with M = G_B·G_A⁺, in float64 and rounded once;
* ``convert_bound``: how far that lands from the target's own ``to_image``.
"""
from __future__ import annotations

import numpy as np

from . import api
from .algebra import dtypes
from .algebra.catalog import LAYOUTS, image_layout
from .algebra.layout import ImageDesc, ImageLayout
from .algebra.tags import LETTERS
from .algebra.transform import rounding
from .errors import ClayoutError

#: The Winograd layouts of the catalog, by name.
WINOGRAD_LAYOUTS = {row.name: row.layout for row in LAYOUTS if row.layout.transform is not None}

#: engine -> {kernel size: layout}: the layout ``--winograd ENGINE`` places a
#: square stride-1 convolution of that size in. MACE has no default (its
#: ``winograd`` option is 2 or 4, and 4 falls back to 2 when the image is too
#: large): ``mace`` is F(4,3), and ``--winograd winograd_2x3_mace`` names the
#: other. clDNN's convolution reads only the xfbyb image.
ENGINES = {
    "mace": {3: "winograd_4x3_mace"},
    "mnn": {3: "winograd_2x3_mnn", 5: "winograd_2x5_mnn"},
    "tflite": {3: "winograd_4x3_tflite"},
    "cldnn": {3: "image_2d_weights_winograd_6x3_s1_xfbyb"},
}


def winograd_layout(name) -> ImageLayout:
    """A Winograd layout by name (or an ImageLayout with a transform)."""
    layout = image_layout(name) if isinstance(name, (str, ImageLayout)) else None
    if layout is None or layout.transform is None:
        raise ClayoutError(f"{name!r} is not a Winograd layout; Winograd layouts: "
                           f"{', '.join(WINOGRAD_LAYOUTS)}")
    return layout


def engine_layouts(engine: str) -> dict[int, ImageLayout]:
    """{kernel size: layout} for ``--winograd ENGINE``: an engine of ``ENGINES``
    or one Winograd layout's name (its kernel size only)."""
    if engine in ENGINES:
        return {k: WINOGRAD_LAYOUTS[n] for k, n in ENGINES[engine].items()}
    if engine in WINOGRAD_LAYOUTS:
        layout = WINOGRAD_LAYOUTS[engine]
        return {layout.transform.taps: layout}
    raise ClayoutError(f"unknown Winograd engine {engine!r}; engines: {', '.join(ENGINES)}; "
                       f"or a Winograd layout: {', '.join(WINOGRAD_LAYOUTS)}")


def _placed_values(image, side: ImageDesc) -> np.ndarray:
    """The transformed values U an image array holds (placed dims, float64)."""
    arr = np.asarray(image)
    if arr.shape != side.array_shape:
        raise ClayoutError(f"the image of {side.describe()} is an array of shape "
                           f"{side.array_shape}; got {arr.shape}")
    placed = side.stored()
    values = api.from_image(arr, placed.layout, placed.dims, dtype="f32", engine="cpu")
    return values.astype(np.float64)


def convert_winograd(image, src_layout, dst_layout, dims, dtype=None) -> np.ndarray:
    """The Winograd image ``image`` (a host array) of ``src_layout`` for a
    filter of ``dims`` (O, I, kH, kW), as the image of ``dst_layout``: U_B =
    M·U_A·Mᵀ with M = G_B·G_A⁺ (along each layout's own axes), in float64,
    rounded once to ``dtype`` (default: the source image's dtype). Exact
    arithmetic would give the target's G·g·Gᵀ; the rounding stays within
    ``convert_bound``. The two layouts take the same kernel size.

    >>> g = np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3)
    >>> mace = api.to_image(g, "winograd_2x3_mace")
    >>> mnn = convert_winograd(mace, "winograd_2x3_mace", "winograd_2x3_mnn", g.shape)
    >>> bool(np.allclose(mnn, api.to_image(g, "winograd_2x3_mnn"), rtol=1e-6, atol=1e-6))
    True
    """
    src_l, dst_l = winograd_layout(src_layout), winograd_layout(dst_layout)
    if src_l.transform.taps != dst_l.transform.taps:
        raise ClayoutError(f"{src_l.name} holds a {src_l.transform.taps}-tap filter and "
                           f"{dst_l.name} a {dst_l.transform.taps}-tap one; a Winograd image "
                           "converts only to a layout of the same kernel size")
    src_dt = dtypes.of_array(np.asarray(image))
    src = ImageDesc(src_l, dims, src_dt)
    dst = ImageDesc(dst_l, src.dims, src_dt if dtype is None else dtype)
    if not dst.dtype.is_float:
        raise ClayoutError(f"{dst_l.name} holds transformed values: its images are f32 or f16, "
                           f"not {dst.dtype.name}")
    g = src_l.transform.exact_inverse(_placed_values(image, src), src.dims)
    values = dtypes.host_array(dst_l.transform.exact(g), dst.dtype, "Winograd image")
    placed = dst.stored()
    return api.to_image(values.reshape(-1), placed.layout, LETTERS[:len(placed.dims)],
                        dtype=dst.dtype, engine="cpu", dims=placed.dims)


def convert_bound(src_layout, dst_layout, g, src_dtype="f32", dst_dtype="f32") -> np.ndarray:
    """Element by element (the target's placed dims), a bound on the
    difference between ``convert_winograd`` of g's ``src_layout`` image and
    g's own ``dst_layout`` image: the source's error carried through G_A⁺
    and G_B, the final rounding, and the target's own forward error."""
    a, b = winograd_layout(src_layout).transform, winograd_layout(dst_layout).transform
    g = np.asarray(g)
    carried = b.spread(a.spread_back(a.forward_bound(g, src_dtype), g.shape))
    exact = np.abs(b.exact(g))
    return carried + rounding(dtypes.dtype(dst_dtype), exact + carried) + \
        b.forward_bound(g, dst_dtype)
