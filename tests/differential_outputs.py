"""The differential check's outputs (tests/differential.py, family "output"):
``read_output`` of a random output on every engine, against the reference.

A case draws an output (an activation image layout or a buffer tag, a
source dtype, 2-5 dims with channel tails), values that tie and saturate
(multiples of 1/8 at a spread of 1, 8 or 60: sigmoid saturates in float64
past 36.7), NaNs now and then, a dequantize (per tensor or per channel) for
integer outputs, an activation, and a result: the tensor (f32 or f16, any
dst tag), argmax, or a threshold with or without top_k.

What every engine must give exactly: argmax's indices; a threshold's
indices in their order (for none and sigmoid: selection and ranking by the
float32 x, ties to the lower index); the tensor's NaNs and shape. What may
differ by the documented bound (docs/outputs.md): the activated values
(sigmoid 2**-22, softmax (C + 4) * 2**-24, a dequantized value one float32
rounding, an f16 result one f16 rounding more). So that the exact parts are
well defined, the case's threshold and top_k fall in gaps of the float64
values wider than the bound (chosen from the values, the same for every
engine); with softmax a threshold's indices are compared as a set (the
order of two probabilities within the bound is the engine's).
"""
from __future__ import annotations

import hashlib
import math
import random

import numpy as np

import runtime
from runtime import ClayoutError
from runtime.algebra.catalog import NAMED

LAYOUTS = sorted(n for n, lay in NAMED.items() if lay.kind == "activation" and
                 lay.transform is None and n != "tflite_single_texture_2d")
TAGS = ("nchw", "nhwc", "nChw4c", "nChw8c", "chwn")
SOURCES = ("f32", "f16", "bf16", "s32", "s8", "u8")
CHANNELS = (1, 2, 3, 5, 17, 21)


class Answer(str):
    """An engine's answer: the exact part as its text (compared as a
    string), the activated values beside it (compared within ``bound``)."""
    values: np.ndarray | None = None
    bound: np.ndarray | None = None


def draw(rng: random.Random) -> dict:
    """The output and the rule of one case (plain data, JSON-ready)."""
    image = rng.random() < 0.6
    nd = 4 if image or rng.random() < 0.7 else rng.choice((2, 3, 5))
    dims = [rng.choice((1, 1, 2)), rng.choice(CHANNELS)] + \
        [rng.choice((1, 2, 3, 5, 7, 9)) for _ in range(nd - 2)]
    src_dtype = rng.choice(SOURCES if not image else ("f32", "f16", "s32", "s8", "u8"))
    where = {"layout": rng.choice(LAYOUTS)} if image else \
        {"tag": rng.choice(TAGS) if nd == 4 else "abcde"[:nd]}
    result = rng.choice(("tensor", "argmax", "threshold", "threshold"))
    return {"dims": dims, "where": where, "dtype": src_dtype,
            "activation": rng.choice((None, "sigmoid", "sigmoid", "softmax")),
            "dequantize": rng.choice(("tensor", "channel")) if src_dtype in ("s32", "s8", "u8")
            else None,
            "result": result, "quantile": rng.random(), "top_k": rng.choice((None, 1, 5, 40)),
            "out_dtype": rng.choice(("f32", "f32", "f16")),
            "dst": rng.choice((None, "nhwc")) if nd == 4 else None,
            "spread": rng.choice((1, 8, 60)), "nans": rng.random() < 0.2}


