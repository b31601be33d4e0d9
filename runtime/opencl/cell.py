"""One cell of a conversion kernel as C lines: the destination vector or
pixel that one store writes (a work item's in the direct family; in the
tiled one, each cell of a tile). ``render_cell`` makes steps 2 to 5 of
``render_kernel`` (runtime/opencl/render.py, which puts the cell into the
template with the launch and the kernel's parameters), each returning a
frozen record the next one reads:

2. ``_index``: the work item's ids decoded into the destination's digits,
   each dim's halo-padded index ``q`` and logical index ``i``, and the
   destination offset;
3. ``_validity``: which of the cell's elements are inside the logical
   dims, and what a padding element holds (zero, or the halo's fill);
4. ``_loads``: the source loads, in runs one load serves (``vloadV``, one
   ``read_image`` for four lanes, or one element), each element converted
   by the dtype rules (runtime/algebra/dtypes_c.py);
5. ``_store``: one ``vstoreV`` or ``write_image*`` (at (g0, g1), or
   (g0, g1, g2, 0) on an image array or 3-D image: runtime/opencl/images.py).

The index expressions come from the algebra's emitter (runtime.algebra.c_index)."""
from __future__ import annotations

from dataclasses import dataclass

from ..algebra import dtypes_c
from ..algebra.c_index import Numbers, paren
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageDesc
from . import frame as frame_c
from .launch import VEC, Launch, decode, work_item_ids
from .tiled import tile_ids
from .sides import Source, Target
from .trace import Accesses


@dataclass(frozen=True)
class Index:
    """Step 2: C lines giving each dim's q (halo-padded) and i (logical)
    index, the terms of the destination buffer offset, and an image
    destination's pixel (x, y, z)."""
    ids: str
    guard: str
    lines: tuple[str, ...]
    offset_terms: tuple[str, ...]
    pixel: tuple[str, str, str] = ("g0", "g1", "g2")


@dataclass(frozen=True)
class Validity:
    """Step 3: per element j of the work item, the C condition that it is
    inside the logical dims (None: always) and what it holds when it is not;
    ``valid_j``: the condition for the element whose j is the C variable ``j``."""
    lines: tuple[str, ...]
    valid: tuple[str | None, ...]
    pad: tuple[str, ...]
    valid_j: str | None = None


@dataclass(frozen=True)
class Load:
    """Step 4: one load and the elements it serves; ``slow`` where ``guard``
    fails (the run reaches past the dims)."""
    guard: str | None
    load: str
    fast: tuple[tuple[int, str], ...]
    slow: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Cell:
    """Steps 2 to 5 of one cell: what the template's kernel body is made of;
    ``element``: the load of its element ``j`` alone (a C variable), for a
    tile loaded element by element (runtime/opencl/tiled.py), else None."""
    index: Index
    validity: Validity
    loads: tuple[Load, ...]
    store: str
    element: str | None = None


def render_cell(src: Source, dst: Target, launch: Launch, run: int, num: Numbers,
                acc: Accesses) -> Cell:
    """The C of one cell of ``dst`` written from ``src`` under ``launch``,
    ``run`` vector elements to a load (``sides.run_length``), its numbers
    written by ``num`` (in the order of the steps: a generic kernel's
    arguments are numbered as they are asked for), its accesses by ``acc``
    (runtime/opencl/trace.py)."""
    index = _index(dst, launch, num, acc)
    validity = _validity(dst.desc, launch, num)
    by_element = launch.tiling is not None and launch.tiling.by_element
    return Cell(index, validity,
                () if by_element else _loads(src, dst.desc, launch, validity, run, num, acc),
                _store(dst, launch, index, num, acc),
                _element(src, dst.desc, launch, validity, num, acc) if by_element else None)


