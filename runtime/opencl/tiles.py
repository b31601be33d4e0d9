"""Tiles of an image over a limit, on the device (runtime.algebra.tiles has the rule).

The image's dense buffer is written on the device by one conversion kernel,
and each tile is a rectangle copied out of it (``clEnqueueReadBufferRect``),
so the unlimited image never exists as an image object and may exceed the
device's limits; reading tiles back is the same in reverse.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from ..algebra.desc import MemoryDesc
from ..errors import ClayoutError


def _rect(tile, image) -> dict:
    """enqueue_copy arguments of one tile's rectangle inside the dense buffer
    of the ImageDesc ``image`` (a pixel is its lanes: 4, 1, or a single
    texture's C)."""
    pixel = image.pixel_bytes
    return dict(buffer_origin=(tile.x0 * pixel, tile.y0, 0), host_origin=(0, 0, 0),
                region=(tile.width * pixel, tile.height, 1),
                buffer_pitches=(image.width * pixel, 0),
                host_pitches=(tile.width * pixel, 0))


def to_tiles(launcher, src, dst, flat: np.ndarray, tile_plan) -> tuple[np.ndarray, ...]:
    """The tiles of the ImageDesc ``dst`` written from host data in ``src``
    (the source and the whole image's dense buffer leased for the call)."""
    memory, queue = launcher.memory, launcher.queue
    out = []
    with memory.lease_buffer(flat.nbytes, cl.mem_flags.READ_ONLY) as src_buf, \
            memory.lease_buffer(dst.memory.size) as image_buf:
        upload = cl.enqueue_copy(queue, src_buf, flat, is_blocking=False)
        done = launcher.enqueue(src, src_buf, dst, image_buf, dense=True, wait_for=[upload])
        for tile in tile_plan.tiles:
            # the image array's rows and columns, then its lanes as they are (a
            # single texture's C too): what the host engines' cut gives
            arr = np.empty((tile.height, tile.width) + dst.array_shape[dst.storage.ndim:],
                           dtype=dst.dtype.np)
            cl.enqueue_copy(queue, arr, image_buf, wait_for=[done] if done else None,
                            **_rect(tile, dst))
            out.append(arr)
    return tuple(out)


def from_tiles(launcher, src, parts, tile_plan, dst: MemoryDesc) -> np.ndarray:
    """``dst`` (1-D) read from the tiles ``parts`` of the ImageDesc ``src``."""
    memory, queue = launcher.memory, launcher.queue
    out = np.empty(dst.span, dtype=dst.dtype.np)
    with memory.lease_buffer(src.memory.size) as image_buf, \
            memory.lease_buffer(out.nbytes) as dst_buf:
        for tile, arr in zip(tile_plan.tiles, parts):
            if np.asarray(arr).nbytes != tile.height * tile.width * src.pixel_bytes:
                raise ClayoutError(f"tile {tile.index} has shape {np.asarray(arr).shape}; "
                                   f"{src.describe()} tiles are (height, width"
                                   f"{'' if src.layout.lanes == 1 else f', {src.lanes}'}) "
                                   "arrays")
            cl.enqueue_copy(queue, image_buf, np.ascontiguousarray(arr), **_rect(tile, src))
        done = launcher.enqueue(src, image_buf, dst, dst_buf, zero_first=True, dense=True)
        cl.enqueue_copy(queue, out, dst_buf, wait_for=[done] if done else None)
    return out
