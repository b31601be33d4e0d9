"""The ONNX operators clayout evaluates on the host when every input is a constant.

A node of :data:`FOLDED_OPS` whose inputs are all constants (initializers,
``Constant`` nodes, outer-scope constants of a subgraph, or what folding made
before it) is evaluated once with numpy, by ONNX's operator semantics, and
its outputs are constants like any other: an exporter's ``Slice`` →
``Concat`` → ``Unsqueeze`` of an LSTM's weights folds into the tensor the
LSTM reads. ``DequantizeLinear`` folds by the rule of
:mod:`runtime.model.quantization` (runtime.model.onnx.constants calls it).
Every operator moves or computes the values exactly as onnxruntime does:
element moves are exact, arithmetic is one IEEE operation per element in the
inputs' type (integer ``Div`` truncates toward zero, as ONNX says).

A node of any other operator, with only constant inputs, is not evaluated:
its inputs are listed as read by it, and the plan names them
(:data:`NOT_FOLDED`).

Example::

    >>> import onnx.helper as h
    >>> node = h.make_node("Slice", ["x", "s", "e", "a"], ["y"])
    >>> evaluate(node, [np.arange(12).reshape(3, 4), np.array([1]), np.array([-1]),
    ...                 np.array([1])], opset=13)[0].tolist()
    [[1, 2], [5, 6], [9, 10]]
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import ClayoutError
from ...limits import check_host_bytes
from .reader import attr

# the element moves: the same elements, moved; a dequantized constant keeps
# its integer tensor and parameters through them (runtime.model.quantization.follow)
MOVES = ("Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose")
NOT_FOLDED = "the ops clayout evaluates on constants"


def _ints(array) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


def _input(inputs, i):
    """Input ``i``, or None when the node has no (or an empty) input there."""
    return inputs[i] if i < len(inputs) else None


def _axes(node, inputs, rank: int, at: int = 1) -> list[int] | None:
    """Axes from the attribute (older opsets) or input ``at``, made non-negative."""
    axes = attr(node, "axes")
    if axes is None and _input(inputs, at) is not None:
        axes = _ints(inputs[at])
    return None if axes is None else [int(a) % rank if rank else 0 for a in axes]


def cast_type(node) -> np.dtype:
    import onnx.helper
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attr(node, "to")))


# -- element moves ------------------------------------------------------------------------
def _reshape(node, inputs, opset):
    x, shape = inputs[0], _ints(inputs[1])
    if not attr(node, "allowzero", 0):
        shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
    return [x.reshape(shape)]


def _flatten(node, inputs, opset):
    x = inputs[0]
    axis = int(attr(node, "axis", 1)) % (x.ndim + 1) if x.ndim else 0
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


def _squeeze(node, inputs, opset):
    axes = _axes(node, inputs, inputs[0].ndim)
    return [np.squeeze(inputs[0], axis=None if axes is None else tuple(axes))]


def _unsqueeze(node, inputs, opset):
    x = inputs[0]
    count = len(attr(node, "axes") or _ints(_input(inputs, 1) if _input(inputs, 1) is not None
                                            else []))
    axes = _axes(node, inputs, x.ndim + count)
    return [np.expand_dims(x, tuple(sorted(axes)))]


def _transpose(node, inputs, opset):
    x = inputs[0]
    return [np.transpose(x, attr(node, "perm") or list(range(x.ndim))[::-1])]


# -- selections ---------------------------------------------------------------------------
def _slice(node, inputs, opset):
    x = inputs[0]
    if opset < 10:
        starts, ends = attr(node, "starts"), attr(node, "ends")
        axes, steps = attr(node, "axes"), None
    else:
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes = _ints(inputs[3]) if _input(inputs, 3) is not None else None
        steps = _ints(inputs[4]) if _input(inputs, 4) is not None else None
    axes = list(range(len(starts))) if axes is None else [a % x.ndim for a in axes]
    steps = steps or [1] * len(starts)
    out = x
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise ValueError("a Slice step of 0")
        n = x.shape[axis]
        start, end = (v + n if v < 0 else v for v in (start, end))
        if step > 0:
            start, end = min(max(start, 0), n), min(max(end, 0), n)
        else:
            start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
        out = np.take(out, np.arange(start, end, step, dtype=np.int64), axis=axis)
    return [out]


def _gather(node, inputs, opset):
    x, indices = inputs[0], np.asarray(inputs[1]).astype(np.int64)
    axis = int(attr(node, "axis", 0)) % max(x.ndim, 1)
    n = x.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise ValueError(f"a Gather index outside -{n}..{n - 1}")
    return [np.take(x, np.where(indices < 0, indices + n, indices), axis=axis)]


def _split(node, inputs, opset):
    x = inputs[0]
    axis = int(attr(node, "axis", 0)) % x.ndim
    sizes = attr(node, "split") if opset < 13 else \
        (_ints(inputs[1]) if _input(inputs, 1) is not None else None)
    count = len(node.output)
    if sizes is None:
        n = x.shape[axis]
        per = -(-n // count)
        sizes = [per] * (count - 1) + [n - per * (count - 1)]
    if sum(sizes) != x.shape[axis] or len(sizes) != count:
        raise ValueError(f"Split sizes {list(sizes)} for {count} outputs of a dim of "
                         f"{x.shape[axis]}")
    return np.split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis)


# -- makers -------------------------------------------------------------------------------
def _concat(node, inputs, opset):
    return [np.concatenate(inputs, axis=int(attr(node, "axis")))]


def _bounded(shape, dtype, what: str) -> None:
    """A result of ``shape`` is checked against the host's memory before it is made."""
    check_host_bytes(math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize, what,
                     "a corrupt model?")


