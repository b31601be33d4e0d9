"""A network output's read-back rule (docs/outputs.md): what
``runtime.read_output`` computes from the output's logical values, as one
frozen record every engine reads.

The output has logical dims (N, C, ...) and is read in three stages:

1. **x**, the activation's input, in float32: the stored value (an integer
   converted once, round to nearest even), or with ``dequantize`` =
   (scale, zero_point) ``float32(q - zero_point) * scale`` (the difference
   exact in integers, one rounding to float32, one product; per tensor or
   one pair per channel, axis 1);
2. **the activation**: none, ``sigmoid`` 1 / (1 + exp(-x)), or ``softmax``
   over axis 1 (the channel's max subtracted first), in float32;
3. **the result**: the tensor itself (placed in a buffer tag, f32 or f16);
   ``argmax`` over axis 1 (int32, ties and NaNs as numpy.argmax: the first);
   or ``threshold`` t: the elements whose activated value exceeds t, as
   (indices (K, rank) int32, values (K,) float32) in row-major order of the
   logical index, or with ``top_k`` the k largest by descending value (ties
   to the lower flat index).

Exact selections: argmax compares x (sigmoid and softmax keep the channels'
order); a threshold without activation compares x > t, with sigmoid the
exact sigmoid of x > t, that is x > ln(t / (1 - t)): both are a float32
comparison key >= b with b the least float32 above the bound
(``OutputRule.bound``), so every engine selects the same elements. top_k orders by x there too. With
softmax the computed float32 probabilities are compared and ordered, so
engines may differ on values within the documented bound of t.
"""
from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from . import dtypes
from .desc import MemoryDesc
from .tags import close_names, did_you_mean
from ..errors import ClayoutError

ACTIVATIONS = ("sigmoid", "softmax")
SOURCE_DTYPES = ("f32", "f16", "bf16", "s32", "s8", "u8")
RESULT_DTYPES = ("f32", "f16")
CAP = 65536   # elements a threshold may select without top_k


@dataclass(frozen=True)
class OutputRule:
    """What ``read_output`` computes (module docstring). ``dims`` are the
    output side's (what the engines read), ``shape`` the caller's (the same
    N, C and elements: a layout may add trailing 1s, (N, C) read as (N, C,
    1, 1)); results are shaped by it. ``scale`` and
    ``zero`` hold one float32 value / integer per channel (None: no
    dequantize); ``result`` is "tensor", "argmax" or "threshold"; ``dst``
    the tensor result's buffer (its tag and dtype), else None."""
    dims: tuple[int, ...]
    shape: tuple[int, ...]
    src: dtypes.DType
    scale: tuple[float, ...] | None
    zero: tuple[int, ...] | None
    activation: str | None
    result: str
    threshold: float | None
    top_k: int | None
    dst: MemoryDesc | None

    @property
    def batch(self) -> int:
        return self.dims[0]

    @property
    def channels(self) -> int:
        return self.dims[1]

    @property
    def spatial(self) -> int:
        """The elements of one channel of one batch item: the product of dims[2:]."""
        return math.prod(self.dims[2:])

    @property
    def argmax_dims(self) -> tuple[int, ...]:
        return (self.shape[0],) + self.shape[2:]

    @property
    def keys_are_p(self) -> bool:
        """Whether a threshold compares and orders the activated values
        (softmax) rather than x (none, sigmoid)."""
        return self.activation == "softmax"

    @property
    def bound(self) -> np.float32:
        """The float32 ``b`` with key >= b exactly where a threshold selects
        (module docstring; NaN: nothing, -inf: every value but NaN)."""
        t = self.threshold
        if self.activation == "sigmoid":
            if t < 0.0:
                return np.float32(-np.inf)      # sigmoid(x) >= 0 > t for every x but NaN
            if t >= 1.0:
                return np.float32(np.nan)       # sigmoid(x) <= 1 for every x
            t = -math.inf if t == 0.0 else math.log(t / (1.0 - t))
        return above(t)


def above(t: float) -> np.float32:
    """The least float32 above ``t`` (x >= it iff x > t, for float32 x); NaN
    for t = +inf (no float32 is above it)."""
    if t == math.inf:
        return np.float32(np.nan)
    with np.errstate(over="ignore"):
        b = np.float32(t)
    if float(b) <= t:
        b = np.nextafter(b, np.float32(np.inf))
    return b


