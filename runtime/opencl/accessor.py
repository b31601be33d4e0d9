"""Accessors: OpenCL C that reads and writes a tensor by its logical index,
whatever its layout (docs/kernels.md).

``accessor(layout, dims=None, *, dtype="f32", name="t", access="read",
generic=False)`` takes one side: an ImageDesc, an image layout (a name, an
ImageLayout, a custom 'TAG:ROWS[:LANES]') with its logical ``dims``, or a
MemoryDesc (a buffer: plain, blocked, strided, halo-padded). Its
``source`` defines, every symbol prefixed with ``name`` and include-guarded:

* ``T NAME_load(NAME_ARGS, i0, ..., i{r-1})``: the element at that logical
  index, 0 for any index outside the logical dims;
* ``T4 NAME_load4(NAME_ARGS, i...)``: the four elements along the lane axis
  (``NAME_LANE_AXIS``, whichever it is) from that index: one read_image*
  for an image, one vload4 where a buffer is contiguous, when the index is
  a multiple of 4 on that axis (four loads elsewhere); past the dims 0;
* ``T4 NAME_load4_aK(NAME_ARGS, i...)`` for every axis K: the four
  elements along logical axis K, whatever the layout: ``NAME_load4`` where
  K is the lane axis, four loads elsewhere. A kernel written for one axis
  calls these; only a kernel that follows ``NAME_LANE_AXIS`` calls
  ``NAME_load4``;
* with ``access="write"``: ``NAME_store4(NAME_ARGS, i..., T4 v)`` along the
  lane axis (an image pixel whole: lanes past the dims written as 0; a
  buffer's elements inside the dims). Off a multiple of 4 a buffer (and the
  ``buffer`` storage) takes the four elements one by one; an image pixel
  cannot be written from another lane, so nothing is written there: a
  program built with ``-DCLAYOUT_CHECKS`` prints each such call.
  ``NAME_store(NAME_ARGS, i..., T v)`` where the storage takes one element
  (buffers, one-channel images; an RGBA image cannot be written lane by
  lane: calling it is a compile error that says so).
  ``NAME_store4_aK(NAME_ARGS, i..., T4 v)`` along axis K where the storage
  can write it (``NAME_store4`` along the lane axis, four ``NAME_store``
  elsewhere) and ``NAME_STORE4_AK`` is then defined, for a kernel's
  ``#ifndef`` / ``#error``; along another axis of an image of 2 or 4
  lanes it is a compile error that says so. Stores outside the dims do
  nothing;
* ``NAME_PARAMS`` (the kernel parameters), ``NAME_ARGS`` (their names),
  ``NAME_RANK``, ``NAME_LANE_AXIS`` and ``int NAME_dim(NAME_ARGS, k)``.

Every storage (runtime.algebra.storage) is reached its own way: an
``image2d_t`` at (int2)(x, y), an ``image2d_array_t`` / ``image3d_t`` at
(int4)(x, y, z, 0) (a write to an image3d_t enables cl_khr_3d_image_writes),
an image buffer through the ``image1d_buffer_t`` over its buffer (no
sampler; ``args`` turns the Memory's ``cl.Buffer`` into that view,
runtime/opencl/images.py ``buffer_view``), and the ``buffer`` storage
through a ``__global`` pointer to its pixels (4 elements each; it takes
one element too, as a buffer does). A single texture of 3 channels has no
image format (runtime/opencl/images.py) and no accessor.

``T`` is float for f32/f16/bf16 data (exactly the stored value), int for
s8/s32, uint for u8; a store rounds a float by the dtype rules
(runtime.algebra.dtypes). ``generic=False`` bakes every number in (one
program per shape); ``generic=True`` takes them as arguments (``.values``,
passed by ``.args(storage)``), one program per layout family.

``.args(storage)`` takes a ``runtime.Memory`` of the accessor's side or its
device object and refuses anything else (runtime/opencl/accessor_args.py).

>>> acc = accessor("in_out_channel", (1, 6, 2, 3), name="x")
>>> acc.params, acc.lane_axis
('__read_only image2d_t x', 1)
"""
from __future__ import annotations

import re

from dataclasses import dataclass