# -- step 2: the index ---------------------------------------------------------------------
def _index(dst: Target, launch: Launch, num: Numbers, acc: Accesses) -> Index:
    desc, nd = dst.desc, dst.desc.ndims
    halo = desc.has_halo
    if launch.tiling is None:
        ids, guard = work_item_ids(launch.sizes, num)
    else:   # a tile's cell is inside the destination
        ids = tile_ids(launch, num, acc.group_id())
        guard = " && ".join(f"g{i} < {num(n, key=('cells', i))}"
                            for i, n in enumerate(launch.sizes[:2]))
    contrib = [[] for _ in range(nd)]
    offset_terms = []
    pixel = {"x": [], "y": [], "z": []}
    if dst.image is None and (desc.offset0 or not num.bake):
        offset_terms.append(num(desc.offset0))
    vec_axis, vector = launch.vec_axis, launch.vector
    for gi, group in enumerate(launch.groups):
        for a, d in decode(f"g{gi}", group, launch.group_sizes(group), num):
            if a == VEC:
                contrib[vec_axis.dim].append(_lit_times(paren(d), vector * vec_axis.div))
                offset_terms.append(_axis_times(paren(d), vec_axis, num, vector))
                continue
            contrib[a.dim].append(_lit_times(paren(d), a.div))
            if dst.image is None:   # an image is written at its pixel: no offset
                offset_terms.append(_axis_times(paren(d), a, num))
            elif launch.tiling is not None:
                coordinate, per = _pixel_axis(dst.image, a)
                pixel[coordinate].append(_axis_times(paren(d), a, num, 1, per))
    lines = []
    for d in range(nd):
        # a dim without digits is 0; not `const` then, or clang folds the
        # guards on it and warns about constant operands of &&
        lines.append(f"const idx_t q{d} = {' + '.join(contrib[d])};" if contrib[d] else
                     f"idx_t q{d} = 0;")
        lo = desc.halo_lower[d]
        minus = f" - {num(lo)}" if lo or (halo and not num.bake) else ""
        lines.append(f"const idx_t i{d} = q{d}{minus};")
    if dst.image is None or launch.tiling is None:
        return Index(ids, guard, tuple(lines), tuple(offset_terms))
    at = tuple(" + ".join(pixel[c]) or "0" for c in ("x", "y", "z"))
    return Index(ids, guard, tuple(lines), tuple(offset_terms), at)


def _pixel_axis(image: ImageDesc, a) -> tuple[str, int]:
    """Which pixel coordinate a physical axis of ``image``'s dense desc
    moves, and by how much less than its element stride: the desc is its
    pixels row-major (layers, rows, columns), lanes innermost."""
    lanes = image.lanes
    if a in image.col_axes:
        return "x", lanes
    if a in image.row_axes:
        return "y", lanes * image.width
    return "z", lanes * image.width * image.height


def _lit_times(expr: str, value: int) -> str:
    return expr if value == 1 else f"{expr} * {value}"


