"""How a conversion kernel is launched, and which destination elements each
work item writes (the first step of rendering: runtime/opencl/render.py).

A buffer destination splits its innermost axis into vectors of V elements
(``vstoreV``) on dimension 0; dimension 1 is the destination axis that walks
the source's contiguous axis (so a work group reads and writes whole cache
lines: a tiled transpose without local memory); dimension 2 is everything
else. An image destination launches (width, height, depth): work item
(x, y, z) writes pixel (x, y) of layer or slice z (depth 1 on a 2-D image;
the layer axes on dimension 2), all its lanes at once (4, or a single
texture's C), so no coordinate can leave the image. A baked kernel
launches these three dimensions; a generic one launches their product in one
dimension with one work-group size and decodes (g0, g1, g2) from its id
(``work_item_ids``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..algebra.c_index import Numbers
from ..algebra.desc import Axis

MAX_VECTOR_BYTES = 64

# A generic kernel's work-group size, the same for every shape: PoCL compiles a
# kernel once more for each local size it is launched with (40-500 ms each,
# cold), so a size that followed the dims would cost a model load one compile
# per weight shape again. Its launch is one-dimensional (no group padding
# beyond this many items); 256 as for the baked buffer and image kernels.
GENERIC_LOCAL = 256

VEC = "vec"   # the group member standing for the vector axis, V elements at a time

# The tiled family's work-group: 256 work items (8 NVIDIA warps, 4 AMD
# wavefronts; one size, so PoCL compiles a tiled program once), a tile of at
# most 1024 cells (4 a work item in each phase: the 32x8 block with 4 rows a
# thread of the fast GPU transposes), at most 16 KiB of values (an NVIDIA
# SM keeps several groups resident; Intel's CPU runtime has 32 KiB of local
# memory), a cell at most 4 elements (one 16-byte store of f32).
TILE_ITEMS = 256
TILE_CELLS = 1024
TILE_BYTES = 16 << 10
TILE_VECTOR = 4


@dataclass(frozen=True)
class Tiling:
    """The tiles of a tiled launch: ``across`` cells along A by ``along``
    cells along B (powers of two), ``counts`` tiles along A, tiles along B
    and positions of the other axes (g2); ``padded``: a tile's row in local
    memory."""
    across: int
    along: int
    counts: tuple[int, int, int]

    @property
    def cells(self) -> int:
        return self.across * self.along

    @property
    def padded(self) -> int:
        """A row of the tile in local memory: ``along`` plus a skew, so that
        the 32 work items of a store step, which walk ``across`` rows and
        32 / ``across`` columns, each meet their own of 32 banks (+1 for 32
        rows, +8 for 4); the load step walks along a row."""
        return self.along + (max(1, 32 // self.across) if self.along % 32 == 0 else 1)

    @property
    def groups(self) -> int:
        return math.prod(self.counts)


@dataclass(frozen=True)
class Launch:
    """The launch of one kernel: the destination axes each work item decodes
    from its ids, in three groups (dimensions 0, 1, 2; ``VEC`` stands for the
    vector axis), how many work items each dimension has, the vector axis and
    its width (the elements or lanes one work item writes), and the axis
    dimension 1 tiles along (a buffer destination's). A tiled launch
    (``tiling`` set) has A alone in the first group, B alone in the
    second; its ``sizes`` count cells, and a cell is what one work item of
    the direct family writes."""
    groups: tuple[tuple, tuple, tuple]
    sizes: tuple[int, int, int]
    vec_axis: Axis | None
    vector: int
    tile: Axis | None
    image: bool
    tiling: Tiling | None = None
    apart: bool = False     # the vector's elements lie apart in memory (one store each)

    def group_sizes(self, group) -> list[int]:
        return [(self.vec_axis.size // self.vector) if a == VEC else a.size for a in group]


def vector_width(size: int, stride: int, itemsize: int, limit: int = 16) -> int:
    if stride != 1:
        return 1
    return next((v for v in (16, 8, 4, 2) if v <= limit and size % v == 0
                 and v * itemsize <= MAX_VECTOR_BYTES), 1)


def plan_launch(dst, image, tile_of, num: Numbers, pixel_dim: int | None = None) -> Launch:
    """The launch writing all of ``dst`` (a buffer desc, or the dense desc of
    the ImageDesc ``image`` written with write_image*). ``tile_of(rest)``
    picks the buffer destination's tile axis among ``rest``. ``pixel_dim``:
    the dim whose values one source load gives together (a frame's
    channels): where a buffer destination holds it as one axis of 2..4 that
    is not its innermost (NCHW), the work item writes that axis (stores
    apart, one load) instead of computing each pixel once per element."""
    # a unit block is structure (never an axis); a unit outer axis only when baked
    axes = [a for a in dst.axes if (a.outer or a.size > 1) and not num.unit(a.size)]
    if image is None and pixel_dim is not None:
        own = [a for a in dst.axes if a.dim == pixel_dim]
        if len(own) == 1 and own[0] in axes[:-1] and 2 <= own[0].size <= 4:
            vec_axis = own[0]
            rest = [a for a in axes if a is not vec_axis]
            tile = tile_of(rest)
            others = tuple(a for a in rest if a is not tile)
            groups = ((VEC,), (tile,) if tile else (), others)
            sizes = (1,) + tuple(math.prod(a.size for a in g) for g in groups[1:])
            return Launch(groups, sizes, vec_axis, vec_axis.size, tile, False, apart=True)
    if image is not None:
        rows = tuple(a for a in image.row_axes if a in axes)
        cols = tuple(a for a in image.col_axes if a in axes)
        layers = tuple(a for a in image.layer_axes if a in axes)
        vec_axis = image.lane_axis
        return Launch((cols, rows, layers), (image.width, image.height, image.depth), vec_axis,
                      image.lanes if vec_axis is not None else 1, None, True)
    vec_axis = axes[-1] if axes else None
    vector = vector_width(vec_axis.size, vec_axis.stride, dst.dtype.itemsize) if vec_axis else 1
    rest = axes[:-1]
    tile = tile_of(rest)
    others = tuple(a for a in rest if a is not tile)
    groups = ((VEC,) if vec_axis else (), (tile,) if tile else (), others)
    sizes = tuple(math.prod((vec_axis.size // vector) if a == VEC else a.size for a in g)
                  for g in groups)
    return Launch(groups, sizes, vec_axis, vector, tile, False)


def plan_tiled(dst, image, source_step, num: Numbers) -> Launch | None:
    """The tiled launch writing all of ``dst`` (as ``plan_launch``), or None
    where the move does not transpose: where the destination axis that walks
    the source's contiguous direction (the least ``source_step(axis,
    elements)``: how far in the source a step of one digit moves, None where
    that is unknown) is A itself, or either side of the tile would be a
    single cell. A is the destination's contiguous direction at cell
    granularity: the cells of the innermost axis (V = up to 4 elements)
    where it has several, else the next axis out; an image's innermost
    column axis, a cell being one pixel."""
    axes = [a for a in dst.axes if (a.outer or a.size > 1) and not num.unit(a.size)]
    if image is not None:
        vec_axis = image.lane_axis
        vector = image.lanes if vec_axis is not None else 1
        cols = [a for a in image.col_axes if a in axes]
        across = cols[-1] if cols else None
    elif axes:
        vec_axis = axes[-1]
        vector = vector_width(vec_axis.size, vec_axis.stride, dst.dtype.itemsize, TILE_VECTOR)
        across = VEC if vec_axis.size // vector > 1 else axes[-2] if len(axes) > 1 else None
    else:
        return None
    if across is None:
        return None
    cells = [a for a in axes if a is not vec_axis]
    steps = {a: source_step(a, 1) for a in cells}
    if across == VEC:
        steps[VEC] = source_step(vec_axis, vector)
    known = {a: abs(s) for a, s in steps.items() if s is not None}
    if across not in known:
        return None
    walker = min(known, key=lambda a: (known[a], a is not across))
    size = (lambda a: vec_axis.size // vector if a == VEC else a.size)
    if walker is across or size(across) < 2 or size(walker) < 2:
        return None
    others = tuple(a for a in cells if a is not across and a is not walker)
    sizes = (size(across), size(walker), math.prod(a.size for a in others))
    # the tile: up to 32 cells across, the rest of TILE_CELLS along (whole lines both
    # ways); where B is short (a 3x3 filter's W), more across, so no work item idles.
    # A generic kernel sizes its tile by the structure alone (an inner block's
    # size, else 32 across and the rest along), so its source is one per family.
    def fixed(a) -> bool:
        return num.bake or not (vec_axis if a == VEC else a).outer

    def fit(a, size, most):
        return min(_pow2_at_least(size), most) if fixed(a) else most
    ta = fit(across, sizes[0], 32)
    tb = fit(walker, sizes[1], max(32, TILE_CELLS // ta))
    ta = fit(across, sizes[0], max(ta, TILE_CELLS // tb))
    while vector * ta * tb * dst.dtype.itemsize > TILE_BYTES:
        if tb > 32:
            tb //= 2
        else:
            ta //= 2
    tiling = Tiling(ta, tb, (-(-sizes[0] // ta), -(-sizes[1] // tb), sizes[2]))
    return Launch(((across,), (walker,), others), sizes, vec_axis, vector,
                  None if image is not None else walker, image is not None, tiling)


def tile_ids(launch: Launch, num: Numbers, group: str = "get_group_id(0)") -> str:
    """The C that gives a tiled group its tile: ``ta``, ``tb`` (the tile's
    place along A and B) and ``g2`` (the other axes' position), decoded from
    the group id ``group`` (numbers baked or passed as arguments, as ``decode``)."""
    n_a, n_b, _ = launch.tiling.counts
    digits = decode("grp", ("g2", "tb", "ta"), (0, n_b, n_a), num)
    g2, tb, ta = (d for _, d in digits)
    return (f"const idx_t grp = {group}, g2 = {g2};\n"
            f"    const idx_t tb = {tb}, ta = {ta};\n"
            f"    const uint lid = get_local_id(0);")


def tile_axis(src, rest, bake: bool):
    """The destination axis (among ``rest``) that walks the source's most
    contiguous axis (``src``: how the kernel reads its source, a sides.Source; so a
    work group reads whole cache lines: a tiled transpose without local
    memory), else the next axis out. Baked, only axes at least 8 long count
    (a 3x3 filter's W = 3 would leave the dimension idle); generic, the choice
    follows the structure alone."""
    if not rest:
        return None
    if src.image is None:
        s_axes = [a for a in src.desc.axes if not bake or a.size >= 8]
        order = sorted(s_axes, key=lambda a: a.stride) if bake else list(reversed(s_axes))
        for s_axis in order:
            match = [a for a in rest if src.dim_map.get(a.dim) == s_axis.dim
                     and (not bake or a.size >= 8)]
            if match:
                return min(match, key=lambda a: abs(a.div - s_axis.div))
    return rest[-1]


def decode(g: str, axes, sizes, num: Numbers) -> list[tuple[object, str]]:
    """Digits of a group of axes (outer to inner) from global id ``g``."""
    out = []
    for i, (a, n) in enumerate(zip(axes, sizes)):
        below = math.prod(sizes[i + 1:])
        d = g if i == len(axes) - 1 else num.div(g, below, key=(g, "below", i))
        out.append((a, d if i == 0 else num.mod(d, n, key=(g, "size", i))))
    return out


def work_item_ids(sizes, num: Numbers) -> tuple[str, str]:
    """The C that gives work item ids g0, g1, g2 (g0 fastest) and the guard
    that returns past the last one. Baked: the three global ids of a 3-D
    launch. Generic: one global id, decoded with the sizes as arguments, so
    the launch (and the local size PoCL compiles for) is the same for every
    shape."""
    if num.bake:
        return ("const idx_t g0 = get_global_id(0), g1 = get_global_id(1), "
                "g2 = get_global_id(2);",
                " || ".join(f"g{i} >= {num(n)}" for i, n in enumerate(sizes)))
    total = num(math.prod(sizes))
    s0, s01 = sizes[0], sizes[0] * sizes[1]
    g2 = num.div("t", s01, key="t01")
    g01 = f"t - g2 * {num(s01, key='t01')}"
    g1 = num.div("g01", s0, key="t0")
    return (f"const idx_t t = get_global_id(0), g2 = {g2}, g01 = {g01};\n"
            f"    const idx_t g1 = {g1}, g0 = g01 - g1 * {num(s0, key='t0')};",
            f"t >= {total}")


def local_size(sizes, image: bool, gather: bool, far: bool = False) -> tuple[int, int, int]:
    """Work-group size of a baked kernel (PoCL runs a group as one loop;
    measured on PoCL 3.1, noisy): an image written from vector loads streams
    best as rows of 256; one gathered from scattered loads as 16 x 16 tiles;
    a buffer in groups of 256 with 32 along dimension 1, the axis walking
    the source's contiguous one, and dimension 2 making up the rest; a
    buffer vector gathered from lanes >= 4 KiB apart (``far``) one vector
    per group, 256 along dimension 1."""
    if image:
        l0 = min(256 if not gather else 16, _pow2_at_least(sizes[0]))
        return l0, min(max(1, 256 // l0), _pow2_at_least(sizes[1])), 1
    if far:
        # each work item reads its vector from `vector` far-apart source rows
        # (NCHW planes 1 MiB apart): one vector per group keeps the rows read at
        # once few enough for the cache ways (with huge pages they all share
        # sets); 4 vectors per group measured 13-54 ms by placement. Along
        # dimension 1, 256 items (whole source runs of 1 KiB per plane) beat 64:
        # 1x64x512x512 NCHW->NHWC 14.0-14.6 -> 10.9-11.7 ms, ->nChw16c 11.0-11.8 ->
        # 8.3-9.2, staged ->in_out_channel 8.0-8.2 -> 5.9-6.1; at 224 2.8-3.1 -> 2.3-2.5
        l1 = min(256, _pow2_at_least(sizes[1]))
        l0 = 1
    else:
        l1 = min(32, _pow2_at_least(sizes[1]))
        l0 = min(max(1, 256 // l1), _pow2_at_least(sizes[0]))
    # when the vector absorbs dimension 0 and dimension 1 is short, fill the
    # group along dimension 2: PoCL pays per group, groups of 4 were 5x slower
    l2 = min(max(1, 256 // (l0 * l1)), _pow2_at_least(sizes[2]))
    return l0, l1, l2


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