from ..algebra.c_index import Numbers, arg_value, offset_expr, paren, unchanged_dims
from ..algebra.catalog import image_layout
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageDesc, ImageLayout
from ..cache import memoized
from ..errors import ClayoutError
from .. import sources
from ..algebra import dtypes_c
from . import accessor_args, images
from .trace import Accesses


@dataclass(frozen=True)
class Function:
    signature: str
    body: tuple[str, ...]


@dataclass(frozen=True)
class Accessor:
    """The accessor of one side: its OpenCL C ``source`` and how to call it
    (module docstring). ``values`` are the numbers a generic accessor takes
    after the storage; ``store_one`` says whether ``NAME_store`` exists."""
    name: str
    side: object
    access: str
    generic: bool
    source: str
    params: str
    lane_axis: int | None
    rank: int
    values: tuple
    store_one: bool

    def args(self, storage) -> tuple:
        """The kernel arguments of this tensor, storage first:
        ``kernel(queue, gsize, None, *acc.args(mem), ...)``. ``storage`` is a
        runtime.Memory of this side or its device object, checked
        (runtime/opencl/accessor_args.py); an image buffer's ``cl.Buffer``
        is bound as its ``image1d_buffer_t`` view."""
        return (accessor_args.device_object(self.name, self.side, storage),) + self.values