def _expand(node, inputs, opset):
    shape = np.broadcast_shapes(inputs[0].shape, tuple(_ints(inputs[1])))
    _bounded(shape, inputs[0].dtype, "an Expand of constants")
    return [np.broadcast_to(inputs[0], shape).copy()]


def _tile(node, inputs, opset):
    x, repeats = inputs[0], _ints(inputs[1])
    _bounded([n * r for n, r in zip(x.shape, repeats)], x.dtype, "a Tile of constants")
    return [np.tile(x, repeats)]


def _pad(node, inputs, opset):
    x = inputs[0]
    mode = attr(node, "mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if opset < 11:
        pads, value, axes = attr(node, "pads"), float(attr(node, "value", 0.0)), None
    else:
        pads = _ints(inputs[1])
        value = np.asarray(inputs[2]).reshape(-1)[0] if _input(inputs, 2) is not None and \
            np.asarray(inputs[2]).size else 0
        axes = _ints(inputs[3]) if _input(inputs, 3) is not None else None
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    before, after = [0] * x.ndim, [0] * x.ndim
    for k, axis in enumerate(axes):
        before[axis], after[axis] = pads[k], pads[k + len(axes)]
    crop = tuple(slice(-b if b < 0 else 0, x.shape[i] + a if a < 0 else None)
                 for i, (b, a) in enumerate(zip(before, after)))
    x = x[crop]
    widths = [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    _bounded([n + b + a for n, (b, a) in zip(x.shape, widths)], x.dtype, "a Pad of constants")
    if mode == "constant":
        return [np.pad(x, widths, constant_values=np.asarray(value, x.dtype))]
    if mode in ("reflect", "edge", "wrap"):
        return [np.pad(x, widths, mode=mode)]
    raise ValueError(f"Pad mode {mode!r}")


def _shape(node, inputs, opset):
    shape = np.array(inputs[0].shape, np.int64)
    start, end = attr(node, "start", 0), attr(node, "end")
    return [shape[start:end]]


def _constant_of_shape(node, inputs, opset):
    import onnx.numpy_helper
    value = attr(node, "value")
    fill = onnx.numpy_helper.to_array(value).reshape(-1) if value is not None else \
        np.zeros(1, np.float32)
    shape = _ints(inputs[0])
    _bounded(shape, fill.dtype, "a ConstantOfShape")
    return [np.full(shape, fill[0], fill.dtype)]


def _range(node, inputs, opset):
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in inputs[:3])
    if delta == 0:
        raise ValueError("a Range delta of 0")
    count = max(int(math.ceil((limit - start) / delta)), 0)
    _bounded((count,), np.asarray(inputs[0]).dtype, "a Range")
    kind = np.asarray(inputs[0]).dtype
    return [(start + np.arange(count, dtype=np.float64 if kind.kind == "f" else np.int64)
             .astype(kind) * np.asarray(delta, kind)).astype(kind)]


# -- arithmetic ---------------------------------------------------------------------------
def _arith(function):
    def run(node, inputs, opset):
        a, b = inputs[0], inputs[1]
        if a.dtype != b.dtype:
            raise ValueError(f"{node.op_type} of {a.dtype} and {b.dtype}")
        shape = np.broadcast_shapes(a.shape, b.shape)
        _bounded(shape, a.dtype, f"a {node.op_type} of constants")
        with np.errstate(all="ignore"):
            return [np.asarray(function(a, b)).astype(a.dtype)]
    return run


def _divide(a, b):
    if a.dtype.kind == "f":
        return a / b
    if np.any(b == 0):
        raise ValueError("an integer Div by 0")
    q = np.abs(a) // np.abs(b)   # ONNX integer Div truncates toward zero
    return np.where((a < 0) != (b < 0), -q, q)


OPS = {
    "Identity": lambda node, inputs, opset: [inputs[0]],
    "Cast": lambda node, inputs, opset: [inputs[0].astype(cast_type(node))],
    "Reshape": _reshape, "Flatten": _flatten, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze,
    "Transpose": _transpose, "Slice": _slice, "Gather": _gather, "Split": _split,
    "Concat": _concat, "Expand": _expand, "Tile": _tile, "Pad": _pad, "Shape": _shape,
    "ConstantOfShape": _constant_of_shape, "Range": _range,
    "Add": _arith(np.add), "Sub": _arith(np.subtract), "Mul": _arith(np.multiply),
    "Div": _arith(_divide),
}
FOLDED_OPS = tuple(OPS) + ("DequantizeLinear",)
# inputs that may be left empty ("") in a node of each operator
OPTIONAL = {"Slice": (3, 4), "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,),
            "Pad": (2, 3), "DequantizeLinear": (2,)}


def foldable(node, data) -> bool:
    """Whether ``node`` is one of FOLDED_OPS with every input a constant
    (``data``: each input's array, or None; an optional input may be absent)."""
    if node.op_type not in FOLDED_OPS or not node.output or not data:
        return False
    optional = OPTIONAL.get(node.op_type, ())
    return all(d is not None or (not name and i in optional)
               for i, (name, d) in enumerate(zip(node.input, data)))


def evaluate(node, inputs: list, opset: int) -> list[np.ndarray]:
    """The outputs of a FOLDED_OPS node (but DequantizeLinear) whose inputs
    are constants (``inputs``: their arrays, None for an absent optional one),
    at the model's ``opset``; a ClayoutError for what ONNX would refuse."""
    try:
        out = OPS[node.op_type](node, inputs, opset)
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        raise ClayoutError(f"cannot evaluate {node.op_type}: {exc}") from None
    return [np.asarray(o) for o in out]