def output_rule(dims, src_dtype, dequantize=None, activation=None, argmax=False,
                threshold=None, top_k=None, dst=None, dtype="f32", shape=None) -> OutputRule:
    """The rule of one call, every argument checked (one ClayoutError naming
    what is allowed)."""
    dims = _dims(dims)
    shape = dims if shape is None else _dims(shape)
    if shape[:2] != dims[:2] or math.prod(shape) != math.prod(dims):
        raise ClayoutError(f"read_output: dims {shape} do not fit the output's {dims}")
    src = dtypes.dtype(src_dtype)
    if src.name not in SOURCE_DTYPES:
        raise ClayoutError(f"read_output: a {src.name} output; allowed: {', '.join(SOURCE_DTYPES)}")
    if activation is not None:
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            near = close_names(str(activation), ACTIVATIONS) if isinstance(activation, str) else []
            raise ClayoutError(f"read_output: activation {activation!r}; allowed: None, "
                               f"{', '.join(map(repr, ACTIVATIONS))}"
                               + (f" ({did_you_mean(near)})" if near else ""))
    if not isinstance(argmax, bool):
        raise ClayoutError(f"read_output: argmax={argmax!r}; allowed: True or False")
    if argmax and threshold is not None:
        raise ClayoutError("read_output: argmax and threshold are two results; ask for one "
                           "(argmax=True, or threshold=t with an optional top_k)")
    if top_k is not None:
        if threshold is None:
            raise ClayoutError("read_output: top_k goes with threshold= (the k largest values "
                               "above it; threshold=float('-inf') for the k largest of all)")
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1 \
                or top_k > CAP:
            raise ClayoutError(f"read_output: top_k={top_k!r}; allowed: an integer 1..{CAP}")
        top_k = int(top_k)
    if threshold is not None:
        if isinstance(threshold, (str, bytes, bool, np.bool_)) or \
                not isinstance(threshold, (int, float, np.integer, np.floating)):
            raise ClayoutError(f"read_output: threshold={threshold!r}; allowed: a number "
                               "(an int or a float)")
        threshold = float(threshold)
        if math.isnan(threshold):
            raise ClayoutError("read_output: threshold is NaN; allowed: a number "
                               "(-inf selects every value but NaN)")
    if (argmax or activation == "softmax") and dims[1] == 0:
        raise ClayoutError(f"read_output: {'argmax' if argmax else 'softmax'} over axis 1 of "
                           f"dims {dims}, which has no channels")
    scale, zero = _dequantize(dequantize, src, dims[1])
    result = "argmax" if argmax else "threshold" if threshold is not None else "tensor"
    desc = None
    if result == "tensor":
        out = dtypes.dtype(dtype)
        if out.name not in RESULT_DTYPES:
            raise ClayoutError(f"read_output: dtype {out.name}; allowed: "
                               f"{', '.join(RESULT_DTYPES)} (the values are float32)")
        try:
            desc = MemoryDesc(shape, out) if dst is None else MemoryDesc(shape, out, tag=dst)
        except ClayoutError as e:
            raise ClayoutError(f"read_output: dst={dst!r} for dims {shape}: {e}") from None
    if math.prod(dims) >= 2 ** 31:
        raise ClayoutError(f"read_output: dims {dims} hold {math.prod(dims)} elements; at most "
                           "2**31 - 1 (indices are int32)")
    return OutputRule(dims, shape, src, scale, zero, activation, result, threshold, top_k, desc)


def _dims(dims) -> tuple[int, ...]:
    try:
        out = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        raise ClayoutError(f"read_output: dims {dims!r}; allowed: a tuple of ints, "
                           "(N, C, ...)") from None
    if len(out) < 2 or any(d < 0 for d in out):
        raise ClayoutError(f"read_output: dims {out}; allowed: (N, C, ...) of 2 dims or more, "
                           "none negative (axis 1 holds the channels)")
    return out


def _dequantize(dequantize, src: dtypes.DType, channels: int):
    if dequantize is None:
        return None, None
    if src.is_float:
        raise ClayoutError(f"read_output: dequantize= on a {src.name} output; it applies to "
                           "integer outputs (s8, u8, s32): a float output is read as it is")
    try:
        scale, zero = dequantize
    except (TypeError, ValueError):
        raise ClayoutError("read_output: dequantize=(scale, zero_point), each a number or one "
                           f"per channel ({channels})") from None
    scale = _per_channel(scale, channels, "scale")
    zero = _per_channel(zero, channels, "zero_point")
    if not all(math.isfinite(s) for s in scale):
        raise ClayoutError("read_output: dequantize's scale must be finite")
    if any(z != int(z) for z in zero):
        raise ClayoutError(f"read_output: dequantize's zero_point {zero} must be integers")
    return tuple(float(np.float32(s)) for s in scale), tuple(int(z) for z in zero)


