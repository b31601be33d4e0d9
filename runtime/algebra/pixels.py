"""Where an image's elements lie: the pixel geometry of an image layout at
given dims, and the index math between a placed index and its pixel.

The image of a layout (runtime/algebra/layout.py) is the dense buffer of
its tag over the image dims, its pixels row-major (layers, rows, columns)
and the lanes innermost. ``geometry`` says which physical axes of that desc
form z, the row y, the column x and the lane, and the image's extent in
pixels; ``pixel`` and ``at_offset`` go from a placed index (or an element
of the dense buffer) to its coordinates and lane, ``index`` back. All of
it on the host, in Python integers; runtime.algebra.c_index's
``pixel_expr`` writes ``pixel`` in OpenCL C.

The ``layout`` arguments below are ImageLayouts and the ``image``
arguments ImageDescs; this module imports neither (layout.py, which holds
both, imports it) and asks them only their fields.
"""
from __future__ import annotations

import math

from ..errors import ClayoutError
from . import dtypes
from .desc import MemoryDesc


def geometry(layout, dims: tuple[int, ...], dt: dtypes.DType) -> tuple:
    """The geometry of ``layout`` at the canonical logical ``dims`` in the
    image dtype ``dt``, the fields of its ImageDesc after layout, dims and
    dtype: (placed, desc, layer_axes, row_axes, col_axes, lane_axis,
    width, height, depth, lanes)."""
    placed = layout.placed_dims(dims)
    desc = MemoryDesc(layout.image_dims(dims), dt, tag=layout.tag)
    axes = desc.axes
    lane = axes[-1] if layout.lanes != 1 else None
    lanes = layout.lanes or lane.size
    if layout.lanes == 0 and lanes > 4:
        raise ClayoutError(f"layout {layout.name!r} holds its innermost dim "
                           f"{layout.dim_names[lane.dim]} whole in one texel: it must be 0..4, "
                           f"got {lanes} (dims {dims})")
    top = layout.layers + layout.rows
    layers, rows = axes[:layout.layers], axes[layout.layers:top]
    cols = axes[top:len(axes) - (lane is not None)]
    depth = math.prod(a.size for a in layers)
    height = math.prod(a.size for a in rows)
    # the width follows the column axes, also when a zero-volume row or
    # layer axis leaves the image with no row
    width = math.prod(a.size for a in cols)
    return (placed, desc, tuple(layers), tuple(rows), tuple(cols), lane, width, height, depth,
            lanes)


def pixel(image, idx) -> tuple[int, ...]:
    """The coordinates (x, y; x, y, z; or x) and lane of the placed index
    ``idx`` of ``image``: the placed dims and the image dims are row-major
    views of one order, so the flat index goes from one to the other."""
    flat = 0
    for i, d in zip(idx, image.placed):
        flat = flat * d + i
    image_idx = []
    for d in reversed(image.desc.dims):
        image_idx.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return at_offset(image, image.desc.offset(tuple(reversed(image_idx))))


def at_offset(image, off: int) -> tuple[int, ...]:
    """The coordinates and lane of element ``off`` of ``image``'s dense buffer."""
    pix, coords = off // image.lanes, []
    for size in image.shape[:-1]:
        coords.append(pix % size)
        pix //= size
    return tuple(coords) + (pix, off % image.lanes)


def index(image, *coords, **named) -> tuple[int, ...] | None:
    """The placed index stored at the pixel of ``coords`` in ``image``
    (``ImageDesc.index``), or None for a padding lane. The image is the
    dense buffer of ``desc``, so the lane's offset ((z*height + y)*width +
    x)*lanes + lane splits into one digit per physical axis; a dim's digits
    rebuild its index, and an index past the dim's size is the zero tail."""
    names = image.storage.coords + ("lane",)
    given = image.storage.pixel_args(coords, named, image.layout.name)
    shown = "x".join(map(str, image.shape))
    for name, size in zip(names, image.shape + (image.lanes,)):
        if not 0 <= int(given[name]) < size:
            raise ClayoutError(f"layout {image.layout.name!r} with dims {image.dims}: {name} "
                               f"{given[name]} is outside the {shown} {image.storage.name} "
                               f"with {image.lanes} lane(s) (allowed 0..{size - 1})")
    pix = 0
    for name, size in reversed(list(zip(names, image.shape))):
        pix = pix * size + int(given[name])
    off = pix * image.lanes + int(given["lane"])
    image_idx = [0] * image.desc.ndims
    for a in image.desc.axes:
        image_idx[a.dim] += (off // a.stride) % a.size * a.div
    if any(i >= d for i, d in zip(image_idx, image.desc.dims)):
        return None
    flat = 0   # image dims -> placed dims: both are row-major views of one order
    for i, d in zip(image_idx, image.desc.dims):
        flat = flat * d + i
    out = []
    for d in reversed(image.placed):
        out.append(flat % d)
        flat //= d
    return tuple(reversed(out))
