"""The tiled family's launch: which destination axes a tile spans, its shape,
and where its cells live in local memory (runtime/opencl/launch.py plans the
direct family; runtime/opencl/render.py renders either).

A work-group of ``TILE_ITEMS`` work items loads one tile of cells with
consecutive work items along B, the destination axis that walks the
source's contiguous direction, waits at one barrier, and stores it with
consecutive work items along A, the destination's own contiguous direction.
A cell is what one work item of the direct family writes: one element of a
buffer (a scalar store: consecutive work items store consecutive elements,
so no vector is split into scalars by a compiler that cannot prove its
alignment), or one pixel of an image (its lanes).

* **Merged axes.** A and B are groups of destination axes: an axis outside
  A (or B) whose elements continue A's (or B's) in both the source and the
  destination joins it (NCHW->NHWC at C = 3: H and W are one run of 50176
  on both sides; a 3x3 filter's kh and kw one of 9), so a tile is not cut
  where memory is not.
* **The shape follows the extent.** A side of a tile is the extent itself
  where that is short (3 channels, 9 taps: every work item has a cell, and
  a warp's loads run on from one row of the tile into the next as memory
  does), else 32 across and the rest of the cells along. A tile holds
  ``TILE_CELLS`` cells, fewer where that leaves fewer than ``TILE_GROUPS``
  groups (two waves of a large GPU). A generic kernel takes the shape as
  arguments: its source is one per family, its local array the largest
  tile's.
* **Banks.** A tile lies in local memory one plane a lane, in rows of B's
  cells or of A's, each padded by the skew that leaves the fewest
  local-memory wavefronts over both phases (counted here for 32 banks of 4
  bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..algebra.c_index import Numbers
from .launch import VEC, Launch, decode, vector_width

TILE_ITEMS = 256       # 8 NVIDIA warps, 4 AMD wavefronts; one size: PoCL compiles a program once
TILE_CELLS = 1024      # 4 a work item in each phase: the 32x8 block, 4 rows a thread, of fast
#                        GPU transposes
TILE_GROUPS = 2048     # tiles of fewer cells (down to TILE_ITEMS) until a move has this many
TILE_BYTES = 16 << 10  # an NVIDIA SM keeps several groups; Intel's CPU runtime has 32 KiB
LOCAL_BYTES = TILE_BYTES + (1 << 10)   # with the rows' skews: what a group's local array takes
BANKS = 32             # local memory: 32 banks of 4-byte words (NVIDIA, AMD)
CELL_VECTOR = 4        # a cell of a run both sides share: at most 4 elements


@dataclass(frozen=True)
class Tiling:
    """The tiles of a tiled launch: ``across`` cells along A by ``along``
    cells along B, ``counts``: tiles along A, tiles along B and positions of
    the other axes (g2); cell (ca, cb) of lane j at word ``j * plane + ca *
    sa + cb * sb`` of local memory (``local_layout``); ``words``: the local
    array's length (a generic kernel's: its family's largest tile)."""
    across: int
    along: int
    counts: tuple[int, int, int]
    sa: int
    sb: int
    plane: int
    words: int
    by_element: bool = False   # the load phase: an element a work item, in the source's order

    @property
    def cells(self) -> int:
        return self.across * self.along

    @property
    def groups(self) -> int:
        return math.prod(self.counts)


