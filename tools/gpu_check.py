"""One prepared command for a lent GPU: everything the access model predicts,
measured on the device in one run of a few minutes (docs/performance.md).

    python tools/gpu_check.py [--quick] [--json OUT.json] [--binaries DIR]

(on a lent NVIDIA machine through ../shared/gpu/: ``bash .gpu/run.sh python
tools/gpu_check.py --json gpu_check.json``). Sections, each a markdown table:

1. **Programs**: each bench move's kernel in both families, built on the
   device; its program binary (PTX on NVIDIA) read back and its global
   loads and stores counted by width (runtime/opencl/gpu_asm.py): a vector
   access split into scalars shows as 4-byte accesses where the source has
   a vector (``--binaries DIR`` keeps the binaries).
2. **Moves**: every bench move (1x64x512x512, 1x3x224x224, the filter) in
   both families, the median of 20 profiled kernel events, against the
   device's own copy of the same bytes (clEnqueueCopyBuffer, or
   ...BufferToImage), beside the model's prediction for the device's GPU
   record (the H100's elsewhere).
3. **Image footprints**: write_imagef of an RGBA f32 image with a warp
   writing 32x1, 16x2 and 8x4 pixels (groups 32x8, 16x16, 8x32), against
   CopyBufferToImage of the same bytes.
4. **Host round trip**: tools/bench_host.py's table (the public call on host
   arrays, pageable, pinned, staged, against the bus's floors).

``--quick`` runs tiny sizes and few rounds, without the host round trip (the
suite's smoke test, on PoCL).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

import bench_host
import bench_predict
from runtime import ImageDesc, MemoryDesc, image_layout
from runtime.opencl import gpu_asm, images
from runtime.opencl import programs as programs_cache
from runtime.opencl.engine import OpenCLEngine, default
from runtime.opencl.moves import move_plan

MOVES = (("NHWC->NCHW", "nhwc", "nchw"), ("NCHW->NHWC", "nchw", "nhwc"),
         ("NCHW->nChw16c", "nchw", "nChw16c"), ("nChw16c->NCHW", "nChw16c", "nchw"),
         ("NHWC->in_out_channel", "nhwc", "image:in_out_channel"),
         ("NCHW->in_out_channel", "nchw", "image:in_out_channel"),
         ("OIHW->conv2d_filter", "oihw", "image:conv2d_filter"))
SIZES = ((1, 64, 512, 512), (1, 3, 224, 224))
FILTER = (512, 512, 3, 3)
QUICK = ((2, 5, 7, 9),)
QUICK_FILTER = (8, 5, 3, 3)
FOOTPRINTS = {"32x1": (32, 8), "16x2": (16, 16), "8x4": (8, 32)}   # a warp's pixels: its group

FOOTPRINT_KERNEL = """
__kernel void footprint(__write_only image2d_t img)
{
    const int x = get_global_id(0), y = get_global_id(1);
    write_imagef(img, (int2)(x, y), (float4)((float)x, (float)y, 0.0f, 1.0f));
}
"""


def cases(quick: bool):
    """(move, src desc, dst side) of every case."""
    for dims in (QUICK if quick else SIZES):
        for name, src_tag, dst in MOVES:
            d = (QUICK_FILTER if quick else FILTER) if name.startswith("OIHW") else dims
            if name.startswith("OIHW") and dims != (QUICK if quick else SIZES)[0]:
                continue
            src = MemoryDesc(d, tag=src_tag)
            target = ImageDesc(image_layout(dst[6:]), d) if dst.startswith("image:") else \
                MemoryDesc(d, tag=dst)
            yield name, src, target


def median_event_ms(queue, launch, repeats: int) -> float:
    """Median ms of ``repeats`` profiled events of ``launch()`` (after one warm-up)."""
    launch().wait()
    times = []
    for _ in range(repeats):
        event = launch()
        event.wait()
        times.append((event.profile.end - event.profile.start) * 1e-6)
    return statistics.median(times)


def memory_for(engine, side):
    if side.is_image and engine.device.options.image_access != "staged" and \
            not engine.staged(side):
        return images.create(engine.context, side, engine.limits)
    size = side.memory.size
    buf = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE, max(1, size))
    cl.enqueue_fill_buffer(engine.queue, buf, np.uint8(0), 0, max(1, size))
    return buf


def copy_launch(engine, side):
    """The device's own copy of ``side``'s bytes: a buffer copy, or a buffer into its image."""
    q, ctx = engine.queue, engine.context
    if side.is_image and not engine.staged(side):
        src = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, side.nbytes)
        img = images.create(ctx, side, engine.limits)
        return lambda: cl.enqueue_copy(q, img, src, offset=0, origin=images.origin(side),
                                       region=images.region(side))
    size = side.memory.size
    a, b = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size) for _ in range(2))
    return lambda: cl.enqueue_copy(q, b, a)


def programs(engines, quick, report, keep: Path | None) -> list[dict]:
    report("\n## Programs: global accesses in the device's program binaries")
    report("| case | size | family | binary | loads (bytes x count) | stores (bytes x count) |")
    report("|---|---|---|---|---|---|")
    rows = []
    for name, src, dst in cases(quick):
        for family, engine in engines.items():
            k = move_plan(src, dst, engine.device).kernel
            if not hasattr(k, "source"):
                continue
            # the engine's own build (cached: the moves below launch it again)
            binary = programs_cache.kernel(engine.context, k.source).program.get_info(
                cl.program_info.BINARIES)[0]
            try:
                text = binary.decode()
                kind = "text"
            except UnicodeDecodeError:
                text, kind = "", f"{len(binary)} bytes, not text"
            counts = gpu_asm.global_accesses(text)
            shown = "x".join(map(str, src.dims))
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"{name.replace('->', '_to_')}_{shown}_{family}.bin").write_bytes(binary)
            rows.append(dict(case=name, size=shown, family=family, binary=kind, **counts))
            report(f"| {name} | {shown} | {family} | {kind} | "
                   f"{_counts(counts['load'])} | {_counts(counts['store'])} |")
    return rows


def _counts(by_width: dict) -> str:
    return ", ".join(f"{w}x{n}" for w, n in sorted(by_width.items())) or "-"


def moves(engines, quick, repeats, report) -> list[dict]:
    base = next(iter(engines.values()))
    record = bench_predict.record_for(base.device).name
    report("\n## Moves: median of profiled kernel events against the device's copy")
    report(f"| case | size | copy ms | direct ms | % | tiled ms | % | {record} model % |")
    report("|---|---|---|---|---|---|---|---|")
    rows = []
    for name, src, dst in cases(quick):
        copy = median_event_ms(base.queue, copy_launch(base, dst), repeats)
        row = dict(case=name, size="x".join(map(str, src.dims)), copy_ms=copy)
        for family, engine in engines.items():
            p = move_plan(src, dst, engine.device)
            s_mem, d_mem = memory_for(engine, src), memory_for(engine, dst)
            row[family] = median_event_ms(
                engine.queue, lambda e=engine, p=p, s=s_mem, d=d_mem: e.launcher.run_plan(p, s, d),
                repeats)
        row["model"] = bench_predict.predicted(src, dst, base.device, src.size,
                                               dst.nbytes if dst.is_image else dst.size)[1]
        rows.append(row)
        report(f"| {name} | {row['size']} | {copy:.3f} | {row['direct']:.3f} | "
               f"{100 * copy / row['direct']:.0f}% | {row['tiled']:.3f} | "
               f"{100 * copy / row['tiled']:.0f}% | {100 * row['model']:.0f}% |")
    return rows


def footprints(engine, quick, repeats, report) -> list[dict]:
    side = ImageDesc(image_layout("in_out_channel"), (1, 8, 32, 64) if quick else
                     (1, 64, 512, 512))
    report(f"\n## Image footprints: write_imagef of {side.describe()} by warp footprint")
    report("| footprint | group | ms | copy ms | % of copy |")
    report("|---|---|---|---|---|")
    knl = cl.Program(engine.context, FOOTPRINT_KERNEL).build().footprint
    img = images.create(engine.context, side, engine.limits)
    copy = median_event_ms(engine.queue, copy_launch(engine, side), repeats)
    rows = []
    for name, group in FOOTPRINTS.items():
        size = (side.width, side.height)
        if size[0] % group[0] or size[1] % group[1] or \
                group[0] * group[1] > engine.device.max_work_group:
            continue
        ms = median_event_ms(engine.queue, lambda g=group: knl(engine.queue, size, g, img),
                             repeats)
        rows.append(dict(footprint=name, group=group, ms=ms, copy_ms=copy))
        report(f"| {name} | {group[0]}x{group[1]} | {ms:.3f} | {copy:.3f} | "
               f"{100 * copy / ms:.0f}% |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few rounds (a smoke test)")
    ap.add_argument("--json", metavar="OUT.json", help="also write every row as JSON")
    ap.add_argument("--binaries", metavar="DIR", help="keep the program binaries there")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    base = default()
    queue = cl.CommandQueue(base.context,
                            properties=cl.command_queue_properties.PROFILING_ENABLE)
    engines = {"direct": OpenCLEngine(queue=queue, tiled=False),
               "tiled": OpenCLEngine(queue=queue, tiled=True)}
    dev = engines["direct"].device
    repeats = 3 if args.quick else 20
    print(f"# gpu_check: {dev.describe()}; {dev.limits.image2d[0]}x{dev.limits.image2d[1]} "
          f"images, {dev.local_memory // 1024} KiB local memory, groups up to "
          f"{dev.max_work_group}; model record: {bench_predict.record_for(dev).title}")
    found = {"device": dev.describe()}
    found["programs"] = programs(engines, args.quick, print,
                                 Path(args.binaries) if args.binaries else None)
    found["moves"] = moves(engines, args.quick, repeats, print)
    found["footprints"] = footprints(engines["direct"], args.quick, repeats, print)
    if not args.quick:   # (its tiny rows are tests/opencl/test_zero_copy.py's)
        print("\n## Host round trip (tools/bench_host.py)")
        found["host"] = bench_host.host_in_place_rows(["512"], 3, print, base)
    found["seconds"] = time.perf_counter() - start
    print(f"\ngpu_check: {found['seconds']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