def _axis_times(d: str, a, num: Numbers, vector: int = 1, per: int = 1) -> str:
    """``d * (vector * stride / per)`` for a destination axis (``per``: the
    elements of a pixel coordinate's unit): an inner block's stride is
    structure (a literal), an outer axis' depends on the dims."""
    if not a.outer:
        return _lit_times(d, vector * a.stride // per)
    return num.times(_lit_times(d, vector), a.stride // per)

# -- step 3: validity and padding ------------------------------------------------------------
def _name(d: int, j, launch: Launch) -> str:
    """The logical index of dim d for the work item's element j (a number, or
    the name of a C variable)."""
    vec = launch.vec_axis
    if vec is None or d != vec.dim or j == 0:
        return f"i{d}"
    if isinstance(j, str):
        return f"(i{d} + {_lit_times(j, vec.div)})"
    return f"(i{d} + {j * vec.div})"


def _validity(dst: MemoryDesc, launch: Launch, num: Numbers) -> Validity:
    nd, vector = dst.ndims, launch.vector
    vec = launch.vec_axis
    vdim = vec.dim if vec is not None else None
    halo = dst.has_halo
    blocked = [d for d in range(nd) if dst.blocks_of(d) > 1]
    if num.bake:
        checked = [d for d in range(nd) if dst.halo_lower[d] or dst.padded_dims[d] > dst.dims[d]]
        tails = [d for d in range(nd) if dst.padded_dims[d] > dst.extent[d]]
    else:   # structure only: blocked dims may have a tail, a halo touches every dim
        # (not specialized on whether a tail is there: a model's weights would
        # need twice the programs; a shape converted often is baked anyway)
        checked = list(range(nd)) if halo else blocked
        tails = blocked if halo else []
    limit = {d: num(dst.dims[d]) for d in checked}
    common = [f"i{d} < {limit[d]}" for d in checked if d != vdim]
    lines = (f"const int ok = {' && '.join(common)};",) if common else ()

    def valid(j):
        parts = ["ok"] if common else []
        if vdim in checked:
            parts.append(f"{_name(vdim, j, launch)} < {limit[vdim]}")
        return " && ".join(parts) or None

    zero = dtypes_c.c_literal(dst.dtype, 0)
    pad = [zero] * vector
    if halo:
        value = dtypes_c.fill_value(dst)
        fill = num.value(dtypes_c.c_literal(dst.dtype, value), value.view(dst.dtype.bits)
                         if dst.dtype.name in ("f16", "bf16") else value, dst.dtype.cl_scalar)
        extent = {d: num(dst.extent[d]) for d in tails}
        tail_cond = " || ".join(f"q{d} >= {extent[d]}" for d in tails if d != vdim)
        for j in range(vector):
            conds = [tail_cond] if tail_cond else []
            if vdim in tails:
                q = f"q{vdim}" if j == 0 else f"(q{vdim} + {j * vec.div})"
                conds.append(f"{q} >= {extent[vdim]}")
            pad[j] = f"({' || '.join(conds)}) ? {zero} : {fill}" if conds else fill
    return Validity(lines, tuple(valid(j) for j in range(vector)), tuple(pad), valid("j"))


# -- step 4: the loads -------------------------------------------------------------------------
def _loads(src: Source, dst: MemoryDesc, launch: Launch, validity: Validity, run: int,
           num: Numbers, acc: Accesses) -> tuple[Load, ...]:
    src_dt, dst_dt = src.desc.dtype, dst.dtype
    valid, pad = validity.valid, validity.pad

    def conv(x):
        return dtypes_c.convert_expr(src_dt, dst_dt, x)

    def src_names(j):
        return src.to_src([_name(d, j, launch) for d in range(dst.ndims)], num)

    if src.frame is not None:   # one pixel's channels serve the elements at that pixel
        return frame_c.loads(Load, launch.vector, src_names, conv, valid, pad, acc)
    loads = []
    for first in range(0, launch.vector, run):
        js = range(first, first + run)
        # an image run needs only its pixel (its first lane valid); a vload all of it
        last = first if src.image is not None else first + run - 1
        ends = [v for v in (valid[first], valid[last]) if v]
        guard = " && ".join(dict.fromkeys(ends)) or None
        if src.image is not None:        # an image source: read a pixel, pick lanes
            io = dtypes_c.c_type(src_dt).image
            coords = src.pixel(src_names(first), num)[:-1]
            load = (f"const {io.pixel_type} r = "
                    f"{acc.read_image(src.image, io.read, 'src', 'clayout_sampler', coords)};")
            fast = []
            for j in js:
                lane_expr = f"r.s{j - first}" if run == 4 else \
                    f"{io.lane_helper}(r, {src.pixel(src_names(j), num)[-1]})"
                value = conv(dtypes_c.image_read_to_storage(src_dt, lane_expr))
                v = valid[j]
                fast.append((j, value if v is None or j == first or guard is None else
                             f"({v}) ? {value} : {pad[j]}"))
            slow = [(j, pad[j]) for j in js]
        else:
            off = src.offset(src_names(first), num)
            if run > 1:
                load, lanes = acc.vload(src_dt, run, "src", off)
                fast = [(j, conv(lanes[j - first])) for j in js]
                slow = []
                for j in js:
                    value = conv(acc.load("src", src.offset(src_names(j), num), src_dt))
                    slow.append((j, value if valid[j] is None else
                                 f"({valid[j]}) ? {value} : {pad[j]}"))
            else:
                load = f"const {src_dt.cl_scalar} r = {acc.load('src', off, src_dt)};"
                fast, slow = [(first, conv("r"))], [(first, pad[first])]
        loads.append(Load(guard, load, tuple(fast), tuple(slow)))
    return tuple(loads)


def _element(src: Source, dst: MemoryDesc, launch: Launch, validity: Validity, num: Numbers,
             acc: Accesses) -> str:
    """Step 4 for one element, ``j`` a C variable: ``v``, loaded where it is
    inside the dims, else zero (an image's padding lanes: a destination
    without a halo)."""
    assert not dst.has_halo, "a tile loaded by element writes an image, which has no halo"
    names = src.to_src([_name(d, "j", launch) for d in range(dst.ndims)], num)
    value = dtypes_c.convert_expr(src.desc.dtype, dst.dtype,
                                  acc.load("src", src.offset(names, num), src.desc.dtype))
    ok = validity.valid_j
    zero = dtypes_c.c_literal(dst.dtype, 0)
    return f"const {dst.dtype.cl_scalar} v = {value if ok is None else f'({ok}) ? {value} : {zero}'};"


# -- step 5: the store -------------------------------------------------------------------------
def _store(dst: Target, launch: Launch, index: Index, num: Numbers, acc: Accesses) -> str:
    dst_dt, vector = dst.desc.dtype, launch.vector
    if dst.image is not None:
        io = dtypes_c.c_type(dst_dt).image
        lanes = [dtypes_c.storage_to_image_write(dst_dt, f"v{j}") for j in range(vector)]
        lanes += ["0"] * (4 - vector)
        return acc.write_image(dst.image, io.write, "dst", index.pixel,
                               f"({io.write_type}4)({', '.join(lanes)})")
    off = " + ".join(index.offset_terms) or "0"
    if vector == 1:
        return acc.store("dst", off, dst_dt, "v0")
    if launch.apart:   # a vector along an axis apart in memory: one store each
        vec = launch.vec_axis
        step = num(vec.stride, key=("apart stride",)) if vec.outer else str(vec.stride)
        return " ".join(acc.store("dst", f"{off} + {j} * {step}", dst_dt, f"v{j}")
                        for j in range(vector))
    return acc.vstore(dst_dt, [f"v{j}" for j in range(vector)], "dst", off)
