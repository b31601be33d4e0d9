"""Plan one conversion kernel from the two descriptors and render it.

A conversion writes every position of the destination's footprint (halo and
block tails included) from its own physical axes: the work item's global id
is decoded into the destination's axis digits, the digits give each element's
halo-padded index per dim, and from the logical index the source side gives
the load (``MemoryDesc.c_offset`` for a buffer, ``ImageLayout.c_pixel`` for an
image). Every constant is baked in. All three kinds (buffer->buffer,
buffer->image, image->buffer) render the one template ``convert.cl.mako``.

Launch geometry: a buffer destination splits its innermost axis into vectors
of V elements (``vstoreV``) on dimension 0; dimension 1 is the destination
axis that walks the source's contiguous axis (so a work group reads and
writes whole cache lines: a tiled transpose without local memory); dimension
2 is everything else. An image destination launches (width, height): work
item (x, y) writes pixel (x, y), so no coordinate can leave the image.

>>> k = plan_reorder(MemoryDesc((1, 8, 2, 2), tag="nchw"), MemoryDesc((1, 8, 2, 2), tag="nhwc"))
>>> k.vector, k.sizes
(8, (1, 2, 2))
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources

from mako.template import Template

from .. import dtypes
from ..desc import MemoryDesc
from ..image import ImageLayout, c_reshape_index
from . import convert

KERNEL_NAME = "clayout_convert"
MAX_VECTOR_BYTES = 64


@dataclass(frozen=True)
class Kernel:
    """A rendered conversion: its source and how to launch it."""
    source: str
    sizes: tuple[int, int, int]      # work items per dimension (the guard)
    local: tuple[int, int, int]      # work-group size
    vector: int                      # elements (or lanes) each work item writes
    src_image: bool
    dst_image: bool
    image_shape: tuple[int, int] | None   # (width, height) of the image side

    @property
    def launch(self) -> tuple[int, int, int]:
        """Global size: ``sizes`` rounded up to whole work groups."""
        return tuple(-(-s // l) * l for s, l in zip(self.sizes, self.local))


def _p(expr: str) -> str:
    return expr if expr.isidentifier() or expr.isdigit() else f"({expr})"


def _term(digit: str, mult: int) -> str:
    return digit if mult == 1 else f"{digit} * {mult}"


def _vector_width(size: int, stride: int, itemsize: int, limit: int = 16) -> int:
    if stride != 1:
        return 1
    return next((v for v in (16, 8, 4, 2) if v <= limit and size % v == 0
                 and v * itemsize <= MAX_VECTOR_BYTES), 1)


def _decode(g: str, axes, sizes) -> list[tuple[object, str]]:
    """Digits of a group of axes (outer to inner) from global id ``g``."""
    out, below = [], math.prod(sizes)
    for i, (a, n) in enumerate(zip(axes, sizes)):
        below //= n
        d = g if below == 1 else f"({g} / {below})"
        out.append((a, d if i == 0 else f"({d} % {n})"))
    return out


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


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class _Source:
    """How the source side loads the element with logical names ``names``."""
    desc: MemoryDesc                 # buffer desc, or the image's dense desc
    layout: ImageLayout | None
    dims: tuple[int, ...]            # dims the names index (image: logical dims)

    def offset(self, names) -> str:
        return self.desc.c_offset([_p(n) for n in names])

    def pixel(self, names):
        return self.layout.c_pixel(self.dims, names)


def _plan(src: _Source, dst: MemoryDesc, dst_layout: ImageLayout | None, to_src,
          image_shape=None, aliased: bool = False) -> Kernel:
    """The kernel writing all of ``dst`` (a buffer desc, or the dense desc of
    ``dst_layout``'s image) from ``src``; ``to_src`` maps dst index names to
    the names the source takes."""
    src_dt, dst_dt = src.desc.dtype, dst.dtype
    axes = [a for a in dst.axes if a.size > 1]
    nd = dst.ndims
    # -- the vector axis and the three launch groups ---------------------------
    if dst_layout is not None:
        width, height = image_shape
        all_axes = dst.axes
        lane = all_axes[-1] if dst_layout.lanes == 4 else None
        vector = 4 if lane is not None else 1
        rows = [a for a in all_axes[:dst_layout.rows] if a.size > 1]
        cols = [a for a in all_axes[dst_layout.rows:len(all_axes) - (lane is not None)]
                if a.size > 1]
        groups = [cols, rows, []]
        vec_axis = lane
        sizes = (width, height, 1)
    else:
        vec_axis = axes[-1] if axes else None
        vector = _vector_width(vec_axis.size, vec_axis.stride, dst_dt.itemsize) if vec_axis else 1
        rest = axes[:-1]
        tile = _tile_axis(src, rest, to_src, nd)
        others = [a for a in rest if a is not tile]
        groups = [["vec"] if vec_axis else [], [tile] if tile else [], others]
        sizes = tuple(math.prod((vec_axis.size // vector) if a == "vec" else a.size for a in g)
                      for g in groups)
    # -- decode: digits, per-dim halo-padded index q, logical index i ----------
    prologue = []
    contrib = [[] for _ in range(nd)]
    offset_terms = [str(dst.offset0)] if dst.offset0 and dst_layout is None else []
    for gi, group in enumerate(groups):
        gsizes = [(vec_axis.size // vector) if a == "vec" else a.size for a in group]
        for a, digit in _decode(f"g{gi}", group, gsizes):
            if a == "vec":
                contrib[vec_axis.dim].append(_term(_p(digit), vector * vec_axis.div))
                offset_terms.append(_term(_p(digit), vector * vec_axis.stride))
                continue
            contrib[a.dim].append(_term(_p(digit), a.div))
            offset_terms.append(_term(_p(digit), a.stride))
    for d in range(nd):
        # a dim without digits is 0; not `const` then, or clang folds the
        # guards on it and warns about constant operands of &&
        prologue.append(f"const idx_t q{d} = {' + '.join(contrib[d])};" if contrib[d] else
                        f"idx_t q{d} = 0;")
        lo = dst.halo_lower[d]
        prologue.append(f"const idx_t i{d} = q{d}" + (f" - {lo};" if lo else ";"))
    # -- validity of each destination element ----------------------------------
    vdim = vec_axis.dim if vec_axis is not None else None
    checked = [d for d in range(nd) if dst.halo_lower[d] or dst.padded_dims[d] > dst.dims[d]]
    tails = [d for d in range(nd) if dst.padded_dims[d] > dst.extent[d]]
    common = [f"i{d} < {dst.dims[d]}" for d in checked if d != vdim]
    if common:
        prologue.append(f"const int ok = {' && '.join(common)};")

    def name_j(d, j):
        return f"i{d}" if d != vdim or j == 0 else f"(i{d} + {j * vec_axis.div})"

    def valid(j):
        parts = ["ok"] if common else []
        if vdim in checked:
            parts.append(f"{name_j(vdim, j)} < {dst.dims[vdim]}")
        return " && ".join(parts) or None

    zero = convert.c_literal(dst_dt, 0)
    halo = any(dst.halo_lower) or any(dst.halo_upper)
    pad = zero
    if halo:
        fill = convert.c_literal(dst_dt, convert.fill_value(dst))
        tail_cond = " || ".join(f"q{d} >= {dst.extent[d]}" for d in tails if d != vdim)
        pad_of = {}
        for j in range(vector):
            conds = [tail_cond] if tail_cond else []
            if vdim in tails:
                q = f"q{vdim}" if j == 0 else f"(q{vdim} + {j * vec_axis.div})"
                conds.append(f"{q} >= {dst.extent[vdim]}")
            pad_of[j] = f"({' || '.join(conds)}) ? {zero} : {fill}" if conds else fill
    else:
        pad_of = {j: pad for j in range(vector)}

    # -- loads, in runs that one load serves ------------------------------------
    def conv(x):
        return convert.convert_expr(src_dt, dst_dt, x)

    def src_names(j):
        return to_src([name_j(d, j) for d in range(nd)])

    runs = []
    run = _run_length(src, dst, vec_axis, vector, to_src, nd)
    for first in range(0, vector, run):
        js = range(first, first + run)
        # an image run needs only its pixel (its first lane valid); a vload all of it
        last = first if src.layout is not None else first + run - 1
        ends = [v for v in (valid(first), valid(last)) if v]
        guard = " && ".join(dict.fromkeys(ends)) or None
        if src.layout is not None:       # an image source: read a pixel, pick lanes
            read, pix_t, lane_fn = convert.IMAGE_IO[src_dt.name][:3]
            x, y, k = src.pixel(src_names(first))
            load = f"const {pix_t} r = {read}(src, clayout_sampler, (int2)({x}, {y}));"
            fast = []
            for j in js:
                lane_expr = f"r.s{j - first}" if run == 4 else f"{lane_fn}(r, {src.pixel(src_names(j))[2]})"
                value = conv(convert.image_read_to_storage(src_dt, lane_expr))
                v = valid(j)
                fast.append((j, value if v is None or j == first or guard is None else
                             f"({v}) ? {value} : {pad_of[j]}"))
            slow = [(j, pad_of[j]) for j in js]
        else:
            off = src.offset(src_names(first))
            if run > 1:
                load = f"const {src_dt.cl_scalar}{run} r = vload{run}(0, src + ({off}));"
                fast = [(j, conv(f"r.s{j - first:x}")) for j in js]
                slow = []
                for j in js:
                    v = valid(j)
                    value = conv(f"src[{src.offset(src_names(j))}]")
                    slow.append((j, value if v is None else f"({v}) ? {value} : {pad_of[j]}"))
            else:
                load = f"const {src_dt.cl_scalar} r = src[{off}];"
                fast, slow = [(first, conv("r"))], [(first, pad_of[first])]
        runs.append({"guard": guard, "load": load, "fast": fast, "slow": slow})

    # -- the store -----------------------------------------------------------------
    dst_t = dst_dt.cl_scalar
    values = ", ".join(f"v{j}" for j in range(vector))
    if dst_layout is not None:
        write, wtype = convert.IMAGE_IO[dst_dt.name][3:]
        lanes = [convert.storage_to_image_write(dst_dt, f"v{j}") for j in range(vector)]
        lanes += ["0"] * (4 - vector)
        store = f"{write}(dst, (int2)(g0, g1), ({wtype}4)({', '.join(lanes)}));"
    else:
        off = " + ".join(offset_terms) or "0"
        store = (f"vstore{vector}(({dst_t}{vector})({values}), 0, dst + ({off}));"
                 if vector > 1 else f"dst[{off}] = v0;")
    restrict = "" if aliased else "restrict "
    span = max(src.desc.span, dst.span, math.prod(dst.padded_dims))
    summary = (f"{'image ' + src.layout.name if src.layout else 'buffer'} {src.desc!r}"
               f" -> {'image ' + dst_layout.name if dst_layout else 'buffer'} {dst!r}")
    source = _template().render(
        summary=summary, helpers=_helpers(), name=KERNEL_NAME,
        src_image=src.layout is not None, index_type="uint" if span < 2 ** 31 else "ulong",
        src_param=("__read_only image2d_t src" if src.layout is not None else
                   f"__global const {src_dt.cl_scalar} *{restrict}src"),
        dst_param=("__write_only image2d_t dst" if dst_layout is not None else
                   f"__global {dst_t} *{restrict}dst"),
        sizes=sizes, prologue=prologue, vector=vector, dst_type=dst_t, runs=runs, store=store)
    image_shape = (sizes[0], sizes[1]) if dst_layout is not None else (
        src.layout.image_shape(src.dims) if src.layout is not None else None)
    gather = run == 1 and vector > 1
    far = gather and dst_layout is None and _gather_stride(src, vec_axis, to_src, nd) >= 4096
    return Kernel(source, sizes, _local(sizes, dst_layout is not None, gather, far), vector,
                  src.layout is not None, dst_layout is not None, image_shape)


def _gather_stride(src: _Source, vec_axis, to_src, nd) -> int:
    """Bytes between the source elements of consecutive vector lanes (0 when
    unknown: an image source, or a dim the source does not have)."""
    if src.layout is not None or vec_axis is None:
        return 0
    sd = _source_dim(to_src, nd, vec_axis.dim)
    if sd is None:
        return 0
    return _element_axis(src.desc, sd).stride * src.desc.dtype.itemsize


def _source_dim(to_src, nd, d) -> int | None:
    """The source dim that destination dim d's index feeds unchanged, or None."""
    names = to_src([f"i{k}" for k in range(nd)])
    return names.index(f"i{d}") if f"i{d}" in names else None


def _element_axis(desc: MemoryDesc, d: int):
    """The axis of dim d that one step of its index moves (div 1: the
    innermost block, or the outer part of an unblocked dim)."""
    return next(a for a in desc.axes if a.dim == d and a.div == 1)


def _tile_axis(src: _Source, rest, to_src, nd):
    """The destination axis that walks the source's most contiguous axis
    among those at least 8 long (so a work group reads whole cache lines: a
    tiled transpose without local memory), else the next axis out. A short
    contiguous axis (W = 3 of a 3x3 filter) would leave the dimension idle."""
    if not rest:
        return None
    if src.layout is None:
        names = to_src([f"i{d}" for d in range(nd)])
        for s_axis in sorted((a for a in src.desc.axes if a.size >= 8), key=lambda a: a.stride):
            want = names[s_axis.dim]
            match = [a for a in rest if f"i{a.dim}" == want and a.size >= 8]
            if match:
                return min(match, key=lambda a: abs(a.div - s_axis.div))
    return rest[-1]


def _run_length(src: _Source, dst: MemoryDesc, vec_axis, vector, to_src, nd) -> int:
    """How many consecutive vector elements one source load serves: V for a
    buffer whose element offsets are consecutive along the vector (vloadV),
    4 for an image whose lanes 0..3 are the vector's next four elements
    (one read_image), else 1. The vector axis always has div 1 (it is the
    innermost axis of its dim), so element j is logical index i + j."""
    if vec_axis is None or vector == 1:
        return 1
    d = vec_axis.dim
    sd = _source_dim(to_src, nd, d)
    if sd is None:
        return 1
    if src.layout is not None:
        names = to_src([f"i{k}" for k in range(nd)])
        want, image = 4, src.layout
        img_names = c_reshape_index(image.logical_dims(src.dims), src.desc.dims,
                                    list(names) + ["0"] * (len(image.logical_dims(src.dims))
                                                           - len(names)))
        if f"i{d}" not in img_names or image.lanes != 4 or vector % 4:
            return 1
        sd = img_names.index(f"i{d}")
        lane = src.desc.axes[-1]
        ok = lane.dim == sd and lane.div == 1 and dst.halo_lower[d] % 4 == 0
        return want if ok else 1
    if (src.desc.halo_lower[sd] - dst.halo_lower[d]) % vector:
        return 1
    a = _element_axis(src.desc, sd)
    ok = a.stride == 1 and (a.outer or a.size % vector == 0)
    return vector if ok else 1


# -- the three kinds -------------------------------------------------------------

_PLANS: dict = {}


def _cached(kind, key, make) -> Kernel:
    """Plans by exactly what changes the source: kind and the exact fields of
    both sides (strides too: descs equal under oneDNN's rules can differ in
    unit strides)."""
    plan = _PLANS.get((kind, key))
    if plan is None:
        plan = _PLANS[(kind, key)] = make()
    return plan


def _key(desc: MemoryDesc):
    return (desc.dims, desc.dtype.name, desc.padded_dims, desc.strides, desc.inner_blks,
            desc.inner_idxs, desc.offset0, desc.halo_lower, desc.halo_upper,
            repr(desc.fill), desc.order)


def plan_reorder(src: MemoryDesc, dst: MemoryDesc, aliased: bool = False) -> Kernel:
    """buffer ``src`` -> buffer ``dst`` (same dims). ``aliased``: src and dst
    may be the same buffer (no ``restrict``); each element is then read and
    written by the same work item, so an in-place same-desc pass is safe."""
    return _cached("reorder", (_key(src), _key(dst), aliased),
                   lambda: _plan(_Source(src, None, src.dims), dst, None, list,
                                 aliased=aliased))


def plan_to_image(src: MemoryDesc, layout: ImageLayout, image_dtype,
                  staged: bool = False) -> Kernel:
    """buffer ``src`` -> an image of ``layout`` holding ``image_dtype``; with
    ``staged`` the kernel writes the image's dense buffer instead (to be copied
    into the image with clEnqueueCopyBufferToImage)."""
    dt = dtypes.image_dtype(image_dtype)
    image = layout.desc(src.dims, dt)

    def make():
        def to_src(names):
            return c_reshape_index(image.dims, src.dims, names)
        return _plan(_Source(src, None, src.dims), image, None if staged else layout, to_src,
                     layout.image_shape(src.dims))
    return _cached("to_image", (_key(src), layout, dt.name, staged), make)


def plan_from_image(layout: ImageLayout, image_dtype, dst: MemoryDesc,
                    staged: bool = False) -> Kernel:
    """an image of ``layout`` holding ``image_dtype`` -> buffer ``dst``; with
    ``staged`` the kernel reads the image's dense buffer (copied out of the
    image with clEnqueueCopyImageToBuffer)."""
    dt = dtypes.image_dtype(image_dtype)
    image = layout.desc(dst.dims, dt)

    def make():
        if staged:
            def to_src(names):
                return c_reshape_index(layout.logical_dims(dst.dims), image.dims,
                                       list(names) + ["0"] * (len(layout.logical_dims(dst.dims))
                                                              - len(names)))
            return _plan(_Source(image, None, image.dims), dst, None, to_src)
        return _plan(_Source(image, layout, dst.dims), dst, None, list)
    return _cached("from_image", (layout, dt.name, _key(dst), staged), make)


def render_source(src=None, dst=None, *, layout=None, image_dtype=None,
                  staged: bool = False) -> str:
    """The OpenCL C source of one conversion, for inspection:
    ``render_source(src_desc, dst_desc)`` (reorder),
    ``render_source(src_desc, layout=..., image_dtype=...)`` (to an image),
    ``render_source(dst=dst_desc, layout=..., image_dtype=...)`` (from an image);
    ``staged``: the buffer kernel a CPU device runs instead of the image access."""
    if layout is None:
        return plan_reorder(src, dst).source
    from ..image import image_layout
    layout = image_layout(layout)
    if src is not None:
        return plan_to_image(src, layout, image_dtype or src.dtype, staged).source
    return plan_from_image(layout, image_dtype or dst.dtype, dst, staged).source


def clear_cache() -> None:
    _PLANS.clear()


@functools.lru_cache(maxsize=1)
def _template() -> Template:
    text = resources.files("runtime.templates").joinpath("convert.cl.mako").read_text()
    return Template(text, strict_undefined=True)


@functools.lru_cache(maxsize=1)
def _helpers() -> str:
    return resources.files("runtime.cl_kernels").joinpath("convert.cl").read_text()
