"""A transform stage: values a layout stores in place of the tensor itself.

Most layouts only move elements. A Winograd filter image stores, per (output,
input) channel pair, U = G·g·Gᵀ of the kH x kW filter g: new values, and new
dims (T x T instead of kH x kW). ``Transform`` states such a stage as data,
once: the matrix G (T rows of r numbers) and the logical axes it acts on
(each of length r, each becoming T). An ImageLayout with a ``transform``
places the transform's output; the engines run the stage between the two
sides of a conversion (runtime.algebra.conversion).

The evaluation, fixed so that every engine gives the same bits:

* forward (``apply``): in float32. G is rounded to float32 once. The axes are
  done in the order given; along one axis, output i is
  ``((G[i,0]*x[0] + G[i,1]*x[1]) + G[i,2]*x[2]) + ...``: every product and
  every sum rounded to float32, p ascending, every term included (a zero
  coefficient too), no fused multiply-add;
* inverse (``invert``): g = G⁺·U·G⁺ᵀ (G⁺ the pseudo-inverse), in float64
  with numpy, then rounded once to the dtype asked for. Every engine runs
  this same host function.

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

    def __post_init__(self):
        rows = {len(row) for row in self.matrix}
        if not self.matrix or len(rows) != 1 or not self.axes:
            raise ClayoutError(f"transform {self.name!r}: the matrix must be T rows of r numbers "
                               "and act on at least one axis")

    @property
    def taps(self) -> int:
        """r: the length each transformed axis has before the transform."""
        return len(self.matrix[0])

    @property
    def tile(self) -> int:
        """T: the length each transformed axis has after it."""
        return len(self.matrix)

    def out_dims(self, dims) -> tuple[int, ...]:
        """The dims after the transform; each transformed axis must be r long."""
        dims = tuple(dims)
        wrong = [a for a in self.axes if a >= len(dims) or dims[a] != self.taps]
        if wrong:
            raise ClayoutError(f"transform {self.name!r} takes {self.taps} along axes "
                               f"{list(self.axes)}; dims {dims} have "
                               + ", ".join(f"{dims[a] if a < len(dims) else 'no'} on axis {a}"
                                           for a in wrong))
        return tuple(self.tile if a in self.axes else d for a, d in enumerate(dims))

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
        return np.ascontiguousarray(x, dtype=np.float32)

    def invert(self, values: np.ndarray, dtype) -> np.ndarray:
        """g = G⁺·U·G⁺ᵀ of ``values`` (the transformed tensor) in float64,
        rounded once to ``dtype``."""
        pinv = np.linalg.pinv(np.array(self.matrix, dtype=np.float64))     # r x T
        x = np.asarray(values).astype(np.float64)
        for axis in self.axes:
            x = np.moveaxis(np.tensordot(np.moveaxis(x, axis, -1), pinv, axes=([-1], [1])),
                            -1, axis)
        return dtypes.host_array(np.ascontiguousarray(x), dtype, "transform output")
