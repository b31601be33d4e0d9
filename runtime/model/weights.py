"""What clayout makes of each constant of a model, before any placement.

:func:`roles` gives every constant a front end found (runtime.model.graph
records, from runtime.model.onnx or runtime.model.tflite) a frozen
:class:`Weight`: its source :class:`~runtime.model.tensor.Tensor`, held by
reference; its role (filter, depthwise, fc_weight, argument: what the weight
does, and so its candidate layouts, runtime.algebra.catalog) from the first
operator reading it that gives one (by that format's role table,
:data:`ROLE_TABLES`); the logical dims and the steps from the source tensor
(runtime.model.tensor). Quantized weights (runtime.model.integer_weights)
bring their scale and zero point as ``argument`` weights of their own, named
``NAME.scale`` and ``NAME.zero_point``.

Example::

    >>> from runtime.model.graph import Constant, Use
    >>> c = Constant("w", np.zeros((8, 3, 3, 3), np.float32), "float32", (8, 3, 3, 3),
    ...              "initializer", [Use("Conv", "conv", 1)])
    >>> w = roles([c])[0]
    >>> w.name, w.role, w.dims, w.tensor.consumer
    ('w', 'filter', (8, 3, 3, 3), 'Conv conv input 1')
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from . import quantization
from ..algebra import dtypes
from .onnx import roles as onnx_roles
from .quantization import INTEGER_OPS
from .tensor import Reshape, Tensor, logical_weight
from .tflite import roles as tflite_roles

FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")
ROLE_TABLES = {"onnx": onnx_roles, "tflite": tflite_roles}   # Use.front -> its role table
# the ops whose constants are weights of a compute op, every format's (the summary's order)
COMPUTE_OPS = onnx_roles.COMPUTE_OPS + tflite_roles.COMPUTE_OPS


@dataclass(frozen=True)
class Weight:
    """One constant (or a quantized weight's parameter) and what clayout
    makes of it: ``tensor`` (the source tensor, by reference), its ``role``
    (None: none) with the logical ``dims``, the ``steps`` from the source
    tensor and those in words (``mapping``), or the ``reason`` it has none.
    Holds no array: a value stored in place of the constant of this name
    (a kept integer tensor, a parameter) comes apart, from
    runtime.model.integer_weights.attach_parameters."""
    tensor: Tensor
    role: str | None = None       # filter, depthwise, fc_weight, argument; None: no image role
    dims: tuple[int, ...] = ()    # clayout's logical dims
    steps: tuple = ()             # runtime.model.tensor step records, source -> logical
    mapping: str = ""             # the steps in words
    reason: str = ""              # why it has no role (or, for a parameter, what it is)
    compute: bool = False         # a weight of a compute op: never dropped
    folded_into: tuple[str, ...] = ()   # the tensors folding made from this one
    use: object = None            # the runtime.model.graph.Use that gave the role
    store_dtype: str = ""         # "": the model's float dtype; s8/u8/s32, or a parameter's own
    source_name: str = ""         # a parameter: the model's constant it holds
    param_of: str = ""            # a parameter: the weight whose scale / zero point it is
    quantization: Mapping | None = None   # a kept integer weight: its parameters (manifest)
    claimed: bool = False         # stored as a weight's parameter: not listed as skipped

    @property
    def name(self) -> str:
        return self.tensor.name

    def as_buffer(self) -> "Weight":
        """This weight as a plain buffer holds it: its logical tensor, or,
        with no role, the source tensor as stored (a scalar as one element)."""
        if self.role is not None:
            return self
        dims = tuple(self.tensor.shape) or (1,)
        return replace(self, dims=dims, steps=(Reshape(dims),))


def use_role(shape: tuple, use):
    """The role one use gives a constant of ``shape``, by the role table of
    the front end that read the model."""
    return ROLE_TABLES[use.front].use_role(shape, use)


def is_weight_input(use, dtype: str) -> bool:
    """Whether ``use`` reads a weight that must never be dropped, by the role
    table of the front end that read the model."""
    return ROLE_TABLES[use.front].is_weight_input(use, dtype)


def roles(constants) -> list[Weight]:
    """Every constant (runtime.model.graph.Constant records) with its role,
    one Weight per constant in the same order (quantized weights get their
    parameters from runtime.model.integer_weights)."""
    return [_weight(c) for c in constants]


def _weight(c) -> Weight:
    """The Weight of one constant: the role its first use that gives one
    gives it, or why it has none."""
    def tensor(consumer: str = "", layout: str = "") -> Tensor:
        return Tensor(c.name, tuple(c.shape), c.dtype, c.origin, consumer, layout)
    integer_weight = any(u.op in INTEGER_OPS and is_weight_input(u, c.dtype) for u in c.uses)
    compute = any(is_weight_input(u, c.dtype) for u in c.uses)
    if c.array is None:
        return Weight(tensor(str(c.uses[0]) if c.uses else ""), compute=compute,
                      reason=f"{c.dtype} constant: clayout reads numeric tensors only")
    if not c.uses and c.folded_into:
        return Weight(tensor("(folded)"), folded_into=tuple(c.folded_into),
                      reason="a step of a folded chain: the tensor named in folded_into holds "
                      "its value")
    if not c.uses:
        return Weight(tensor(), reason="not used by any node")
    if c.dtype not in FLOAT_DTYPES and not integer_weight:
        use = c.uses[0]
        return Weight(tensor(str(use)), compute=compute,
                      reason=ROLE_TABLES[use.front].param_reason(use) or (
                          f"{c.dtype} tensor (shape, index or quantized data): "
                          "only float weights go on images"))
    if c.array.size == 0:
        return Weight(tensor(str(c.uses[0])), reason="empty tensor (0 elements)")
    use, found = c.uses[0], None
    for trial_use in c.uses:     # the first use that gives a role decides, else the first use
        trial = use_role(c.shape, trial_use)
        if trial.role is not None or found is None:
            use, found = trial_use, trial
        if trial.role is not None:
            break
    reason = f"{found.reason}; {use.note}" if found.role is None and use.note else found.reason
    return Weight(tensor(str(use), found.source_layout), role=found.role, dims=found.dims,
                  steps=found.steps, mapping=found.mapping, reason=reason, use=use,
                  compute=compute, folded_into=tuple(c.folded_into))


def float_dtype(weights) -> str:
    """The image dtype when ``--dtype`` is not given: the weights' own float
    type: f16 when every float weight to store is float16, else f32 (exact for
    every other float type but float64, which is rounded to f32)."""
    kinds = {w.tensor.dtype for w in weights if not w.store_dtype and
             w.tensor.dtype in FLOAT_DTYPES and (w.role is not None or w.compute)}
    return "f16" if kinds == {"float16"} else "f32"


def stored_values(array: np.ndarray, dtype: str) -> np.ndarray:
    """The weight as clayout stores it in ``dtype``: float64 is rounded to f32
    first (not a clayout dtype), then to ``dtype``, nearest even."""
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    return dtypes.convert(np.ascontiguousarray(array), dtype).reshape(np.shape(array))


def logical_axis(w: Weight, axis: int | None) -> int | None:
    """The logical dim that the source tensor's axis ``axis`` of ``w`` becomes, or None."""
    if axis is None:
        return None
    return quantization.axis_after(w.tensor.shape, axis, lambda a: logical_weight(a, w.steps))
