"""The quantized half of ``clayout model``'s plan: integer weights and their parameters.

After :func:`runtime.model.weights.roles` has given each constant its role,
:func:`attach_parameters` settles the quantized ones:

* a weight folded from a ``DequantizeLinear`` (QDQ) keeps its float value and
  records what it was made of (``dequantized``), or with ``--quantized keep``
  stores its integer tensor ``q`` instead;
* an integer operator's weight (``ConvInteger``, ``MatMulInteger``,
  ``QLinearConv``, ``QLinearMatMul``) is always stored as integers, and
  ``QLinearConv``'s int32 bias too.

An integer weight goes on an s8, u8 or s32 image (int8, uint8, int32) in its
role's layout; its scale and zero point become ``argument`` weights of their own,
named ``NAME.scale`` and ``NAME.zero_point``, in their own types (a bf16 scale
as f32, exactly; a float64 one rounded to f32), one element per tensor or one per index of the per-axis
parameters' ONNX ``axis``; the weight's ``quantization`` names them. A case that
cannot be stored this way (an int16 weight, a zero point computed at run time)
leaves the weight without a role, and since it is a compute weight the
conversion fails naming it.
"""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np

from ..errors import ClayoutError
from .tensor import Reshape, Tensor
from .tensor_data import values
from .weights import Weight, logical_axis
from .quantization import IMAGE_INT, INTEGER_OPS, check_parameters, param_axis, traced_scale

PARAM_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "f32", "float64": "f32",
                "int8": "s8", "uint8": "u8", "int32": "s32"}   # a scale's or zero point's image


def _parameter(w: Weight, kind: str, name: str, array: np.ndarray, origin: str,
               axis: int | None) -> Weight:
    """The ``argument`` weight ``NAME.kind`` holding ``array`` (flattened)."""
    count = int(np.asarray(array).size)
    per = "per tensor" if axis is None else f"one per index of the weight's ONNX axis {axis}"
    return Weight(Tensor(f"{w.name}.{kind}", tuple(np.shape(array)), array.dtype.name, origin,
                         w.tensor.consumer),
                  role="argument", dims=(count,), steps=(Reshape((count,)),),
                  mapping=f"the {kind.replace('_', ' ')} of {w.name!r}, {per}",
                  reason="a quantized weight's parameter",
                  store_dtype=PARAM_DTYPES[array.dtype.name], source_name=name, param_of=w.name)


def _refuse(w: Weight, why: str) -> Weight:
    """No image for ``w``: as a compute weight it is stored as a plain buffer
    of its own values (with --images-only the conversion fails naming it)."""
    return replace(w, role=None, dims=(), steps=(), mapping="", reason=why, compute=True)


def _integer(w: Weight, q_dtype: str, what: str) -> Weight:
    """``w`` on the image dtype for integer values of ``q_dtype``; refused
    (no ``store_dtype``) when none holds them."""
    store = IMAGE_INT.get(q_dtype, "")
    if not store:
        return _refuse(w, f"{what}: {q_dtype} values; integer images hold int8 (s8), uint8 (u8) "
                       "and int32 (s32)")
    return replace(w, store_dtype=store)


def _with_parameters(w: Weight, scale, zero, axis, source: str, scale_source: str,
                     sources: dict, q_name: str = "") -> tuple[Weight, list[Weight]]:
    """w with its ``quantization`` record, and its parameter weights (their
    values into ``sources``). ``scale`` and ``zero`` are (name, array,
    origin) or None."""
    for found in (scale, zero):
        if found is not None and np.asarray(found[1]).dtype.name not in PARAM_DTYPES:
            return _refuse(w, f"its parameter {found[0]!r} is {np.asarray(found[1]).dtype.name}; "
                           f"parameters are {', '.join(PARAM_DTYPES)}"), []
    params = []
    for kind, found in (("scale", scale), ("zero_point", zero)):
        if found is not None:
            params.append(_parameter(w, kind, *found,
                                     axis if np.asarray(found[1]).size > 1 else None))
            sources[params[-1].name] = found[1]
    record = {"q": q_name or None, "scale": f"{w.name}.scale" if scale else None,
              "zero_point": f"{w.name}.zero_point" if zero else None, "axis": axis,
              "logical_axis": logical_axis(w, axis) if w.steps else axis,
              "source": source, "scale_source": scale_source}
    return replace(w, quantization=MappingProxyType(record)), params