def values(spec: dict, seed: int) -> np.ndarray:
    """The output's logical values (its dims, its dtype): ties and saturation."""
    rng = np.random.default_rng(seed)
    dims, name = tuple(spec["dims"]), spec["dtype"]
    if name in ("s32", "s8", "u8"):
        lo, hi = {"s8": (-128, 127), "u8": (0, 255), "s32": (-40000, 40000)}[name]
        return rng.integers(lo, hi + 1, size=dims).astype({"s8": np.int8, "u8": np.uint8,
                                                             "s32": np.int32}[name])
    x = np.round(rng.standard_normal(dims) * spec["spread"] * 8) / 8
    if spec["nans"] and x.size:
        x.reshape(-1)[rng.integers(0, x.size, max(1, x.size // 50))] = np.nan
    import ml_dtypes
    return x.astype({"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[name])


def dequantize(spec: dict, seed: int):
    if spec["dequantize"] is None:
        return None
    rng = np.random.default_rng(seed + 1)
    c = spec["dims"][1]
    n = 1 if spec["dequantize"] == "tensor" else c
    scale = rng.choice((0.05, 0.5, 2.0, 1 / 3), n).astype(np.float32)
    zero = rng.integers(-20, 21, n) if spec["dtype"] != "u8" else rng.integers(0, 128, n)
    return (scale if n > 1 else float(scale[0]), zero if n > 1 else int(zero[0]))


def exact(spec: dict, q: np.ndarray, dq) -> tuple[np.ndarray, np.ndarray]:
    """(x as the engines compute it in float32, the activated values in float64)."""
    x32 = q.astype(np.float32)
    x64 = q.astype(np.float64)
    if dq is not None:
        scale, zero = (np.asarray(v).reshape((1, -1) + (1,) * (q.ndim - 2)) for v in dq)
        diff = q.astype(np.int64) - zero.astype(np.int64)
        x32 = diff.astype(np.float32) * scale.astype(np.float32)
        x64 = diff.astype(np.float64) * scale.astype(np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if spec["activation"] == "sigmoid":
            return x32, 1 / (1 + np.exp(-x64))
        if spec["activation"] == "softmax" and x64.size:
            e = np.exp(x64 - x64.max(axis=1, keepdims=True))
            return x32, e / e.sum(axis=1, keepdims=True)
    return x32, x64


def bound(spec: dict, p: np.ndarray) -> np.ndarray:
    """How far an engine's activated value may be from the float64 one."""
    a = np.abs(np.nan_to_num(p, nan=0.0, posinf=0.0, neginf=0.0))
    if spec["activation"] == "sigmoid":
        b = np.full(p.shape, 2.0 ** -22)
    elif spec["activation"] == "softmax":
        b = np.full(p.shape, (spec["dims"][1] + 4) * 2.0 ** -24)
    else:
        b = a * 2.0 ** -23 if spec["dequantize"] is not None else np.zeros(p.shape)
    if spec["result"] == "tensor" and spec["out_dtype"] == "f16":
        b = b + a * 2.0 ** -10 + 2.0 ** -24
    return b


def _gap(sorted_values: np.ndarray, at: int, width: float) -> float | None:
    """The middle of the gap nearest index ``at`` between consecutive sorted
    values wider than ``width``; None where there is none."""
    v = sorted_values
    for d in range(len(v)):
        for i in (at - d, at + d):
            if 0 < i < len(v) and v[i] - v[i - 1] > width:
                return float((v[i] + v[i - 1]) / 2)
    return None


def rule(spec: dict, q: np.ndarray, dq) -> dict:
    """read_output's keywords for the case: its threshold and top_k placed in
    gaps of the float64 values, the same for every engine."""
    kw = {"activation": spec["activation"], "dequantize": dq}
    if spec["result"] == "argmax":
        return {**kw, "argmax": True}
    if spec["result"] == "tensor":
        return {**kw, "dtype": spec["out_dtype"], "dst": spec["dst"]}
    _, p = exact(spec, q, dq)
    width = 4 * float(bound(spec, p).max(initial=0.0)) + 1e-12
    finite = np.sort(np.unique(p[np.isfinite(p)]))
    t = _gap(finite, int(spec["quantile"] * len(finite)), width) if finite.size else None
    kw["threshold"] = float("-inf") if t is None else t
    chosen = np.sort(p[p > kw["threshold"]])[::-1] if t is not None else \
        np.sort(p[~np.isnan(p)])[::-1]
    k = spec["top_k"]
    if k is not None and spec["activation"] == "softmax" and k < chosen.size and \
            not chosen[k - 1] - chosen[k] > width:
        k = None   # the k-th and the next within the bound: either may be kept
    if k is not None:
        kw["top_k"] = k
    elif chosen.size > 60000:
        kw["top_k"] = 100
    return kw


def source(spec: dict, q: np.ndarray):
    """(the output as a host array, its layout) as an engine would hand it over."""
    dims = tuple(spec["dims"])
    if "layout" in spec["where"]:
        layout = spec["where"]["layout"]
        return runtime.to_image(q, layout, dims=dims, engine="reference"), layout
    tag = spec["where"]["tag"]
    desc = runtime.MemoryDesc(dims, spec["dtype"], tag=tag)
    flat = runtime.reorder(q.reshape(-1), runtime.MemoryDesc(dims, spec["dtype"]), desc,
                           engine="reference")
    return flat.reshape(runtime.physical_shape(desc)), tag


def answer(spec: dict, seed: int, engine, out: bool) -> Answer:
    """What ``engine`` gives for the case."""
    q = values(spec, seed)
    dq = dequantize(spec, seed)
    try:
        arr, layout = source(spec, q)
        kw = rule(spec, q, dq)
        target = None
        if out and spec["result"] != "threshold":
            target = _junk(spec, kw, q)
        if type(engine).__name__ == "Prepared":   # differential.Prepared: runtime.prepare
            conv = runtime.prepare.read_output(layout, tuple(spec["dims"]), spec["dtype"],
                                               engine=engine.engine, **kw)
            got = conv(arr, out=target)
        else:
            got = runtime.read_output(arr, layout, tuple(spec["dims"]), engine=engine,
                                      out=target, **kw)
    except ClayoutError:
        return Answer("refused")
    except Exception as exc:  # noqa: BLE001 - every other exception is the bug reported
        return Answer(f"crash {type(exc).__name__}: {str(exc)[:200]}")
    if spec["result"] == "argmax":
        return Answer(_digest("argmax", got))
    _, p = exact(spec, q, dq)
    if spec["result"] == "tensor":
        v = np.asarray(got, np.float64)
        want = runtime.read_output(arr, layout, tuple(spec["dims"]), engine="reference", **kw)
        a = Answer(_digest("tensor", np.isnan(v)) + f" {v.shape}")
        a.values, a.bound = v, bound(spec, np.asarray(want, np.float64))
        return a
    idx, val = got
    if spec["activation"] == "softmax":
        order = np.lexsort(idx.T[::-1]) if idx.size else np.zeros(0, int)
        idx, val = idx[order], val[order]
    a = Answer(_digest("threshold", idx) + f" {len(idx)} selected")
    flat = np.ravel_multi_index(idx.T, p.shape) if idx.size else np.zeros(0, int)
    a.values, a.bound = val.astype(np.float64), bound(spec, p.reshape(-1)[flat])
    return a


def _junk(spec: dict, kw: dict, q: np.ndarray) -> np.ndarray:
    """An out= of the result's shape and dtype, every byte 0xA5."""
    dims = tuple(spec["dims"])
    if kw.get("argmax"):
        shape, dt = (dims[0],) + dims[2:], np.int32
    else:
        shape = runtime.physical_shape(runtime.MemoryDesc(dims, kw["dtype"], tag=kw["dst"])) \
            if kw["dst"] else dims
        dt = np.float16 if kw["dtype"] == "f16" else np.float32
    size = math.prod(shape) * np.dtype(dt).itemsize
    return np.frombuffer(b"\xa5" * size, dt).reshape(shape).copy()


def _digest(what: str, arr) -> str:
    arr = np.ascontiguousarray(arr)
    return f"bits {what} {arr.shape} " + hashlib.sha1(arr.view(np.uint8).tobytes()).hexdigest()[:16]


def agrees(got: Answer, want: Answer) -> bool:
    """``got`` is ``want``'s exact part, its values within the bound."""
    if str(got) != str(want):
        return False
    if want.values is None:
        return True
    if got.values is None or got.values.shape != want.values.shape:
        return False
    both = ~np.isnan(want.values)
    g, w = got.values[both], want.values[both]
    with np.errstate(invalid="ignore"):
        close = (g == w) | (np.abs(g - w) <= want.bound[both])   # infinities: equal or not
    return bool(np.isnan(got.values[~both]).all() and close.all())
