"""Pictures of image layouts (``clayout show``), written as PNG with zlib + struct.

Every image pixel is drawn as a cell of lane squares (R G / B A for RGBA
layouts, one square for one-channel layouts). A lane holding logical element
``idx`` is coloured by that element: the hue follows the layout's channel dim
(C of activations, O of filters, I of depthwise filters, W of arguments), the
brightness the element's position in the other dims (dark first, bright last).
Padding lanes are black; a grey grid separates pixels when cells are large
enough to show it.

Example: ``picture("in_out_channel", (1, 6, 2, 3))`` draws a 6 x 2 image whose
left half holds channels 0..3 and right half channels 4, 5 and two black lanes.
"""
from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from .errors import ClayoutError
from .image import ImageLayout, image_layout

CHANNEL_DIM = {"activation": 1, "filter": 0, "depthwise": 1, "argument": 0}
MAX_IMAGE_SIDE = 2048      # image pixels per side that ``show`` will draw
TARGET_SIDE = 512          # small images are scaled up to about this many picture pixels
GRID = (64, 64, 64)


def encode_png(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``rgb`` (height, width, 3) uint8: signature, IHDR,
    one IDAT (every row with filter 0), IEND."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape[:2]:
        raise ClayoutError(f"a PNG needs a non-empty (height, width, 3) array, got {rgb.shape}")
    height, width, _ = rgb.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)) + chunk(b"IEND", b""))


def element_map(layout: ImageLayout, dims) -> np.ndarray:
    """For every image lane, (height, width, lanes): the flat logical index it
    holds, or -1 for a padding lane. Computed by placing 1..n on the image."""
    dims = layout.logical_dims(dims)
    count = math.prod(dims)
    if count >= 2**31 - 1:
        raise ClayoutError(f"dims {dims} have {count} elements, too many to draw")
    from .api import to_image  # late: the api pulls in the engines
    ids = np.arange(1, count + 1, dtype=np.int32).reshape(dims)
    image = to_image(ids, layout, src="abcdefghijkl"[:len(dims)], dtype="s32", engine="cpu")
    image = image.astype(np.int64) - 1
    return image if image.ndim == 3 else image[:, :, None]


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


def _colours(layout: ImageLayout, dims, flat: np.ndarray) -> np.ndarray:
    """RGB (uint8) of each flat logical index in ``flat`` (-1: black)."""
    dims = layout.logical_dims(dims)
    cdim = CHANNEL_DIM.get(layout.kind, 1 if len(dims) > 1 else 0)
    coords = np.unravel_index(np.maximum(flat, 0), dims)
    channel = coords[cdim]
    rest_dims = [d for i, d in enumerate(dims) if i != cdim]
    rest = np.zeros_like(flat)
    for i, d in enumerate(dims):
        if i != cdim:
            rest = rest * d + coords[i]
    hue = channel / max(dims[cdim], 1) * 0.85          # stop short of wrapping to red again
    value = 0.35 + 0.65 * rest / max(math.prod(rest_dims) - 1, 1)
    rgb = np.round(_hsv_to_rgb(hue, 0.8, value) * 255).astype(np.uint8)
    rgb[flat < 0] = 0
    return rgb


def picture(layout, dims) -> tuple[np.ndarray, dict]:
    """The RGB picture (height, width, 3) of ``layout`` for ``dims`` and a
    description of how it was drawn (image size, lane cell, scale, channel dim)."""
    layout = image_layout(layout)
    dims = layout.logical_dims(dims)
    width, height = layout.image_shape(dims)
    if width == 0 or height == 0:
        raise ClayoutError(f"layout {layout.name!r} with dims {dims} is an empty "
                           f"{width}x{height} image; nothing to draw")
    if max(width, height) > MAX_IMAGE_SIDE:
        raise ClayoutError(f"layout {layout.name!r} with dims {dims} is a {width}x{height} image; "
                           f"show draws images up to {MAX_IMAGE_SIDE} pixels a side: pass smaller dims")
    cells = element_map(layout, dims)                     # (height, width, lanes)
    lanes_x, lanes_y = (2, 2) if layout.lanes == 4 else (1, 1)
    scale = max(1, TARGET_SIDE // (max(width * lanes_x, height * lanes_y)))
    grid = 1 if scale >= 3 else 0
    # lane k of pixel (x, y) sits at sub-cell (k % 2, k // 2) of its cell
    colours = _colours(layout, dims, cells)               # (height, width, lanes, 3)
    cell = colours.reshape(height, width, lanes_y, lanes_x, 3).transpose(0, 2, 1, 3, 4)
    cell = cell.reshape(height * lanes_y, width * lanes_x, 3)
    big = np.repeat(np.repeat(cell, scale, axis=0), scale, axis=1)
    if grid:
        step_y, step_x = lanes_y * scale, lanes_x * scale
        out = np.empty((height * (step_y + 1) + 1, width * (step_x + 1) + 1, 3), np.uint8)
        out[...] = GRID
        tiles = big.reshape(height, step_y, width, step_x, 3)
        for y in range(height):
            row = out[1 + y * (step_y + 1): 1 + y * (step_y + 1) + step_y]
            view = row[:, 1:].reshape(step_y, width, step_x + 1, 3)
            view[:, :, :step_x] = tiles[y]
        big = out
    cdim = CHANNEL_DIM.get(layout.kind, 1 if len(dims) > 1 else 0)
    info = {"width": width, "height": height, "lanes": layout.lanes, "scale": scale,
            "grid": bool(grid), "channel_dim": cdim, "picture": (big.shape[1], big.shape[0])}
    return big, info
