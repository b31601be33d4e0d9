"""A model's tensor as its file holds it, whatever the format, and the steps
from it to clayout's logical tensor.

:class:`Tensor` is what every later record (a Weight, a Placement, a manifest
entry) says of the source tensor: they hold it by reference, never copy its
fields. A step is a record that applies and inverts itself:
:class:`Transpose` and :class:`Reshape`, in the order the role table gives
them (runtime.model.onnx.roles, runtime.model.tflite.roles).

Example::

    >>> steps = (Transpose((0, 3, 1, 2)),)           # TFLite OHWI -> (O, I, kH, kW)
    >>> w = np.arange(2 * 3 * 3 * 4).reshape(2, 3, 3, 4)
    >>> logical = logical_weight(w, steps)
    >>> logical.shape, bool((source_weight(logical, steps, w.shape) == w).all())
    ((2, 4, 3, 3), True)
    >>> [s.json() for s in steps], parse_steps([["reshape", [4, 2]]])
    ([['transpose', [0, 3, 1, 2]]], (Reshape(shape=(4, 2)),))
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ClayoutError


@dataclass(frozen=True)
class Tensor:
    """A tensor of the model file: ``name`` (qualified: a subgraph's tensors
    carry its name), ``shape`` and ``dtype`` as stored (numpy's names,
    "float32"; what it is where numpy has none, "string"), ``origin`` (an
    initializer, a Constant node, a buffer, a folded chain), ``consumer``
    (the operator input that gave it its role: "Conv conv1 input 1"; "" when
    unused), ``layout`` (the format's own letters for it, TFLite's "OHWI", or
    ""), and ``dequantized`` (a folded dequantization: what it was made of,
    the manifest's field)."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    origin: str = ""
    consumer: str = ""
    layout: str = ""
    dequantized: Mapping | None = None


@dataclass(frozen=True)
class Transpose:
    """Axes permuted: axis i of the result is axis ``perm[i]`` of the input."""
    perm: tuple[int, ...]
    kind = "transpose"

    def apply(self, array: np.ndarray) -> np.ndarray:
        return array.transpose(self.perm)

    def shape_after(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[p] for p in self.perm)

    def invert(self, array: np.ndarray, before: tuple[int, ...]) -> np.ndarray:
        return array.transpose(np.argsort(self.perm))

    def json(self) -> list:
        return [self.kind, list(self.perm)]


@dataclass(frozen=True)
class Reshape:
    """The same elements, in row-major order, in another shape."""
    shape: tuple[int, ...]
    kind = "reshape"

    def apply(self, array: np.ndarray) -> np.ndarray:
        return array.reshape(self.shape)

    def shape_after(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.shape)

    def invert(self, array: np.ndarray, before: tuple[int, ...]) -> np.ndarray:
        return array.reshape(before)

    def json(self) -> list:
        return [self.kind, list(self.shape)]


STEPS = {"transpose": Transpose, "reshape": Reshape}


def parse_steps(listed) -> tuple:
    """The step records of a manifest's ``steps`` (``[["transpose", [..]], ...]``)."""
    out = []
    for item in listed or ():
        try:
            kind, arg = item
            out.append(STEPS[kind](tuple(int(v) for v in arg)))
        except (KeyError, TypeError, ValueError):
            raise ClayoutError(f"manifest step {item!r}: expected ['transpose', PERM] or "
                               "['reshape', SHAPE]") from None
    return tuple(out)


def logical_weight(array: np.ndarray, steps) -> np.ndarray:
    """The source tensor as clayout's logical tensor: each step applied in order."""
    for step in steps:
        array = step.apply(array)
    return array


def source_weight(logical: np.ndarray, steps, shape) -> np.ndarray:
    """The inverse of :func:`logical_weight`: back to the source tensor's ``shape``."""
    shapes, current = [], tuple(shape)
    for step in steps:                        # the shape before each step
        shapes.append(current)
        current = step.shape_after(current)
    for step, before in reversed(list(zip(steps, shapes))):
        logical = step.invert(logical, before)
    return logical.reshape(shape)
