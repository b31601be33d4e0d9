"""A transform stage: values a layout stores in place of the tensor itself.

Most layouts only move elements. A Winograd filter image stores, per (output,
input) channel pair, U = G·g·Gᵀ of the kH x kW filter g: new values, and new
dims (T x T instead of kH x kW). ``Transform`` states such a stage as data,
once: the matrix G (T rows of r numbers) and the logical axes it acts on
(each of length r, each becoming T; ``square`` names axes left as they are
that must be r long too), and optionally a ``split`` (axis,
block): after G, that axis is padded with zeros to a multiple of ``block``
and split in two, (⌈d/block⌉, block) (TFLite's four filter images, one per
input lane, put the lane outermost). An ImageLayout with a ``transform``
places the transform's output; the engines run the stage between the two
sides of a conversion (runtime.algebra.conversion).

The evaluation, fixed so that every engine gives the same bits:

* forward (``apply``): in float32. G is rounded to float32 once. The axes are
  done in the order given; along one axis, output i is
  ``((G[i,0]*x[0] + G[i,1]*x[1]) + G[i,2]*x[2]) + ...``: every product and
  every sum rounded to float32, p ascending, every term included (a zero
  coefficient too), no fused multiply-add. Every result has the same bits
  on every engine, but a NaN's sign and payload can differ: when two NaNs
  meet in a sum, IEEE 754 leaves open which one is kept (x86 keeps the first
  operand, and a compiler may swap an addition's operands);
* bounds (docs/winograd.md): with u the unit roundoff of float32 (2⁻²⁴), k
  axes and r taps, |U − G·g·Gᵀ| ≤ (k·(r+1)+1)·u·(|G|·|g|·|G|ᵀ) element by
  element (the rounding of G to float32, then r rounded products and r−1
  rounded sums per axis); an f16 image adds its one rounding of U. The
  inverse carries that error through |G⁺| and adds one rounding of g.
  ``forward_bound`` and ``inverse_bound`` evaluate them for a given g.
* inverse (``invert``): the split undone (the padding dropped), then
  g = G⁺·U·G⁺ᵀ (G⁺ the pseudo-inverse), in float64 with numpy, then rounded
  once to the dtype asked for. Every engine runs this same host function.

>>> t = Transform("double", ((2.0,), (1.0,)), axes=(0,))     # r = 1, T = 2
>>> t.out_dims((1, 5))
(2, 5)
>>> t.apply(np.array([[1.5, 2.0, 0.0, -1.0, 3.0]], np.float32))
array([[ 3. ,  4. ,  0. , -2. ,  6. ],
       [ 1.5,  2. ,  0. , -1. ,  3. ]], dtype=float32)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes
from ..errors import ClayoutError


@dataclass(frozen=True)
class Transform:
    """``matrix`` (T rows of r numbers) applied along each of ``axes``."""
    name: str
    matrix: tuple[tuple[float, ...], ...]
    axes: tuple[int, ...]
    split: tuple[int, int] | None = None
    square: tuple[int, ...] = ()    # axes not transformed that must be r long too

    def __post_init__(self):
        rows = {len(row) for row in self.matrix}
        if not self.matrix or len(rows) != 1 or not self.axes:
            raise ClayoutError(f"transform {self.name!r}: the matrix must be T rows of r numbers "
                               "and act on at least one axis")
        if self.split is not None and (len(self.split) != 2 or self.split[1] < 1):
            raise ClayoutError(f"transform {self.name!r}: split is (axis, block) with block >= 1, "
                               f"got {self.split}")

    @property
    def taps(self) -> int:
        """r: the length each transformed axis has before the transform."""
        return len(self.matrix[0])

    @property
    def tile(self) -> int:
        """T: the length each transformed axis has after it."""
        return len(self.matrix)

    def out_dims(self, dims) -> tuple[int, ...]:
        """The dims after the transform; each transformed axis (and each of
        ``square``) must be r long."""
        dims = tuple(dims)
        need = sorted(set(self.axes) | set(self.square))
        wrong = [a for a in need if a >= len(dims) or dims[a] != self.taps]
        if wrong:
            raise ClayoutError(f"transform {self.name!r} takes {self.taps} along axes "
                               f"{need}; dims {dims} have "
                               + ", ".join(f"{dims[a] if a < len(dims) else 'no'} on axis {a}"
                                           for a in wrong))
        out = tuple(self.tile if a in self.axes else d for a, d in enumerate(dims))
        if self.split is None:
            return out
        axis, block = self.split
        return out[:axis] + (-(-out[axis] // block), block) + out[axis + 1:]

    def _split(self, x: np.ndarray) -> np.ndarray:
        """The transformed tensor with its split axis padded and split."""
        if self.split is None:
            return x
        axis, block = self.split
        d = x.shape[axis]
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, -(-d // block) * block - d)
        x = np.pad(x, pad)
        return x.reshape(x.shape[:axis] + (-(-d // block), block) + x.shape[axis + 1:])

    def _merge(self, x: np.ndarray, dims) -> np.ndarray:
        """The inverse of ``_split``: the split axis merged and cut to ``dims``."""
        if self.split is None:
            return x
        axis, _ = self.split
        x = x.reshape(x.shape[:axis] + (x.shape[axis] * x.shape[axis + 1],) + x.shape[axis + 2:])
        return x[(slice(None),) * axis + (slice(0, dims[axis]),)]

    def f32_matrix(self) -> np.ndarray:
        return np.array(self.matrix, dtype=np.float64).astype(np.float32)

    def apply(self, values: np.ndarray) -> np.ndarray:
        """The forward transform of ``values`` (the logical tensor, any float
        dtype; converted to float32 exactly first) in float32, in the order
        of this module's docstring."""
        x = dtypes.convert(np.asarray(values), "f32") if np.asarray(values).dtype != np.float32 \
            else np.asarray(values)
        g = self.f32_matrix()
        for axis in self.axes:
            moved = np.moveaxis(x, axis, -1)                    # (..., r)
            acc = moved[..., 0, None] * g[:, 0]                 # (..., T), each product rounded
            for p in range(1, self.taps):
                acc = acc + moved[..., p, None] * g[:, p]       # then each sum
            x = np.moveaxis(acc, -1, axis)
        return np.ascontiguousarray(self._split(x), dtype=np.float32)

    def invert(self, values: np.ndarray, dtype, dims) -> np.ndarray:
        """g = G⁺·U·G⁺ᵀ of ``values`` (the transformed tensor, the output of
        ``apply`` for a tensor of ``dims``) in float64, rounded once to ``dtype``."""
        return dtypes.host_array(self.exact_inverse(values, dims), dtype, "transform output")

    def exact_inverse(self, values: np.ndarray, dims) -> np.ndarray:
        """G⁺·U·G⁺ᵀ in float64, not rounded: the tensor of ``dims`` whose
        transform ``values`` is (exactly, for the ``values`` of an exact G·g·Gᵀ)."""
        x = self._merge(np.asarray(values).astype(np.float64), tuple(dims))
        return _along(x, np.linalg.pinv(np.array(self.matrix, dtype=np.float64)), self.axes)

    def exact(self, values: np.ndarray) -> np.ndarray:
        """G·g·Gᵀ in float64 with G as written (not rounded to float32): the
        value the float32 evaluation approximates."""
        x = np.asarray(values).astype(np.float64)
        return self._split(_along(x, np.array(self.matrix, dtype=np.float64), self.axes))

    # -- the documented error bounds (this module's docstring) -------------------------------
    def forward_bound(self, values: np.ndarray, dtype="f32") -> np.ndarray:
        """Element by element, a bound on |U − G·g·Gᵀ| for the image of the
        tensor ``values`` (g) held in ``dtype`` (f32, or f16 rounding U once)."""
        spread = self.spread(np.abs(np.asarray(values).astype(np.float64)))
        bound = (len(self.axes) * (self.taps + 1) + 1) * F32_UNIT * spread
        return bound + rounding(dtypes.dtype(dtype), np.abs(self.exact(values)) + bound)

    def inverse_bound(self, values: np.ndarray, dtype="f32", out="f32") -> np.ndarray:
        """Element by element, a bound on |from_image(to_image(g)) − g| for the
        tensor ``values`` (g), its image in ``dtype``, read back into ``out``."""
        carried = self.spread_back(self.forward_bound(values, dtype), np.shape(values))
        return carried + rounding(dtypes.dtype(out), np.abs(np.asarray(values, np.float64))
                                  + carried)

    def spread_back(self, error: np.ndarray, dims) -> np.ndarray:
        """An error bound on U (placed dims) carried through the inverse:
        |G⁺|·E·|G⁺|ᵀ (logical ``dims``), with room for the float64 sums."""
        pinv = np.abs(np.linalg.pinv(np.array(self.matrix, dtype=np.float64)))
        return _along(self._merge(np.asarray(error, np.float64), tuple(dims)), pinv,
                      self.axes) * (1 + 1e-9)

    def spread(self, error: np.ndarray) -> np.ndarray:
        """An error bound on g (logical dims) carried through the forward
        transform: |G|·E·|G|ᵀ (placed dims)."""
        return self._split(_along(np.asarray(error, np.float64),
                                  np.abs(np.array(self.matrix, np.float64)), self.axes))


F32_UNIT = 2.0 ** -24


def rounding(dt, magnitude: np.ndarray) -> np.ndarray:
    """A bound on one rounding to ``dt`` of values of ``magnitude``: half an
    ulp relative, and half the smallest subnormal near zero."""
    unit, tiny = {"f32": (2.0 ** -24, 2.0 ** -150), "f16": (2.0 ** -11, 2.0 ** -25),
                  "bf16": (2.0 ** -8, 2.0 ** -134)}[dt.name]
    return unit * magnitude + tiny


def _along(x: np.ndarray, matrix: np.ndarray, axes) -> np.ndarray:
    """``matrix`` (rows x len) applied along each of ``axes`` of ``x``, in float64.
    An inf or NaN in ``x`` (an f16 image holds them) gives inf or NaN by IEEE
    rules, without numpy's RuntimeWarning on the caller's stderr."""
    with np.errstate(invalid="ignore", over="ignore"):
        for axis in axes:
            x = np.moveaxis(np.tensordot(np.moveaxis(x, axis, -1), matrix, axes=([-1], [1])),
                            -1, axis)
    return np.ascontiguousarray(x)
