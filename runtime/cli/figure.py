"""Labelled pictures of image layouts (``clayout show``), drawn with matplotlib.

matplotlib is an optional extra (``pip install 'clayout[plot]'``); nothing
else in clayout needs it. The figure shows the image as a grid of pixels with
x (column) and y (row) on the axes; each pixel is split into its lanes
(R G / B A for RGBA layouts, one square for one-channel layouts). A lane that
holds logical element ``idx`` is coloured by it: the hue follows the layout's
channel dim (C of activations, O of filters, I of depthwise filters, W of
arguments), the brightness the element's position in the other dims (dark
first). Padding lanes (block tails, always zero) are light grey and hatched.
Small images get every lane labelled with its logical index (``c5 h0 w2``).

Example::

    fig = figure("in_out_channel", (1, 6, 3, 5), formula="n=y/H, ...")
    save_png(fig, "pic.png")    # a 10 x 3 image: channels 0..3 left, 4, 5 + padding right
"""
from __future__ import annotations

import math

import numpy as np

from ..algebra.catalog import image_layout
from ..algebra.layout import ImageDesc, ImageLayout
from ..api import to_image
from ..algebra import catalog
from ..errors import ClayoutError
from ..fileio import atomic_write, check_output
from .args import parse_dims
from .checks import check_output_kind

INSTALL_HINT = "clayout show needs matplotlib: pip install 'clayout[plot]'"
CHANNEL_DIM = {"activation": 1, "filter": 0, "depthwise": 1, "argument": 0}
MAX_IMAGE_SIDE = 2048      # image pixels per side that ``show`` will draw
MAX_LABELLED_LANES = 256   # above this, lanes are coloured but not labelled
PAD_RGB = (0.86, 0.86, 0.86)


