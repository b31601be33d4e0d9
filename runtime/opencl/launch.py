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
(``work_item_ids``). This is the direct family's launch; the tiled family's,
whose work-groups move tiles through local memory, is runtime/opencl/tiled.py's.
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
    tiling: object = None   # the tiles of the tiled family (runtime/opencl/tiled.py), or None
    apart: bool = False     # the vector's elements lie apart in memory (one store each)

    def group_sizes(self, group) -> list[int]:
        return [(self.vec_axis.size // self.vector) if a == VEC else a.size for a in group]


def vector_width(size: int, stride: int, itemsize: int, limit: int = 16) -> int:
    if stride != 1:
        return 1
    return next((v for v in (16, 8, 4, 2) if v <= limit and size % v == 0
                 and v * itemsize <= MAX_VECTOR_BYTES), 1)


def plan_launch(dst, image, tile_of, num: Numbers, pixel_dim: int | None = None,
                widest: int = 16) -> Launch:
    """The launch writing all of ``dst`` (a buffer desc, or the dense desc of
    the ImageDesc ``image`` written with write_image*). ``tile_of(rest)``
    picks the buffer destination's tile axis among ``rest``. ``pixel_dim``:
    the dim whose values one source load gives together (a frame's
    channels): where a buffer destination holds it as one axis of 2..4 that
    is not its innermost (NCHW), the work item writes that axis (stores
    apart, one load) instead of computing each pixel once per element.
    ``widest``: the most elements a buffer destination's vector may have
    (a GPU's plan: 1, consecutive work items storing consecutive elements)."""
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
    vector = vector_width(vec_axis.size, vec_axis.stride, dst.dtype.itemsize, widest) \
        if vec_axis else 1
    rest = axes[:-1]
    tile = tile_of(rest)
    others = tuple(a for a in rest if a is not tile)
    groups = ((VEC,) if vec_axis else (), (tile,) if tile else (), others)
    sizes = tuple(math.prod((vec_axis.size // vector) if a == VEC else a.size for a in g)
                  for g in groups)
    return Launch(groups, sizes, vec_axis, vector, tile, False)


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