def _per_channel(value, channels: int, name: str) -> tuple[float, ...]:
    arr = np.asarray(value, dtype=np.float64).reshape(-1) if not isinstance(value, str) else None
    if arr is None or arr.size not in (1, channels):
        raise ClayoutError(f"read_output: dequantize's {name} {value!r}; allowed: one number "
                           f"or {channels} (one per channel, axis 1)")
    return tuple(float(v) for v in np.broadcast_to(arr, (channels,)))


def check_count(rule: OutputRule, count: int) -> None:
    """Refuse a threshold without top_k that selects more than CAP elements."""
    if rule.top_k is None and count > CAP:
        raise ClayoutError(f"read_output: {count} values exceed threshold {rule.threshold}, "
                           f"over the cap of {CAP}; raise the threshold or pass top_k")


def finish_selected(rule: OutputRule, flat: np.ndarray, values: np.ndarray,
                    keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A threshold's result from the selected elements (flat logical index,
    activated value, order key), in any order: sorted by index, or the top_k
    by descending key, ties to the lower index; more than CAP without top_k
    is an error."""
    check_count(rule, flat.size)
    if rule.top_k is None:
        order = np.argsort(flat, kind="stable")
    else:
        order = _top(flat, keys, rule.top_k)
    flat = flat[order]
    idx = np.stack(np.unravel_index(flat.astype(np.int64), rule.shape), axis=1) if flat.size \
        else np.zeros((0, len(rule.shape)), np.int64)
    return idx.astype(np.int32), values[order].astype(np.float32)


def _top(flat: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` largest ``keys``, by descending key, ties
    to the lower ``flat`` index (no key is NaN: a threshold selects none).
    Past a few times k, the candidates are the keys at or above the k-th
    largest (every one equal to it kept, so a tie at the boundary still goes
    to the lower index) and only they are sorted."""
    n = keys.size
    if n > 4 * k + 64:
        kth = np.partition(keys, n - k)[n - k]          # the k-th largest key
        chosen = np.flatnonzero(keys >= kth)
        inner = np.lexsort((flat[chosen], -keys[chosen].astype(np.float64)))[:k]
        return chosen[inner]
    return np.lexsort((flat, -keys.astype(np.float64)))[:k]


class Pending:
    """A result on its way (``read_output(..., wait=False)``): ``done()``
    says whether the device has finished (without waiting), ``result()``
    waits for it and gives the result (computed once; safe from many
    threads). ``event``: the device event of the call's last command (a
    pyopencl Event to put in another command's wait list), None where the
    work was done on the host."""

    def __init__(self, finish, ready=lambda: True, event=None):
        self._finish, self._ready = finish, ready
        self.event = event
        self._lock = threading.Lock()
        self._value = self._error = None
        self._finished = False

    @classmethod
    def of(cls, value, event=None) -> "Pending":
        """A result already here (``event``: the device command that made
        it, where one did)."""
        return cls(lambda: value, event=event)

    def done(self) -> bool:
        return self._finished or bool(self._ready())

    def result(self):
        with self._lock:
            if not self._finished:
                try:
                    self._value = self._finish()
                except BaseException as e:   # kept: every later result() raises it again
                    self._error = e
                self._finished = True
                self._finish = self._ready = None
        if self._error is not None:
            raise self._error
        return self._value

    def map(self, fn) -> "Pending":
        """A Pending of ``fn(result)`` (the same device work)."""
        inner = self
        return Pending(lambda: fn(inner.result()), self.done, self.event)

    def then(self, release) -> "Pending":
        """A Pending of the same result that calls ``release()`` once that
        result is finished (or has failed), or when it is dropped unfinished
        (whatever the device still does with what ``release`` gives back is
        ordered before its next use by the memory's events)."""
        inner = self

        def finish():
            try:
                return inner.result()
            finally:
                released()
        pending = Pending(finish, self.done, self.event)
        released = weakref.finalize(pending, release)
        return pending

    def __repr__(self) -> str:
        return f"<clayout Pending {'done' if self.done() else 'running'}>"
