"""Which image each constant of an ONNX model goes on (``clayout model``'s plan).

:func:`roles` gives every constant found by :func:`runtime.model.onnx_graph.read_constants`
a frozen :class:`Weight`: its role (filter, depthwise, fc_weight, argument: what the
weight does, and so its candidate layouts, runtime.algebra.catalog) from the op that reads it, the
logical dims, and the ``steps`` (numpy reshape / transpose, in order) that turn
the ONNX tensor into the logical one (:func:`role_of`: what one use makes of
it, a :class:`Role`); :func:`logical_weight` applies them and
:func:`onnx_weight` undoes them. The role table is in runtime.model's docstring
and the README. Quantized weights (runtime.model.quantization) take the role of the float
op they stand for, and bring their scale and zero point as ``argument`` weights
of their own, named ``NAME.scale`` and ``NAME.zero_point``.

Example::

    >>> r = role_of((8, 3, 5), "Conv", 1, None)        # a 1-D convolution: (O, I, K)
    >>> r.role, r.dims, r.steps
    ('filter', (8, 3, 1, 5), (('reshape', (8, 3, 1, 5)),))
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from . import quantization, tflite_roles
from ..algebra import dtypes
from .graph import Role, argument_role
from .onnx_graph import attr
from .quantization import INTEGER_OPS, QDQ_OPS

FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")
ELEMENTWISE_OPS = ("Add", "Sub", "Mul", "Div", "PRelu")
ARGUMENT_INPUTS = {"Conv": (2,), "ConvTranspose": (2,), "Gemm": (2,),
                   "BatchNormalization": (1, 2, 3, 4), "PRelu": (1,),
                   "InstanceNormalization": (1, 2), "LayerNormalization": (1, 2),
                   "Add": (0, 1), "Sub": (0, 1), "Mul": (0, 1), "Div": (0, 1)}
# ops whose float constant inputs are weights: one with no image role never goes
# unnoticed (the command fails naming it, or --keep-buffers stores it as a buffer)
FLOAT_COMPUTE_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "LSTM", "GRU", "RNN",
                     "Attention", "MultiHeadAttention")
COMPUTE_OPS = FLOAT_COMPUTE_OPS + tuple(INTEGER_OPS)


@dataclass(frozen=True)
class Weight:
    """One constant tensor (or a quantized weight's parameter) and what clayout
    makes of it, before any placement (runtime.model.placements). Holds no
    array: a value stored in place of the constant of this name (a kept
    integer tensor, a parameter) comes apart, from
    runtime.model.integer_weights.attach_parameters."""
    name: str
    onnx_shape: tuple[int, ...]
    onnx_dtype: str
    consumer: str = ""            # "Conv conv1 input 1", or "" when unused
    origin: str = ""              # "initializer", "Constant node c0 -> Cast k", ...
    role: str | None = None       # its role: filter, depthwise, fc_weight, argument; None: none
    dims: tuple[int, ...] = ()    # clayout's logical dims
    steps: tuple = ()             # (("transpose", perm) | ("reshape", shape), ...) ONNX -> logical
    mapping: str = ""             # the steps in words
    reason: str = ""              # why it was skipped
    compute: bool = False         # a weight of a COMPUTE_OPS op: never dropped
    folded_into: tuple[str, ...] = ()   # the tensors a folded chain made from this one
    use: object = None            # the runtime.model.onnx_graph.Use that gave the role
    store_dtype: str = ""         # "": the model's float dtype; s8/u8/s32, or a parameter's own
    onnx_name: str = ""           # a parameter: the ONNX constant it holds
    param_of: str = ""            # a parameter: the weight whose scale / zero point it is
    quantization: Mapping | None = None   # an integer weight: its parameters (manifest field)
    dequantized: Mapping | None = None    # a folded DequantizeLinear: what it was made of
    claimed: bool = False         # stored as a weight's parameter: not listed as skipped
    source_layout: str = ""       # the stored tensor's layout in its format's letters ("OHWI")


# -- roles ------------------------------------------------------------------------------------
def _filter_role(op: str, group: int, s: tuple) -> Role:
    """Conv and ConvTranspose weights of rank 4 (``s``: the shape)."""
    if op == "Conv" and group > 1 and s[1] == 1 and s[0] % group == 0:
        mult = s[0] // group
        return Role("depthwise", (mult, group, s[2], s[3]),
                    (("reshape", (group, mult, s[2], s[3])), ("transpose", (1, 0, 2, 3))),
                    f"ONNX (C*M,1,kH,kW) with C={group}, M={mult}: [m,c] = onnx[c*M+m]")
    if op == "Conv":
        return Role("filter", s, (), "ONNX (O,I,kH,kW) as stored"
                    + (f" (group {group}: I per group)" if group > 1 else ""))
    if group == 1:
        return Role("filter", (s[1], s[0], s[2], s[3]), (("transpose", (1, 0, 2, 3)),),
                    "ONNX (I,O,kH,kW) transposed to (O,I,kH,kW)")
    if s[0] == group:
        return Role("depthwise", (s[1], s[0], s[2], s[3]), (("transpose", (1, 0, 2, 3)),),
                    f"ONNX (C,M,kH,kW) with C={group}, M={s[1]} transposed: [m,c] = onnx[c,m]")
    if s[0] % group:
        return Role(reason=f"ConvTranspose weight dim 0 ({s[0]}) is not a multiple of group "
                    f"{group}")
    per = s[0] // group
    dims = (group * s[1], per, s[2], s[3])
    return Role("filter", dims, (("reshape", (group, per, s[1], s[2], s[3])),
                                 ("transpose", (0, 2, 1, 3, 4)), ("reshape", dims)),
                f"ONNX (I,O/g,kH,kW) with g={group} to (O,I/g,kH,kW): "
                f"[gi*{s[1]}+o, i] = onnx[gi*{per}+i, o]")


def _conv_role(shape: tuple, op: str, node) -> Role:
    """A Conv / ConvTranspose weight: 2-D as is, 1-D (rank 3) as (.., 1, K)."""
    group = int(attr(node, "group", 1)) if node is not None else 1
    if len(shape) == 4:
        return _filter_role(op, group, shape)
    if len(shape) != 3:
        what = " (a 3-D convolution)" if len(shape) == 5 else ""
        return Role(reason=f"{op} weight of rank {len(shape)}{what}: image layouts take 1-D and "
                    "2-D convolutions only")
    as_2d = (shape[0], shape[1], 1, shape[2])
    role = _filter_role(op, group, as_2d)
    if role.role is None:
        return role
    return replace(role, steps=(("reshape", as_2d),) + role.steps,
                   mapping=f"1-D: ONNX {shape} as {as_2d}, then " + role.mapping)


def _param_reason(op: str, index: int) -> str:
    """Why a quantization parameter input has no image role of its own ("" if it is none)."""
    spec = INTEGER_OPS.get(op)
    if spec is not None and index in (spec.scale, spec.zero_point):
        kind = "scale" if index == spec.scale else "zero point"
        return f"the {kind} of {op}'s weight: stored with the weight as NAME.{kind.replace(' ', '_')}"
    if (spec is not None and index in spec.activation) or (op in QDQ_OPS and index in (1, 2)):
        return f"{op} input {index}: an activation's quantization parameter (a kernel argument)"
    return ""


def role_of(shape: tuple, op: str, index: int, node) -> Role:
    """What being input ``index`` of ``node`` (an ``op``) makes of a constant
    of ONNX ``shape``: its role, dims and steps, or why it has none."""
    spec = INTEGER_OPS.get(op)
    if spec is not None:                     # integer operators: the role of the op they stand for
        if index == spec.weight:
            return role_of(shape, spec.like, 1, node)
        if index == spec.bias:
            return role_of(shape, "Conv", 2, node)
    if _param_reason(op, index):
        return Role(reason=_param_reason(op, index))
    if op in ("Conv", "ConvTranspose") and index == 1:
        return _conv_role(shape, op, node)
    if op == "Gemm" and index == 1:
        if len(shape) != 2:
            return Role(reason=f"Gemm B of rank {len(shape)}")
        trans = bool(attr(node, "transB", 0)) if node is not None else False
        out, inp = (shape[0], shape[1]) if trans else (shape[1], shape[0])
        dims = (out, inp, 1, 1)
        return Role("fc_weight", dims,
                    (() if trans else (("transpose", (1, 0)),)) + (("reshape", dims),),
                    "Gemm B (O,I) with transB=1, as stored" if trans else
                    "Gemm B (I,O) with transB=0, transposed to (O,I)")
    if op == "MatMul" and index == 1:
        if len(shape) == 2:
            dims = (shape[1], shape[0], 1, 1)
            return Role("fc_weight", dims, (("transpose", (1, 0)), ("reshape", dims)),
                        "MatMul B (I,O) transposed to (O,I)")
        if len(shape) == 3:
            dims = (shape[0] * shape[2], shape[1], 1, 1)
            return Role("fc_weight", dims, (("transpose", (0, 2, 1)), ("reshape", dims)),
                        "MatMul B (G,I,O) to (G*O,I): [g*O+o, i] = B[g, i, o]")
        return Role(reason=f"MatMul weight of rank {len(shape)}: 2-D and 3-D weights are mapped")
    if index not in ARGUMENT_INPUTS.get(op, ()):
        return Role(reason=f"{op} input {index} has no image role")
    return argument_role(op, index, shape, elementwise=op in ELEMENTWISE_OPS, source="ONNX")


def use_role(shape: tuple, use) -> Role:
    """The role one use gives a constant of ``shape``, by the table of the
    front end that read the model (this module's for ONNX, runtime.model.tflite_roles')."""
    if use.front == "tflite":
        return tflite_roles.role_of(shape, use)
    return role_of(shape, use.op, use.index, use.proto)


def is_weight_input(use, onnx_dtype: str) -> bool:
    """Whether ``use`` reads a weight that must never be dropped: a float input
    of a FLOAT_COMPUTE_OPS op, or an integer operator's weight or bias; any
    constant input of a TFLite compute operator (runtime.model.tflite_roles)."""
    if use.front == "tflite":
        return tflite_roles.is_weight_input(use, onnx_dtype)
    spec = INTEGER_OPS.get(use.op)
    if spec is not None:
        return use.index in (spec.weight, spec.bias)
    return use.op in FLOAT_COMPUTE_OPS and onnx_dtype in FLOAT_DTYPES


def roles(constants) -> list[Weight]:
    """Every constant (from :func:`runtime.model.onnx_graph.read_constants`) with its
    role, one Weight per constant in the same order (quantized weights get
    their parameters from runtime.model.integer_weights)."""
    return [_weight(c) for c in constants]


def _weight(c) -> Weight:
    """The Weight of one constant: the role its first use that gives one
    gives it, or why it has none."""
    known = dict(name=c.name, onnx_shape=c.shape, onnx_dtype=c.onnx_dtype, origin=c.origin)
    integer_weight = any(u.op in INTEGER_OPS and is_weight_input(u, c.onnx_dtype) for u in c.uses)
    compute = any(is_weight_input(u, c.onnx_dtype) for u in c.uses)
    if c.array is None:
        return Weight(**known, consumer=str(c.uses[0]) if c.uses else "", compute=compute,
                      reason=f"{c.onnx_dtype} constant: clayout reads numeric tensors only")
    if not c.uses and c.folded_into:
        return Weight(**known, consumer="(folded)", folded_into=tuple(c.folded_into),
                      reason="a step of a folded chain: the tensor named in folded_into holds "
                      "its value")
    if not c.uses:
        return Weight(**known, reason="not used by any node")
    if c.onnx_dtype not in FLOAT_DTYPES and not integer_weight:
        use = c.uses[0]
        return Weight(**known, consumer=str(use), compute=compute,
                      reason=_param_reason(use.op, use.index) or (
            f"{c.onnx_dtype} tensor (shape, index or quantized data): "
            "only float weights go on images"))
    if c.array.size == 0:
        return Weight(**known, consumer=str(c.uses[0]), reason="empty tensor (0 elements)")
    use, found = c.uses[0], None
    for trial_use in c.uses:     # the first use that gives a role decides, else the first use
        trial = use_role(c.shape, trial_use)
        if trial.role is not None or found is None:
            use, found = trial_use, trial
        if trial.role is not None:
            break
    return Weight(**known, consumer=str(use), role=found.role, dims=found.dims, steps=found.steps,
                  mapping=found.mapping, reason=found.reason, use=use, compute=compute,
                  source_layout=found.source_layout)


def float_dtype(weights) -> str:
    """The image dtype when ``--dtype`` is not given: the weights' own float
    type: f16 when every float weight to store is float16, else f32 (exact for
    every other float type but float64, which is rounded to f32)."""
    kinds = {w.onnx_dtype for w in weights if not w.store_dtype and w.onnx_dtype in FLOAT_DTYPES
             and (w.role is not None or w.compute)}
    return "f16" if kinds == {"float16"} else "f32"


# -- the steps and their inverse -------------------------------------------------------------------
def logical_weight(array: np.ndarray, steps) -> np.ndarray:
    """The ONNX tensor as clayout's logical tensor (``steps`` from a Weight or
    manifest entry)."""
    for kind, arg in steps:
        array = array.transpose(arg) if kind == "transpose" else array.reshape(arg)
    return array


def onnx_weight(logical: np.ndarray, steps, onnx_shape) -> np.ndarray:
    """The inverse of :func:`logical_weight`: back to the ONNX tensor's shape."""
    shapes, shape = [], tuple(onnx_shape)
    for kind, arg in steps:                   # the shape before each step
        shapes.append(shape)
        shape = tuple(shape[p] for p in arg) if kind == "transpose" else tuple(arg)
    for (kind, arg), before in reversed(list(zip(steps, shapes))):
        logical = logical.transpose(np.argsort(arg)) if kind == "transpose" else \
            logical.reshape(before)
    return logical.reshape(onnx_shape)


def stored_values(array: np.ndarray, dtype: str) -> np.ndarray:
    """The weight as clayout stores it in ``dtype``: float64 is rounded to f32
    first (not a clayout dtype), then to ``dtype``, nearest even."""
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    return dtypes.convert(np.ascontiguousarray(array), dtype).reshape(np.shape(array))


def logical_axis(w: Weight, axis: int | None) -> int | None:
    """The logical dim that ONNX axis ``axis`` of ``w`` becomes, or None."""
    if axis is None:
        return None
    return quantization.axis_after(w.onnx_shape, axis, lambda a: logical_weight(a, w.steps))
