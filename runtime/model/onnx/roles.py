"""What each ONNX operator makes of its constant inputs: the ONNX half of
``clayout model``'s role table (the TFLite half is runtime.model.tflite.roles).

:func:`role_of` gives what one use makes of a constant (a ConstantRole: its role,
logical dims and the steps from the ONNX tensor), or why it has none. The
table is in runtime.model.apply's docstring and docs/cli.md. Quantized
weights (runtime.model.quantization) take the role of the float op they
stand for.

Example::

    >>> r = role_of((8, 3, 5), "Conv", 1, None)        # a 1-D convolution: (O, I, K)
    >>> r.role, r.dims, r.steps
    ('filter', (8, 3, 1, 5), (Reshape(shape=(8, 3, 1, 5)),))
"""
from __future__ import annotations

from dataclasses import replace

from ..graph import ConstantRole, argument_role
from ..tensor import Reshape, Transpose
from ..quantization import INTEGER_OPS, QDQ_OPS
from .reader import attr

FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")
ELEMENTWISE_OPS = ("Add", "Sub", "Mul", "Div", "PRelu")
ARGUMENT_INPUTS = {"Conv": (2,), "ConvTranspose": (2,), "Gemm": (2,),
                   "BatchNormalization": (1, 2, 3, 4), "PRelu": (1,),
                   "InstanceNormalization": (1, 2), "LayerNormalization": (1, 2),
                   "Add": (0, 1), "Sub": (0, 1), "Mul": (0, 1), "Div": (0, 1)}
# ops whose float constant inputs are weights: one with no image role never goes
# unnoticed (a plain buffer, or with --images-only the command fails naming it)
FLOAT_COMPUTE_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "LSTM", "GRU", "RNN",
                     "Attention", "MultiHeadAttention")
COMPUTE_OPS = FLOAT_COMPUTE_OPS + tuple(INTEGER_OPS)


# -- roles ------------------------------------------------------------------------------------
def _filter_role(op: str, group: int, s: tuple) -> ConstantRole:
    """Conv and ConvTranspose weights of rank 4 (``s``: the shape)."""
    if op == "Conv" and group > 1 and s[1] == 1 and s[0] % group == 0:
        mult = s[0] // group
        return ConstantRole("depthwise", (mult, group, s[2], s[3]),
                    (Reshape((group, mult, s[2], s[3])), Transpose((1, 0, 2, 3))),
                    f"ONNX (C*M,1,kH,kW) with C={group}, M={mult}: [m,c] = onnx[c*M+m]")
    if op == "Conv":
        return ConstantRole("filter", s, (), "ONNX (O,I,kH,kW) as stored"
                    + (f" (group {group}: I per group)" if group > 1 else ""))
    if group == 1:
        return ConstantRole("filter", (s[1], s[0], s[2], s[3]), (Transpose((1, 0, 2, 3)),),
                    "ONNX (I,O,kH,kW) transposed to (O,I,kH,kW)")
    if s[0] == group:
        return ConstantRole("depthwise", (s[1], s[0], s[2], s[3]), (Transpose((1, 0, 2, 3)),),
                    f"ONNX (C,M,kH,kW) with C={group}, M={s[1]} transposed: [m,c] = onnx[c,m]")
    if s[0] % group:
        return ConstantRole(reason=f"ConvTranspose weight dim 0 ({s[0]}) is not a multiple of group "
                    f"{group}")
    per = s[0] // group
    dims = (group * s[1], per, s[2], s[3])
    return ConstantRole("filter", dims, (Reshape((group, per, s[1], s[2], s[3])),
                                 Transpose((0, 2, 1, 3, 4)), Reshape(dims)),
                f"ONNX (I,O/g,kH,kW) with g={group} to (O,I/g,kH,kW): "
                f"[gi*{s[1]}+o, i] = onnx[gi*{per}+i, o]")


