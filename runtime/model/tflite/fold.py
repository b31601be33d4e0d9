"""The TensorFlow Lite operators clayout evaluates on the host when every
input is a constant.

``DEQUANTIZE`` and ``DENSIFY`` pass a constant's value on unchanged (its real
value was read with it: runtime.model.tflite.constants). The element moves
and selections below are evaluated with numpy by TFLite's own semantics, and
their result is checked against the output tensor's stored shape:

=================  ===============================================================
RESHAPE            the output tensor's shape (its stored, static shape)
TRANSPOSE          input 1 is the permutation
CONCATENATION      along ``axis`` (negative counts from the end)
SLICE              input 1 begin, input 2 size (-1: to the end)
STRIDED_SLICE      inputs 1..3 begin, end, strides; begin/end/shrink-axis masks and
                   ``offset``; an ellipsis or new-axis mask is not evaluated
GATHER             along ``axis`` (``batch_dims`` 0)
PACK               the inputs stacked along ``axis``
CAST               to the output tensor's type
=================  ===============================================================

Example::

    >>> from runtime.model.tflite.file import Operator, TensorEntry
    >>> op = Operator(0, "PACK", False, (0, 1), (2,), {"axis": 1, "values_count": 2})
    >>> out = TensorEntry(2, "p", (3, 2), "float32", 0, None, None, None, False)
    >>> evaluate(op, [np.array([1., 2, 3]), np.array([4., 5, 6])], out).tolist()
    [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
"""
from __future__ import annotations

import numpy as np

from ...errors import ClayoutError

PASSED_ON = ("DEQUANTIZE", "DENSIFY")   # one input, its value passed on
MOVES = ("RESHAPE", "TRANSPOSE")       # a dequantized tensor's integers follow these


def _ints(array) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


def _reshape(op, inputs, out):
    return inputs[0].reshape(out.shape)


def _transpose(op, inputs, out):
    return np.transpose(inputs[0], _ints(inputs[1]))


def _concatenation(op, inputs, out):
    return np.concatenate(inputs, axis=int(op.options.get("axis", 0)))


def _slice(op, inputs, out):
    x, begin, size = inputs[0], _ints(inputs[1]), _ints(inputs[2])
    return x[tuple(slice(b, x.shape[i] if s == -1 else b + s)
                   for i, (b, s) in enumerate(zip(begin, size)))]


def _strided_slice(op, inputs, out):
    o = op.options
    if o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0):
        raise ValueError("an ellipsis or new-axis mask")
    x = inputs[0]
    begin, end, strides = _ints(inputs[1]), _ints(inputs[2]), _ints(inputs[3])
    shrink = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        n = x.shape[i]
        if s == 0:
            raise ValueError("a stride of 0")
        if o.get("offset", False):
            e = b + e
        b = (0 if s > 0 else n - 1) if o.get("begin_mask", 0) >> i & 1 else (b + n if b < 0 else b)
        e = (n if s > 0 else -1) if o.get("end_mask", 0) >> i & 1 else (e + n if e < 0 else e)
        if o.get("shrink_axis_mask", 0) >> i & 1:
            e, s = b + 1, 1
            shrink.append(i)
        lo, hi = (0, n) if s > 0 else (-1, n - 1)
        b, e = min(max(b, lo), hi), min(max(e, lo), hi)
        x = np.take(x, np.arange(b, e, s, dtype=np.int64), axis=i)
    return np.squeeze(x, axis=tuple(shrink)) if shrink else x


def _gather(op, inputs, out):
    if op.options.get("batch_dims", 0):
        raise ValueError("batch_dims other than 0")
    x, indices = inputs[0], np.asarray(inputs[1]).astype(np.int64)
    axis = int(op.options.get("axis", 0)) % x.ndim
    if indices.size and (indices.min() < 0 or indices.max() >= x.shape[axis]):
        raise ValueError(f"an index outside 0..{x.shape[axis] - 1}")
    return np.take(x, indices, axis=axis)


def _pack(op, inputs, out):
    return np.stack(inputs, axis=int(op.options.get("axis", 0)))


def _cast(op, inputs, out):
    return inputs[0].astype(np.dtype(out.dtype))


OPS = {"RESHAPE": _reshape, "TRANSPOSE": _transpose, "CONCATENATION": _concatenation,
       "SLICE": _slice, "STRIDED_SLICE": _strided_slice, "GATHER": _gather, "PACK": _pack,
       "CAST": _cast}
FOLDED_OPS = PASSED_ON + tuple(OPS)


def foldable(op, inputs) -> bool:
    """Whether the operator ``op`` is one of FOLDED_OPS with every input a
    readable constant (``inputs``: runtime.model.graph.Constant or None each)
    and one output."""
    return (op.op in FOLDED_OPS and not op.custom and bool(op.inputs)
            and all(i >= 0 for i in op.inputs)
            and all(c is not None and c.array is not None for c in inputs)
            and len(op.outputs) == 1 and op.outputs[0] >= 0
            and (op.op not in PASSED_ON or len(op.inputs) == 1))


def evaluate(op, inputs: list, out) -> np.ndarray:
    """The output of a folded operator (not one of PASSED_ON) whose inputs
    are the arrays ``inputs``; ``out`` its output tensor, whose stored shape
    the result must have. A ClayoutError for what TFLite would refuse."""
    try:
        result = np.asarray(OPS[op.op](op, inputs, out))
    except (ValueError, TypeError, IndexError) as exc:
        raise ClayoutError(f"cannot evaluate {op.op}: {exc}") from None
    if out.shape and tuple(result.shape) != tuple(out.shape):
        raise ClayoutError(f"{op.op} gives shape {tuple(result.shape)}, but its output tensor "
                           f"says {tuple(out.shape)}")
    return result
