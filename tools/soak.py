"""A soak of one engine: threads of mixed calls on random shapes for a
while, the process's resident memory and the call rate reported as it goes.

Each of ``--threads`` threads (4) loops over the kinds of call an inference
engine makes: ``to_image``, ``from_image`` and ``reorder`` on host arrays,
``from_frame`` with a moving crop, ``read_output`` (argmax, a threshold, a
tensor result) and a Memory conversion on the device, each with its tags,
layout and result drawn at random from the same few, on a shape drawn at
random (``--fixed``: the same shape every time, the baseline the caches
are measured against: the same kinds of call, only the shapes differ).
Every ``--every`` seconds it prints one line: the time, the resident memory
(MiB), the calls per second since the last line, the programs built (on
calling threads and in the background), the programs the cache holds (and
what they weigh) and the entries of the largest caches. At the end: the
first and last minute's call rates, the peak memory and the memory once the
caches were full (the median of the last third).

Run: ``python tools/soak.py --minutes 3`` (``--discrete``: the OpenCL engine
with ``host_in_place=False``, the path a discrete GPU takes; ``--engine
cpu`` for the cpu engine). It is not part of the test suite: it takes
minutes and measures the machine.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time

import numpy as np

import runtime
from runtime import MemoryDesc, cache

LAYOUTS = ("in_out_channel", "in_out_height", "in_out_width", "conv2d_filter")
TAGS = ("nchw", "nhwc", "nChw8c", "nChw16c", "chwn")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _dims(rng: random.Random, fixed: bool, big: bool = False) -> tuple[int, int, int, int]:
    if fixed:
        return (1, 16, 24, 24) if big else (1, 8, 12, 10)
    top = 96 if big else 40
    return (rng.randint(1, 2), rng.randint(1, 40), rng.randint(1, top), rng.randint(1, top))


def calls(engine, fixed: bool):
    """The kinds of call, each a function of a random generator."""
    frame = np.random.default_rng(0).integers(0, 256, (720 * 3 // 2, 1280), np.uint8)

    def to_image(rng):
        dims = _dims(rng, fixed)
        x = np.full(dims, rng.random(), np.float32)
        runtime.to_image(x, rng.choice(LAYOUTS[:3]), engine=engine)

    def from_image(rng):
        dims = _dims(rng, fixed)
        layout = rng.choice(LAYOUTS)
        img = np.zeros(runtime.image_layout(layout).array_shape(dims), np.float32)
        runtime.from_image(img, layout, dims, dst=rng.choice(TAGS[:2]), engine=engine)

    def reorder(rng):
        dims = _dims(rng, fixed)
        a, b = rng.sample(TAGS, 2)
        src = MemoryDesc(dims, tag=a)
        x = np.ones(src.span, np.float32)
        runtime.reorder(x, src, MemoryDesc(dims, tag=b), engine=engine)

    def from_frame(rng):
        size = (96, 96) if fixed else (rng.randint(16, 160), rng.randint(16, 160))
        x0, y0 = rng.randrange(0, 600, 2), rng.randrange(0, 300, 2)
        runtime.from_frame(frame, "nchw", format="nv21", size=size,
                           crop=(x0, y0, 640, 400), engine=engine)

    def read_output(rng):
        dims = _dims(rng, fixed)
        x = np.full(dims, rng.random(), np.float32)
        kind = rng.randrange(3)
        if kind == 0:
            runtime.read_output(x, "nchw", dims, argmax=True, engine=engine)
        elif kind == 1:
            runtime.read_output(x, "nchw", dims, activation="sigmoid", threshold=0.6,
                                top_k=10, engine=engine)
        else:
            runtime.read_output(x, "nchw", dims, activation="softmax", dst="nhwc",
                                engine=engine)

    def memory(rng):
        if isinstance(engine, str):
            return
        dims = _dims(rng, fixed)
        src = runtime.Memory(MemoryDesc(dims), engine)
        img = runtime.to_image(src, rng.choice(LAYOUTS[:3]))
        img.to_numpy()
    return [to_image, from_image, reorder, from_frame, read_output, memory]


def soak(engine, minutes: float, threads: int, fixed: bool, every: float, out=print) -> dict:
    """Run the soak; returns {"samples": [(t, rss, rate)], "errors": [...]}."""
    kinds = calls(engine, fixed)
    stop = threading.Event()
    counts = [0] * threads
    errors: list[str] = []

    def work(t: int) -> None:
        rng = random.Random(t)
        while not stop.is_set():
            fn = kinds[rng.randrange(len(kinds))]
            try:
                fn(rng)
            except Exception as exc:  # noqa: BLE001 - reported, the soak goes on
                errors.append(f"{fn.__name__}: {type(exc).__name__}: {exc}")
                if len(errors) > 20:
                    stop.set()
            counts[t] += 1

    from runtime.opencl import programs
    workers = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
    start = time.monotonic()
    for w in workers:
        w.start()
    samples, last_n, last_t = [], 0, start
    out(f"soak: {threads} threads, {'fixed' if fixed else 'random'} shapes, {minutes} min on "
        f"{engine if isinstance(engine, str) else engine.device.describe()}")
    out("    s   RSS MiB  calls/s  built (calling/background)  programs held  largest caches")
    end = start + 60 * minutes
    while time.monotonic() < end and not stop.is_set():
        time.sleep(min(every, max(0.0, end - time.monotonic())))
        now, n = time.monotonic(), sum(counts)
        rate = (n - last_n) / (now - last_t)
        last_n, last_t = n, now
        rss = rss_mib()
        samples.append((now - start, rss, rate))
        calling = programs.STATS["builds"] - programs.STATS["builds_in_background"]
        big = sorted(cache.REGISTRY.values(), key=len, reverse=True)[:2]
        held = programs.PROGRAMS
        held_mib = getattr(held, "bytes", 0) / 2**20
        out(f"{now - start:5.0f} {rss:9.1f} {rate:8.1f}  {calling:6d}/"
            f"{programs.STATS['builds_in_background']:<6d}  {len(held):4d} {held_mib:6.0f} MiB  "
            + ", ".join(f"{c.name} {len(c)}" for c in big))
    stop.set()
    for w in workers:
        w.join()
    return {"samples": samples, "errors": errors, "calls": sum(counts)}


def summary(result: dict, out=print) -> None:
    samples = result["samples"]
    if not samples:
        return
    first = [r for t, _, r in samples if t <= samples[0][0] + 60]
    last = [r for t, _, r in samples if t >= samples[-1][0] - 60]
    full = [m for _, m, _ in samples[len(samples) * 2 // 3:]]
    out(f"calls: {result['calls']}; errors: {len(result['errors'])}")
    for e in result["errors"][:5]:
        out(f"  {e}")
    a, b = statistics.mean(first), statistics.mean(last)
    out(f"rate: first minute {a:.1f}/s, last minute {b:.1f}/s (last / first {b / a:.2f})")
    out(f"memory: peak {max(m for _, m, _ in samples):.1f} MiB, caches full (median of the "
        f"last third) {statistics.median(full):.1f} MiB")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between lines")
    ap.add_argument("--fixed", action="store_true", help="the same shapes every call")
    ap.add_argument("--engine", default="opencl", choices=("opencl", "cpu"))
    ap.add_argument("--discrete", action="store_true",
                    help="the OpenCL engine with host_in_place=False")
    args = ap.parse_args(argv)
    engine = args.engine
    if engine == "opencl":
        from runtime.opencl.engine import OpenCLEngine, default
        engine = OpenCLEngine(queue=default().queue, host_in_place=False) if args.discrete \
            else default()
    result = soak(engine, args.minutes, args.threads, args.fixed, args.every)
    summary(result)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
