"""Benchmark: conversions as ratios against the copy limit, in one run.

CPU part: each conversion of the cpu engine (on the path it takes: compiled
moves where a C compiler works, else numpy; into a preallocated destination:
``cpu.reorder_into``, and the public call with ``out=``) against
``np.copyto`` of the destination's bytes (memcpy), beside peers measured in
the same run: naive numpy (one big ``ascontiguousarray`` of a pad + reshape +
transpose view) and, where torch is installed, ``copy_`` into a channels_last
tensor. Then the engine's two paths side by side with oneDNN's reorder
primitive (tools/bench_onednn.py: a plain CPU build from PyPI through ctypes,
skipped with a line where it does not install; ``--paths`` for that table
alone). The OpenCL part is added by tools/bench_opencl.py when an OpenCL
device exists, followed by the public
call on host arrays (``out=``) with the engine's in-place path
(``host_in_place=True``: USE_HOST_PTR and a map) and without it (copies to
and from device buffers), against the same copy limit (tools/bench_host.py).

Run: ``python tools/bench.py`` or ``clayout bench`` (``--quick`` for small sizes);
``--models-at-scale``: clayout model on generated models of 94 MB to 1.13 GB
(tools/bench_scale.py).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import bench_discrete
import bench_frame
import bench_model
import bench_output
import bench_scale
import bench_onednn
import bench_host
from bench_call import CASES, SIZES, busy, dst_desc, geomean, public_call, timed_in_turn
from runtime.algebra.desc import MemoryDesc
from runtime import image_layout
from runtime.cpu import engine as cpu
from runtime.cpu import geometry
from runtime.engine import opencl_available

# the cpu engine's two paths against oneDNN's reorder (plain tags) and the copy limit
PEER_CASES = (("nchw", "nhwc"), ("nchw", "nChw16c"), ("nhwc", "nchw"), ("nChw16c", "nchw"))
IMAGE_CASES = (("nchw", "in_out_channel"), ("nhwc", "in_out_channel"),
               ("oihw", "conv2d_filter"))
def timeit(fn, repeat: int, inner: int) -> float:
    """Median over ``repeat`` rounds of the mean of ``inner`` calls, in ms."""
    return timed_in_turn({0: fn}, repeat, inner)[0]


def naive(src: MemoryDesc, dst: MemoryDesc):
    """One big numpy transpose: logical view -> pad -> split blocked dims ->
    transpose to dst's physical order -> ascontiguousarray."""
    src_axes = src.axes
    phys = tuple(a.size for a in src_axes)
    to_logical = np.argsort([a.dim for a in src_axes])

    def run(buf):
        logical = buf[:src.span].reshape(phys).transpose(to_logical)
        pad = [(0, p - d) for d, p in zip(dst.dims, dst.padded_dims)]
        if any(hi for _, hi in pad):
            logical = np.pad(logical, pad)
        split, names = [], []
        for d in range(dst.ndims):
            ax = sorted((a for a in dst.axes if a.dim == d), key=lambda a: -a.div)
            split.extend(a.size for a in ax)
            names.extend(dst.axes.index(a) for a in ax)
        view = logical.reshape(split).transpose(np.argsort(names))
        return np.ascontiguousarray(view).reshape(-1)
    return run




def torch_channels_last():
    try:
        import torch
    except ImportError:
        return None
    return torch


