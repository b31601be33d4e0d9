"""Quantized weights: the DequantizeLinear rule, and the parameters of integer operators.

Quantized ONNX models hold a weight in one of two ways:

* **QDQ** (onnxruntime's ``quantize_static``, most quantization toolkits): an integer
  constant ``q`` goes through ``DequantizeLinear(q, scale, zero_point)`` before the
  op reads it. :mod:`runtime.model.onnx.constants` folds that node like a ``Cast`` (the float
  value, :func:`dequantize`) and keeps where the value came from
  (:class:`QuantSource`), so that ``clayout model --quantized keep`` can store ``q``
  and its parameters instead.
* **integer operators** (``ConvInteger``, ``MatMulInteger``, ``QLinearConv``,
  ``QLinearMatMul``: ``quantize_dynamic`` and the QOperator format): the op reads
  the integer weight itself; its zero point, and for the QLinear ops its scale,
  are other inputs of the op (:data:`INTEGER_OPS`). ``ConvInteger`` and
  ``MatMulInteger`` have no scale: :func:`traced_scale` finds the one the graph
  multiplies their output by.

The rule, evaluated exactly this way (ONNX DequantizeLinear)::

    d = int64(q) - int64(zero_point)      # exact (no zero point: 0)
    y = float32(d) * float32(scale)       # one rounding, round to nearest even;
                                          # float32(d) is exact for |d| <= 2**24,
                                          # always so for 8- and 16-bit q
    y = y rounded to the scale's type     # only for an f16 or bf16 scale

Example::

    >>> import numpy as np
    >>> dequantize(np.array([-128, 0, 127], np.int8), np.float32(0.5),
    ...            np.int8(-1), None).tolist()
    [-63.5, 0.5, 64.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..algebra import dtypes
from ..errors import ClayoutError

QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")   # what DequantizeLinear folds
IMAGE_INT = {"int8": "s8", "uint8": "u8", "int32": "s32"}       # integer weights on images
SCALE_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class IntegerOp:
    """Where an integer operator's weight and its parameters are."""
    weight: int
    like: str                    # the float op whose role table the weight follows
    scale: int | None            # None: the op has none; the graph scales its output
    zero_point: int
    bias: int | None = None      # QLinearConv's int32 bias
    activation: tuple[int, ...] = ()   # the input's and output's scales and zero points


INTEGER_OPS = {
    "ConvInteger": IntegerOp(weight=1, like="Conv", scale=None, zero_point=3, activation=(2,)),
    "MatMulInteger": IntegerOp(weight=1, like="MatMul", scale=None, zero_point=3,
                               activation=(2,)),
    "QLinearConv": IntegerOp(weight=3, like="Conv", scale=4, zero_point=5, bias=8,
                             activation=(1, 2, 6, 7)),
    "QLinearMatMul": IntegerOp(weight=3, like="MatMul", scale=4, zero_point=5,
                               activation=(1, 2, 6, 7)),
}
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


@dataclass
class QuantSource:
    """A folded DequantizeLinear's integer tensor and parameters, in the shape
    of the folded constant (moved along with it by later folded steps)."""
    q: np.ndarray
    q_name: str
    scale: np.ndarray
    scale_name: str
    zero_point: np.ndarray | None
    zero_point_name: str
    axis: int | None             # axis of q the parameters run along; None: per tensor
    node: str                    # "DequantizeLinear NODE"


# -- the rule ------------------------------------------------------------------------------
def _along(values: np.ndarray, axis: int | None, ndim: int) -> np.ndarray:
    """Per-tensor parameters as a scalar, per-axis ones shaped to broadcast along ``axis``."""
    if axis is None or values.size == 1:
        return values.reshape(())
    return values.reshape([-1 if d == axis else 1 for d in range(ndim)])


