"""One conversion kernel: what each work item computes, how the kernel is
launched, and its OpenCL C source (runtime.opencl.kernels chooses and caches
the kernels; this module builds one).

A conversion writes every position of the destination's footprint (halo and
block tails included) from its own physical axes: the work item's global id
is decoded into the destination's axis digits, the digits give each element's
halo-padded index per dim, and from the logical index the source side gives
the load (``c_index.offset_expr`` for a buffer, ``c_index.pixel_expr`` for an
image). All three kinds (buffer->buffer, buffer->image, image->buffer) render
the one template ``convert.cl.mako``.

Launch geometry: a buffer destination splits its innermost axis into vectors
of V elements (``vstoreV``) on dimension 0; dimension 1 is the destination
axis that walks the source's contiguous axis (so a work group reads and
writes whole cache lines: a tiled transpose without local memory); dimension
2 is everything else. An image destination launches (width, height): work
item (x, y) writes pixel (x, y), so no coordinate can leave the image. A
baked kernel launches these three dimensions; a generic one launches their
product in one dimension with one work-group size and decodes (g0, g1, g2)
from its id (``_work_item_ids``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources

from mako.template import Template

from ..algebra.c_index import Numbers, arg_value, offset_expr, paren, pixel_expr, unchanged_dims
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageLayout
from . import convert

KERNEL_NAME = "clayout_convert"
MAX_VECTOR_BYTES = 64
@dataclass(frozen=True)
class Kernel:
    """A rendered conversion: its source, its argument values and how to launch it."""
    source: str
    sizes: tuple[int, int, int]      # work items per dimension (the guard)
    local: tuple[int, int, int]      # work-group size
    vector: int                      # elements (or lanes) each work item writes
    src_image: bool
    dst_image: bool
    image_shape: tuple[int, int] | None   # (width, height) of the image side
    args: tuple = ()                 # values of the scalar arguments after src, dst
    generic: bool = False            # numbers passed as arguments (shared program)
    family: tuple = ()               # what the source of a generic kernel depends on
    copy: tuple[int, int] | None = None   # no kernel: copy this many bytes, zero up to that many

    @property
    def launch(self) -> tuple[int, ...]:
        """Global size: a baked kernel's ``sizes`` rounded up to whole work
        groups; a generic kernel's work items in one dimension, rounded up
        to its one group size (the kernel decodes (g0, g1, g2) from it)."""
        sizes = (math.prod(self.sizes),) if self.generic else self.sizes
        return tuple(-(-s // lo) * lo for s, lo in zip(sizes, self.local))


def copy_kernel(src: MemoryDesc, dst: MemoryDesc) -> Kernel | None:
    """A conversion that is a byte copy, or None: the same dims (an image's
    dims may group a layout's logical ones) and dtype on both sides, every
    element at the same offset (``linear_strides``), those offsets
    filling [0, n) (row-major in some order), so the first n elements move as
    they are and the rest of dst, its padding, is zero (a bias onto an
    ``argument`` image: the vector plus a zero tail). It needs no program."""
    if src.dims != dst.dims or src.dtype != dst.dtype or src.offset0 or dst.offset0 \
            or src.is_zero:
        return None
    a, b = src.linear_strides(), dst.linear_strides()
    if a is None or a != b:
        return None
    expect = 1
    for stride, n in sorted((s, n) for s, n in zip(a, src.dims) if n > 1):
        if stride != expect:
            return None
        expect *= n
    item = src.dtype.itemsize
    return Kernel("", (0, 0, 0), (1, 1, 1), 1, False, False, None,
                  copy=(src.nelems * item, dst.span * item))


def _vector_width(size: int, stride: int, itemsize: int, limit: int = 16) -> int:
    if stride != 1:
        return 1
    return next((v for v in (16, 8, 4, 2) if v <= limit and size % v == 0
                 and v * itemsize <= MAX_VECTOR_BYTES), 1)


def _decode(g: str, axes, sizes, num: Numbers) -> list[tuple[object, str]]:
    """Digits of a group of axes (outer to inner) from global id ``g``."""
    out = []
    for i, (a, n) in enumerate(zip(axes, sizes)):
        below = math.prod(sizes[i + 1:])
        d = g if i == len(axes) - 1 else num.div(g, below, key=(g, "below", i))
        out.append((a, d if i == 0 else num.mod(d, n, key=(g, "size", i))))
    return out


# A generic kernel's work-group size, the same for every shape: PoCL compiles a
# kernel once more for each local size it is launched with (40-500 ms each,
# cold), so a size that followed the dims would cost a model load one compile
# per weight shape again. Its launch is one-dimensional (no group padding
# beyond this many items); 256 as for the baked buffer and image kernels.
GENERIC_LOCAL = 256


def _local(sizes, image: bool, gather: bool, far: bool = False) -> tuple[int, int, int]:
    """Work-group size (PoCL runs a group as one loop; measured on PoCL 3.1,
    noisy): an image written from vector loads streams best as rows of 256;
    one gathered from scattered loads as 16 x 16 tiles; a buffer in groups of
    256 with 32 along dimension 1, the axis walking the source's contiguous
    one, and dimension 2 making up the rest; a buffer vector gathered from
    lanes >= 4 KiB apart (``far``) one vector per group, 64 along dimension 1."""
    if image:
        l0 = min(256 if not gather else 16, _pow2_at_least(sizes[0]))
        return l0, min(max(1, 256 // l0), _pow2_at_least(sizes[1])), 1
    if far:
        # each work item reads its vector from `vector` far-apart source rows
        # (NCHW planes 1 MiB apart): one vector per group keeps the rows read at
        # once few enough for the cache ways (with huge pages they all share
        # sets); 4 vectors per group measured 13-54 ms by placement, this 13-16
        l1 = min(64, _pow2_at_least(sizes[1]))
        l0 = 1
    else:
        l1 = min(32, _pow2_at_least(sizes[1]))
        l0 = min(max(1, 256 // l1), _pow2_at_least(sizes[0]))
    # when the vector absorbs dimension 0 and dimension 1 is short, fill the
    # group along dimension 2: PoCL pays per group, groups of 4 were 5x slower
    l2 = min(max(1, 256 // (l0 * l1)), _pow2_at_least(sizes[2]))
    return l0, l1, l2


def _work_item_ids(sizes, num: Numbers) -> tuple[str, str]:
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


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class Source:
    """How the source side loads the element with a logical index.

    ``to_src`` turns the destination's index names into the source's;
    ``dim_map`` says, structurally, which source dim each destination dim's
    index feeds unchanged (absent: the dim is reshaped on the way)."""
    desc: MemoryDesc                 # buffer desc, or the image's dense desc
    layout: ImageLayout | None       # an image source read with read_image*
    dims: tuple[int, ...]            # dims the pixel names index (image: logical dims)
    to_src: object                   # (names, num) -> source names
    dim_map: dict

    def offset(self, names, num: Numbers) -> str:
        return offset_expr(self.desc, [paren(n) for n in names], num)

    def pixel(self, names, num: Numbers):
        return pixel_expr(self.layout, self.dims, names, num)


def render_kernel(src: Source, dst: MemoryDesc, dst_layout: ImageLayout | None,
                  place=None, aliased: bool = False, bake: bool = True) -> Kernel:
    """The kernel writing all of ``dst`` (a buffer desc, or the dense desc of
    ``dst_layout``'s image, whose placement is ``place``) from ``src``."""
    index_type = _index_type(src.desc, dst)
    num = Numbers(bake, magic_div=index_type == "uint")
    src_dt, dst_dt = src.desc.dtype, dst.dtype
    nd = dst.ndims
    # a unit block is structure (never an axis); a unit outer axis only when baked
    axes = [a for a in dst.axes if (a.outer or a.size > 1) and not num.unit(a.size)]
    # -- the vector axis and the three launch groups ---------------------------
    if dst_layout is not None:
        rows = [a for a in place.row_axes if a in axes]
        cols = [a for a in place.col_axes if a in axes]
        groups = [cols, rows, []]
        tile = None
        vec_axis = place.lane_axis
        vector = 4 if vec_axis is not None else 1
        sizes = (place.width, place.height, 1)
    else:
        vec_axis = axes[-1] if axes else None
        vector = _vector_width(vec_axis.size, vec_axis.stride, dst_dt.itemsize) if vec_axis else 1
        rest = axes[:-1]
        tile = _tile_axis(src, rest, bake)
        others = [a for a in rest if a is not tile]
        groups = [["vec"] if vec_axis else [], [tile] if tile else [], others]
        sizes = tuple(math.prod((vec_axis.size // vector) if a == "vec" else a.size for a in g)
                      for g in groups)
    # -- decode: digits, per-dim halo-padded index q, logical index i ----------
    halo = any(dst.halo_lower) or any(dst.halo_upper)
    ids, guard = _work_item_ids(sizes, num)
    prologue = []
    contrib = [[] for _ in range(nd)]
    offset_terms = []
    if dst_layout is None and (dst.offset0 or not bake):
        offset_terms.append(num(dst.offset0))
    for gi, group in enumerate(groups):
        gsizes = [(vec_axis.size // vector) if a == "vec" else a.size for a in group]
        for a, d in _decode(f"g{gi}", group, gsizes, num):
            if a == "vec":
                contrib[vec_axis.dim].append(_lit_times(paren(d), vector * vec_axis.div))
                offset_terms.append(_axis_times(paren(d), vec_axis, num, vector))
                continue
            contrib[a.dim].append(_lit_times(paren(d), a.div))
            if dst_layout is None:   # an image is written at (g0, g1): no offset
                offset_terms.append(_axis_times(paren(d), a, num))
    for d in range(nd):
        # a dim without digits is 0; not `const` then, or clang folds the
        # guards on it and warns about constant operands of &&
        prologue.append(f"const idx_t q{d} = {' + '.join(contrib[d])};" if contrib[d] else
                        f"idx_t q{d} = 0;")
        lo = dst.halo_lower[d]
        minus = f" - {num(lo)}" if lo or (halo and not bake) else ""
        prologue.append(f"const idx_t i{d} = q{d}{minus};")
    # -- validity of each destination element ----------------------------------
    vdim = vec_axis.dim if vec_axis is not None else None
    blocked = [d for d in range(nd) if dst.blocks_of(d) > 1]
    if bake:
        checked = [d for d in range(nd) if dst.halo_lower[d] or dst.padded_dims[d] > dst.dims[d]]
        tails = [d for d in range(nd) if dst.padded_dims[d] > dst.extent[d]]
    else:   # structure only: blocked dims may have a tail, a halo touches every dim
        # (not specialized on whether a tail is there: a model's weights would
        # need twice the programs; a shape converted often is baked anyway)
        checked = list(range(nd)) if halo else blocked
        tails = blocked if halo else []
    limit = {d: num(dst.dims[d]) for d in checked}
    common = [f"i{d} < {limit[d]}" for d in checked if d != vdim]
    if common:
        prologue.append(f"const int ok = {' && '.join(common)};")

    def name_j(d, j):
        return f"i{d}" if d != vdim or j == 0 else f"(i{d} + {j * vec_axis.div})"

    def valid(j):
        parts = ["ok"] if common else []
        if vdim in checked:
            parts.append(f"{name_j(vdim, j)} < {limit[vdim]}")
        return " && ".join(parts) or None

    zero = convert.c_literal(dst_dt, 0)
    pad_of = {j: zero for j in range(vector)}
    if halo:
        value = convert.fill_value(dst)
        fill = num.value(convert.c_literal(dst_dt, value), value.view(dst_dt.bits)
                         if dst_dt.name in ("f16", "bf16") else value, dst_dt.cl_scalar)
        extent = {d: num(dst.extent[d]) for d in tails}
        tail_cond = " || ".join(f"q{d} >= {extent[d]}" for d in tails if d != vdim)
        for j in range(vector):
            conds = [tail_cond] if tail_cond else []
            if vdim in tails:
                q = f"q{vdim}" if j == 0 else f"(q{vdim} + {j * vec_axis.div})"
                conds.append(f"{q} >= {extent[vdim]}")
            pad_of[j] = f"({' || '.join(conds)}) ? {zero} : {fill}" if conds else fill

    # -- loads, in runs that one load serves ------------------------------------
    def conv(x):
        return convert.convert_expr(src_dt, dst_dt, x)

    def src_names(j):
        return src.to_src([name_j(d, j) for d in range(nd)], num)

    runs = []
    run = _run_length(src, dst, vec_axis, vector, bake)
    for first in range(0, vector, run):
        js = range(first, first + run)
        # an image run needs only its pixel (its first lane valid); a vload all of it
        last = first if src.layout is not None else first + run - 1
        ends = [v for v in (valid(first), valid(last)) if v]
        run_guard = " && ".join(dict.fromkeys(ends)) or None
        if src.layout is not None:       # an image source: read a pixel, pick lanes
            io = convert.IMAGE_IO[src_dt.name]
            x, y, _ = src.pixel(src_names(first), num)
            load = f"const {io.pixel_type} r = {io.read}(src, clayout_sampler, (int2)({x}, {y}));"
            fast = []
            for j in js:
                lane_expr = f"r.s{j - first}" if run == 4 else \
                    f"{io.lane_helper}(r, {src.pixel(src_names(j), num)[2]})"
                value = conv(convert.image_read_to_storage(src_dt, lane_expr))
                v = valid(j)
                fast.append((j, value if v is None or j == first or run_guard is None else
                             f"({v}) ? {value} : {pad_of[j]}"))
            slow = [(j, pad_of[j]) for j in js]
        else:
            off = src.offset(src_names(first), num)
            if run > 1:
                load = f"const {src_dt.cl_scalar}{run} r = vload{run}(0, src + ({off}));"
                fast = [(j, conv(f"r.s{j - first:x}")) for j in js]
                slow = []
                for j in js:
                    v = valid(j)
                    value = conv(f"src[{src.offset(src_names(j), num)}]")
                    slow.append((j, value if v is None else f"({v}) ? {value} : {pad_of[j]}"))
            else:
                load = f"const {src_dt.cl_scalar} r = src[{off}];"
                fast, slow = [(first, conv("r"))], [(first, pad_of[first])]
        runs.append({"guard": run_guard, "load": load, "fast": fast, "slow": slow})

    # -- the store -----------------------------------------------------------------
    dst_t = dst_dt.cl_scalar
    values = ", ".join(f"v{j}" for j in range(vector))
    if dst_layout is not None:
        io = convert.IMAGE_IO[dst_dt.name]
        lanes = [convert.storage_to_image_write(dst_dt, f"v{j}") for j in range(vector)]
        lanes += ["0"] * (4 - vector)
        store = f"{io.write}(dst, (int2)(g0, g1), ({io.write_type}4)({', '.join(lanes)}));"
    else:
        off = " + ".join(offset_terms) or "0"
        store = (f"vstore{vector}(({dst_t}{vector})({values}), 0, dst + ({off}));"
                 if vector > 1 else f"dst[{off}] = v0;")
    restrict = "" if aliased else "restrict "
    summary = (f"{'image ' + src.layout.name if src.layout else 'buffer'} "
               f"{_side(src.desc, bake)} -> {'image ' + dst_layout.name if dst_layout else 'buffer'} "
               f"{_side(dst, bake)}" + ("" if bake else " (generic: numbers are arguments)"))
    params = "".join(f", const {'idx_t' if ctype == 'idx_t' else ctype} {name}"
                     for name, ctype, _ in num.args)
    source = _template().render(
        summary=summary, helpers=_helpers(), name=KERNEL_NAME,
        src_image=src.layout is not None, index_type=index_type,
        src_param=("__read_only image2d_t src" if src.layout is not None else
                   f"__global const {src_dt.cl_scalar} *{restrict}src"),
        dst_param=("__write_only image2d_t dst" if dst_layout is not None else
                   f"__global {dst_t} *{restrict}dst"),
        params=params, ids=ids, guard=guard, prologue=prologue, vector=vector, dst_type=dst_t,
        runs=runs, store=store)
    args = tuple(arg_value(index_type if ctype == "idx_t" else ctype, value)
                 for _, ctype, value in num.args)
    shape = (sizes[0], sizes[1]) if dst_layout is not None else (
        src.layout.image_shape(src.dims) if src.layout is not None else None)
    gather = run == 1 and vector > 1
    far = gather and dst_layout is None and _gather_stride(src, vec_axis) >= 4096
    family = (structure(src.desc), src.layout.name if src.layout else None, structure(dst),
              dst_layout.name if dst_layout else None, vector, run,
              dst.axes.index(tile) if dst_layout is None and tile else None, index_type,
              aliased, bake)
    local = (GENERIC_LOCAL,) if not bake else _local(sizes, dst_layout is not None, gather, far)
    return Kernel(source, sizes, local, vector,
                  src.layout is not None, dst_layout is not None, shape, args, not bake, family)


def structure(desc: MemoryDesc) -> tuple:
    """What of a desc a generic kernel's source depends on: dtype, axis order,
    blocking, whether strides are a tag's or a user's, whether it has a halo."""
    return (desc.dtype.name, desc.order, desc.inner_idxs, desc.inner_blks,
            desc.tag is not None, any(desc.halo_lower) or any(desc.halo_upper))


def _side(desc: MemoryDesc, bake: bool) -> str:
    """The summary line's name of one side: the whole desc when baked, its
    structure (tag, dtype) when generic, so the comment does not vary by dims."""
    if bake:
        return repr(desc)
    tag = desc.tag or "strided"
    halo = " halo" if any(desc.halo_lower) or any(desc.halo_upper) else ""
    return f"{desc.dtype.name} {tag}{halo}"


def _unit_stride(desc: MemoryDesc) -> bool:
    """True when the innermost axis of a plain desc has stride 1 by its
    structure (a tag), not by a user's stride value."""
    return desc.tag is not None


def _index_type(src: MemoryDesc, dst: MemoryDesc) -> str:
    span = max(src.span, dst.span, math.prod(dst.padded_dims))
    return "uint" if span < 2 ** 31 else "ulong"


def _lit_times(expr: str, value: int) -> str:
    return expr if value == 1 else f"{expr} * {value}"


def _axis_times(d: str, a, num: Numbers, vector: int = 1) -> str:
    """``d * (vector * stride)`` for a destination axis: an inner block's stride
    is structure (a literal), an outer axis' depends on the dims."""
    if not a.outer:
        return _lit_times(d, vector * a.stride)
    return num.times(_lit_times(d, vector), a.stride)


def _gather_stride(src: Source, vec_axis) -> int:
    """Bytes between the source elements of consecutive vector lanes (0 when
    unknown: an image source, or a dim the source does not have)."""
    if src.layout is not None or vec_axis is None or vec_axis.dim not in src.dim_map:
        return 0
    return _element_axis(src.desc, src.dim_map[vec_axis.dim]).stride * src.desc.dtype.itemsize


def _element_axis(desc: MemoryDesc, d: int):
    """The axis of dim d that one step of its index moves (div 1: the
    innermost block, or the outer part of an unblocked dim)."""
    return next(a for a in desc.axes if a.dim == d and a.div == 1)


def _tile_axis(src: Source, rest, bake: bool):
    """The destination axis that walks the source's most contiguous axis (so a
    work group reads whole cache lines: a tiled transpose without local
    memory), else the next axis out. Baked, only axes at least 8 long count
    (a 3x3 filter's W = 3 would leave the dimension idle); generic, the choice
    follows the structure alone."""
    if not rest:
        return None
    if src.layout is None:
        fed = {dst_dim: src_dim for dst_dim, src_dim in src.dim_map.items()}
        s_axes = [a for a in src.desc.axes if not bake or a.size >= 8]
        order = sorted(s_axes, key=lambda a: a.stride) if bake else list(reversed(s_axes))
        for s_axis in order:
            match = [a for a in rest if fed.get(a.dim) == s_axis.dim and (not bake or a.size >= 8)]
            if match:
                return min(match, key=lambda a: abs(a.div - s_axis.div))
    return rest[-1]


def _run_length(src: Source, dst: MemoryDesc, vec_axis, vector, bake: bool) -> int:
    """How many consecutive vector elements one source load serves: V for a
    buffer whose element offsets are consecutive along the vector (vloadV),
    4 for an image whose lanes 0..3 are the vector's next four elements
    (one read_image), else 1. The vector axis always has div 1 (it is the
    innermost axis of its dim), so element j is logical index i + j."""
    if vec_axis is None or vector == 1:
        return 1
    d = vec_axis.dim
    dst_halo = any(dst.halo_lower) or any(dst.halo_upper)
    if src.layout is not None:
        image_dim = unchanged_dims(src.layout).get(d)
        lane = src.desc.axes[-1]
        if image_dim is None or src.layout.lanes != 4 or vector % 4:
            return 1
        aligned = dst.halo_lower[d] % 4 == 0 if bake else not dst_halo
        return 4 if lane.dim == image_dim and lane.div == 1 and aligned else 1
    sd = src.dim_map.get(d)
    if sd is None:
        return 1
    if bake:
        if (src.desc.halo_lower[sd] - dst.halo_lower[d]) % vector:
            return 1
    elif dst_halo or any(src.desc.halo_lower) or any(src.desc.halo_upper):
        return 1
    a = _element_axis(src.desc, sd)
    unit = a.stride == 1 and (bake or not a.outer or _unit_stride(src.desc))
    ok = unit and (a.outer or a.size % vector == 0)
    return vector if ok else 1




@functools.lru_cache(maxsize=1)
def _template() -> Template:
    text = resources.files("runtime.templates").joinpath("convert.cl.mako").read_text()
    return Template(text, strict_undefined=True)


@functools.lru_cache(maxsize=1)
def _helpers() -> str:
    return resources.files("runtime.cl_kernels").joinpath("convert.cl").read_text()
