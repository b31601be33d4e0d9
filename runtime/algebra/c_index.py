"""Index expressions of a layout, in OpenCL C, with constants or arguments.

One emitter serves every kernel: ``offset_expr`` (a buffer element's offset,
the mirror of ``MemoryDesc.offsets``), ``pixel_expr`` (an image lane's
(x, y, lane), the mirror of ``ImageDesc.pixel``) and the row-major
reshapes between a side's logical dims and its own dims (``own_names``,
``logical_names``).

Where the numbers go is the caller's choice, made once per kernel with a
``Numbers``:

* ``Numbers(bake=True)`` writes every number as a literal: a program for one
  shape, which lets the compiler turn divisions into multiplications (what
  large tensors want);
* ``Numbers(bake=False)`` writes each number that depends on the dims (an
  outer size, a stride, offset0, a halo, the image width) as a kernel argument
  ``n0, n1, ...`` and records its value, so the source depends only on the
  layouts' structure: one program serves every shape of a conversion family.

Numbers that are structure (block sizes, the 4 lanes) are literals in both.

>>> from runtime.algebra.desc import MemoryDesc
>>> desc = MemoryDesc((2, 17, 3, 4), tag="nChw16c")
>>> offset_expr(desc, ["n", "c", "h", "w"], Numbers(bake=True))
'n * 384 + (c / 16) * 192 + h * 64 + w * 16 + (c % 16)'
>>> num = Numbers(bake=False)
>>> offset_expr(desc, ["n", "c", "h", "w"], num), [value for _, _, value in num.args]
('n0 + n * n1 + (c / 16) * n2 + h * n3 + w * n4 + (c % 16)', [0, 384, 192, 64, 16])
"""
from __future__ import annotations

import math

import numpy as np

# The ``desc`` arguments below are MemoryDescs and the ``layout`` arguments
# ImageLayouts; this module imports neither (both import it), so the names in
# the annotations are documentation only.


# Divisions by a number known only at run time: an integer division costs tens
# of cycles and has no SIMD instruction, so a generic kernel divides by
# multiplying with a magic number instead (the compiler does the same for a
# baked constant). For every 0 <= n < 2**DIV_BITS and divisor d >= 1, with
# l = ceil(log2 d), m = floor(2**(DIV_BITS + l) / d) + 1 (m < 2**32) and
# s = DIV_BITS + l: n / d == (n * m) >> s, exactly, in 64-bit arithmetic
# (Granlund and Montgomery's round-up method: m * d - 2**s <= 2**l).
DIV_BITS = 31


def magic(d: int) -> tuple[int, int]:
    """(m, s) with n // d == (n * m) >> s for every 0 <= n < 2**DIV_BITS.

    >>> m, s = magic(56)
    >>> all((n * m) >> s == n // 56 for n in (0, 55, 56, 2**31 - 1))
    True
    """
    if not 1 <= d < 2 ** DIV_BITS:
        raise ValueError(f"divisor {d} outside 1..2**{DIV_BITS}-1")
    lg = (d - 1).bit_length()
    shift = DIV_BITS + lg
    return (1 << shift) // d + 1, shift


