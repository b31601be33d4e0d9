"""Image layouts (docs/layouts.md), and ImageDesc: a layout placed at given dims.

An ``ImageLayout`` is (tag, rows, lanes) over the image's dims, on a
``storage`` (runtime.algebra.storage, docs/storage.md): on a 2-D image the
first ``rows`` outer axes of the tag form the image row ``y``, the remaining
axes form the column ``x`` (both row-major); on an image array or a 3-D
image the first ``layers`` axes form ``z`` before them; on an image buffer
or a buffer every axis forms one pixel index ``x``. With ``lanes=4`` the
innermost block of 4 is the RGBA lane; ``lanes=1`` is one channel (CL_R);
``lanes=0`` puts the innermost dim whole in one texel (1, 2 or 4 channels).
The host view of an image (height, width, lanes; depth, height, width,
lanes; pixels, lanes) is exactly the dense buffer of that desc, so every
conversion is a reorder. ``volume`` is the form for 5-D dims (N,C,D,H,W);
``groups`` merges logical dims before placing them (O, I*H*W); ``transform``
gives values computed from the tensor (runtime.algebra.transform).

An ``ImageDesc`` is one *side* of a conversion held in an image: a layout
at logical dims in an image dtype, its geometry (runtime.algebra.pixels)
worked out once. The other kind of side is a ``MemoryDesc``.

>>> in_out_channel = ImageLayout("in_out_channel", "acBd4b", rows=2, kind="activation")
>>> img = ImageDesc(in_out_channel, (1, 17, 5, 7))
>>> img.extent, img.array_shape, [a.dim for a in img.row_axes], [a.dim for a in img.col_axes]
((35, 5, 1), (5, 35, 4), [0, 2], [1, 3])
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..cache import LRU
from ..errors import ClayoutError
from . import dtypes, pixels
from .c_index import Numbers, pixel_expr
from .checks import as_ints
from .desc import Axis, MemoryDesc
from .kinds import KINDS
from .storage import STORAGES, Storage, check_layout, image_text, storage_of
from .tags import LETTERS, parse_tag
from .transform import Transform


@dataclass(frozen=True)
class ImageLayout:
    name: str
    tag: str
    rows: int
    lanes: int = 4
    kind: str = "custom"
    ndims: int = 4
    groups: tuple[tuple[int, ...], ...] | None = None
    transform: Transform | None = None
    storage: Storage = STORAGES["image2d"]   # given by name or as the record; kept as the record
    layers: int = 0
    volume: ImageLayout | None = None

    def __post_init__(self):
        object.__setattr__(self, "storage", storage_of(self.storage, self.name))
        check_layout(self, parse_tag(self.tag))

    def at(self, dims) -> ImageLayout:
        """The form of this layout for ``dims``: ``volume`` for 5-D dims, else itself."""
        if self.volume is not None and len(dims) == self.volume.ndims:
            return self.volume
        return self

    # -- dims ---------------------------------------------------------------
    @property
    def dim_names(self) -> tuple[str, ...]:
        """Upper-case names of the logical dims: N,C,H,W / O,I,H,W / ...; A, B, ... for custom."""
        kind = KINDS.get(self.kind)
        names = tuple(kind.dims.split(",")) if kind else ()
        return names if len(names) == self.ndims else tuple(LETTERS[:self.ndims].upper())

    @property
    def placed_names(self) -> tuple[str, ...]:
        """Lower-case names of the placed dims (the dims ``pixel`` and
        ``index`` speak of): the logical names, or, after a transform, its
        output's: two transformed axes are u, v (U's rows and columns), one is
        t; a split axis is q (= i/4) and j (= i%4)."""
        names = [n.lower() for n in self.dim_names]
        t = self.transform
        if t is None:
            return tuple(names)
        renamed = ("u", "v") if len(t.axes) == 2 else ("t",)
        for axis, name in zip(t.axes, renamed):
            names[axis] = name
        if t.split is not None:
            names[t.split[0]:t.split[0] + 1] = ["q", "j"]
        return tuple(names)

    @property
    def dims_text(self) -> str:
        """The logical dims as messages write them: 'N,C,H,W (or N,C)', 'a,b,c,d'."""
        kind = KINDS.get(self.kind)
        return kind.text if kind else ",".join(LETTERS[:self.ndims])

    def logical_dims(self, dims) -> tuple[int, ...]:
        """The canonical logical dims: 2-D activations (N, C) become (N, C, 1, 1)."""
        dims = as_ints(dims, "dims")
        if self.at(dims) is not self:
            return self.at(dims).logical_dims(dims)
        kind = KINDS.get(self.kind)
        if kind is not None and kind.two_d and len(dims) == 2:
            dims = dims + (1,) * (self.ndims - 2)
        if len(dims) != self.ndims or min(dims, default=0) < 0:
            what = kind.text if kind else f"{self.ndims} dims"
            if self.volume is not None:
                what += f" or {self.volume.dims_text}"
            raise ClayoutError(f"layout {self.name!r} takes dims {what}; got {dims}")
        return dims

    def default_tag(self, ndims: int | None = None) -> str:
        """The plain tag of this layout's logical dims (nchw, oihw, mihw, x; 'nc'
        for a 2-D activation), the default of to_image's src and from_image's dst."""
        nd = self.ndims if ndims is None else ndims
        if self.volume is not None and nd == self.volume.ndims:
            return self.volume.default_tag(nd)
        kind = KINDS.get(self.kind)
        if kind is not None and kind.two_d and nd == 2:
            return "nc"
        if kind is None or self.ndims != len(kind.default_tag):   # a split's 5 placed dims
            return LETTERS[:nd]
        return kind.default_tag

    def placed_dims(self, dims) -> tuple[int, ...]:
        """The dims the tag places, before ``groups``: the logical dims, or the
        transform's output dims."""
        dims = self.logical_dims(dims)
        if self.at(dims) is not self:
            return self.at(dims).placed_dims(dims)
        return self.transform.out_dims(dims) if self.transform else dims

    def image_dims(self, dims) -> tuple[int, ...]:
        """The dims of the image's dense desc: the placed dims, grouped."""
        if self.at(self.logical_dims(dims)) is not self:
            return self.at(self.logical_dims(dims)).image_dims(dims)
        dims = self.placed_dims(dims)
        if not self.groups:
            return dims
        return tuple(math.prod(dims[d] for d in group) for group in self.groups)

    # -- the public questions; each answered by the ImageDesc at these dims ---------
    def desc(self, dims, dtype="f32") -> MemoryDesc:
        """The dense buffer desc equal to this image's memory, over ``image_dims``."""
        return ImageDesc(self, dims, dtype).desc

    def image_shape(self, dims) -> tuple[int, ...]:
        """Pixels per coordinate: (width, height), (width, height, depth) or (pixels,)."""
        return ImageDesc(self, dims).shape

    def array_shape(self, dims) -> tuple[int, ...]:
        """The host array holding the image (``ImageDesc.array_shape``)."""
        return ImageDesc(self, dims).array_shape

    def pixel(self, dims, idx) -> tuple[int, ...]:
        """(x, y, lane) of the (placed) index ``idx``: (x, y, z, lane) on an
        array or a 3-D image, (x, lane) on a buffer."""
        return ImageDesc(self, dims).pixel(idx)

    def index(self, dims, *coords, **named) -> tuple[int, ...] | None:
        """The (placed) index at a pixel and lane (coordinates positional or
        named x, y, z, lane), or None for a padding lane; inverts ``pixel``.

        >>> in_out_channel = ImageLayout("in_out_channel", "acBd4b", rows=2, kind="activation")
        >>> in_out_channel.index((1, 17, 5, 7), x=30, y=2, lane=0)
        (0, 16, 2, 2)
        >>> in_out_channel.index((1, 17, 5, 7), x=30, y=2, lane=1) is None
        True
        """
        return ImageDesc(self, dims).index(*coords, **named)

    def c_pixel(self, dims, names) -> tuple[str, ...]:
        """``pixel`` of the index ``names`` (one OpenCL C expression per dim),
        constants baked in: in_out_channel at (2, 8, 2, 3), names n, c, h, w:
        ``("(c / 4) * 3 + w", "n * 2 + h", "(c % 4)")``."""
        return ImageDesc(self, dims).c_pixel(names, Numbers(bake=True))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, init=False, eq=False)
