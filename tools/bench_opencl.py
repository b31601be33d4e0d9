"""OpenCL part of the benchmark, all in one run on one device.

``run(sizes, report, engine=None, repeats=15) -> list[dict]``: for each NCHW
size, each case below is timed by wall clock until the queue is idle (median
of ``repeats`` after warm-up) and compared with the device's own copy of the
same bytes, timed in turn with it: ``clEnqueueCopyBuffer`` for buffer
targets, ``clEnqueueCopyBufferToImage`` for image targets. A generic kernel with
run-time index arguments (dims and strides as kernel arguments, one work item
per element or pixel, in the style of MACE's buffer_to_image kernels; written
here) runs the same case, to show what baking the constants buys. ``ours``
is the steady state (a shape under 16 MiB converted again and again gets its
baked program after 8 calls); "first calls" is the same conversion on its
family's generic program, what a shape converted once (a weight) runs (at 16
MiB and more the first call is baked too). The copy limit, ours, first calls,
the generic peer and the host call are timed in turn, round by round, so each
comparison between them holds within one round. Each row
also gives the first call's cost (render + build + launch, wall clock, with
PoCL's disk cache as found), a cached call's cost (host API, wall clock),
and the public call on host arrays writing into a reused ``out=`` array
(wall clock, against the same copy limit).

Each case runs in both kernel families, timed in the same rounds: direct
(one work item a vector or pixel) and tiled (local-memory tiles, what a
GPU's plan takes for a move that transposes; a move that does not
transpose is direct in both). ``family`` is the one the device's plan
chooses and ``ours`` its time; the other family is printed beside it.

``report`` is called with each output line (a markdown table). Rows are
returned as dicts: case, size, bytes, family, ms, direct_ms, tiled_ms, direct_pct,
tiled_pct, unbaked_ms, limit_ms, pct_of_limit, generic_ms, speedup_vs_generic,
first_call_ms, cached_call_ms, host_out_ms, host_out_pct, model_pct (the access
model's prediction for a GPU record's plan of the case, tools/bench_predict.py).

Called by tools/bench.py (``python tools/bench.py``, ``clayout bench``).
"""
from __future__ import annotations

import os
import statistics
import time

import numpy as np
import pyopencl as cl

import bench_predict
from bench_call import geomean, public_call, timed_in_turn
from runtime.algebra.desc import MemoryDesc
from runtime import ImageDesc, image_layout
from runtime.opencl import images
from runtime.opencl.device import EngineOptions
from runtime.opencl.moves import family_of, move_plan
from runtime.opencl import programs
from runtime.opencl.engine import OpenCLEngine, default

SIZES = ((1, 64, 224, 224), (1, 64, 512, 512), (1, 17, 512, 512))

GENERIC = r"""
// One work item per logical element / pixel; every size and stride is a
// run-time argument (MACE-style). Blocked channels: offset of c is
// (c / B) * sC + (c % B) * sB.
__kernel void generic_reorder(__global const float *src, __global float *dst,
                              int C, int H, int W,
                              int sN, int sC, int sH, int sW, int sB, int B,
                              int dN, int dC, int dH, int dW, int dB, int DB)
{
    int w = get_global_id(0), h = get_global_id(1), nc = get_global_id(2);
    if (w >= W || h >= H) return;
    int n = nc / C, c = nc % C;
    dst[n * dN + (c / DB) * dC + h * dH + w * dW + (c % DB) * dB] =
        src[n * sN + (c / B) * sC + h * sH + w * sW + (c % B) * sB];
}

__kernel void generic_in_out_channel(__global const float *src, __write_only image2d_t img,
                                     int C, int H, int W, int sN, int sC, int sH, int sW)
{
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= get_image_width(img) || y >= get_image_height(img)) return;   // the rounded range
    int w = x % W, cb = x / W, n = y / H, h = y % H;
    if (cb * 4 >= C) return;
    int base = n * sN + h * sH + w * sW, c = cb * 4;
    float4 v = (float4)(src[base + c * sC],
                        c + 1 < C ? src[base + (c + 1) * sC] : 0.0f,
                        c + 2 < C ? src[base + (c + 2) * sC] : 0.0f,
                        c + 3 < C ? src[base + (c + 3) * sC] : 0.0f);
    write_imagef(img, (int2)(x, y), v);
}

__kernel void generic_conv2d_filter(__global const float *src, __write_only image2d_t img,
                                    int O, int I, int H, int W)
{
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= get_image_width(img) || y >= get_image_height(img)) return;   // the rounded range
    int hw = H * W, ob = y / hw, h = (y % hw) / W, w = y % W, i = x;
    if (i >= I) return;
    float v[4];
    for (int k = 0; k < 4; ++k) {
        int o = ob * 4 + k;
        v[k] = o < O ? src[((o * I + i) * H + h) * W + w] : 0.0f;
    }
    write_imagef(img, (int2)(x, y), (float4)(v[0], v[1], v[2], v[3]));
}
"""