class Numbers:
    """Where the dims-dependent numbers of one kernel go: literals
    (``bake=True``) or kernel arguments named ``n0, n1, ...`` (``prefix``
    other than "n": ``t_n0, ...`` for an accessor named t) whose values
    are kept in ``args`` as (name, C type, value). ``magic_div``: divisions
    and remainders by arguments multiply by a magic number instead (every
    index below 2**31, i.e. ``idx_t`` is uint)."""

    def __init__(self, bake: bool, magic_div: bool = False, prefix: str = "n"):
        self.bake = bake
        self.magic_div = magic_div and not bake
        self.prefix = prefix
        self.args: list[tuple[str, str, object]] = []
        self._named: dict = {}

    def __call__(self, value, ctype: str = "idx_t", key=None) -> str:
        """An index-typed number: a literal, or an argument holding it. The
        same ``key`` (what the number is: a desc's stride of one axis, ...)
        asked again gets the same argument."""
        if self.bake:
            return str(int(value))
        if key is not None and key in self._named:
            return self._named[key]
        name = f"{self.prefix}{len(self.args)}"
        self.args.append((name, ctype, int(value)))
        if key is not None:
            self._named[key] = name
        return name

    def value(self, literal: str, raw, ctype: str) -> str:
        """A value of another C type (a fill value): ``literal`` when baked,
        else an argument of ``ctype`` holding ``raw`` (a numpy scalar)."""
        if self.bake:
            return literal
        name = f"{self.prefix}{len(self.args)}"
        self.args.append((name, ctype, raw))
        return name

    def div(self, expr: str, value, key=None) -> str:
        """``expr / value`` for an index ``expr`` and a dims-dependent divisor."""
        if not self.magic_div or int(value) < 1:
            return f"({expr} / {self(value, key=key)})"
        m, shift = magic(int(value))
        mm = self(m, "uint", key=None if key is None else (key, "magic"))
        ss = self(shift, "uint", key=None if key is None else (key, "shift"))
        return f"clayout_div({expr}, {mm}, {ss})"

    def mod(self, expr: str, value, key=None) -> str:
        """``expr % value`` for an index ``expr`` and a dims-dependent divisor."""
        if not self.magic_div or int(value) < 1:
            return f"({expr} % {self(value, key=key)})"
        return f"({expr} - {self.div(expr, value, key)} * {self(value, key=key)})"

    def unit(self, size: int) -> bool:
        """True when a baked axis of ``size`` contributes nothing (size 1);
        a generic kernel keeps every axis, whatever its size."""
        return self.bake and size == 1

    def times(self, expr: str, value, key=None) -> str:
        """``expr * value``, the factor a literal or an argument."""
        if self.bake and value == 1:
            return expr
        return f"{expr} * {self(value, key=key)}"


def paren(expr: str) -> str:
    return expr if expr.isidentifier() or expr.isdigit() else f"({expr})"


def digit(q: str, div: int, size: int, outer: bool) -> str:
    """Digit ``(q / div) % size`` of an axis; div and a block's size are
    structure (literals), an outer axis has no modulo."""
    d = q if div == 1 else f"({q} / {div})"
    return d if outer else f"({d} % {size})"


def offset_expr(desc, names, num: Numbers) -> str:
    """The element offset of logical index ``names`` (one C expression per
    dim) in ``desc``: oneDNN's walk, offset0 and halo included."""
    halo = desc.has_halo
    me = id(desc)
    terms = [num(desc.offset0, key=(me, "offset0"))] if desc.offset0 or not num.bake else []
    for pos, a in enumerate(desc.axes):
        if (not a.outer and a.size == 1) or (num.bake and desc.dims[a.dim] == 0):
            continue
        lo = desc.halo_lower[a.dim]
        q = paren(names[a.dim])
        if lo or (halo and not num.bake):
            q = f"({names[a.dim]} + {num(lo, key=(me, 'halo', a.dim))})"
        d = digit(q, a.div, a.size, a.outer)
        if a.outer:
            terms.append(num.times(d, a.stride, key=(me, "stride", pos)))
        else:
            terms.append(d if a.stride == 1 else f"{d} * {a.stride}")
    return " + ".join(terms) if terms else "0"


# -- a side's own dims <-> the logical dims (an image's groups, 2-D activations) -------------
# A MemoryDesc's own dims are the logical dims. An ImageDesc's are its image
# dims: the placed dims (the logical ones, or a transform's output) with each
# of the layout's groups flattened row-major. Both sides of a conversion name
# elements by logical (placed) index, so a kernel decodes its destination's
# own index, turns it into the logical one, and that into the source's own.
def own_names(side, names, num: Numbers) -> list[str]:
    """Logical index ``names`` (padded with "0" to the side's rank: a 2-D
    activation is N, C, 1, 1) as the index of the side's own dims."""
    if not side.is_image:
        return list(names)
    dims, layout = side.placed, side.layout
    names = list(names) + ["0"] * (len(dims) - len(names))
    if not layout.groups:
        return names
    out = []
    for group in layout.groups:
        flat = names[group[0]]
        for d in group[1:]:
            flat = f"{paren(flat)} * {num(dims[d], key=('dim', d))} + {paren(names[d])}"
        out.append(flat)
    return out


