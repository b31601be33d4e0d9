"""``read_output``'s arithmetic on a host array of the output's logical
values (runtime/algebra/output.py has the rules): ``evaluate(rule, q)`` in
float32 as the engines compute (the cpu engine's path; the OpenCL kernel
does the same operations), ``evaluate(rule, q, exact=True)`` in float64
from the formulas (the reference engine: every value rounded once at the
end). Both return the call's result: the tensor as float32 / float64
logical values (the caller places it), argmax indices, or (indices,
values).
"""
from __future__ import annotations

import numpy as np

from .output import OutputRule, finish_selected


def evaluate(rule: OutputRule, q: np.ndarray, exact: bool = False):
    """The result of ``rule`` on ``q``, the output's logical values."""
    ft = np.float64 if exact else np.float32
    q = q.reshape(rule.batch, rule.channels, rule.spatial)
    x = inputs(rule, q, ft)
    if rule.result == "argmax":
        return np.argmax(x, axis=1).astype(np.int32).reshape(rule.argmax_dims)
    p = activated(rule, x, ft)
    if rule.result == "tensor":
        return p.reshape(rule.shape)
    # one ranking on every engine: softmax's probabilities, else x as float32 (sigmoid
    # keeps x's order and never saturates where float64's 1.0 would tie x = 37 and 50)
    keys = p if rule.keys_are_p else x if not exact else inputs(rule, q, np.float32)
    with np.errstate(invalid="ignore"):
        mask = p > rule.threshold if exact else keys >= rule.bound
    flat = np.flatnonzero(mask)
    return finish_selected(rule, flat, p.reshape(-1)[flat], keys.reshape(-1)[flat])


def inputs(rule: OutputRule, q: np.ndarray, ft=np.float32) -> np.ndarray:
    """x, the activation's input, of (N, C, S) stored values."""
    if rule.scale is None:
        return q.astype(ft)
    zero = np.asarray(rule.zero, np.int64)[None, :, None]
    scale = np.asarray(rule.scale, np.float32)[None, :, None].astype(ft)
    diff = q.astype(np.int64) - zero
    return diff.astype(ft) * scale


def activated(rule: OutputRule, x: np.ndarray, ft=np.float32) -> np.ndarray:
    one = ft(1)
    with np.errstate(over="ignore", invalid="ignore"):
        if rule.activation == "sigmoid":
            return one / (one + np.exp(-x))
        if rule.activation == "softmax":
            if x.size == 0:
                return x
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
    return x
