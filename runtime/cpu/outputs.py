"""``read_output`` on the cpu engine's compiled path (templates/cpu_output.c.mako):
the output converted once into its rows, channels last (one compiled move in
its own dtype: an ``in_out_channel`` image's pixels are nearly that already),
then each row's x, argmax or activated values in C in bands of rows on the engine's
worker pool (runtime/cpu/pool.py).
A threshold compares in numpy over the rows (x for none and sigmoid, the
probabilities for softmax) and activates only what it selected. The float32
operations are runtime/algebra/output_math.py's (the C library's expf, not
numpy's: within the documented bound). Where the engine's library is not
loaded the numpy path (runtime/contract.py) does it all."""
from __future__ import annotations

import numpy as np

from . import geometry as g, native
from ..algebra.desc import MemoryDesc
from ..algebra.hostarray import physical_shape
from ..algebra.output import OutputRule, Pending, finish_selected
from ..algebra.tags import LETTERS
from .pool import serve

SMALL = 1 << 18    # at most this many elements: one band, no workers (waking them costs more)


def channels_last(dims) -> str:
    """The tag holding ``dims`` (N, C, ...) with the channels innermost."""
    letters = LETTERS[:len(dims)]
    return letters[0] + letters[2:] + letters[1]


def read(engine, side, data, rule: OutputRule, out=None) -> Pending | None:
    """The Pending result (finished), or None where the engine's library is not loaded."""
    run = planned(engine, side, rule)
    return None if run is None else run(data, out)


def planned(engine, side, rule: OutputRule):
    """``run(data, out=None) -> Pending``: read_output of ``side`` by
    ``rule`` on the engine's library, planned once (the move into rows, the
    C function and its numbers); None where the library is not loaded."""
    lib = engine.library
    if lib.dll is None or rule.channels == 0 or 0 in rule.dims:
        return None
    rows_desc = MemoryDesc(rule.dims, side.dtype, tag=channels_last(rule.dims))
    to_rows = engine.executor(side, rows_desc)
    n = rule.batch * rule.spatial
    C = rule.channels
    parts = 1 if n * C <= SMALL else 2 * g.THREADS
    scale = zero = None
    if rule.scale is not None:
        scale = np.asarray(rule.scale, np.float32)
        zero = np.asarray(rule.zero, np.int32)
    fn = lib.function("clayout_output")
    code = native.OUTPUT_DTYPES[side.dtype.name]
    numbers = (None if scale is None else scale.ctypes.data,
               None if zero is None else zero.ctypes.data)
    act = {None: 0, "sigmoid": 1, "softmax": 2}[rule.activation]
    tensor_src = MemoryDesc(rule.shape, "f32", tag=channels_last(rule.shape)) \
        if rule.result == "tensor" else None
    to_dst = engine.executor(tensor_src, rule.dst) if tensor_src is not None else None

    def call(rows, how: int, arg=None, values=None, _held=(scale, zero)):   # kept alive
        if parts > 1:
            serve(lib)
        return fn(rows.ctypes.data, code, how, n, C, *numbers,
                  None if arg is None else arg.ctypes.data,
                  None if values is None else values.ctypes.data, parts, g.THREADS)

    def run(data, out=None) -> Pending | None:
        rows = np.ascontiguousarray(to_rows(data))
        if rule.result == "argmax":
            arg = out if out is not None else np.empty(rule.argmax_dims, np.int32)
            return Pending.of(arg) if call(rows, 0, arg=arg) == 0 else None
        if rule.result == "tensor":
            values = np.empty(n * C, np.float32)
            call(rows, act, values=values)
            result = to_dst(values, out)
            return Pending.of(out if out is not None else
                              result.reshape(physical_shape(rule.dst)))
        keys = np.empty(n * C, np.float32)
        call(rows, 2 if rule.keys_are_p else 0, values=keys)   # x, or softmax's p
        with np.errstate(invalid="ignore"):
            at = np.flatnonzero(keys >= rule.bound)
        key = keys[at]
        value = key
        if rule.activation == "sigmoid":
            with np.errstate(over="ignore"):
                value = np.float32(1) / (np.float32(1) + np.exp(-key))
        r, c = np.divmod(at, C)
        b, s = np.divmod(r, rule.spatial)
        flat = (b * C + c) * rule.spatial + s          # the logical (row-major) index
        return Pending.of(finish_selected(rule, flat, value, key))
    return run
