"""Tensors larger than one image: the image cut into tiles of at most W x H pixels.

The rule, for an image of ``width x height`` pixels and a limit ``(W, H)``:
when ``width <= W`` and ``height <= H`` there is one image and no tiles.
Otherwise the image is cut into ``rows = ceil(height / H)`` bands of rows
and each band into ``cols = ceil(width / W)`` pieces; tile ``(r, c)``
covers image rows ``[r*H, min((r+1)*H, height))`` and columns
``[c*W, min((c+1)*W, width))``, and the tiles are listed row-major (tile
``(r, c)`` is number ``r*cols + c``). So only the last band and the last
column may be smaller; with only the height over, the tiles concatenate
along y (axis 0), with only the width over along x (axis 1), and with both
each band's tiles concatenate along x and the bands along y.

>>> image = ImageDesc(image_layout("in_out_channel"), (1, 17, 5, 7))   # 35 x 5 pixels
>>> plan = tile_plan(image, (16, 4))
>>> plan.rows, plan.cols, [t.region for t in plan.tiles][:2]
(2, 3, ['x [0, 16) y [0, 4)', 'x [16, 32) y [0, 4)'])

Engines cut and join tiles with ``to_tiles`` / ``from_tiles`` (the engine
contract, runtime/contract.py): the host engines build the unlimited image
and cut it; the opencl engine writes the image's dense buffer on the device
and copies each tile's rectangle out of it (runtime/opencl/tiles.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import dtypes
from .catalog import image_layout
from ..errors import ClayoutError
from .layout import ImageDesc, ImageLayout
from .storage import Limits


@dataclass(frozen=True)
class Tile:
    """Tile number ``index`` at (row, col) of the grid: pixels x in [x0, x0 +
    width), y in [y0, y0 + height) of the unlimited image."""
    index: int
    row: int
    col: int
    x0: int
    y0: int
    width: int
    height: int

    @property
    def region(self) -> str:
        return f"x [{self.x0}, {self.x0 + self.width}) y [{self.y0}, {self.y0 + self.height})"

    def cut(self, image: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(image[self.y0:self.y0 + self.height,
                                          self.x0:self.x0 + self.width])


@dataclass(frozen=True)
class TilePlan:
    """How the image ``side`` is cut for ``limits`` (a Limits: ``max_image``
    is its 2-D (width, height))."""
    side: ImageDesc
    image: tuple[int, int]        # (width, height) of the unlimited image
    limits: Limits                # the limit it was cut for
    rows: int
    cols: int
    tiles: tuple[Tile, ...]

    @property
    def layout(self) -> ImageLayout:
        return self.side.layout

    @property
    def dims(self) -> tuple[int, ...]:
        return self.side.dims

    @property
    def lanes(self) -> int:
        """Values per pixel (a single texture's: its C)."""
        return self.side.lanes

    @property
    def max_image(self) -> tuple[int, int]:
        """The 2-D limit the image was cut by: (max width, max height)."""
        return self.limits.image2d

    @property
    def split(self) -> bool:
        """True when the image is over the limit and comes as tiles."""
        return len(self.tiles) > 1

    def shape(self, tile: Tile) -> tuple[int, ...]:
        """The host array shape of ``tile``: (height, width, lanes) or (height, width)."""
        return (tile.height, tile.width) + ((self.lanes,) if self.layout.lanes != 1 else ())

    def cut(self, image: np.ndarray) -> tuple[np.ndarray, ...]:
        """The tiles of an unlimited image array, row-major."""
        return tuple(t.cut(image) for t in self.tiles)

    def join(self, tiles) -> np.ndarray:
        """The unlimited image from its tiles (checked with ``check``)."""
        self.check(tiles)
        bands = [np.concatenate(tiles[r * self.cols:(r + 1) * self.cols], axis=1)
                 for r in range(self.rows)]
        return np.ascontiguousarray(np.concatenate(bands, axis=0))

    def check(self, tiles) -> None:
        """Refuse tiles whose count, shapes or dtypes do not follow this plan."""
        where = (f"tiles of layout {self.layout.name!r} for dims {self.dims} (image "
                 f"{self.image[0]}x{self.image[1]}, {self.rows} row(s) x {self.cols} column(s) "
                 f"of at most {self.max_image[0]}x{self.max_image[1]} pixels)")
        if len(tiles) != len(self.tiles):
            raise ClayoutError(f"{where}: expected {len(self.tiles)} tiles in row-major order, "
                               f"got {len(tiles)}")
        first = dtypes.of_array(np.asarray(tiles[0]))
        for tile, arr in zip(self.tiles, tiles):
            arr = np.asarray(arr)
            if arr.shape != self.shape(tile):
                raise ClayoutError(f"{where}: tile {tile.index} (row {tile.row}, column "
                                   f"{tile.col}, {tile.region}) has shape {arr.shape}, "
                                   f"expected {self.shape(tile)}")
            if dtypes.of_array(arr) != first:
                raise ClayoutError(f"{where}: tile {tile.index} has dtype "
                                   f"{dtypes.of_array(arr).name} but tile 0 has {first.name}")


MAX_TILES = 1 << 16   # more tiles than this is a mistake in the dims or the limit


def tile_plan(image: ImageDesc, limits) -> TilePlan:
    """The tiles of ``image`` (an ImageDesc on a storage that tiles) under
    ``limits`` (a Limits, or a 2-D (W, H) limit), by the rule in this module's
    docstring. An image within the limit (an empty one included) is one tile
    covering it all."""
    if not isinstance(image, ImageDesc):
        raise ClayoutError(f"tile_plan takes an ImageDesc (runtime.ImageDesc(layout, dims)), "
                           f"got {type(image).__name__}")
    layout, dims = image.layout, image.dims
    bound = Limits.of(limits)
    max_w, max_h = bound.image2d
    if not image.storage.tiles:
        raise ClayoutError(f"max_image tiles 2-D images; layout {layout.name!r} places dims "
                           f"{dims} on storage {image.storage.name} (whose own limits are "
                           "checked instead)")
    width, height = image.width, image.height
    if (width <= max_w and height <= max_h) or width * height == 0:
        rows = cols = 1
        max_w, max_h = max(max_w, width), max(max_h, height)
    else:
        rows, cols = math.ceil(height / max_h), math.ceil(width / max_w)
        if rows * cols > MAX_TILES:   # each tile is an object and an array: refuse, not swap
            raise ClayoutError(f"the {layout.name} image of dims {dims} is {width}x{height} "
                               f"pixels: {rows} x {cols} = {rows * cols} tiles of at most "
                               f"{max_w}x{max_h}, over the limit of {MAX_TILES} tiles; raise "
                               "max_image (--max-image) or check the dims")
    tiles = tuple(Tile(r * cols + c, r, c, c * max_w, r * max_h,
                       min(max_w, width - c * max_w), min(max_h, height - r * max_h))
                  for r in range(rows) for c in range(cols))
    return TilePlan(image, (width, height), bound, rows, cols, tiles)


_LANE_AXIS = {4: ", 4", 1: "", 0: ", C"}   # a single texture's lanes are its C


def plan_of(layout, dims, tiles) -> TilePlan:
    """The plan a tuple of tiles was cut by: tile 0 has the limit's full size
    along each axis that was split (and the whole image along one that was
    not), so its shape gives (W, H); the whole tuple is then checked."""
    layout = image_layout(layout)
    if not tiles:
        raise ClayoutError(f"an empty tuple of tiles for layout {layout.name!r}; give the "
                           "image array, or its tiles in row-major order")
    for i, arr in enumerate(tiles):
        if not isinstance(arr, np.ndarray):
            raise ClayoutError(f"tile {i} is a {type(arr).__name__}; tiles are numpy arrays "
                               "(height, width[, 4]) as to_image(..., max_image=...) returns")
    first = tiles[0]
    if first.ndim != (2 if layout.lanes == 1 else 3):
        raise ClayoutError(f"tile 0 has shape {first.shape}; layout {layout.name!r} tiles are "
                           f"(height, width{_LANE_AXIS[layout.lanes]}) arrays")
    image = ImageDesc(layout, layout.logical_dims(dims))   # the cut needs its extent only
    plan = tile_plan(image, (max(1, first.shape[1]), max(1, first.shape[0])))
    plan.check(tiles)
    return plan
