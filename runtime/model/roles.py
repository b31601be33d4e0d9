"""Which image each constant of an ONNX model goes on (``clayout model``'s plan).

:func:`roles` gives every constant found by :func:`runtime.model.onnx_graph.read_constants`
a :class:`Weight`: its role (filter, depthwise, fc_weight, argument: what the
weight does, and so its candidate layouts, runtime.algebra.catalog) from the op that reads it, the
logical dims, and the ``steps`` (numpy reshape / transpose, in order) that turn
the ONNX tensor into the logical one; :func:`logical_weight` applies them and
:func:`onnx_weight` undoes them. The role table is in runtime.model's docstring
and the README. Quantized weights (runtime.model.quantization) take the role of the float
op they stand for, and bring their scale and zero point as ``argument`` weights
of their own, named ``NAME.scale`` and ``NAME.zero_point``.

Example::

    >>> w = Weight("w", (8, 3, 5), "float32")
    >>> assign_role(w, "Conv", 1, None)        # a 1-D convolution: (O, I, K)
    >>> w.role, w.dims, w.steps
    ('filter', (8, 3, 1, 5), (('reshape', (8, 3, 1, 5)),))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import quantization
from ..algebra import dtypes
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


@dataclass
class Weight:
    """One constant tensor (or a quantized weight's parameter) and what clayout does with it."""
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
    folded_into: list | None = None   # the tensors a folded chain made from this one
    use: object = None            # the runtime.model.onnx_graph.Use that gave the role
    store_dtype: str = ""         # "": the model's float dtype; s8/u8/s32, or a parameter's own
    source: np.ndarray | None = None   # what is stored, when not the constant of this name
    onnx_name: str = ""           # a parameter: the ONNX constant it holds
    param_of: str = ""            # a parameter: the weight whose scale / zero point it is
    quantization: dict | None = None   # an integer weight: its parameters (manifest field)
    dequantized: dict | None = None    # a folded DequantizeLinear: what it was made of
    claimed: bool = False         # stored as a weight's parameter: not listed as skipped


# -- roles ------------------------------------------------------------------------------------
def _filter_role(w: Weight, op: str, group: int, s: tuple) -> None:
    """Conv and ConvTranspose weights of rank 4 (``s``: the shape)."""
    if op == "Conv" and group > 1 and s[1] == 1 and s[0] % group == 0:
        mult = s[0] // group
        w.role, w.dims = "depthwise", (mult, group, s[2], s[3])
        w.steps = (("reshape", (group, mult, s[2], s[3])), ("transpose", (1, 0, 2, 3)))
        w.mapping = f"ONNX (C*M,1,kH,kW) with C={group}, M={mult}: [m,c] = onnx[c*M+m]"
    elif op == "Conv":
        w.role, w.dims = "filter", s
        w.mapping = "ONNX (O,I,kH,kW) as stored" + (f" (group {group}: I per group)"
                                                   if group > 1 else "")
    elif group == 1:
        w.role, w.dims, w.steps = "filter", (s[1], s[0], s[2], s[3]), \
            (("transpose", (1, 0, 2, 3)),)
        w.mapping = "ONNX (I,O,kH,kW) transposed to (O,I,kH,kW)"
    elif s[0] == group:
        w.role, w.dims, w.steps = "depthwise", (s[1], s[0], s[2], s[3]), \
            (("transpose", (1, 0, 2, 3)),)
        w.mapping = f"ONNX (C,M,kH,kW) with C={group}, M={s[1]} transposed: [m,c] = onnx[c,m]"
    elif s[0] % group:
        w.reason = f"ConvTranspose weight dim 0 ({s[0]}) is not a multiple of group {group}"
    else:
        per = s[0] // group
        w.role, w.dims = "filter", (group * s[1], per, s[2], s[3])
        w.steps = (("reshape", (group, per, s[1], s[2], s[3])), ("transpose", (0, 2, 1, 3, 4)),
                   ("reshape", w.dims))
        w.mapping = (f"ONNX (I,O/g,kH,kW) with g={group} to (O,I/g,kH,kW): "
                     f"[gi*{s[1]}+o, i] = onnx[gi*{per}+i, o]")


def _conv_role(w: Weight, op: str, node) -> None:
    """A Conv / ConvTranspose weight: 2-D as is, 1-D (rank 3) as (.., 1, K)."""
    shape = w.onnx_shape
    group = int(attr(node, "group", 1)) if node is not None else 1
    if len(shape) == 4:
        return _filter_role(w, op, group, shape)
    if len(shape) != 3:
        what = " (a 3-D convolution)" if len(shape) == 5 else ""
        w.reason = (f"{op} weight of rank {len(shape)}{what}: image layouts take 1-D and 2-D "
                    "convolutions only")
        return
    as_2d = (shape[0], shape[1], 1, shape[2])
    _filter_role(w, op, group, as_2d)
    if w.role is not None:
        w.steps = (("reshape", as_2d),) + w.steps
        w.mapping = f"1-D: ONNX {shape} as {as_2d}, then " + w.mapping


def _param_reason(op: str, index: int) -> str:
    """Why a quantization parameter input has no image role of its own ("" if it is none)."""
    spec = INTEGER_OPS.get(op)
    if spec is not None and index in (spec.scale, spec.zero_point):
        kind = "scale" if index == spec.scale else "zero point"
        return f"the {kind} of {op}'s weight: stored with the weight as NAME.{kind.replace(' ', '_')}"
    if (spec is not None and index in spec.activation) or (op in QDQ_OPS and index in (1, 2)):
        return f"{op} input {index}: an activation's quantization parameter (a kernel argument)"
    return ""


def assign_role(w: Weight, op: str, index: int, node) -> None:
    """Fill in w's role, dims and steps for being input ``index`` of ``node`` (an ``op``)."""
    shape = w.onnx_shape
    spec = INTEGER_OPS.get(op)
    if spec is not None:                     # integer operators: the role of the op they stand for
        if index == spec.weight:
            return assign_role(w, spec.like, 1, node)
        if index == spec.bias:
            return assign_role(w, "Conv", 2, node)
    if _param_reason(op, index):
        w.reason = _param_reason(op, index)
        return
    if op in ("Conv", "ConvTranspose") and index == 1:
        return _conv_role(w, op, node)
    if op == "Gemm" and index == 1:
        if len(shape) != 2:
            w.reason = f"Gemm B of rank {len(shape)}"
            return
        trans = bool(attr(node, "transB", 0)) if node is not None else False
        out, inp = (shape[0], shape[1]) if trans else (shape[1], shape[0])
        w.role, w.dims = "fc_weight", (out, inp, 1, 1)
        w.steps = ((() if trans else (("transpose", (1, 0)),)) + (("reshape", w.dims),))
        w.mapping = "Gemm B (O,I) with transB=1, as stored" if trans else \
            "Gemm B (I,O) with transB=0, transposed to (O,I)"
        return
    if op == "MatMul" and index == 1:
        if len(shape) == 2:
            w.role, w.dims = "fc_weight", (shape[1], shape[0], 1, 1)
            w.steps = (("transpose", (1, 0)), ("reshape", w.dims))
            w.mapping = "MatMul B (I,O) transposed to (O,I)"
        elif len(shape) == 3:
            w.role, w.dims = "fc_weight", (shape[0] * shape[2], shape[1], 1, 1)
            w.steps = (("transpose", (0, 2, 1)), ("reshape", w.dims))
            w.mapping = "MatMul B (G,I,O) to (G*O,I): [g*O+o, i] = B[g, i, o]"
        else:
            w.reason = f"MatMul weight of rank {len(shape)}: 2-D and 3-D weights are mapped"
        return
    if index not in ARGUMENT_INPUTS.get(op, ()):
        w.reason = f"{op} input {index} has no image role"
        return
    big = [d for d in shape if d != 1]
    if not big and op in ELEMENTWISE_OPS:   # broadcast to every element, not one per channel
        w.reason = "scalar constant: pass it as a kernel argument"
    elif len(big) > 1:
        w.reason = f"{op} input {index} of shape {shape} is not a per-channel vector"
    else:                                   # a bias of one output channel is still a vector
        length = big[0] if big else 1
        w.role, w.dims, w.steps = "argument", (length,), (("reshape", (length,)),)
        w.mapping = "as stored" if len(shape) == 1 else f"ONNX {shape} flattened"


def is_weight_input(use, onnx_dtype: str) -> bool:
    """Whether ``use`` reads a weight that must never be dropped: a float input
    of a FLOAT_COMPUTE_OPS op, or an integer operator's weight or bias."""
    spec = INTEGER_OPS.get(use.op)
    if spec is not None:
        return use.index in (spec.weight, spec.bias)
    return use.op in FLOAT_COMPUTE_OPS and onnx_dtype in FLOAT_DTYPES


def roles(constants) -> list[Weight]:
    """Every constant (from :func:`runtime.model.onnx_graph.read_constants`) with its
    role, one Weight per constant in the same order (quantized weights get
    their parameters from runtime.model.integer_weights)."""
    weights = []
    for c in constants:
        w = Weight(c.name, c.shape, c.onnx_dtype, origin=c.origin)
        weights.append(w)
        integer_weight = any(u.op in INTEGER_OPS and is_weight_input(u, c.onnx_dtype)
                             for u in c.uses)
        if c.array is None:
            w.reason = f"{c.onnx_dtype} constant: clayout reads numeric tensors only"
        elif not c.uses and c.folded_into:
            w.consumer, w.folded_into = "(folded)", list(c.folded_into)
            w.reason = "a step of a folded chain: the tensor named in folded_into holds its value"
        elif not c.uses:
            w.reason = "not used by any node"
        elif c.onnx_dtype not in FLOAT_DTYPES and not integer_weight:
            use = c.uses[0]
            w.consumer = str(use)
            w.reason = _param_reason(use.op, use.index) or (
                f"{c.onnx_dtype} tensor (shape, index or quantized data): "
                "only float weights go on images")
        elif c.array.size == 0:
            w.consumer, w.reason = str(c.uses[0]), "empty tensor (0 elements)"
        else:
            for use in c.uses:     # the first use that gives a role decides
                trial = Weight(w.name, w.onnx_shape, w.onnx_dtype)
                assign_role(trial, use.op, use.index, use.proto)
                if trial.role is not None or use is c.uses[0]:
                    w.consumer, w.role, w.dims, w.steps, w.mapping, w.reason = \
                        str(use), trial.role, trial.dims, trial.steps, trial.mapping, trial.reason
                    w.use = use
                if trial.role is not None:
                    break
            w.compute = any(is_weight_input(u, c.onnx_dtype) for u in c.uses)
    return weights


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