def accessor(layout, dims=None, *, dtype="f32", name: str = "t", access: str = "read",
             generic: bool = False, trace: Accesses | None = None) -> Accessor:
    """The accessor of ``layout`` (see the module docstring). ``trace``: the
    access emitter of a kernel that traces (runtime/opencl/trace.py): its
    functions then take the kernel's log through ``NAME_PARAMS`` (not
    cached)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ClayoutError(f"accessor name {name!r} must be a C identifier (it prefixes "
                           "every symbol)")
    if access not in ("read", "write"):
        raise ClayoutError(f"access {access!r}; allowed: read, write")
    side = _side(layout, dims, dtype)
    if side.is_image and side.transform is not None:
        side = side.stored()   # the values stored: indexed by the transform's output dims
    if side.is_image and side.storage.image_object and side.lanes not in images.ORDERS:
        raise ClayoutError(f"no accessor of {side.describe()}: {images.NO_RGB}")
    taken = _own_names(side, access, bool(generic))
    if name in taken:
        short = sorted(n for n in taken if re.fullmatch(r"[a-z]\d*", n))
        raise ClayoutError(f"accessor name {name!r} is a name its functions use inside "
                           f"(their variables {', '.join(short)}; OpenCL's types and "
                           f"built-ins): choose another, such as '{name}_t' or 'src'")
    if trace is not None and trace.trace:
        return _render(side, name, access, bool(generic), trace)
    return _build(side, name, access, bool(generic))


PROBE = "clayout_probe"


@memoized("accessor names", "CLAYOUT_ACCESSOR_CACHE", 256)
def _own_names(side, access: str, generic: bool) -> frozenset:
    """Every identifier the accessor's text uses besides the symbols its
    name prefixes (its locals and parameters: i0, d, p, k, v, ...; the
    helpers; OpenCL's types and built-ins): a name among them would be
    declared twice or hide one of them, and the program would not build."""
    text = _build(side, PROBE, access, generic).source
    own = text[text.index(f"#define {PROBE}_PARAMS"):]   # after the helpers (theirs are clayout_*)
    # comments, strings and directives say nothing; a vector's lanes (v.x) and the
    # numbers' suffixes (1.0f) are no names
    code = re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|#\s*\w+', " ", own, flags=re.S)
    return frozenset(w for w in re.findall(r"(?<![.\w])[A-Za-z_]\w*", code)
                     if not w.startswith(PROBE))


def _side(layout, dims, dtype):
    if isinstance(layout, (MemoryDesc, ImageDesc)):
        if dims is not None and tuple(dims) != layout.dims:
            raise ClayoutError(f"accessor of {layout.describe()}: dims {tuple(dims)} differ "
                               "from the side's own; leave dims out")
        return layout
    if not isinstance(layout, (str, ImageLayout)):
        raise ClayoutError(f"accessor takes an ImageDesc, a MemoryDesc, or an image layout "
                           f"with dims; got {type(layout).__name__}")
    if dims is None:
        raise ClayoutError(f"accessor of layout {layout!r} needs dims= (its logical dims)")
    return ImageDesc(image_layout(layout), dims, dtype)


@memoized("accessors", "CLAYOUT_ACCESSOR_CACHE", 256)
def _build(side, name: str, access: str, generic: bool) -> Accessor:
    return _render(side, name, access, generic, Accesses())


def _render(side, name: str, access: str, generic: bool, acc: Accesses) -> Accessor:
    num = Numbers(bake=not generic, magic_div=generic, prefix=f"{name}_n")
    span = side.memory.span
    idx = "uint" if span < 2 ** 31 else "ulong"
    if idx == "ulong":
        num.magic_div = False
    dt = side.dtype
    scalar, vector, zero = dtypes_c.c_type(dt).value
    rank = len(side.dims)
    dims = [num(d, key=("dim", k)) for k, d in enumerate(side.dims)]
    lane = _lane_axis(side)
    ints = ", ".join(f"int i{k}" for k in range(rank))
    inside = " && ".join(f"(uint)i{k} < {dims[k]}" for k in range(rank))
    qs = [f"const {idx} q{k} = ({idx})i{k};" for k in range(rank)]
    names = [f"q{k}" for k in range(rank)]
    fns, notes = [], []
    image = side.is_image and side.storage.image_object
    pixels = side.is_image and not image                      # pixels in a __global buffer
    readable = access == "read" or not image
    pixel = None
    if image:
        io = dtypes_c.c_type(dt).image
        *coords, k = side.c_pixel(names, num)
        pixel = acc.read_image(side, io.read, name, f"{name}_sampler", coords)
        one = f"{io.lane_helper}(p, {k})"   # read_image* gives the value type itself
    elif pixels:
        *coords, k = side.c_pixel(names, num)
        base = f"{paren(coords[0])} * {side.lanes}"
        one = dtypes_c.storage_value(dt, acc.load(name, f"{base} + {k}", dt))
        lanes4 = (dtypes_c.storage_value(dt, acc.load(name, f"{base} + {j}", dt))
                  for j in range(4))
        pixel = f"({vector})({', '.join(lanes4)})"
    else:
        off = offset_expr(side, names, num)
        one = dtypes_c.storage_value(dt, acc.load(name, off, dt))
    sig = f"{name}_PARAMS, {ints}"
    here = _calls(name, rank, 0)[0]   # a call's arguments at the index itself
    if readable:
        fns.append(Function(f"static inline {scalar} {name}_load({sig})",
                            (f"if (!({inside})) return {zero};", *qs,
                             *((f"const {io.pixel_type} p = {pixel};",) if image else ()),
                             f"return {one};")))
    if readable and lane is not None:
        fns.append(Function(f"static inline {vector} {name}_load4({sig})",
                            _load4(side, name, lane, dims, qs, vector, zero,
                                   pixel, num, acc)))
    if readable:   # along a named axis: a kernel written for one axis reads any layout right
        fns += [Function(f"static inline {vector} {name}_load4_a{k}({sig})",
                         (f"return {name}_load4({here});" if k == lane else
                          _four_loads(name, rank, k, vector),)) for k in range(rank)]
    store_one = access == "write" and (not image or side.lanes == 1)
    if access == "write":
        if store_one:
            fns.append(Function(f"static inline void {name}_store({sig}, {scalar} v)",
                                (f"if (!({inside})) return;", *qs,
                                 _store_one(side, name, names, num, acc))))
        else:
            notes.append(f"#define {name}_store(...) {name}_store_is_not_available_on_an_RGBA"
                         f"_image_write_whole_pixels_with_{name}_store4")
        if lane is not None:
            fns.append(Function(f"static inline void {name}_store4({sig}, {vector} v)",
                                _store4(side, name, lane, dims, qs, names, num, zero,
                                        acc)))
        elif not store_one:
            raise ClayoutError(f"an accessor cannot write {side.describe()}: its RGBA lanes hold "
                               "elements of grouped dims (no single lane axis) and one lane "
                               "cannot be written alone; write it with to_image")
        for k in range(rank):   # along a named axis, where the storage can write it
            if k == lane or store_one:
                fns.append(Function(f"static inline void {name}_store4_a{k}({sig}, {vector} v)",
                                    (f"{name}_store4({here}, v);",) if k == lane else
                                    _four_stores(name, rank, k)))
                notes.append(f"#define {name}_STORE4_A{k} 1")
            else:   # four pixels, each written whole from one lane: not possible
                notes.append(f"#define {name}_store4_a{k}(...) {name}_store4_a{k}_is_not_"
                             f"available_on_an_{side.channels}_image_whose_lanes_run_along_"
                             f"axis_{lane}_write_whole_pixels_with_{name}_store4")
    fns.insert(0, Function(f"static inline int {name}_dim({name}_PARAMS, int k)",
                           (f"const int d[{rank}] = {{{', '.join(f'(int){d}' for d in dims)}}};",
                            "return d[k];")))
    param = images.param(side, name, access) if side.is_image else \
        f"__global {'const ' if access == 'read' else ''}{dt.cl_scalar} *{name}"
    extra = [f"const {idx if ctype == 'idx_t' else ctype} {n}" for n, ctype, _ in num.args]
    params = ", ".join([param] + extra)
    args = ", ".join([name] + [n for n, _, _ in num.args])
    values = tuple(arg_value(idx if ctype == "idx_t" else ctype, v) for _, ctype, v in num.args)
    # a generic accessor's text names no dims: one text (one program) for every shape
    summary = (f"{side.describe()}, {access}" if not generic else
               f"{_family(side)}, {access}, generic (numbers are arguments)")
    source = sources.template("accessor.cl.mako").render(
        name=name, summary=summary, guard=f"CLAYOUT_ACCESSOR_{name}",
        helpers=sources.helpers() + acc.helpers, params=params + acc.param, args=args + acc.arg, rank=rank, lane_axis=lane, notes=notes,
        pragmas=images.pragmas(side, access) if image else (),
        sampler=image and access == "read" and images.sampled(side), functions=fns)
    return Accessor(name, side, access, generic, source, params, lane, rank, values, store_one)


def _family(side) -> str:
    """``side`` described without its dims (rank, layout, dtype, storage)."""
    if side.is_image:
        return f"{side.layout.name} rank {len(side.dims)} {side.dtype.name} ({side.storage.name})"
    return f"{side.dtype.name} rank {len(side.dims)} {side.tag or 'strided'}"


def _lane_axis(side) -> int | None:
    """The logical axis whose four consecutive elements share a pixel (an
    image's lane block, when its dim is not grouped), or, for a buffer, the
    dim of its innermost axis when that steps one element of its dim."""
    if side.is_image:
        if side.lane_axis is None:
            return None
        into_logical = {own: d for d, own in unchanged_dims(side).items()}
        return into_logical.get(side.lane_axis.dim)
    inner = side.axes[-1] if side.axes else None
    return inner.dim if inner is not None and inner.div == 1 else None


def _contiguous4(side, lane: int) -> bool:
    """A buffer whose four elements from a multiple of 4 on the lane axis
    are one vload4: the innermost axis steps the lane dim by one element
    at stride 1, and 4 divides its block (or it is the outer part)."""
    a = side.axes[-1]
    halo = side.halo_lower[lane] % 4 == 0
    return a.dim == lane and a.stride == 1 and (a.outer or a.size % 4 == 0) and halo \
        and side.tag is not None


def _calls(name: str, rank: int, axis: int) -> list[str]:
    """The arguments of a call at the index and at its next three along ``axis``."""
    return [", ".join([f"{name}_ARGS"] + [f"i{k}" + (f" + {j}" if k == axis and j else "")
                                          for k in range(rank)]) for j in range(4)]


def _four_loads(name: str, rank: int, axis: int, vector: str) -> str:
    """Four ``load``s along ``axis``, as one vector: right on any layout."""
    loads = ", ".join(f"{name}_load({c})" for c in _calls(name, rank, axis))
    return f"return ({vector})({loads});"


def _four_stores(name: str, rank: int, axis: int) -> tuple[str, ...]:
    """Four ``store``s of v along ``axis`` (each does nothing outside the dims)."""
    return tuple(f"{name}_store({c}, v.s{j});" for j, c in enumerate(_calls(name, rank, axis)))


def _lane_guard(side, dims, lane: int, action: str) -> str:
    """``action`` unless every index but the lane's is inside its dim and
    the lane's index is too."""
    inside = [f"(uint)i{k} < {dims[k]}" for k in range(len(side.dims)) if k != lane]
    inside.append(f"(uint)i{lane} < {dims[lane]}")
    return f"if (!({' && '.join(inside)})) {action}"


def _load4(side, name, lane, dims, qs, vector, zero, pixel, num, acc):
    single = _four_loads(name, len(side.dims), lane, vector)
    if pixel is None and not _contiguous4(side, lane):
        return (single,)
    guard = _lane_guard(side, dims, lane, f"return ({vector})({zero});")
    if pixel is not None:   # one pixel: lanes past the dims are the image's zero padding
        return (guard, f"if (i{lane} & 3) {single}", *qs, f"const {vector} p = {pixel};",
                f"if (i{lane} + 4 <= {dims[lane]}) return p;",
                f"const int n = {dims[lane]} - i{lane};",
                f"return ({vector})(p.x, n > 1 ? p.y : {zero}, n > 2 ? p.z : {zero}, {zero});")
    off = offset_expr(side, [f"q{k}" for k in range(len(side.dims))], num)
    return (guard, f"if ((i{lane} & 3) || i{lane} + 4 > {dims[lane]}) {single}", *qs,
            *dtypes_c.storage_value4(side.dtype, acc.vload_expr(side.dtype, 4, name, off)))


def _store_one(side, name, names, num, acc) -> str:
    dt = side.dtype
    if side.is_image and not side.storage.image_object:   # one lane of a pixel
        *coords, k = side.c_pixel(names, num)
        return acc.store(name, f"{paren(coords[0])} * {side.lanes} + {k}", dt,
                         dtypes_c.value_to_storage(dt, "v"))
    if side.is_image:   # one channel
        io = dtypes_c.c_type(dt).image
        coords = side.c_pixel(names, num)[:-1]
        value = dtypes_c.value_to_image_write(dt, "v")
        return acc.write_image(side, io.write, name, coords,
                               f"({io.write_type}4)({value}, 0, 0, 0)")
    return acc.store(name, offset_expr(side, names, num), dt, dtypes_c.value_to_storage(dt, "v"))


def _store4(side, name, lane, dims, qs, names, num, zero, acc):
    rank = len(side.dims)
    one_by_one = _four_stores(name, rank, lane)
    if not side.is_image:   # a buffer: its elements inside the dims, one by one
        return one_by_one
    dt = side.dtype
    coords = side.c_pixel(names, num)[:-1]
    values = [f"i{lane} + {j} < {dims[lane]} ? v.s{j} : {zero}" for j in range(4)]
    if not side.storage.image_object:   # off a pixel's first lane: element by element
        off = tuple(f"    {line}" for line in one_by_one)
    else:   # an image pixel is written whole, from its first lane: nothing to write
        off = ("#ifdef CLAYOUT_CHECKS",
               f'    printf("clayout: {name}_store4 at i{lane} = %d, not a multiple of 4: an '
               f'{side.channels} image is written a whole pixel at a time; nothing '
               f'written\\n", i{lane});', "#endif")
    head = (f"if (i{lane} & 3) {{", *off, "    return;", "}",
            _lane_guard(side, dims, lane, "return;"), *qs)
    if not side.storage.image_object:   # the whole pixel, padding lanes 0
        base = f"{paren(coords[0])} * {side.lanes}"
        return head + tuple(acc.store(name, f"{base} + {j}", dt,
                                      dtypes_c.value_to_storage(dt, f"({v})"))
                            for j, v in enumerate(values))
    io = dtypes_c.c_type(dt).image
    lanes = [dtypes_c.value_to_image_write(dt, v) for v in values]
    return head + (acc.write_image(side, io.write, name, coords,
                                   f"({io.write_type}4)({', '.join(lanes)})"),)


__all__ = ["Accessor", "accessor"]
