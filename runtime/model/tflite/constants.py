"""Every constant tensor of a TensorFlow Lite model, in the graph record
(:mod:`runtime.model.graph`) the ONNX front end fills too.

A constant is a tensor whose buffer holds data (:mod:`runtime.model.tflite.file`
reads the flatbuffer). Its value is its real value:

* a **sparse** tensor is densified by the format's own rule
  (:func:`runtime.model.tflite.sparse.densify`);
* an **integer tensor with quantization parameters** (int8/uint8/int16/int32
  weights and biases, per tensor or per channel along ``quantized_dimension``)
  is dequantized by ``(q - zero_point) * scale``
  (:func:`runtime.model.quantization.dequantize`, the rule TFLite's
  DEQUANTIZE applies); its integers and parameters stay with it
  (``Constant.quant``) for ``--quantized keep``.

The ops that only pass such a value on are folded: the output of a
``DEQUANTIZE`` or ``DENSIFY`` of a constant is a constant of the same value,
named after that output tensor (the name the consuming operator reads), and
the input is listed as a step of a folded chain. A ``DEQUANTIZE`` of float16
keeps the float16 values (float32 holds them exactly), so such a model's
images are f16 by default, like an f16 ONNX model's.

Names: a tensor's own name; an unnamed one is ``tensorN`` (N its index), a
name used twice in one subgraph gets ``#N`` for its later uses, and tensors of
subgraph K > 0 are prefixed with the subgraph's name (or ``subgraphK``) and
``/``. Operators are labeled ``#N`` by their index (``SUBGRAPH/#N`` likewise).

Example::

    >>> from runtime.model.tflite import file as tflite_file
    >>> m = tflite_file.load("face.tflite")                            # doctest: +SKIP
    >>> [(c.name, c.origin) for c in read_constants(m)][:1]           # doctest: +SKIP
    [('conv2d/Kernel', 'buffer 3 -> DEQUANTIZE #0')]
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import quantization
from ...errors import ClayoutError
from ..graph import Constant, Use, printable
from .file import tensor_array
from .fold import FOLDED_OPS, MOVES, PASSED_ON, evaluate, foldable
from .sparse import densify
from ..tensor_data import values



def _names(subgraph, prefix: str) -> list[str]:
    """Every tensor's unique name in ``subgraph`` (see the module's docstring)."""
    names, seen = [], set()
    for t in subgraph.tensors:
        name = prefix + (t.name or f"tensor{t.index}")
        if name in seen:
            name = f"{name}#{t.index}"
        while name in seen:
            name += "'"
        seen.add(name)
        names.append(name)
    return names


def _zero_point(q: np.ndarray, zero: np.ndarray, name: str) -> np.ndarray | None:
    """The zero points in the type of ``q`` (TFLite stores them as int64), or
    None when every one is 0; out of that type's range is an error."""
    if zero.size == 0:
        return None
    info = np.iinfo(q.dtype)
    if zero.min() < info.min or zero.max() > info.max:
        raise ClayoutError(f"tensor {printable(name)!r}: a zero point outside the range of its "
                           f"{q.dtype.name} values ({int(zero.min())}..{int(zero.max())})")
    return zero.astype(q.dtype)


def _dequantized(t, q: np.ndarray, name: str, origin: str, where: str) -> Constant:
    """The constant of an integer tensor with quantization parameters: its
    real value, and its integers and parameters in ``quant``."""
    params = t.quantization
    scale = np.asarray(params.scale, dtype=np.float32)
    zero = _zero_point(q, np.asarray(params.zero_point, dtype=np.int64), name)
    what = f"{where}: tensor {printable(name)!r}"
    try:
        axis = quantization.check_parameters(q.shape, scale, zero, params.quantized_dimension,
                                             what)
    except ClayoutError as exc:
        raise ClayoutError(f"{exc} (its quantization parameters)") from None
    node = f"the quantization parameters of tensor {name!r}"
    source = quantization.QuantSource(q, name, scale, f"{name}:scale", zero,
                                      "" if zero is None else f"{name}:zero_point", axis, node)
    value = quantization.dequantize(q, scale, zero, axis)
    return Constant(name, value, value.dtype.name, tuple(q.shape),
                    f"{origin}, {q.dtype.name} dequantized by its quantization parameters",
                    quant=source)


def _constant(t, name: str, where: str) -> Constant:
    """The constant of tensor ``t`` (one with data): its real value."""
    origin = f"buffer {t.buffer}"
    array = tensor_array(t)
    if array is None:
        return Constant(name, None, t.dtype, tuple(t.shape), origin)
    if t.sparsity is not None:
        array = densify(array, tuple(t.shape), t.sparsity, name)
        origin += " (sparse, densified)"
    if t.quantization is not None and array.dtype.kind in "iu":   # the reader: a scale
        return _dequantized(t, values(array), name, origin, where)   # folded now, held
    return Constant(name, array, array.dtype.name, tuple(t.shape), origin)