def _conv_role(shape: tuple, op: str, node) -> ConstantRole:
    """A Conv / ConvTranspose weight: 2-D as is, 1-D (rank 3) as (.., 1, K)."""
    group = int(attr(node, "group", 1)) if node is not None else 1
    if len(shape) == 4:
        return _filter_role(op, group, shape)
    if len(shape) != 3:
        what = " (a 3-D convolution)" if len(shape) == 5 else ""
        return ConstantRole(reason=f"{op} weight of rank {len(shape)}{what}: image layouts take 1-D and "
                    "2-D convolutions only")
    as_2d = (shape[0], shape[1], 1, shape[2])
    role = _filter_role(op, group, as_2d)
    if role.role is None:
        return role
    return replace(role, steps=(Reshape(as_2d),) + role.steps,
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


def role_of(shape: tuple, op: str, index: int, node) -> ConstantRole:
    """What being input ``index`` of ``node`` (an ``op``) makes of a constant
    of ONNX ``shape``: its role, dims and steps, or why it has none."""
    spec = INTEGER_OPS.get(op)
    if spec is not None:                     # integer operators: the role of the op they stand for
        if index == spec.weight:
            return role_of(shape, spec.like, 1, node)
        if index == spec.bias:
            return role_of(shape, "Conv", 2, node)
    if _param_reason(op, index):
        return ConstantRole(reason=_param_reason(op, index))
    if op in ("Conv", "ConvTranspose") and index == 1:
        return _conv_role(shape, op, node)
    if op == "Gemm" and index == 1:
        if len(shape) != 2:
            return ConstantRole(reason=f"Gemm B of rank {len(shape)}")
        trans = bool(attr(node, "transB", 0)) if node is not None else False
        out, inp = (shape[0], shape[1]) if trans else (shape[1], shape[0])
        dims = (out, inp, 1, 1)
        return ConstantRole("fc_weight", dims,
                    (() if trans else (Transpose((1, 0)),)) + (Reshape(dims),),
                    "Gemm B (O,I) with transB=1, as stored" if trans else
                    "Gemm B (I,O) with transB=0, transposed to (O,I)")
    if op == "MatMul" and index == 1:
        if len(shape) == 2:
            dims = (shape[1], shape[0], 1, 1)
            return ConstantRole("fc_weight", dims, (Transpose((1, 0)), Reshape(dims)),
                        "MatMul B (I,O) transposed to (O,I)")
        if len(shape) == 3:
            dims = (shape[0] * shape[2], shape[1], 1, 1)
            return ConstantRole("fc_weight", dims, (Transpose((0, 2, 1)), Reshape(dims)),
                        "MatMul B (G,I,O) to (G*O,I): [g*O+o, i] = B[g, i, o]")
        return ConstantRole(reason=f"MatMul weight of rank {len(shape)}: 2-D and 3-D weights are mapped")
    if index not in ARGUMENT_INPUTS.get(op, ()):
        return ConstantRole(reason=f"{op} input {index} has no image role")
    return argument_role(op, index, shape, elementwise=op in ELEMENTWISE_OPS, source="ONNX")


def is_weight_input(use, dtype: str) -> bool:
    """Whether ``use`` reads a weight that must never be dropped: a float input
    of a FLOAT_COMPUTE_OPS op, or an integer operator's weight or bias."""
    spec = INTEGER_OPS.get(use.op)
    if spec is not None:
        return use.index in (spec.weight, spec.bias)
    return use.op in FLOAT_COMPUTE_OPS and dtype in FLOAT_DTYPES


def use_role(shape: tuple, use) -> ConstantRole:
    """The role one use (a runtime.model.graph.Use) gives a constant of ``shape``."""
    return role_of(shape, use.op, use.index, use.proto)


def param_reason(use) -> str:
    """Why a non-float input of ``use`` has no image role when it is a
    quantization parameter ("" otherwise)."""
    return _param_reason(use.op, use.index)


def conv_settings(use) -> tuple[tuple, tuple, int]:
    """(strides, dilations, group) of the Conv ``use`` reads a filter for
    (ONNX's defaults, empty and 1, where the attributes are absent)."""
    node = use.proto
    return (tuple(attr(node, "strides") or ()), tuple(attr(node, "dilations") or ()),
            int(attr(node, "group", 1)))