class ImageDesc:
    """A side of a conversion held in an image: ``ImageDesc(layout, dims,
    dtype="f32")`` (an ImageLayout, the logical dims, the image dtype).

    ``dims`` are the canonical logical dims (a 2-D activation becomes N,C,1,1);
    ``placed`` the dims the tag places (the transform's output dims for a
    layout with a ``transform``, else ``dims``); ``desc`` the image's memory,
    the dense MemoryDesc of ``layout.tag`` over the image dims (``placed``
    grouped), in ``dtype``; ``layer_axes`` / ``row_axes`` / ``col_axes`` /
    ``lane_axis`` the desc's physical axes that form z, the row y, the
    column x and the lane (None for one channel); ``width``, ``height``,
    ``depth`` the extent in pixels (height and depth 1 where the storage has
    no such coordinate); ``lanes`` the values per pixel. ``pixel``,
    ``index`` and ``c_pixel`` work on placed indices. ``layout`` is the form
    of the layout for these dims (its ``volume`` for 5-D dims).
    """
    layout: ImageLayout
    dims: tuple[int, ...]
    dtype: dtypes.DType
    placed: tuple[int, ...]
    desc: MemoryDesc
    layer_axes: tuple[Axis, ...]
    row_axes: tuple[Axis, ...]
    col_axes: tuple[Axis, ...]
    lane_axis: Axis | None
    width: int
    height: int
    depth: int
    lanes: int

    is_image = True   # class constants, not fields (runtime/algebra/side.py)
    is_frame = False

    def __init__(self, layout: ImageLayout, dims, dtype="f32"):
        if not isinstance(layout, ImageLayout):
            raise ClayoutError(f"ImageDesc takes an ImageLayout, got {type(layout).__name__} "
                               "(runtime.image_layout(name) gives one)")
        dims = layout.logical_dims(dims)
        layout = layout.at(dims)
        dt = dtypes.image_dtype(dtype)
        values = GEOMETRY.get((layout, dims, dt.name), lambda: pixels.geometry(layout, dims, dt))
        for name, value in zip(("layout", "dims", "dtype", "placed", "desc", "layer_axes",
                                "row_axes", "col_axes", "lane_axis", "width", "height", "depth",
                                "lanes"),
                               (layout, dims, dt) + values):
            object.__setattr__(self, name, value)

    # -- the side's common face (a MemoryDesc has the same) -------------------------
    @property
    def memory(self) -> MemoryDesc:
        """The memory this side occupies: the image's dense desc."""
        return self.desc

    @property
    def is_zero(self) -> bool:
        return math.prod(self.dims) == 0

    @property
    def transform(self) -> Transform | None:
        return self.layout.transform

    # -- the image --------------------------------------------------------------------
    @property
    def storage(self) -> Storage:
        """The storage record (runtime.algebra.storage) the image lives on."""
        return self.layout.storage

    @property
    def extent(self) -> tuple[int, int, int]:
        """(width, height, depth) in pixels."""
        return self.width, self.height, self.depth

    @property
    def shape(self) -> tuple[int, ...]:
        """The size in pixels, one number per coordinate of the storage:
        (width, height), (width, height, depth) or (pixels,)."""
        return self.extent[:self.storage.ndim]

    @property
    def array_shape(self) -> tuple[int, ...]:
        """The host array holding the image: its coordinates outer first, then
        the lanes: (height, width, 4) or (height, width) for one channel;
        (depth, height, width, 4); (pixels, 4); lanes 0: (height, width, C)."""
        return tuple(reversed(self.shape)) + ((self.lanes,) if self.layout.lanes != 1 else ())

    @property
    def pixel_bytes(self) -> int:
        """Bytes of one pixel: its lanes times the dtype's size (the one place
        it is said: a row pitch, a tile's rectangle, an image's size)."""
        return self.lanes * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the image: every pixel's lanes, padding lanes included."""
        return self.width * self.height * self.depth * self.pixel_bytes

    def with_dtype(self, dtype) -> ImageDesc:
        return ImageDesc(self.layout, self.dims, dtype)

    def stored(self) -> ImageDesc:
        """This image with its transform left out: the layout placing the
        transform's output (``placed``) as it is (itself when there is none)."""
        if self.transform is None:
            return self
        return ImageDesc(_untransformed(self.layout), self.placed, self.dtype)

    def describe(self) -> str:
        """'in_out_channel 1x17x5x7 f32 (image 35x5 RGBA)', for messages."""
        return (f"{self.layout.name} {'x'.join(map(str, self.dims))} {self.dtype.name} "
                f"({image_text(self)})")

    @property
    def channels(self) -> str:
        """The channel order's name: RGBA, R, RG or RGB (lanes 0: one per value)."""
        return {4: "RGBA", 1: "R", 2: "RG", 3: "RGB"}.get(self.lanes, f"{self.lanes} lanes")

    def __repr__(self) -> str:
        return f"ImageDesc({self.describe()})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, ImageDesc):
            return NotImplemented
        return (self.layout, self.dims, self.dtype) == (other.layout, other.dims, other.dtype)

    def __hash__(self) -> int:
        return hash((self.layout, self.dims, self.dtype.name))

    # -- index math: placed index <-> (x, y, lane) (runtime.algebra.pixels) -------------
    def pixel(self, idx) -> tuple[int, ...]:
        """The coordinates (x, y; x, y, z; or x) and lane of the placed index ``idx``."""
        return pixels.pixel(self, idx)

    def at_offset(self, off: int) -> tuple[int, ...]:
        """The coordinates and lane of element ``off`` of the dense buffer."""
        return pixels.at_offset(self, off)

    def index(self, *coords, **named) -> tuple[int, ...] | None:
        """The placed index stored at the pixel of ``coords`` (x, y; x, y, z;
        or x, by storage; the lane may follow them, or be named ``lane``; all
        may be named x, y, z), or None when that lane is padding; the inverse
        of ``pixel``."""
        return pixels.index(self, *coords, **named)

    def c_pixel(self, names, num: Numbers) -> tuple[str, ...]:
        """The coordinates and lane of the placed index ``names`` as C
        expressions (numbers baked or passed as arguments by ``num``);
        mirrors ``pixel``."""
        return pixel_expr(self, names, num)


# The geometry of (layout, dims, dtype), worked out once: an ImageDesc is made
# on every conversion, so its constructor is one lookup here.
GEOMETRY = LRU("image geometry", "CLAYOUT_PLACEMENT_CACHE", 4096)


def _untransformed(layout: ImageLayout) -> ImageLayout:
    split = layout.transform.split is not None
    return ImageLayout(layout.name, layout.tag, layout.rows, layout.lanes, layout.kind,
                       layout.ndims + split, layout.groups, storage=layout.storage,
                       layers=layout.layers)
