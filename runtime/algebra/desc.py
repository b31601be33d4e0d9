"""MemoryDesc: a logical tensor placed in memory, with oneDNN semantics (docs/formats.md).

A desc is frozen data. It owns its index math twice, as mirror images:
``offset(idx)`` (the oneDNN walk, in Python) and ``c_offset(names)`` (the same
sum as an OpenCL C expression with every constant baked in). ``axes`` lists
the physical axes outer to inner; the fast path and the kernels are built
from it.

Worked example: ``MemoryDesc((2, 17, 3, 4), tag="nChw16c")`` has
padded_dims (2, 32, 3, 4) and strides (384, 192, 64, 16); element (1, 16, 2, 3)
sits at 1*384 + (16//16)*192 + 2*64 + 3*16 + 16%16 = 752.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from . import dtypes
from . import ops
from .c_index import Numbers, offset_expr
from .checks import as_ints, desc_fields
from ..errors import ClayoutError
from .strides import from_strides, from_tag, halo_sizes
from .tags import MAX_DIMS, Tag


@dataclass(frozen=True)
class Axis:
    """One physical axis: digit ``(q[dim] // div) % size`` times ``stride``,
    where q is the index inside the halo-padded extent. For the outer axis of
    a dim (``outer=True``) there is no modulo."""
    dim: int
    size: int
    div: int
    stride: int
    outer: bool


@dataclass(frozen=True, init=False, eq=False)
class MemoryDesc:
    # Derived quantities (axes, size, span, is_dense, tag, ...) are worked out
    # once per desc, on first use (functools.cached_property: a desc is frozen).
    dims: tuple[int, ...]
    dtype: dtypes.DType
    padded_dims: tuple[int, ...]
    strides: tuple[int, ...]
    inner_blks: tuple[int, ...]
    inner_idxs: tuple[int, ...]
    offset0: int
    halo_lower: tuple[int, ...]
    halo_upper: tuple[int, ...]
    fill: float
    order: tuple[int, ...]   # outer axes, outermost first (from the tag, or by stride)

    def __init__(self, dims, dtype="f32", tag=None, strides=None, offset0=0,
                 halo=None, fill=0):
        """``MemoryDesc(dims, dtype, tag=...)`` or ``strides=...`` (plain, no
        blocking). ``halo=(lower, upper)`` adds clDNN padding filled with ``fill``;
        blocking applies to the padded extent."""
        dims = as_ints(dims, "dims") if not isinstance(dims, int) else (dims,)
        if not 1 <= len(dims) <= MAX_DIMS or min(dims) < 0:
            raise ClayoutError(f"dims {dims}: expected 1 to {MAX_DIMS} non-negative sizes")
        nd = len(dims)
        lower, upper = halo_sizes(halo, nd)
        extent = tuple(lo + d + up for lo, d, up in zip(lower, dims, upper))
        if tag is not None and strides is not None:
            raise ClayoutError("give either tag= or strides=, not both")
        if strides is None:
            padded, out_strides, order, inner_blks, inner_idxs = from_tag(tag, dims, extent)
        else:
            padded, out_strides, order = from_strides(strides, dims, extent)
            inner_blks, inner_idxs = (), ()
        (offset0,) = as_ints((offset0,), "offset0")
        if offset0 < 0:
            raise ClayoutError(f"offset0 {offset0} must be >= 0")
        try:
            fill = float(fill)
        except (TypeError, ValueError):
            raise ClayoutError(f"fill must be a number, got {fill!r}") from None
        self._init(dims, dtypes.dtype(dtype), padded, out_strides, inner_blks, inner_idxs,
                   offset0, lower, upper, fill, order)

    # -- construction helpers -------------------------------------------------
    def _init(self, dims, dtype, padded, strides, inner_blks, inner_idxs, offset0,
              lower, upper, fill, order):
        for name, value in (("dims", tuple(dims)), ("dtype", dtype),
                            ("padded_dims", tuple(padded)), ("strides", tuple(strides)),
                            ("inner_blks", tuple(inner_blks)), ("inner_idxs", tuple(inner_idxs)),
                            ("offset0", offset0), ("halo_lower", tuple(lower)),
                            ("halo_upper", tuple(upper)), ("fill", float(fill)),
                            ("order", tuple(order))):
            object.__setattr__(self, name, value)

    # -- as one side of a conversion (an ImageDesc is the other kind of side) ------
    is_image = False   # class constants, not fields (runtime/algebra/side.py)
    is_frame = False

    @property
    def memory(self) -> "MemoryDesc":
        """The memory this side occupies: the desc itself (an ImageDesc's is the
        dense desc of its image)."""
        return self

    # -- derived quantities -----------------------------------------------------
    @property
    def ndims(self) -> int:
        return len(self.dims)

    def blocks_of(self, d: int) -> int:
        """Product of the inner blocks of dim d (1 if unblocked)."""
        return math.prod(b for b, i in zip(self.inner_blks, self.inner_idxs) if i == d)

    @functools.cached_property
    def extent(self) -> tuple[int, ...]:
        """Halo-padded extent of each dim (before rounding up to the blocks)."""
        return tuple(lo + d + up for lo, d, up in zip(self.halo_lower, self.dims, self.halo_upper))

    @functools.cached_property
    def nelems(self) -> int:
        """Logical element count."""
        return math.prod(self.dims)

    @functools.cached_property
    def is_zero(self) -> bool:
        return self.nelems == 0

    @functools.cached_property
    def size(self) -> int:
        """Bytes of the described memory with all padding, offset0 excluded (oneDNN)."""
        if self.is_zero:
            return 0
        span = max([(p // self.blocks_of(d)) * s if p else 0
                    for d, (p, s) in enumerate(zip(self.padded_dims, self.strides))] +
                   [math.prod(self.inner_blks)])
        return span * self.dtype.itemsize

    @functools.cached_property
    def span(self) -> int:
        """Elements a buffer needs from its start (offset0 included) to hold this desc."""
        return 0 if self.is_zero else self.offset0 + self.size // self.dtype.itemsize

    @functools.cached_property
    def axes(self) -> tuple[Axis, ...]:
        """Physical axes, outer to inner: the outer part of each dim in ``order``,
        then the inner blocks as written."""
        out = []
        for d in self.order:
            b = self.blocks_of(d)
            out.append(Axis(d, -(-self.padded_dims[d] // b), b, self.strides[d], True))
        inner = []
        stride, below = 1, [1] * self.ndims
        for d, size in reversed(list(zip(self.inner_idxs, self.inner_blks))):
            inner.append(Axis(d, size, below[d], stride, False))  # innermost first
            below[d] *= size
            stride *= size
        out.extend(reversed(inner))
        return tuple(out)

    @functools.cached_property
    def is_dense(self) -> bool:
        """True when the axes tile [offset0, span) exactly (no gaps, no overlap)."""
        if self.is_zero:
            return True
        if any(p % self.blocks_of(d) for d, p in enumerate(self.padded_dims)):
            return False  # a submemory ending inside a block leaves part of it out
        axes = sorted((a for a in self.axes if a.size > 1), key=lambda a: a.stride)
        expect = 1
        for a in axes:
            if a.stride != expect:
                return False
            expect *= a.size
        return expect == self.size // self.dtype.itemsize

    @functools.cached_property
    def span_bytes(self) -> int:
        """Bytes a buffer needs from its start (offset0 included): ``span`` in bytes."""
        return self.span * self.dtype.itemsize

    @functools.cached_property
    def has_padding(self) -> bool:
        return self.padded_dims != self.dims

    @functools.cached_property
    def has_halo(self) -> bool:
        return any(self.halo_lower) or any(self.halo_upper)

    @property
    def has_fixed_elements(self) -> bool:
        """True when some of its memory is not the tensor's: block tails
        (always 0) or a halo (``fill``), rewritten when a buffer is attached."""
        return not self.is_zero and (self.has_padding or self.has_halo)

    def linear_strides(self) -> tuple[int, ...] | None:
        """The stride of each dim when every element sits at offset0 +
        sum(idx[d] * stride[d]): each dim's blocks fold back into one stride
        (``A4a`` over W: (w / 4) * 4 + w % 4 = w) and there is no halo; None
        otherwise. A dim of size 1 gets 0.

        >>> MemoryDesc((10,), tag="A4a").linear_strides()
        (1,)
        >>> MemoryDesc((2, 3, 5), tag="aCb4c").linear_strides() is None
        True
        """
        if self.has_halo:
            return None
        out = []
        for d in range(self.ndims):
            if self.dims[d] == 1:
                out.append(0)
                continue
            stride = block = None
            for a in sorted((a for a in self.axes if a.dim == d), key=lambda a: a.div):
                if stride is None:
                    stride, block = a.stride, a.size
                elif a.stride != block * stride:
                    return None
                else:
                    block *= a.size
            out.append(stride)
        return tuple(out)

    # -- index math -----------------------------------------------------------
    def offset(self, idx) -> int:
        """Element offset of logical index ``idx`` (oneDNN's walk: inner blocks
        innermost first, then the outer strides, plus offset0)."""
        idx = as_ints(idx, "index")
        if len(idx) != self.ndims or any(not 0 <= i < d for i, d in zip(idx, self.dims)):
            raise ClayoutError(f"index {idx} is outside dims {self.dims}")
        return int(self.offsets([np.asarray(i) for i in idx]))

    def offsets(self, idx) -> np.ndarray:
        """Vectorized ``offset``: ``idx`` is one integer array per dim (broadcastable)."""
        pos = [np.asarray(i, dtype=np.int64) + lo for i, lo in zip(idx, self.halo_lower)]
        off = np.int64(0)
        stride = 1
        for blk, d in reversed(list(zip(self.inner_blks, self.inner_idxs))):
            off = off + (pos[d] % blk) * stride
            pos[d] = pos[d] // blk
            stride *= blk
        for d in range(self.ndims):
            off = off + pos[d] * self.strides[d]
        return off + self.offset0

    def c_offset(self, names) -> str:
        """The offset as an OpenCL C expression of the logical indices ``names``
        (one C expression per dim), constants baked in; mirrors ``offset``
        (runtime.algebra.c_index emits it, also with the numbers as kernel arguments)."""
        return offset_expr(self, list(names), Numbers(bake=True))

    # -- names ------------------------------------------------------------------
    @functools.cached_property
    def tag(self) -> str | None:
        """The letter tag that describes this desc (dense strides of its order and
        blocks), or None when the strides are not those of any tag."""
        try:
            candidate = str(Tag(self.ndims, self.order,
                                tuple(zip(self.inner_idxs, self.inner_blks))))
            ref = MemoryDesc(self.dims, self.dtype, tag=candidate,
                             halo=(self.halo_lower, self.halo_upper))
        except ClayoutError:
            return None
        if ref.padded_dims != self.padded_dims or not self._same_strides(ref):
            return None
        return candidate

    def __str__(self) -> str:
        """The letter tag when one describes this desc completely (no offset0,
        no halo): ``str(MemoryDesc((2, 17, 3, 4), tag="nChw16c")) == "aBcd16b"``;
        else ``describe()``."""
        tag = self.tag
        plain = not self.offset0 and not self.has_halo
        return tag if tag is not None and plain else self.describe()

    def describe(self) -> str:
        """dtype, dims and layout in one line, for messages: 'f32 2x17x3x4 aBcd16b'."""
        base = self.tag or "strides=" + ",".join(map(str, self.strides))
        extra = f" offset0={self.offset0}" if self.offset0 else ""
        if self.has_halo:
            extra += f" halo={self.halo_lower}/{self.halo_upper} fill={self.fill:g}"
        return f"{self.dtype.name} {'x'.join(map(str, self.dims))} {base}{extra}"

    def __repr__(self) -> str:
        return f"MemoryDesc({self.describe()})"

    # -- equality (oneDNN rules) ------------------------------------------------
    def _same_strides(self, other: "MemoryDesc") -> bool:
        return all(s == o or (d == p == 1)
                   for s, o, d, p in zip(self.strides, other.strides, self.dims, self.padded_dims))

    def __eq__(self, other) -> bool:
        if not isinstance(other, MemoryDesc):
            return NotImplemented
        return other is self or (self.dims == other.dims and self.dtype == other.dtype
                and self.padded_dims == other.padded_dims and self.offset0 == other.offset0
                and self.inner_blks == other.inner_blks and self.inner_idxs == other.inner_idxs
                and self.halo_lower == other.halo_lower and self.halo_upper == other.halo_upper
                and (self.fill == other.fill or (math.isnan(self.fill) and math.isnan(other.fill)))
                and self._same_strides(other))

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")   # a desc is frozen: its hash is made once
        if found is None:
            found = hash((self.dims, self.dtype.name, self.padded_dims, self.offset0,
                          self.inner_blks, self.inner_idxs, self.halo_lower, self.halo_upper))
            object.__setattr__(self, "_hash", found)
        return found

    # -- operations ---------------------------------------------------------------
    def replace(self, **fields) -> "MemoryDesc":
        """This desc with some fields changed, checked before it is built.

        ``fields`` are attribute names: dims, dtype, padded_dims, strides,
        inner_blks, inner_idxs, offset0, halo_lower, halo_upper, fill, order;
        values as the constructor takes them (sequences of integers, a dtype
        name or DType). The check is of the structure: every per-dim field
        has one non-negative integer per dim, ``order`` is a permutation of
        the dims, each inner block names a dim and has a size of at least 1,
        and each padded dim holds its dim with the halo. What the strides
        address is the caller's to get right (submemory, reshape and
        permute_axes build their results with this).

        Worked example: channels 16..31 of an nChw16c desc are one channel
        block in, so the part keeps every stride, starts 192 elements later
        (one step of the outer C axis) and is padded to a single block:

        >>> d = MemoryDesc((2, 32, 3, 4), tag="nChw16c")
        >>> d.strides
        (384, 192, 64, 16)
        >>> part = d.replace(dims=(2, 16, 3, 4), padded_dims=(2, 16, 3, 4), offset0=192)
        >>> part.describe(), part == d.submemory((2, 16, 3, 4), (0, 16, 0, 0))
        ('f32 2x16x3x4 strides=384,192,64,16 offset0=192', True)
        >>> d.replace(order=(0, 1, 2))
        Traceback (most recent call last):
        ...
        runtime.errors.ClayoutError: replace: order (0, 1, 2) is not a permutation of 4 dims
        """
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(fields) - set(names))
        if unknown:
            raise ClayoutError(f"replace: unknown field(s) {', '.join(unknown)}; a MemoryDesc "
                               f"has {', '.join(names)}")
        new = desc_fields({name: fields.get(name, getattr(self, name)) for name in names},
                          MAX_DIMS)
        obj = MemoryDesc.__new__(MemoryDesc)
        obj._init(new["dims"], dtypes.dtype(new["dtype"]), new["padded_dims"], new["strides"],
                  new["inner_blks"], new["inner_idxs"], new["offset0"], new["halo_lower"],
                  new["halo_upper"], new["fill"], new["order"])
        return obj

    def with_dtype(self, dtype) -> "MemoryDesc":
        return self.replace(dtype=dtype)

    def submemory(self, dims, offsets) -> "MemoryDesc":
        """A view of part of this memory (oneDNN rules): ``offsets`` a multiple of
        each dim's block; a part that does not reach the right border must be a
        whole number of blocks or smaller than one block."""
        return ops.submemory(self, as_ints(dims, "submemory dims"),
                             as_ints(offsets, "submemory offsets"))

    def reshape(self, dims) -> "MemoryDesc":
        """Same memory, other dims: only joins or splits of dense, unblocked,
        unpadded dims, and adding/removing unit dims (oneDNN rules)."""
        return ops.reshape(self, as_ints(dims, "reshape dims"))

    def permute_axes(self, perm) -> "MemoryDesc":
        """Rename dims: ``new.dims[perm[i]] = dims[i]`` (oneDNN's permute_axes)."""
        return ops.permute_axes(self, as_ints(perm, "perm"))