def plan_tiled(dst, image, source_step, num: Numbers, itemsize: int,
               sector: int = 8) -> Launch | None:
    """The tiled launch writing all of ``dst`` (a buffer desc, or the dense
    desc of the ImageDesc ``image``), or None where the move does not
    transpose: where B (the destination axis with the least
    ``source_step(axis, elements)``, how far in the source a step of one
    digit moves; None where unknown) is A itself, or either side of the
    tile would be a single cell. A is the destination's contiguous
    direction: its innermost axis (an image's innermost column axis, a cell
    being one pixel)."""
    axes = [a for a in dst.axes if (a.outer or a.size > 1) and not num.unit(a.size)]
    if image is not None:
        vec_axis = image.lane_axis
        vector = image.lanes if vec_axis is not None else 1
        cols = [a for a in image.col_axes if a in axes]
        across = cols[-1] if cols else None
    elif axes:
        vec_axis, vector = axes[-1], 1
        across = VEC if vec_axis.size > 1 else axes[-2] if len(axes) > 1 else None
        inner = source_step(vec_axis, 1)
        if inner == 1 and across == VEC and len(axes) > 1:
            # both sides' innermost run (nhwc -> nChw4c: the 4c block): a cell is that run, one
            # vector, and the tile transposes the axes outside it
            vector = vector_width(vec_axis.size, vec_axis.stride, itemsize, CELL_VECTOR)
            across = VEC if vec_axis.size // vector > 1 else axes[-2]
    else:
        return None
    if across is None:
        return None
    cells = [a for a in axes if a is not vec_axis]
    size = (lambda a: vec_axis.size // vector if a == VEC else a.size)
    axis = (lambda a: vec_axis if a == VEC else a)

    def step(a, n=1):
        return source_step(vec_axis, vector * n) if a == VEC else source_step(a, n)
    known = {a: abs(s) for a in cells + ([VEC] if across == VEC else [])
             if (s := step(a)) is not None}
    if across not in known:
        return None
    walker = min(known, key=lambda a: (known[a], a is not across))
    # an image's lanes that run on in the source (NHWC's channels) are loaded one a work item:
    # a tile even where the pixels do not transpose (NHWC at C = 3: a row of pixels, B none)
    lane = source_step(vec_axis, 1) if image is not None and vector > 1 else None
    by_element = lane is not None and abs(lane) < known[walker]
    if walker is across or size(walker) < 2:
        if not by_element:
            return None
        walker = None
    if size(across) < 2:
        return None
    order = [a for a in dst.axes if a in cells or a is vec_axis]
    a_group = _merged(across, order, size, axis, step, (walker,), image)
    b_group = () if walker is None else _merged(walker, order, size, axis, step, a_group, image)
    others = tuple(a for a in cells if a not in a_group and a not in b_group)
    sizes = (math.prod(map(size, a_group)), math.prod(map(size, b_group)),
             math.prod(a.size for a in others))
    ta, tb = shape(sizes, vector * itemsize, sector)
    room = LOCAL_BYTES // (vector * itemsize)   # words of a plane the skew may take
    sa, sb, plane = local_layout(ta, tb, room, vector, by_element)
    # a generic kernel's array holds any tile of its family: LOCAL_BYTES
    words = vector * plane if num.bake else LOCAL_BYTES // itemsize
    tiling = Tiling(ta, tb, (-(-sizes[0] // ta), -(-sizes[1] // tb), sizes[2]), sa, sb, plane,
                    words, by_element)
    return Launch((a_group, b_group, others), sizes, vec_axis, vector,
                  None if image is not None else b_group[-1], image is not None, tiling)


def _merged(first, order, size, axis, step, taken, image) -> tuple:
    """``first`` and the destination axes just outside it (outer to inner)
    whose digits continue its run in both memories: the destination's stride
    (a pixel coordinate's, on an image) is the run's extent times its own,
    and so is the source's step."""
    group = [first]
    while True:
        inner = group[0]
        at = order.index(axis(inner))
        if at == 0:
            break
        outer = order[at - 1]
        if outer in taken or outer == axis(first) or (image is not None and
                                                      _coordinate(image, outer) !=
                                                      _coordinate(image, axis(inner))):
            break
        run = math.prod(map(size, group))
        s_outer, s_inner = step(outer), step(inner)
        if s_outer is None or s_inner is None or outer.stride != axis(inner).stride * \
                (size(inner) if inner != VEC else axis(inner).size) or s_outer != s_inner * run:
            break
        group.insert(0, outer)
    return tuple(group)


def _coordinate(image, a) -> str:
    return "x" if a in image.col_axes else "y" if a in image.row_axes else "z"


def shape(sizes, cell_bytes: int, sector: int) -> tuple[int, int]:
    """(cells along A, cells along B) of a tile of a move of ``sizes`` (A's,
    B's and the other axes' cells): B whole where it is short (up to 32),
    else at least 32; A whole where it is short, else at least 32 (a
    filter's 9 taps: 32 x 9, whose rows fall on 32 banks both ways) and
    more where the budget leaves room (3 channels: 80 x 3); the budget ``TILE_CELLS``
    cells, fewer (to one a work item) where the move would have fewer than
    ``TILE_GROUPS`` tiles, at most ``TILE_BYTES`` of values. A side cut
    short of its extent is a multiple of ``sector`` cells (a 32-byte
    sector's elements), so that every tile's runs start on a sector."""
    total = math.prod(sizes)
    budget = TILE_CELLS
    while budget > TILE_ITEMS and total // budget < TILE_GROUPS:
        budget //= 2
    while budget * cell_bytes > TILE_BYTES and budget > 64:
        budget //= 2
    a, b = sizes[0], sizes[1]
    tb = b if b <= 32 else _cut(b, max(32, budget // min(a, 32)), sector)
    ta = _cut(a, max(32, budget // tb), sector)
    return ta, tb


def _cut(extent: int, most: int, sector: int) -> int:
    """``extent`` where it is at most ``most``, else ``most`` down to a multiple of ``sector``."""
    if extent <= most:
        return extent
    return max(sector, most - most % sector) if most >= sector else most


def local_layout(across: int, along: int, room: int, vector: int = 1,
                 by_element: bool = False) -> tuple[int, int, int]:
    """Where lane j of cell (ca, cb) of a tile lives in local memory: ``j *
    plane + ca * sa + cb * sb``; (sa, sb, plane). Rows hold B's cells (sa =
    along + s, sb = 1) or A's (sa = 1, sb = across + s), s < 32 a skew,
    whichever leaves the fewest local-memory wavefronts over the load phase
    (consecutive work items along B: cell e is (e / along, e % along); or,
    ``by_element``, element e is lane e % V of cell e / V) and the store
    phase (consecutive work items along A: cell e is (e % across, e /
    across), a lane at a time), a request being 32 consecutive work items;
    a plane within ``room`` words."""
    e = np.arange(across * along)
    store = (np.zeros_like(e), e % across, e // across)
    if by_element:
        x = np.arange(across * along * vector)
        load = (x % vector, (x // vector) // along, (x // vector) % along)
    else:
        load = (np.zeros_like(e), e // along, e % along)
    phases = [(j, ca, cb, np.arange(len(j)) // BANKS) for j, ca, cb in (load, store)]
    ideal = sum(-(-len(j) // BANKS) for j, _, _ in (load, store))

    def cost(sa, sb, plane) -> int:
        """Wavefronts of both phases: per request, its busiest bank's words."""
        total = 0
        for j, ca, cb, request in phases:
            bank = (j * plane + ca * sa + cb * sb) % BANKS
            counts = np.bincount(request * BANKS + bank, minlength=(request[-1] + 1) * BANKS)
            total += int(counts.reshape(-1, BANKS).max(axis=1).sum())
        return total
    best = None
    for rows, length in ((across, along), (along, across)):
        for s in range(BANKS):
            row = length + s
            if s and rows * row > room:
                break
            sa, sb = (row, 1) if rows == across else (1, row)
            c = cost(sa, sb, rows * row)
            if best is None or c < best[0]:
                best = (c, (sa, sb, rows * row))
            if c == ideal:   # no request waits on a bank: none is better
                return best[1]
    if vector > 1:   # then the planes apart by a skew of their own (lanes loaded side by side)
        sa, sb, plane = best[1]
        for p in range(1, BANKS):
            if plane + p > room:
                break
            c = cost(sa, sb, plane + p)
            if c < best[0]:
                best = (c, (sa, sb, plane + p))
            if c == ideal:
                break
    return best[1]


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