def _passed_on(op, source: Constant, out, name: str, label: str, where: str) -> Constant:
    """The constant a DEQUANTIZE or DENSIFY makes of ``source``: the same value."""
    if source.array.dtype.kind in "iu" and op.op == "DEQUANTIZE":
        raise ClayoutError(f"{where}: DEQUANTIZE {label} reads {printable(source.name)!r}, a "
                           f"{source.dtype} tensor without quantization parameters (no "
                           "scale): its value is unknown")
    if tuple(out.shape) != tuple(source.shape):
        raise ClayoutError(f"{where}: {op.op} {label} makes {printable(name)!r} of shape "
                           f"{tuple(out.shape)} from {printable(source.name)!r} of shape "
                           f"{tuple(source.shape)}")
    return Constant(name, source.array, source.dtype, tuple(source.shape),
                    f"{source.origin} -> {op.op} {label}", quant=source.quant,
                    folded_from=(source.name,))


def _fold(op, inputs: list, out, name: str, label: str, where: str) -> Constant:
    """The constant a folded operator makes of its constant ``inputs``."""
    if op.op in PASSED_ON:
        return _passed_on(op, inputs[0], out, name, label, where)
    try:
        array = evaluate(op, [values(c.array) for c in inputs], out)
    except ClayoutError as exc:
        shown = ", ".join(repr(printable(c.name)) for c in inputs)
        raise ClayoutError(f"{where}: {op.op} {label} of the constants {shown}: {exc}") from None
    quant = None
    if op.op in MOVES and inputs[0].quant is not None:   # its integers moved along
        rest = [values(c.array) for c in inputs[1:]]
        quant = quantization.follow(op.op, inputs[0].quant,
                                    lambda a: evaluate(op, [a] + rest, replace(out, dtype=a.dtype.name)))
    data = inputs if op.op in ("CONCATENATION", "PACK") else inputs[:1]
    origin = f"{data[0].origin} -> {op.op} {label}" if len(data) == 1 else \
        f"{op.op} {label} of " + ", ".join(c.name for c in data)
    return Constant(name, array, array.dtype.name, tuple(array.shape), origin, quant=quant,
                    folded_from=tuple(c.name for c in inputs))


def _live(subgraph) -> set:
    """The tensor indices some output of ``subgraph`` needs: walked back from
    its outputs, an operator one of whose outputs is needed (or that has none:
    it acts on state) needs its inputs."""
    needed = set(subgraph.outputs)
    for op in reversed(subgraph.operators):
        if not op.outputs or any(i in needed for i in op.outputs):
            needed.update(i for i in op.inputs if i >= 0)
    return needed


def _subgraph(subgraph, where: str) -> list[Constant]:
    """The constants of one subgraph, each listed where an operator first
    reads or folds it (execution order), then the unread ones; each knows
    whether an output of the subgraph needs it."""
    prefix = "" if subgraph.index == 0 else f"{subgraph.name or f'subgraph{subgraph.index}'}/"
    names = _names(subgraph, prefix)
    consts = {t.index: _constant(t, names[t.index], where) for t in subgraph.tensors
              if t.data is not None}
    ordered: dict[int, Constant] = {}
    for op in subgraph.operators:
        label = f"{prefix}#{op.index}"
        inputs = [consts.get(i) if i >= 0 else None for i in op.inputs]
        for i in op.inputs:
            if i in consts:
                ordered.setdefault(i, consts[i])
        if foldable(op, inputs) and op.outputs[0] not in consts:
            out = op.outputs[0]
            made = _fold(op, inputs, subgraph.tensors[out], names[out], label, where)
            for c in inputs:
                if made.name not in c.folded_into:
                    c.folded_into.append(made.name)
            consts[out] = ordered[out] = made
            continue
        note = "" if not inputs or any(c is None for c in inputs) else \
            (f"every input of {op.op} {label} is a constant, but clayout does not evaluate "
             f"{op.op} (it evaluates {', '.join(FOLDED_OPS)})")
        for position, c in enumerate(inputs):
            if c is not None:
                c.uses.append(Use(op.op, label, position, op, subgraph, front="tflite",
                                  note=note))
    for index, c in consts.items():
        ordered.setdefault(index, c)
    needed = _live(subgraph)
    for index, c in consts.items():
        c.live = index in needed
    return list(ordered.values())


def read_constants(model, path: str | None = None) -> list[Constant]:
    """Every constant tensor of ``model`` (a runtime.model.tflite.file.TFLiteModel),
    subgraph by subgraph, with the operators that read it."""
    where = path or model.path
    return [c for subgraph in model.subgraphs for c in _subgraph(subgraph, where)]