def _keep_dequantized(w: Weight, quant, claimed: set, sources: dict):
    """``--quantized keep`` of a folded DequantizeLinear: q and its parameters."""
    w = _integer(w, quant.q.dtype.name, f"--quantized keep of {quant.node}")
    if not w.store_dtype:
        return replace(w, reason=w.reason + "; pass --quantized fold to store its float value"), []
    sources[w.name] = quant.q
    claimed.update(n for n in (quant.q_name, quant.scale_name, quant.zero_point_name) if n)
    zero = None if quant.zero_point is None else \
        (quant.zero_point_name, quant.zero_point, f"zero point of {quant.node}")
    return _with_parameters(w, (quant.scale_name, quant.scale, f"scale of {quant.node}"), zero,
                            quant.axis, quant.node, quant.node, sources, quant.q_name)


def _input_constant(use, index: int, kind: str):
    """(name, array, origin) of input ``index`` of the use's node, None when
    absent; a ClayoutError when it is there but not a constant."""
    name = use.proto.input[index] if index is not None and index < len(use.proto.input) else ""
    if not name:
        return None
    found = use.graph.constant(name)
    if found is None or found.array is None:
        raise ClayoutError(f"its {kind} {name!r} ({use.op} input {index}) is not a constant")
    return found.name, values(found.array), found.origin


def _integer_operator(w: Weight, c, use, claimed: set, sources: dict):
    """An integer operator's weight: integer image, its zero point and scale."""
    spec = INTEGER_OPS[use.op]
    w = _integer(w, c.dtype, f"{use.op} weight")
    if not w.store_dtype:
        return w, []
    try:
        zero = _input_constant(use, spec.zero_point, "zero point")
        if spec.scale is not None:
            scale = _input_constant(use, spec.scale, "scale")
            how = f"{use.op} {use.node} input {spec.scale}"
        else:
            found, how = traced_scale(use)
            scale = None if found is None else (found.name, values(found.array), found.origin)
        flat = [None if p is None else np.asarray(p[1]).reshape(-1) for p in (scale, zero)]
        axis = check_parameters(c.shape, flat[0] if flat[0] is not None else np.ones(1),
                                flat[1], param_axis(use.op, len(c.shape)), f"{use.op} weight")
    except ClayoutError as exc:
        return _refuse(w, str(exc)), []
    claimed.update(p[0] for p in (scale, zero) if p is not None)
    return _with_parameters(w, scale, zero, axis, f"{use}",
                            how if scale else f"not found: {how}", sources)


def attach_parameters(weights: list[Weight], constants, form: str) -> tuple[list[Weight], dict]:
    """(weights, sources): ``weights`` (one per constant, from
    runtime.model.weights.roles) with the quantized ones settled, each followed
    by its parameter weights; ``sources`` maps the name of each weight stored
    with other values than the constant of its name (a kept integer tensor
    q, a parameter) to those values. ``form``: "fold" or "keep" (``--quantized``)."""
    if form not in ("fold", "keep"):
        raise ClayoutError(f"--quantized {form!r}; allowed: fold, keep")
    claimed: set[str] = set()
    out, sources = [], {}
    for w, c in zip(weights, constants):
        params = []
        integer_use = next((u for u in c.uses if u.op in INTEGER_OPS
                            and u.index == INTEGER_OPS[u.op].weight), None)
        if w.role is None and not w.compute:
            pass
        elif integer_use is not None:
            w, params = _integer_operator(w, c, integer_use, claimed, sources)
        elif any(u.op in INTEGER_OPS and u.index == INTEGER_OPS[u.op].bias for u in c.uses):
            w = _integer(w, c.dtype, "QLinearConv bias")   # int32; scale x_scale * w_scale
        elif c.quant is not None and form == "keep":
            w, params = _keep_dequantized(w, c.quant, claimed, sources)
        elif c.quant is not None:
            q = c.quant
            w = replace(w, tensor=replace(w.tensor, dequantized=MappingProxyType({
                "q": q.q_name, "scale": q.scale_name, "zero_point": q.zero_point_name or None,
                "axis": q.axis, "node": q.node})))
        elif form == "keep" and " -> DequantizeLinear " in c.origin:
            w = _refuse(w, "--quantized keep: the steps folded after its DequantizeLinear move "
                        "its per-axis parameters off one axis; pass --quantized fold")
        out.append(w)
        out += params
    # a constant stored as a weight's parameter is not listed again as skipped
    out = [replace(w, claimed=True) if w.name in claimed and w.role is None and not w.compute
           else w for w in out]
    return out, sources
