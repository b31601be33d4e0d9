"""Image layouts (docs/layouts.md): a MemoryDesc placed on a 2D RGBA (or one-channel) image.

An image layout is (tag, rows, lanes) over the image's dims: the first ``rows``
outer axes of the tag form the image row ``y``, the remaining axes form the
column ``x`` (both row-major), and with ``lanes=4`` the innermost block of 4 is
the RGBA lane. The host view of an image, an array (height, width, lanes), is
exactly the dense buffer of that desc, so every conversion is a reorder.

``groups`` merges logical dims before placing them (``image_2d_weights_c4_fyx_b``
views O,I,H,W as O, I*H*W); the merge is a row-major reshape of logical dims.

Example: ``image_layout("in_out_channel").image_shape((1, 17, 5, 7))`` is
(ceil(17/4)*7, 1*5) = (35, 5).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .c_index import Numbers, pixel_expr
from ..cache import LRU
from .desc import MemoryDesc, _ints
from ..errors import ClayoutError
from .tags import LETTERS, parse_tag

DEFAULT_TAGS = {"activation": "nchw", "filter": "oihw", "depthwise": "mihw", "argument": "x"}
KINDS = {  # logical dims users pass, by kind of tensor
    "activation": "N,C,H,W (or N,C)",
    "filter": "O,I,H,W",
    "depthwise": "M,I,H,W",
    "argument": "W",
}


@dataclass(frozen=True)
class ImageLayout:
    name: str
    tag: str
    rows: int
    lanes: int = 4
    kind: str = "custom"
    ndims: int = 4
    groups: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self):
        parsed = parse_tag(self.tag)
        image_rank = len(self.groups) if self.groups else self.ndims
        if parsed.ndims != image_rank:
            raise ClayoutError(f"image layout {self.name!r}: tag {self.tag!r} has {parsed.ndims} "
                               f"dims but the layout places {image_rank}")
        if self.lanes not in (1, 4):
            raise ClayoutError(f"image layout {self.name!r}: lanes must be 4 (RGBA) or 1 (CL_R), "
                               f"got {self.lanes}")
        if self.lanes == 4 and (not parsed.blocks or parsed.blocks[-1][1] != 4):
            raise ClayoutError(f"image layout {self.name!r}: tag {self.tag!r} must end in an inner "
                               "block of 4 (the RGBA lane), e.g. 'acBd4b'")
        if not 0 <= self.rows <= parsed.ndims:
            raise ClayoutError(f"image layout {self.name!r}: rows must be 0..{parsed.ndims}, "
                               f"got {self.rows}")

    # -- dims ---------------------------------------------------------------
    def logical_dims(self, dims) -> tuple[int, ...]:
        """The canonical logical dims: 2-D activations (N, C) become (N, C, 1, 1)."""
        dims = _ints(dims, "dims")
        if self.kind == "activation" and len(dims) == 2:
            dims = dims + (1, 1)
        if len(dims) != self.ndims or min(dims, default=0) < 0:
            what = KINDS.get(self.kind, f"{self.ndims} dims")
            raise ClayoutError(f"layout {self.name!r} takes dims {what}; got {dims}")
        return dims

    def default_tag(self, ndims: int | None = None) -> str:
        """The plain tag of this layout's logical dims (nchw, oihw, mihw, x; 'nc'
        for a 2-D activation), the default of to_image's src and from_image's dst."""
        nd = self.ndims if ndims is None else ndims
        if self.kind == "activation" and nd == 2:
            return "nc"
        return DEFAULT_TAGS.get(self.kind) or LETTERS[:nd]

    def image_dims(self, dims) -> tuple[int, ...]:
        dims = self.logical_dims(dims)
        if not self.groups:
            return dims
        return tuple(math.prod(dims[d] for d in group) for group in self.groups)

    def desc(self, dims, dtype="f32") -> MemoryDesc:
        """The dense buffer desc equal to this image's memory, over ``image_dims``."""
        return MemoryDesc(self.image_dims(dims), dtype, tag=self.tag)

    def placement(self, dims) -> "ImagePlacement":
        """Where this layout puts a tensor of ``dims``: the image's row, column
        and lane axes and its size, worked out once per (layout, dims) and kept
        (``PLACEMENTS``, a bounded cache: runtime/cache.py)."""
        return _placement(self, self.logical_dims(dims))

    def image_shape(self, dims) -> tuple[int, int]:
        """(width, height) in pixels."""
        place = self.placement(dims)
        return place.width, place.height

    def array_shape(self, dims) -> tuple[int, ...]:
        """Shape of the host array holding the image: (height, width, 4) or (height, width)."""
        width, height = self.image_shape(dims)
        return (height, width, 4) if self.lanes == 4 else (height, width)

    def pixel(self, dims, idx) -> tuple[int, int, int]:
        """(x, y, lane) of the logical index ``idx``."""
        dims = self.logical_dims(dims)
        flat = 0
        for i, d in zip(idx, dims):
            flat = flat * d + i
        image_dims = self.image_dims(dims)
        image_idx = []
        for d in reversed(image_dims):
            image_idx.append(flat % d if d else 0)
            flat = flat // d if d else 0
        place = self.placement(dims)
        off = place.desc.offset(tuple(reversed(image_idx)))
        width = place.width
        return (off // self.lanes) % width, off // (self.lanes * width), off % self.lanes

    def index(self, dims, x, y, lane=0) -> tuple[int, ...] | None:
        """The logical index stored at pixel (x, y), lane ``lane``, or None when
        that lane is padding; the inverse of ``pixel``. The image is the dense
        buffer of ``desc(dims)``, so the lane's offset (y*width + x)*lanes + lane
        splits into one digit per physical axis; a dim's digits rebuild its
        index, and an index past the dim's size is the zero tail.

        >>> image_layout("in_out_channel").index((1, 17, 5, 7), x=30, y=2, lane=0)
        (0, 16, 2, 2)
        >>> image_layout("in_out_channel").index((1, 17, 5, 7), x=30, y=2, lane=1) is None
        True
        """
        dims = self.logical_dims(dims)
        place = self.placement(dims)
        width, height = place.width, place.height
        for name, value, size in (("x", x, width), ("y", y, height), ("lane", lane, self.lanes)):
            if not 0 <= int(value) < size:
                raise ClayoutError(f"layout {self.name!r} with dims {dims}: {name} {value} is "
                                   f"outside the {width}x{height} image with {self.lanes} "
                                   f"lane(s) (allowed 0..{size - 1})")
        desc = place.desc
        off = (int(y) * width + int(x)) * self.lanes + int(lane)
        image_idx = [0] * desc.ndims
        for a in desc.axes:
            image_idx[a.dim] += (off // a.stride) % a.size * a.div
        image_dims = self.image_dims(dims)
        if any(i >= d for i, d in zip(image_idx, image_dims)):
            return None
        flat = 0   # image dims -> logical dims: both are row-major views of one order
        for i, d in zip(image_idx, image_dims):
            flat = flat * d + i
        out = []
        for d in reversed(dims):
            out.append(flat % d)
            flat //= d
        return tuple(reversed(out))

    def c_pixel(self, dims, names) -> tuple[str, str, str]:
        """(x, y, lane) of the logical index ``names`` (one OpenCL C expression
        per dim of ``dims``) as C expressions with constants baked in; mirrors
        ``pixel``. ``image_layout("in_out_channel").c_pixel((2, 8, 2, 3),
        ["n", "c", "h", "w"])`` is ``("(c / 4) * 3 + w", "n * 2 + h", "(c % 4)")``."""
        return pixel_expr(self, dims, names, Numbers(bake=True))

    # -- device limits --------------------------------------------------------
    def fitting(self, dims, max_width: int, max_height: int) -> list["ImageLayout"]:
        """Named layouts of this layout's kind whose image for ``dims`` fits the
        limits, in table order (this one included when it fits)."""
        fits = []
        for other in NAMED.values():
            if other.kind == self.kind:
                try:
                    w, h = other.image_shape(dims)
                except ClayoutError:
                    continue
                if w <= max_width and h <= max_height:
                    fits.append(other)
        return fits

    def check_fits(self, dims, max_width: int, max_height: int) -> None:
        """Refuse an image larger than the device's 2D limits, naming the
        layouts of the same kind that would fit."""
        width, height = self.image_shape(dims)
        if width <= max_width and height <= max_height:
            return
        fits = [f"{o.name} ({'x'.join(map(str, o.image_shape(dims)))})"
                for o in self.fitting(dims, max_width, max_height) if o.name != self.name]
        hint = ("layouts that fit: " + ", ".join(fits)) if fits else \
            "no named image layout fits; keep this tensor in a buffer"
        raise ClayoutError(f"layout {self.name!r} needs a {width}x{height} image for dims "
                           f"{tuple(dims)}, over the device limit {max_width}x{max_height}; {hint}")

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ImagePlacement:
    """A layout at given dims: the image's dense desc (f32; the geometry does
    not depend on the dtype) with its physical axes split into the axes that
    form the row ``y`` (the first ``rows``), the lane (the innermost block of
    4, when ``lanes`` is 4) and the column ``x`` (the rest), and the image's
    size. ``image_shape``, ``pixel``, ``index``, the OpenCL index emitter and
    the kernels' launch all read it from here.

    >>> p = image_layout("in_out_channel").placement((1, 17, 5, 7))
    >>> (p.width, p.height), [a.dim for a in p.row_axes], [a.dim for a in p.col_axes]
    ((35, 5), [0, 2], [1, 3])
    """
    layout: ImageLayout
    dims: tuple[int, ...]            # logical dims
    desc: MemoryDesc                 # the dense image desc over the image dims
    row_axes: tuple                  # Axis, outer to inner: y
    col_axes: tuple                  # Axis, outer to inner: x
    lane_axis: object                # Axis of the RGBA lane, None for one channel
    width: int
    height: int


PLACEMENTS = LRU("image placements", "CLAYOUT_PLACEMENT_CACHE", 4096)


def _placement(layout: ImageLayout, dims: tuple[int, ...]) -> ImagePlacement:
    return PLACEMENTS.get((layout, dims), lambda: _place(layout, dims))


def _place(layout: ImageLayout, dims: tuple[int, ...]) -> ImagePlacement:
    desc = layout.desc(dims)
    axes = desc.axes
    lane = axes[-1] if layout.lanes == 4 else None
    rows, cols = axes[:layout.rows], axes[layout.rows:len(axes) - (lane is not None)]
    height = math.prod(a.size for a in rows)
    # the width follows the column axes, also when a zero-volume row axis
    # leaves the image with no row
    width = math.prod(a.size for a in axes[layout.rows:]) // layout.lanes
    return ImagePlacement(layout, dims, desc, rows, cols, lane, width, height)


def _named(name, tag, rows, kind, lanes=4, ndims=4, groups=None):
    return ImageLayout(name, tag, rows, lanes, kind, ndims, groups)


NAMED = {layout.name: layout for layout in (
    _named("in_out_channel", "acBd4b", 2, "activation"),
    _named("in_out_height", "aCbd4c", 2, "activation"),
    _named("in_out_width", "acbD4d", 2, "activation"),
    _named("conv2d_filter", "Acdb4a", 3, "filter"),
    _named("dw_conv2d_filter", "Bacd4b", 1, "depthwise"),
    _named("argument", "A4a", 0, "argument", ndims=1),
    _named("weight_height", "Acdb4a", 1, "filter"),
    _named("weight_width", "acdB4b", 1, "filter"),
    _named("image_2d_weights_c4_fyx_b", "aB4b", 1, "filter", groups=((0,), (1, 2, 3))),
    _named("image_2d_weights_c1_b_fyx", "bcda", 3, "filter", lanes=1),
    _named("texture_2d", "cBda4b", 2, "activation"),
)}


def image_layout(name) -> ImageLayout:
    """A named layout, an ImageLayout, or a custom one written 'TAG:ROWS[:LANES]'
    (for example 'acBd4b:2' is in_out_channel)."""
    if isinstance(name, ImageLayout):
        return name
    if name in NAMED:
        return NAMED[name]
    if isinstance(name, str) and ":" in name:
        tag, _, rest = name.partition(":")
        rows, _, lanes = rest.partition(":")
        try:
            rows_i, lanes_i = int(rows), int(lanes or 4)
        except ValueError:
            rows_i = lanes_i = None
        if rows_i is not None:
            ndims = parse_tag(tag).ndims
            return ImageLayout(name, tag, rows_i, lanes_i, "custom", ndims)
    raise ClayoutError(f"unknown image layout {name!r}; named layouts: {', '.join(NAMED)}; "
                       "or a custom 'TAG:ROWS[:LANES]' such as 'acBd4b:2'")
