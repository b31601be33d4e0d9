"""What the benchmarks (the cpu rows of tools/bench.py, tools/bench_opencl.py,
tools/bench_host.py) share: the sizes and cases they time, the public call
they time on a host array, the timer that takes several calls' rounds in
turn, and the geometric mean. A module of its own below them all, so that no
benchmark imports another.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from runtime import ImageDesc, api, image_layout
from runtime.algebra import hostarray
from runtime.algebra.desc import MemoryDesc

SIZES = {"224": (1, 64, 224, 224), "512": (1, 64, 512, 512),
         "C17": (1, 17, 224, 224), "C3": (1, 3, 224, 224),
         "C17x512": (1, 17, 512, 512), "C3x512": (1, 3, 512, 512),
         "tiny": (2, 5, 7, 9), "tiny64": (2, 64, 3, 5)}  # smoke tests of the bench itself
CASES = (  # (name, src tag, dst tag or image layout)
    ("NHWC->NCHW", "nhwc", "nchw"),
    ("NCHW->NHWC", "nchw", "nhwc"),
    ("NCHW->nChw16c", "nchw", "nChw16c"),
    ("NHWC->in_out_channel", "nhwc", "image:in_out_channel"),
    ("NCHW->in_out_channel", "nchw", "image:in_out_channel"),
    ("OIHW->conv2d_filter", "oihw", "image:conv2d_filter"),
)


def dst_desc(dst: str, dims, dtype="f32") -> MemoryDesc:
    if dst.startswith("image:"):
        return ImageDesc(image_layout(dst[6:]), dims, dtype).desc
    return MemoryDesc(dims, dtype, tag=dst)



def public_call(x: np.ndarray, src: MemoryDesc, target, engine, empty=np.empty):
    """A call of runtime.reorder (``target`` a MemoryDesc) or runtime.to_image
    (``target`` an ImageDesc, or an ImageLayout) on host array ``x`` (src's
    physical elements) writing into one reused ``out=`` array, made by
    ``empty(shape, dtype)`` (runtime.empty_pinned for a pinned one)."""
    if isinstance(target, MemoryDesc):
        out = empty(target.span, target.dtype.np)
        return lambda: api.reorder(x, src, target, engine=engine, out=out)
    layout = getattr(target, "layout", target)
    tag = next(t for t in ("nchw", "nhwc", "oihw") if MemoryDesc(src.dims, tag=t) == src)
    arr = x.reshape(hostarray.physical_shape(src))
    out = empty(layout.array_shape(src.dims), src.dtype.np)
    return lambda: api.to_image(arr, layout, src=tag, engine=engine, out=out)


def timed_in_turn(fns: dict, repeat: int, inner: int = 1, warm: int = 1,
                  after: dict | None = None) -> dict:
    """Median ms per call of each of ``fns`` (name -> call) over ``repeat``
    rounds of ``inner`` calls, after ``warm`` calls of each. The rounds are
    taken in turn (one round of each, ``repeat`` times): a drift of the
    machine's memory speed during the measurement then reaches a copy limit
    and the conversions timed against it alike, and their ratios stay steady.
    ``after``: name -> a call made, untimed, after each of that name's rounds."""
    for fn in fns.values():
        for _ in range(warm):
            fn()
    rounds = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            rounds[k].append((time.perf_counter() - start) / inner)
            if after and k in after:
                after[k]()
    return {k: statistics.median(v) * 1e3 for k, v in rounds.items()}


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def busy(seconds: float) -> None:
    """Keep this thread busy for ``seconds`` (not asleep: the CPU stays up):
    a peer's OpenMP threads, which spin for a while after its calls, stop
    spinning meanwhile and leave the cores to the next round."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