def require_matplotlib():
    """The matplotlib Figure class and the Agg canvas, or a one-line ClayoutError
    saying how to install them. Agg is used directly: no display, no pyplot state."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ClayoutError(INSTALL_HINT) from None
    return Figure, FigureCanvasAgg


def element_map(layout: ImageLayout, dims) -> np.ndarray:
    """For every image lane, the host array shape with the lanes last
    ((height, width, lanes), (depth, height, width, lanes), (pixels,
    lanes)): the flat logical index it holds, or -1 for a padding lane.
    Computed by placing 1..n on the image."""
    dims = layout.logical_dims(dims)
    count = math.prod(dims)
    if count >= 2**31 - 1:
        raise ClayoutError(f"dims {dims} have {count} elements, too many to draw")
    ids = np.arange(1, count + 1, dtype=np.int32).reshape(dims)
    image = to_image(ids, layout, src="abcdefghijkl"[:len(dims)], dtype="s32", engine="cpu")
    image = image.astype(np.int64) - 1
    return image[..., None] if layout.at(dims).lanes == 1 else image


def drawn(image: ImageDesc, cells: np.ndarray):
    """The storage laid out flat for drawing: (grid (rows, columns, lanes),
    x tick labels, y tick labels, columns where a layer starts, a note).
    Layers (z) of an array or a 3-D image sit side by side, left to right;
    a buffer's pixel index x is wrapped into rows, each labelled by its
    first x; lanes 0 with 3 channels gets a fourth sub-cell marked -2 (no lane)."""
    store = image.storage
    if cells.shape[-1] == 3:
        cells = np.concatenate([cells, np.full(cells.shape[:-1] + (1,), -2)], axis=-1)
    if store.ndim == 2:
        h, w = cells.shape[:2]
        return cells, list(range(w)), [str(y) for y in range(h)], [], ""
    if store.ndim == 3:
        d, h, w = cells.shape[:3]
        grid = cells.transpose(1, 0, 2, 3).reshape(h, d * w, cells.shape[-1])
        return (grid, [x % w if w else 0 for x in range(d * w)], [str(y) for y in range(h)],
                [z * w for z in range(d)], f"layers z = 0..{d - 1} side by side, left to right")
    pixels = cells.shape[0]
    wrap = image.width
    for a in reversed(image.col_axes):   # rows of the innermost axes' run, 4 pixels or more
        size = math.prod(b.size for b in image.col_axes[image.col_axes.index(a):])
        if size >= 4:
            wrap = size
            break
    wrap = max(1, min(wrap, pixels or 1))
    rows = -(-pixels // wrap)
    grid = np.full((rows * wrap, cells.shape[-1]), -2)
    grid[:pixels] = cells
    return (grid.reshape(rows, wrap, -1), list(range(wrap)),
            [f"x={r * wrap}" for r in range(rows)], [],
            f"pixel index x wrapped every {wrap} pixels: x = row start + column")


def _hsv_to_rgb(h: np.ndarray, s: float, v: np.ndarray) -> np.ndarray:
    """Vectorized colorsys.hsv_to_rgb: arrays of hue and value in [0, 1] -> (..., 3)."""
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.zeros(np.shape(h) + (3,))
    for sector, (r, g, b) in enumerate(table):
        mask = i == sector
        out[mask] = np.stack([r[mask], g[mask], b[mask]], axis=-1)
    return out


def colours(layout: ImageLayout, dims, flat: np.ndarray) -> np.ndarray:
    """RGB in [0, 1] of each flat logical index in ``flat`` (-1: padding grey)."""
    dims = layout.logical_dims(dims)
    cdim = CHANNEL_DIM.get(layout.kind, 1 if len(dims) > 1 else 0)
    coords = np.unravel_index(np.maximum(flat, 0), dims)
    rest = np.zeros_like(flat)
    for i, d in enumerate(dims):
        if i != cdim:
            rest = rest * d + coords[i]
    rest_count = math.prod(d for i, d in enumerate(dims) if i != cdim)
    hue = coords[cdim] / max(dims[cdim], 1) * 0.85       # stop short of wrapping to red again
    value = 0.35 + 0.65 * rest / (rest_count - 1) if rest_count > 1 else np.full(flat.shape, 0.7)
    rgb = _hsv_to_rgb(hue, 0.75, value)
    rgb[flat < 0] = PAD_RGB
    rgb[flat == -2] = (1.0, 1.0, 1.0)   # no lane there (a buffer's last row, 3 channels)
    return rgb


def lane_label(names: list[str], dims, flat: int) -> str:
    """'c5 h0 w2': the logical index of one lane, unit dims (N = 1) left out."""
    coords = np.unravel_index(flat, dims)
    parts = [f"{n}{int(i)}" for n, i, d in zip(names, coords, dims) if d > 1]
    return " ".join(parts) or f"{names[0]}0"


def figure(layout, dims, formula: str | None = None):
    """The labelled matplotlib Figure of ``layout`` for logical ``dims``."""
    Figure, FigureCanvasAgg = require_matplotlib()
    layout = image_layout(layout)
    names = list(ImageDesc(layout, dims).layout.placed_names)   # the 5-D form for 5-D dims
    # a Winograd layout: the lanes hold U's elements (o, i, u, v), so its placement is drawn
    image = ImageDesc(layout, dims).stored()
    layout, dims = image.layout, image.dims
    if 0 in image.shape:
        raise ClayoutError(f"layout {layout.name!r} with dims {dims} is an empty "
                           f"{'x'.join(map(str, image.shape))} {image.storage.name}; "
                           "nothing to draw")
    cells, xlabels, ylabels, layer_starts, note = drawn(image, element_map(layout, dims))
    height, width = cells.shape[:2]
    if max(width, height) > MAX_IMAGE_SIDE:
        raise ClayoutError(f"layout {layout.name!r} with dims {dims} is a "
                           f"{'x'.join(map(str, image.shape))} {image.storage.noun}; show draws "
                           f"images up to {MAX_IMAGE_SIDE} pixels a side: pass smaller dims")
    lanes = cells.shape[-1]
    lx, ly = (2, 2) if lanes == 4 else (lanes, 1)
    # lane k of pixel (x, y) sits at sub-cell (k % 2, k // 2) of its cell
    grid = cells.reshape(height, width, ly, lx).transpose(0, 2, 1, 3).reshape(height * ly, width * lx)
    labelled = grid.size <= MAX_LABELLED_LANES
    lane_w, lane_h = (0.72, 0.36) if labelled else (0.12, 0.12)
    fig_w = min(max(width * lx * lane_w + 1.4, 8.0), 24)   # the title needs about 8 inches
    fig_h = min(max(height * ly * lane_h + 2.9, 4.0), 18)
    fig = Figure(figsize=(fig_w, fig_h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _lanes(ax, layout, dims, names, grid, (width, height), (lx, ly), labelled)
    _axes(ax, image, (width, height), xlabels, ylabels, layer_starts)
    fig.suptitle(_title(image, names, note, formula), fontsize=9)
    _legend(fig, layout, dims, names)
    return fig


def _lanes(ax, layout, dims, names, grid, size, lanes, labelled) -> None:
    """The lanes as coloured cells: padding hatched, each labelled with its
    logical index where there is room, pixel borders thick, lane borders thin."""
    from matplotlib.patches import Rectangle
    (width, height), (lx, ly) = size, lanes
    rgb = colours(layout, dims, grid)
    ax.imshow(rgb, extent=(0, width, height, 0), aspect="auto", interpolation="nearest")
    pads = np.argwhere(grid == -1)
    if len(pads) <= 4096:   # hatch padding lanes so they read as "empty" in grey print too
        for gy, gx in pads:
            ax.add_patch(Rectangle((gx / lx, gy / ly), 1 / lx, 1 / ly, fill=False,
                                   hatch="///", edgecolor="0.55", linewidth=0))
    if labelled:
        size = 7 if lx == 2 else 8
        for gy in range(grid.shape[0]):
            for gx in range(grid.shape[1]):
                flat = int(grid[gy, gx])
                if flat == -2:
                    continue
                text = "pad" if flat < 0 else lane_label(names, dims, flat)
                dark = flat >= 0 and rgb[gy, gx] @ (0.3, 0.59, 0.11) < 0.45
                ax.text((gx + 0.5) / lx, (gy + 0.5) / ly, text, ha="center", va="center",
                        fontsize=size, color="0.35" if flat < 0 else "white" if dark else "black")
    if max(width, height) <= 128:   # pixel borders thick, lane borders thin
        for x in range(width + 1):
            ax.axvline(x, color="black", linewidth=1.2)
        for y in range(height + 1):
            ax.axhline(y, color="black", linewidth=1.2)
        if lx == 2 and labelled:
            for x in range(width):
                ax.axvline(x + 0.5, color="white", linewidth=0.5)
        if ly == 2 and labelled:
            for y in range(height):
                ax.axhline(y + 0.5, color="white", linewidth=0.5)


def _axes(ax, image, size, xlabels, ylabels, layer_starts) -> None:
    """Ticks and labels of x and y; each layer of a 3-D storage framed and named."""
    width, height = size
    for z, x0 in enumerate(layer_starts):
        ax.axvline(x0, color="crimson", linewidth=3)
        ax.text(x0 + 0.05, -0.08, f"z={z}", ha="left", va="bottom", fontsize=9, color="crimson",
                transform=ax.get_xaxis_transform())
    step_x = max(1, math.ceil(width / 24))
    step_y = max(1, math.ceil(height / 24))
    ax.set_xticks(np.arange(0, width, step_x) + 0.5, [str(xlabels[x]) for x in range(0, width, step_x)])
    ax.set_yticks(np.arange(0, height, step_y) + 0.5, [ylabels[y] for y in range(0, height, step_y)])
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.tick_params(top=True, labeltop=True, right=True, labelright=True, labelsize=8)
    on_buffer = image.storage.ndim == 1
    ax.set_xlabel("x within the row (pixels)" if on_buffer else "x (image column, pixels)")
    ax.set_ylabel("first x of the row" if on_buffer else "y (image row, pixels)")


def _title(image, names, note, formula) -> str:
    """The figure's title: the layout, its tag and placement, the dims, the
    storage and lanes, and the pixel formula."""
    layout, dims = image.layout, image.dims
    dims_text = ", ".join(f"{n.upper()}={d}" for n, d in zip(names, dims))
    lanes_text = {4: "RGBA: each pixel's lanes R G / B A", 1: "one channel (CL_R)",
                  2: "RG: each texel's lanes R G", 3: "RGB: each texel's lanes R G / B"}.get(
        image.lanes if layout.lanes == 0 else layout.lanes, "")
    if layout.lanes == 0:
        lanes_text += ", the innermost dim whole in one texel"
    size = " x ".join(map(str, image.shape))
    placing = f"rows {layout.rows}" + (f", layers {layout.layers}" if layout.layers else "")
    return (f"{layout.name}   tag {layout.tag}, {placing}   {dims_text}\n"
            f"{image.storage.name} {size} pixels, {lanes_text}"
            + (f"\n{note}" if note else "") + "\n"
            f"pixel ({', '.join(image.storage.coords)}), lane k -> "
            f"{formula or 'custom layout: from the tag'}")


def _legend(fig, layout, dims, names) -> None:
    """What a lane's colour says: the channel's hue, the shade of its
    position, the hatch of a padding lane."""
    from matplotlib.patches import Patch
    cdim = CHANNEL_DIM.get(layout.kind, 1 if len(dims) > 1 else 0)
    others = ", ".join(n for i, n in enumerate(names) if i != cdim)
    channel = names[cdim]
    handles = []
    shown = range(dims[cdim]) if dims[cdim] <= 8 else \
        sorted({0, dims[cdim] // 2, dims[cdim] - 1})
    for ci in shown:
        idx = [0] * len(dims)
        idx[cdim] = ci
        rgb = colours(layout, dims, np.array([int(np.ravel_multi_index(idx, dims))]))[0]
        handles.append(Patch(facecolor=rgb, edgecolor="black", label=f"hue: {channel}={ci}"))
    if others:
        handles.append(Patch(facecolor="white", edgecolor="white",
                             label=f"shade: position in ({others}),\ndark = first, bright = last"))
    handles.append(Patch(facecolor=PAD_RGB, edgecolor="0.55", hatch="///",
                         label="padding lane\n(block tail, always 0)"))
    fig.legend(handles=handles, loc="outside lower center", fontsize=8, ncols=4,
               title="colour of a lane", title_fontsize=8, frameon=True)


def save_png(fig, file) -> None:
    """Write ``fig`` as PNG to an open binary file (or a path)."""
    fig.savefig(file, format="png", dpi=100)


# -- the command ---------------------------------------------------------------------------
def register(command) -> None:
    p = command("show", cmd_show, "draw an image layout as a labelled PNG (needs matplotlib: "
                "pip install 'clayout[plot]')")
    p.add_argument("layout", metavar="NAME")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    p.add_argument("-o", "--output", required=True, metavar="PIC.png")


def cmd_show(args) -> int:
    """Draw the layout as a labelled PNG (needs the optional matplotlib extra)."""
    require_matplotlib()   # before any work: without it, one line and nothing written
    check_output(args.output)
    check_output_kind(args)
    layout = image_layout(args.layout)
    image = ImageDesc(layout, args.dims)
    fig = figure(layout, image.dims, formula=catalog.formula(layout))
    atomic_write(args.output, lambda f: save_png(fig, f))
    px_w, px_h = (round(v) for v in fig.get_size_inches() * fig.dpi)
    print(f"wrote {args.output}: {px_w}x{px_h} PNG of the {'x'.join(map(str, image.shape))} "
          f"{image.layout.name} {image.storage.noun} (dims {','.join(map(str, image.dims))})")
    return 0
