"""Output part of the benchmark: a network's output to the user's result,
``runtime.read_output`` in one pass against the chain users write today, in
one run.

The chain: ``runtime.from_image`` of the output image to a host NCHW f32
array on the same engine, then numpy (``np.argmax(x, 1)``; ``1 / (1 +
np.exp(-x))`` then ``np.argwhere(p > t)`` and, for top-k, an argsort;
softmax as exp(x - max) / sum). Cases:

* ``seg``: a segmentation output 1x21x512x512 f16 in ``in_out_channel`` ->
  argmax;
* ``det``: a detector's scores 1x16x80x80 f32 in ``in_out_channel``,
  sigmoid, threshold 0.5, top_k 100 (logits drawn around -4, as a
  detector's mostly background scores: about 0.4 % pass);
* ``cls``: a classifier's 1x1000 logits (an ``in_out_channel`` image),
  softmax, top_k 5;
* ``tiny``: a smoke test of the bench itself.

On the opencl engine the output is an image Memory already on the device
(what a network leaves there): the chain reads it back whole, read_output
reads back only the result. On the cpu engine both start from the host
image array. Timed in turn (bench_call.timed_in_turn); the ratio chain /
read_output per case and engine, against the goals (>= 3 for seg and det,
>= 1 for cls), and the bytes read back against the whole image's.
"""
from __future__ import annotations

import numpy as np

import runtime
from bench_call import timed_in_turn

CASES = {  # name: (dims, dtype, read_output arguments)
    "seg": ((1, 21, 512, 512), "f16", dict(argmax=True)),
    "det": ((1, 16, 80, 80), "f32", dict(activation="sigmoid", threshold=0.5, top_k=100)),
    "cls": ((1, 1000), "f32", dict(activation="softmax", threshold=-np.inf, top_k=5)),
    "tiny": ((1, 5, 8, 8), "f32", dict(argmax=True)),
}
GOALS = {"seg": 3.0, "det": 3.0, "cls": 1.0, "tiny": 0.0}
LAYOUT = "in_out_channel"


def chain(kw: dict):
    """What users write after from_image: numpy on the host NCHW f32 array."""
    def post(x: np.ndarray):
        if kw.get("argmax"):
            return np.argmax(x, axis=1)
        if kw.get("activation") == "sigmoid":
            p = 1 / (1 + np.exp(-x))
        else:
            e = np.exp(x - x.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
        idx = np.argwhere(p > kw["threshold"])
        vals = p[tuple(idx.T)]
        order = np.argsort(-vals, kind="stable")[:kw["top_k"]]
        return idx[order], vals[order]
    return post


def run(repeat: int = 9, inner: int = 3, opencl: bool = True, cases=("seg", "det", "cls"),
        out=print) -> dict:
    """The cases' rows, printed by ``out``; ``opencl``: True (the default
    OpenCL engine), False, or an OpenCL engine. Returns {(case, engine): chain / read_output}."""
    engines = ["cpu"]
    if opencl:
        from runtime.engine import get
        try:
            engines.append(get("opencl") if opencl is True else opencl)
        except runtime.ClayoutError as e:
            out(f"outputs: no OpenCL device ({e}); opencl rows left out")
    ratios = {}
    out("outputs: read_output in one pass against from_image to NCHW f32 + numpy, "
        f"medians of {repeat} rounds (ms)")
    rng = np.random.default_rng(0)
    for case in cases:
        dims, dtype, kw = CASES[case]
        x = rng.standard_normal(dims).astype(np.float16 if dtype == "f16" else np.float32)
        if case == "det":
            x = x * np.float32(1.5) - np.float32(4)
        img = runtime.to_image(x, LAYOUT, src="nchw" if len(dims) == 4 else "nc")
        post = chain(kw)
        fns, result_bytes = {}, 0
        for eng in engines:
            name = eng if isinstance(eng, str) else "opencl"
            src = img if isinstance(eng, str) else \
                runtime.Memory.image(LAYOUT, dims, dtype, engine=eng, data=img)
            host = (lambda s=src, e=eng: runtime.from_image(s, LAYOUT, dims, dtype="f32",
                                                            engine=e)) \
                if isinstance(eng, str) else (lambda s=src: runtime.from_image(
                    s.to_numpy(), LAYOUT, dims, dtype="f32", engine="cpu"))
            fns[f"chain {name}"] = lambda h=host: post(h())
            if isinstance(eng, str):
                fns[f"read_output {name}"] = lambda s=src, e=eng: runtime.read_output(
                    s, LAYOUT, dims, engine=e, **kw)
            else:
                fns[f"read_output {name}"] = lambda s=src: runtime.read_output(s, **kw)
        res = runtime.read_output(img, LAYOUT, dims, engine="cpu", **kw)
        result_bytes = sum(r.nbytes for r in res) if isinstance(res, tuple) else res.nbytes
        ms = timed_in_turn(fns, repeat, inner)
        for k, v in ms.items():
            out(f"{case:5s} {k:20s} {v:9.3f} ms")
        for eng in engines:
            name = eng if isinstance(eng, str) else "opencl"
            r = ms[f"chain {name}"] / ms[f"read_output {name}"]
            ratios[(case, name)] = r
            goal = GOALS[case]
            out(f"{case:5s} chain / read_output, {name}: {r:.2f} (goal >= {goal}: "
                f"{'met' if r >= goal else 'NOT met'})")
        out(f"{case:5s} read back: {result_bytes} bytes of the result against the image's "
            f"{img.nbytes} ({dims} {dtype})")
    return ratios