def logical_names(side, names, num: Numbers, ndims: int | None = None) -> list[str]:
    """The inverse of ``own_names``: the index ``names`` of the side's own
    dims as the logical index, cut to ``ndims`` dims (2 for a 2-D activation)."""
    if not side.is_image or not side.layout.groups:
        out = list(names)
    else:
        dims = side.placed
        out = [""] * len(dims)
        for q, group in zip(names, side.layout.groups):
            for j, d in enumerate(group):
                below = math.prod(dims[e] for e in group[j + 1:])
                expr = paren(q) if j == len(group) - 1 else \
                    num.div(paren(q), below, key=("below", d))
                out[d] = expr if j == 0 else num.mod(expr, dims[d], key=("dim", d))
    return out[:ndims if ndims is not None else len(out)]


def unchanged_dims(side) -> dict[int, int]:
    """Logical dim -> own dim for the dims whose index passes to the side's
    own dims unchanged (all of a buffer's; an image's groups of one dim)."""
    if not side.is_image or not side.layout.groups:
        return {d: d for d in range(len(side.dims))}
    return {group[0]: g for g, group in enumerate(side.layout.groups) if len(group) == 1}


def pixel_expr(image, names, num: Numbers) -> tuple[str, ...]:
    """The coordinates and lane of the placed index ``names`` in the
    ImageDesc ``image`` as C expressions: (x, y, lane), (x, y, z, lane) or
    (x, lane) by its storage; the mirror of ``ImageDesc.pixel``: its column,
    row, layer and lane axes give x, y, z and the lane."""
    desc = image.desc
    if num.bake and desc.is_zero:   # an empty image has no pixel (and maybe width 0)
        return ("0",) * (image.storage.ndim + 1)
    q = own_names(image, names, num)

    def terms(axes, pitch, key):
        out = []
        for i, a in enumerate(axes):
            if (not a.outer and a.size == 1) or (num.bake and (a.size == 1 or
                                                               desc.dims[a.dim] == 0)):
                continue
            d = digit(paren(q[a.dim]), a.div, a.size, a.outer)
            out.append(num.times(d, a.stride // pitch, key=(key, i)))
        return " + ".join(out) or "0"

    lane = image.lane_axis
    lane_expr = "0" if lane is None else \
        digit(paren(q[lane.dim]), lane.div, lane.size, lane.outer)
    pitch = image.width * image.lanes
    coords = (terms(image.col_axes, image.lanes, "x"), terms(image.row_axes, pitch, "y"),
              terms(image.layer_axes, pitch * image.height, "z"))
    return coords[:image.storage.ndim] + (lane_expr,)


def arg_value(ctype: str, value):
    """The numpy scalar pyopencl passes for an argument of ``ctype``."""
    if isinstance(value, np.generic):
        return value
    return {"uint": np.uint32, "ulong": np.uint64}[ctype](value)


def f32_literal(value) -> str:
    """The exact C literal of one float32 number (hex float; INFINITY for
    the infinities; NaN has none: the caller refuses it).

    >>> f32_literal(0.1), f32_literal(-2.0), f32_literal(0.0)
    ('0x1.99999ap-4f', '-0x1p+1f', '0.0f')
    """
    v = float(np.float32(value))
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    if v == 0.0:
        return "-0.0f" if math.copysign(1.0, v) < 0 else "0.0f"
    mantissa, exponent = v.hex().split("p")
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}f"