def cpu_rows(sizes, repeat: int, inner: int):
    rows = []
    torch = torch_channels_last()
    for size in sizes:
        dims = SIZES[size]
        for name, src_tag, dst in CASES:
            src = MemoryDesc(dims, tag=src_tag)
            dstd = dst_desc(dst, dims)
            x = np.random.default_rng(0).standard_normal(src.span).astype(np.float32)
            out = np.empty(dstd.span, np.float32)
            same = np.empty(dstd.span, np.float32)
            ref = np.resize(x, dstd.span)
            target = image_layout(dst[6:]) if dst.startswith("image:") else dstd
            call = public_call(x, src, target, "cpu")
            ms = timed_in_turn({"memcpy": lambda: np.copyto(same, ref),
                                  "cpu": lambda: cpu.reorder_into(x, src, out, dstd),
                                  "out=": call}, repeat, inner)
            assert np.array_equal(call().reshape(-1), out), f"out= disagrees on {name}"
            naive_fn = naive(src, dstd)
            assert np.array_equal(naive_fn(x), out), f"naive numpy disagrees on {name}"
            naive_ms = timeit(lambda: naive_fn(x), repeat, max(1, inner // 2))
            row = {"size": size, "case": name, "bytes": dstd.size, **ms, "numpy": naive_ms}
            if torch is not None and name == "NCHW->NHWC":
                t_src = torch.from_numpy(x.reshape(dims))
                t_dst = torch.empty(dims).contiguous(memory_format=torch.channels_last)
                row["torch"] = timeit(lambda: t_dst.copy_(t_src), repeat, inner)
            rows.append(row)
    return rows


def path_rows(sizes, repeat: int, report=print, peer=None) -> list[dict]:
    """The cpu engine's compiled and numpy paths (the public call with
    out=), np.copyto of the destination's bytes and oneDNN's reorder
    primitive on the same arrays, their rounds in turn; after each of
    oneDNN's rounds this thread keeps busy 5 ms, untimed (its OpenMP threads
    spin after its calls and would take the cores from the next round);
    then oneDNN alone and clayout alone, each its rounds back to back (its
    threads still spinning between calls: each at its best). Bits checked
    between all three."""
    peer = peer or bench_onednn.load()
    said = peer if isinstance(peer, str) else f"{peer.version}, {peer.threads} OpenMP threads"
    on_path = {path: cpu.CpuEngine(path) for path in ("auto", "numpy")}   # the engine's paths
    report(f"oneDNN: {said}; cpu engine: {on_path['auto'].status()}")
    report("| case | size | MiB | np.copyto ms | oneDNN ms | clayout ms | numpy path ms | "
           "clayout / oneDNN | oneDNN alone ms | clayout alone ms | alone / alone | "
           "clayout % of copy | clayout − copy µs |")
    report("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for size in sizes:
        dims = SIZES[size]
        # oneDNN's cases at C = 64, the image cases at the other sizes (C = 3, 17)
        cases = [(s, d, s, d) for s, d in PEER_CASES] if dims[1] == 64 else \
            [(s, "image:" + d, s, d) for s, d in IMAGE_CASES]
        for src_tag, dst, a, b in cases:
            src, dstd = MemoryDesc(dims, tag=src_tag), dst_desc(dst, dims)
            x = np.random.default_rng(0).standard_normal(src.span).astype(np.float32)
            same, ref = np.empty(dstd.span, np.float32), np.resize(x, dstd.span)
            target = image_layout(dst[6:]) if dst.startswith("image:") else dstd
            fns = {"copy": lambda: np.copyto(same, ref),
                   "clayout": public_call(x, src, target, on_path["auto"]),
                   "numpy": public_call(x, src, target, on_path["numpy"])}
            got = np.full(dstd.span, np.nan, np.float32)
            if not isinstance(peer, str) and not dst.startswith("image:"):
                fns["onednn"] = peer.reorder(dims, src_tag, dst, x, got)
            ms = timed_in_turn(fns, repeat, inner=3 if dims[1] == 64 else 8, warm=2,
                               after={"onednn": lambda: busy(0.005)})
            ours = fns["clayout"]().reshape(-1).copy()
            assert np.array_equal(fns["numpy"]().reshape(-1), ours), f"paths disagree: {a}->{b}"
            assert "onednn" not in fns or np.array_equal(got, ours), f"oneDNN disagrees: {a}->{b}"
            if "onednn" in fns:   # and each at its best: calls back to back, threads spinning
                ms["alone"] = timed_in_turn({"o": fns["onednn"]}, repeat, inner=3, warm=2)["o"]
                busy(0.005)
                ms["ours alone"] = timed_in_turn({"c": fns["clayout"]}, repeat, inner=3,
                                                 warm=2)["c"]
            row = {"size": size, "case": f"{a}->{b}", "bytes": dstd.size, **ms}
            rows.append(row)
            nan = float("nan")
            vs = f"{ms['onednn'] / ms['clayout']:.2f}" if "onednn" in ms else "-"
            alone = f"{ms['alone'] / ms['ours alone']:.2f}" if "alone" in ms else "-"
            report(f"| {a}->{b} | {'x'.join(map(str, dims))} | {dstd.size / 2**20:.1f} | "
                   f"{ms['copy']:.3f} | {ms.get('onednn', nan):.3f} | {ms['clayout']:.3f} | "
                   f"{ms['numpy']:.3f} | {vs} | {ms.get('alone', nan):.3f} | "
                   f"{ms.get('ours alone', nan):.3f} | {alone} | "
                   f"{100 * ms['copy'] / ms['clayout']:.0f}% | "
                   f"{1e3 * (ms['clayout'] - ms['copy']):.0f} |")
    with_peer = [r for r in rows if "onednn" in r]
    if with_peer:
        report(f"geomean clayout / oneDNN: "
               f"{geomean(r['onednn'] / r['clayout'] for r in with_peer):.2f} in turn "
               f"(numpy path {geomean(r['onednn'] / r['numpy'] for r in with_peer):.2f}), "
               f"{geomean(r['alone'] / r['ours alone'] for r in with_peer):.2f} each alone")
    return rows


def print_table(rows, columns, base: str, out=sys.stdout):
    head = f"{'size':>5} {'case':<22} {'MiB':>6} " + " ".join(f"{c:>16}" for c in columns)
    print(head, file=out)
    for r in rows:
        cells = []
        for c in columns:
            if c not in r:
                cells.append(f"{'-':>16}")
            elif c == base:
                cells.append(f"{r[c]:>8.2f} ms      ")
            else:
                cells.append(f"{r[c]:>7.2f} ms {100 * r[base] / r[c]:>4.0f}%")
        print(f"{r['size']:>5} {r['case']:<22} {r['bytes'] / 2**20:>6.1f} " + " ".join(cells),
              file=out)


def geomean_pct(rows, col: str, base: str, size: str) -> float:
    return 100 * geomean(r[base] / r[col] for r in rows if r["size"] == size and col in r)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="clayout bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="224,512,C17,C3",
                    help=f"comma-separated, of {', '.join(SIZES)}")
    ap.add_argument("--quick", action="store_true", help="224 and C17 only, fewer rounds")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-opencl", action="store_true")
    ap.add_argument("--paths", action="store_true",
                    help="only the cpu engine's compiled and numpy paths against np.copyto "
                    "and oneDNN's reorder (224, 512, and the image cases at C3, C17, C3x512, "
                    "C17x512 unless --sizes names others)")
    ap.add_argument("--frames", action="store_true",
                    help="only the frame case: a camera frame to a model input, runtime.from_frame "
                    "against the cv2 + numpy + to_image chain and cv2 alone")
    ap.add_argument("--outputs", action="store_true",
                    help="only the output case: a network's output to argmax, top-k or a "
                    "softmax, runtime.read_output against from_image + numpy")
    ap.add_argument("--model", metavar="M.onnx",
                    help="instead: the load time of a whole model on each engine (programs "
                    "built, cold, warm, cpu); 'synthetic' makes one with 60 weight shapes")
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"), help="with --model")
    ap.add_argument("--models-at-scale", action="store_true",
                    help="instead: clayout model's time, MB/s and peak memory on generated "
                    "models of 10, 40 and 120 convolutions of 9.4 MB each (inline .onnx, "
                    "external data, .tflite; --quick: 10 and 40; --sizes N,N: other counts)")
    ap.add_argument("--host", action="store_true",
                    help="only the OpenCL host-array table: the public call on host arrays "
                    "(in place, pageable, pinned, staging) against the bus's floors")
    ap.add_argument("--overhead", action="store_true",
                    help="only the overhead of small calls: prepared and ordinary calls "
                    "against np.copyto, pyopencl's own enqueue and from_image + numpy")
    ap.add_argument("--cases", help="with --host: the cases to time, comma-separated (e.g. "
                    "NCHW->NHWC,NCHW->in_out_channel); all by default")
    args = ap.parse_args(argv)
    if args.overhead:
        import bench_overhead
        bench_overhead.run(repeat=3 if args.quick else args.repeat,
                           inner=100 if args.quick else 400, opencl=not args.no_opencl)
        return 0
    if args.model:
        return bench_model.main(args.model, args.dtype, 3 if args.quick else args.repeat)
    if args.models_at_scale:
        chosen = args.sizes if "--sizes" in (argv or sys.argv) else None
        return bench_scale.main(chosen, args.quick, opencl=not args.no_opencl)
    sizes = ["224", "C17"] if args.quick else args.sizes.split(",")
    for s in sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s!r}; allowed: {', '.join(SIZES)}")
    repeat = 3 if args.quick else args.repeat
    frames = lambda: bench_frame.run(repeat=3 * repeat, inner=2 if args.quick else 4,  # noqa: E731
                                     opencl=not args.no_opencl)
    discrete, why = (None, "") if args.no_opencl else bench_discrete.engines()
    if args.frames:
        frames()
        if discrete is not None:
            print()
            bench_discrete.frame_rows(3 * repeat, 2 if args.quick else 4, engine=discrete)
        elif why:
            print(why)
        return 0
    if args.outputs:
        cases = ("tiny",) if sizes == ["tiny"] else ("seg", "det", "cls")
        bench_output.run(repeat=3 * repeat, inner=2 if args.quick else 3,
                         opencl=not args.no_opencl, cases=cases)
        if discrete is not None:
            print()
            bench_discrete.output_rows(cases, 3 * repeat, 2 if args.quick else 3, engine=discrete)
        elif why:
            print(why)
        return 0
    if args.host:
        if not opencl_available():
            print("OpenCL: no device with image support; nothing to measure")
            return 0
        bench_host.host_in_place_rows(sizes, repeat,
                                      cases=args.cases.split(",") if args.cases else None)
        return 0
    if args.paths:
        chosen = args.sizes.split(",") if "--sizes" in (argv or sys.argv) else \
            ["224", "512", "C3", "C17", "C3x512", "C17x512"]
        path_rows([s for s in chosen if s in SIZES], repeat)
        return 0
    print(f"clayout bench: f32, medians of {repeat} rounds; % = memcpy time / conversion time "
          f"(higher is better; 100% = copy speed); {geometry.THREADS} threads")
    rows = cpu_rows(sizes, repeat, inner=4)
    print(f"\nCPU ({cpu.ENGINE.status()}): memcpy = np.copyto of the destination's bytes")
    print_table(rows, ["memcpy", "cpu", "out=", "numpy", "torch"], "memcpy")
    for s in sizes:
        print(f"geomean {s}: cpu fast path {geomean_pct(rows, 'cpu', 'memcpy', s):.0f}% of "
              f"memcpy, public call with out= {geomean_pct(rows, 'out=', 'memcpy', s):.0f}%, "
              f"naive numpy {geomean_pct(rows, 'numpy', 'memcpy', s):.0f}%")
    print("\nCPU paths: the public call with out= on the compiled and numpy paths, "
          "np.copyto of the destination's bytes, oneDNN's reorder")
    path_rows(sizes, repeat)
    if not args.no_opencl:
        if not opencl_available():
            print("\nOpenCL: no device with image support; skipped")
        else:
            import bench_opencl as cl_bench   # pyopencl: only with a device
            print("\nOpenCL: % = the device's own copy of the same bytes (clEnqueueCopyBuffer, "
                  "or clEnqueueCopyBufferToImage for images) / conversion time")
            cl_bench.run([SIZES[s] for s in sizes if s != "C3"], print, repeats=max(5, 3 * repeat))
            print("\nOpenCL host arrays with out=: in place (host_in_place=True), and "
                  "copied through pooled device memory (host_in_place=False) from pageable, "
                  "pinned (runtime.empty_pinned) and staged arrays, against the floors of the "
                  "same bytes' round trip")
            bench_host.host_in_place_rows(sizes, repeat)
    if sizes != ["tiny"]:   # the smoke size is for the bench itself, not for timing frames
        print()
        frames()
        if discrete is not None:
            print()
            bench_discrete.frame_rows(3 * repeat, 4, engine=discrete)
        print()
        bench_output.run(repeat=3 * repeat, opencl=not args.no_opencl)
        if discrete is not None:
            print()
            bench_discrete.output_rows(("seg", "det", "cls"), 3 * repeat, 3, engine=discrete)
    return 0


if __name__ == "__main__":
    sys.exit(main())