def _together_ms(queue, launches: dict, repeats: int) -> dict:
    """Median wall-clock ms of each ``launch()`` until the queue is idle, the
    launches' rounds taken in turn (runtime.bench_call.timed_in_turn). Wall
    clock because a conversion may be several commands (a kernel, then a
    buffer->image copy), so one event's profile would miss part of it. The
    warm-up passes the point where a shape converted again and again gets its
    baked program (the steady state of a per-frame conversion)."""
    def until_idle(launch):
        def call():
            launch()
            queue.finish()
        return call
    return timed_in_turn({k: until_idle(f) for k, f in launches.items()}, repeats,
                         warm=EngineOptions.read().specialize_after + 3)


def _pow2_local(sizes, total=256):
    l0 = min(total, 1 << max(0, (sizes[0] - 1).bit_length()))
    return (l0, max(1, min(total // l0, sizes[1])), 1)[:len(sizes)]


def _rounded(sizes, local):
    return tuple(-(-s // l) * l for s, l in zip(sizes, local))


def _blocked(desc: MemoryDesc):
    """(sN, sC, sH, sW, sB, B) of a 4-D desc with at most one block (on C)."""
    blk = desc.inner_blks[0] if desc.inner_blks else 1
    s = desc.strides
    return (s[0], s[1], s[2], s[3], 1 if blk > 1 else 0, blk)


class _Bench:
    def __init__(self, engine: OpenCLEngine | None, repeats: int):
        base = engine or default()
        queue = cl.CommandQueue(base.context,
                                properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.eng = OpenCLEngine(queue=queue)
        # both families on the same queue, the device's choice among them
        self.families = {"direct": OpenCLEngine(queue=queue, tiled=False),
                         "tiled": OpenCLEngine(queue=queue, tiled=True)}
        self.chosen = "tiled" if family_of(self.eng.device)[0] else "direct"
        # the first calls of a shape: its family's generic program (an engine reads
        # CLAYOUT_SPECIALIZE_AFTER once, when it is made; 0: never baked by use)
        saved = os.environ.get("CLAYOUT_SPECIALIZE_AFTER")
        os.environ["CLAYOUT_SPECIALIZE_AFTER"] = "0"
        try:
            self.first_calls = OpenCLEngine(queue=queue)
        finally:
            if saved is None:
                del os.environ["CLAYOUT_SPECIALIZE_AFTER"]
            else:
                os.environ["CLAYOUT_SPECIALIZE_AFTER"] = saved
        self.ctx, self.q = self.eng.context, queue
        self.repeats = repeats
        program = programs.build(self.ctx, GENERIC)
        self.generic = {name: cl.Kernel(program, name) for name in (
            "generic_reorder", "generic_in_out_channel", "generic_conv2d_filter")}

    def _buffer(self, nbytes, fill=None):
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, nbytes)
        cl.enqueue_fill_buffer(self.q, buf, np.float32(1.5), 0, nbytes)
        return buf

    def copy_launch(self, nbytes):
        """The copy limit of a buffer target: the device copying its bytes."""
        a, b = self._buffer(nbytes), self._buffer(nbytes)
        return lambda: cl.enqueue_copy(self.q, b, a)

    def new_image(self, image: ImageDesc):
        return images.create(self.ctx, image, self.eng.limits)

    def copy_to_image_launch(self, image: ImageDesc):
        """The copy limit of an image target: a buffer of its bytes copied in."""
        buf = self._buffer(image.nbytes)
        img = self.new_image(image)
        return lambda: cl.enqueue_copy(self.q, img, buf, offset=0, origin=images.origin(image),
                                       region=images.region(image))

    def first_and_cached(self, call):
        programs.clear_cache()
        t0 = time.perf_counter()
        call()
        first = (time.perf_counter() - t0) * 1e3
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
        return first, statistics.median(times)

    def host_out_call(self, src: MemoryDesc, target):
        """The public call on a host array into a reused out= array
        (runtime.bench_call.public_call)."""
        return public_call(np.ones(src.span, np.float32), src, target, self.eng)

    def steady(self, limit, ours, unbaked, peer, host_out) -> dict:
        """Medians of the copy limit, the conversion's steady state in each
        kernel family (``ours``: {family: launch}), its generic program, the
        MACE-style peer kernel and the public call on host arrays, their
        rounds in turn (so that the comparisons between them hold within
        each round)."""
        return _together_ms(self.q, {"limit": limit, **ours, "unbaked": unbaked,
                                     "peer": peer, "host_out": host_out}, self.repeats)

    def family_of(self, src, dst) -> str:
        """The family the device's plan runs this move in."""
        return "tiled" if move_plan(src, dst, self.eng.device).kernel.tiled else "direct"

    def reorder(self, src: MemoryDesc, dst: MemoryDesc):
        sbuf, dbuf = self._buffer(src.size), self._buffer(dst.size)
        ours = {f: lambda e=e: e.launcher.enqueue(src, sbuf, dst, dbuf) for f, e in self.families.items()}
        unbaked = lambda: self.first_calls.launcher.enqueue(src, sbuf, dst, dbuf)   # noqa: E731
        n, c, h, w = src.dims
        sizes = (w, h, n * c)
        local = (min(256, 1 << (w - 1).bit_length()), 1, 1)
        args = [np.int32(v) for v in (c, h, w, *_blocked(src), *_blocked(dst))]
        knl = self.generic["generic_reorder"]
        generic = lambda: knl(self.q, _rounded(sizes, local), local,   # noqa: E731
                              sbuf, dbuf, *args)
        host = np.ones(src.span, np.float32)
        first, cached = self.first_and_cached(lambda: self.eng.convert(src, dst, host))
        return ours, unbaked, generic, first, cached

    def to_image(self, src: MemoryDesc, image: ImageDesc):
        sbuf = self._buffer(src.size)
        img = self.new_image(image)
        ours = {f: lambda e=e: e.launcher.enqueue(src, sbuf, image, img) for f, e in self.families.items()}
        unbaked = lambda: self.first_calls.launcher.enqueue(src, sbuf, image, img)   # noqa: E731
        w, h = image.width, image.height
        local = _pow2_local((w, h))
        if image.layout.name == "in_out_channel":
            knl = self.generic["generic_in_out_channel"]
            args = [np.int32(v) for v in (src.dims[1], src.dims[2], src.dims[3], *src.strides)]
        else:
            knl = self.generic["generic_conv2d_filter"]
            args = [np.int32(v) for v in src.dims]
        generic = lambda: knl(self.q, _rounded((w, h), local), local,   # noqa: E731
                              sbuf, img, *args)
        host = np.ones(src.span, np.float32)
        first, cached = self.first_and_cached(lambda: self.eng.convert(src, image, host))
        return ours, unbaked, generic, first, cached


def run(sizes=SIZES, report=print, engine=None, repeats=15) -> list[dict]:
    """Time every case at every NCHW size; see the module docstring."""
    b = _Bench(engine, repeats)
    report(f"OpenCL device: {b.eng.device.name} ({b.eng.device.platform}); kernel family: "
           f"{family_of(b.eng.device)[1]}")
    record = bench_predict.record_for(b.eng.device).name
    report("| case | size | MB | family | ours ms | limit ms | % of limit | direct % | tiled % | "
           f"{record} model % | first calls ms | generic ms | x vs generic | first call ms | "
           "cached call ms | host out= ms | % of limit |")
    report("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for dims in sizes:
        n, c, h, w = dims
        filt = (c * 8 if c >= 64 else c, 256 if h <= 224 else 512, 3, 3)
        cases = [
            ("NHWC->NCHW", "buffer", MemoryDesc(dims, tag="nhwc"), MemoryDesc(dims, tag="nchw")),
            ("NCHW->NHWC", "buffer", MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc")),
            ("NCHW->nChw16c", "buffer", MemoryDesc(dims, tag="nchw"),
             MemoryDesc(dims, tag="nChw16c")),
            ("NHWC->in_out_channel", "image", MemoryDesc(dims, tag="nhwc"), "in_out_channel"),
            ("NCHW->in_out_channel", "image", MemoryDesc(dims, tag="nchw"), "in_out_channel"),
            ("OIHW->conv2d_filter", "image", MemoryDesc(filt, tag="oihw"), "conv2d_filter"),
        ]
        for name, kind, src, dst in cases:
            if kind == "buffer":
                ours, unbaked, generic, first, cached = b.reorder(src, dst)
                limit, nbytes = b.copy_launch(dst.size), dst.size
                target = dst
            else:
                target = ImageDesc(image_layout(dst), src.dims)
                ours, unbaked, generic, first, cached = b.to_image(src, target)
                limit = b.copy_to_image_launch(target)
                nbytes = target.nbytes
            shown = "x".join(map(str, src.dims))
            family = b.family_of(src, target)
            ms = b.steady(limit, ours, unbaked, generic, b.host_out_call(src, target))
            limit, host_out = ms["limit"], ms["host_out"]
            unbaked, generic = ms["unbaked"], ms["peer"]
            ours = ms[b.chosen]
            moved = "tiled" if move_plan(src, target, b.families["tiled"].device).kernel.tiled \
                else "direct (no transpose)"
            _, model = bench_predict.predicted(src, target, b.eng.device, src.size, nbytes)
            row = dict(case=name, size=shown, bytes=nbytes, family=family, ms=ours,
                       direct_ms=ms["direct"], tiled_ms=ms["tiled"],
                       direct_pct=100 * limit / ms["direct"], tiled_pct=100 * limit / ms["tiled"],
                       unbaked_ms=unbaked, limit_ms=limit,
                       pct_of_limit=100 * limit / ours, generic_ms=generic,
                       speedup_vs_generic=generic / ours, first_call_ms=first,
                       cached_call_ms=cached, host_out_ms=host_out,
                       host_out_pct=100 * limit / host_out, model_pct=100 * model)
            rows.append(row)
            report(f"| {name} | {shown} | {nbytes / 1e6:.1f} | {family} | {ours:.2f} | "
                   f"{limit:.2f} | {row['pct_of_limit']:.0f}% | {row['direct_pct']:.0f}% | "
                   f"{row['tiled_pct']:.0f}%{'' if moved == 'tiled' else ' (direct)'} | "
                   f"{row['model_pct']:.0f}% | {unbaked:.2f} | {generic:.2f} | "
                   f"{row['speedup_vs_generic']:.2f} | {first:.0f} | {cached:.1f} | "
                   f"{host_out:.2f} | {row['host_out_pct']:.0f}% |")
        mine = rows[-len(cases):]
        report(f"geomean {'x'.join(map(str, dims))}: kernels "
               f"{geomean(r['pct_of_limit'] for r in mine):.0f}% of the copy limit "
               f"(direct {geomean(r['direct_pct'] for r in mine):.0f}%, tiled "
               f"{geomean(r['tiled_pct'] for r in mine):.0f}%; {record} model "
               f"{geomean(r['model_pct'] for r in mine):.0f}%), "
               f"host arrays with out= {geomean(r['host_out_pct'] for r in mine):.0f}%")
    return rows