def dequantize(q: np.ndarray, scale: np.ndarray, zero_point, axis: int | None) -> np.ndarray:
    """``(q - zero_point) * scale`` by the rule of this module's docstring, in
    the scale's float type; ``axis`` None for per-tensor parameters."""
    scale = np.asarray(scale)
    d = q.astype(np.int64)
    if zero_point is not None:
        d = d - _along(np.asarray(zero_point).astype(np.int64), axis, q.ndim)
    y = d.astype(np.float32) * _along(scale.astype(np.float32), axis, q.ndim)
    y = np.asarray(y, dtype=np.float32)
    return y if scale.dtype == np.float32 else dtypes.convert(y, dtypes.dtype(scale.dtype).name)


def check_parameters(q_shape, scale: np.ndarray, zero_point, axis: int, what: str) -> int | None:
    """The axis the parameters run along (normalized), or None when both are
    per tensor (one element). Each is one element or one per index of ``axis``
    of ``q_shape``; anything else is a ClayoutError naming ``what``."""
    sizes = [np.asarray(v).size for v in (scale, zero_point) if v is not None]
    if all(size == 1 for size in sizes):
        return None
    rank = len(q_shape)
    if not -rank <= axis < rank:
        raise ClayoutError(f"{what}: axis {axis} is outside the weight's {rank} dims {q_shape}")
    axis %= rank
    want = (q_shape[axis],)
    for name, value in (("scale", scale), ("zero point", zero_point)):
        if value is not None and np.asarray(value).size != 1 and np.asarray(value).shape != want:
            raise ClayoutError(f"{what}: {name} of shape {np.asarray(value).shape} does not fit "
                               f"the weight's dims {q_shape} along axis {axis}: expected one "
                               f"element (per tensor) or shape {want} (per axis)")
    return axis


def fold_dequantize(q, scale, zero_point, axis: int, block_size: int, node: str,
                    names=("", "", "")) -> tuple[np.ndarray, QuantSource]:
    """The float value of a DequantizeLinear whose inputs are constants, and
    its QuantSource; an unsupported form is a ClayoutError naming ``node``."""
    what = f"{node} of {names[0]!r}"
    if q.dtype.name not in QUANTIZED_DTYPES:
        raise ClayoutError(f"{what}: {q.dtype.name} input; clayout folds "
                           f"{', '.join(QUANTIZED_DTYPES)}")
    if scale.dtype.name not in SCALE_DTYPES:
        raise ClayoutError(f"{what}: {scale.dtype.name} scale; allowed: "
                           f"{', '.join(SCALE_DTYPES)}")
    if zero_point is not None and zero_point.dtype != q.dtype:
        raise ClayoutError(f"{what}: zero point of type {zero_point.dtype.name}, the input is "
                           f"{q.dtype.name}; ONNX requires the same type")
    if block_size:
        raise ClayoutError(f"{what}: block_size {block_size} (blocked quantization) is not "
                           "supported; clayout folds per-tensor and per-axis parameters")
    axis = check_parameters(q.shape, scale, zero_point, axis, what)
    source = QuantSource(q, names[0], scale, names[1], zero_point, names[2], axis, node)
    return dequantize(q, scale, zero_point, axis), source


def scaled_integers(q, q_name: str, scale, scale_name: str, value, node: str):
    """The QuantSource of a weight stored as integers times a scale without a
    DequantizeLinear (``Mul(Cast(q), scale)``, weight-only int8 exports):
    ``value`` (what the folded Mul made) is the rule's ``q * scale`` (zero
    point 0) bit for bit, and ``scale`` is one element or runs along one axis
    of ``q``; else None (the value stays a plain float constant)."""
    if q.dtype.name not in IMAGE_INT or scale.dtype.name not in SCALE_DTYPES or \
            scale.ndim > q.ndim or value.shape != q.shape:
        return None
    padded = (1,) * (q.ndim - scale.ndim) + scale.shape
    big = [a for a, d in enumerate(padded) if d != 1]
    if len(big) > 1 or (big and padded[big[0]] != q.shape[big[0]]):
        return None
    axis = big[0] if big else None
    flat = scale.reshape(-1)
    want = dequantize(q, flat, None, axis)
    if want.dtype != value.dtype or not np.array_equal(
            want.view(f"u{want.itemsize}"), np.ascontiguousarray(value).view(f"u{want.itemsize}")):
        return None
    return QuantSource(q, q_name, flat, scale_name, None, "", axis, node)


# -- moving with the folded steps -----------------------------------------------------------
def axis_after(shape, axis: int, move) -> int | None:
    """Where axis ``axis`` of a tensor of ``shape`` lies after ``move`` (a
    function that only moves elements: a folded Reshape or Transpose, a role's
    steps), or None when its elements no longer run along one axis in order."""
    n = shape[axis]
    index = np.broadcast_to(_along(np.arange(n, dtype=np.int32), axis, len(shape)), shape)
    moved = np.asarray(move(np.ascontiguousarray(index)))
    for a in range(moved.ndim):
        if moved.shape[a] == n and np.array_equal(
                moved, np.broadcast_to(_along(np.arange(n, dtype=np.int32), a, moved.ndim),
                                       moved.shape)):
            return a
    return None


def follow(op: str, source: QuantSource, move, cast_to=None) -> QuantSource | None:
    """The QuantSource of a folded step ``op`` applied to a dequantized
    constant: the same for Identity and a Cast to a float type, moved along
    for Reshape / Transpose / ... (``move`` applies the step to an array);
    None when the parameters no longer run along one axis."""
    if op == "Identity" or (op == "Cast" and cast_to is not None and cast_to.kind == "f"):
        return source
    if op == "Cast":
        return None
    axis = None
    if source.axis is not None:
        axis = axis_after(source.q.shape, source.axis, move)
        if axis is None:
            return None
    return QuantSource(np.asarray(move(source.q)), source.q_name, source.scale,
                       source.scale_name, source.zero_point, source.zero_point_name, axis,
                       source.node)


# -- integer operators ------------------------------------------------------------------------
def param_axis(op: str, weight_rank: int) -> int:
    """The weight axis of per-axis parameters: the output channels (Conv-like:
    axis 0; MatMul-like: the columns, the last axis)."""
    return 0 if INTEGER_OPS[op].like == "Conv" else weight_rank - 1


def traced_scale(use) -> tuple[object | None, str]:
    """(the scale constant, how it was found) of a ConvInteger / MatMulInteger
    weight: the op's output, through Cast nodes, is multiplied by a constant
    (the product of the input's and the weight's scale), or by a Mul of the
    input's run-time scale and a constant (the weight's scale: onnxruntime's
    quantize_dynamic). (None, why) when the graph has neither."""
    graph, node = use.graph, use.proto
    value = node.output[0] if node.output else ""
    reader = None
    while value:
        readers = graph.consumers.get(value, [])
        if len(readers) != 1:
            return None, f"its output is read by {len(readers)} nodes, not one Mul"
        reader = readers[0]
        if reader[0].op_type != "Cast":
            break
        value = reader[0].output[0]
    if reader is None or reader[0].op_type != "Mul" or len(reader[0].input) != 2:
        return None, "its output is not multiplied by a scale (Cast, then Mul)"
    mul, label = reader
    other = mul.input[1] if mul.input[0] == value else mul.input[0]
    found = graph.constant(other)
    if found is not None:
        return found, f"Mul {label}: the constant its output is multiplied by"
    made = graph.producers.get(other)
    if made is not None and made[0].op_type == "Mul":
        consts = [graph.constant(n) for n in made[0].input]
        consts = [c for c in consts if c is not None]
        if len(consts) == 1:
            return consts[0], (f"Mul {made[1]}: the constant times the input's run-time scale, "
                               f"which Mul {label} applies to the output")
    return None, f"Mul {label} multiplies its output by no constant scale"
