"""The OpenCL host-array table of tools/bench.py (``--host``, and after the
OpenCL table): the public call on host arrays against the bus's floors
measured in the same run.
"""
from __future__ import annotations

import os

import numpy as np

from bench_call import CASES, SIZES, dst_desc, geomean, public_call, timed_in_turn
from runtime import ClayoutError, ImageDesc, image_layout
from runtime.algebra.desc import MemoryDesc


def host_in_place_rows(sizes, repeat: int, report=print, engine=None, cases=None) -> list[dict]:
    """Each case at each size (the filter: tools/bench_opencl.py's filter of
    that size, which fits a device image) as the public call on host arrays
    with ``out=``, against the host round-trip floors measured in the same
    run, on engines sharing one queue:

    * ``in place``: ``host_in_place=True`` (USE_HOST_PTR over the caller's
      arrays, a map to read: what a device that shares host memory does);
    * ``pageable``: ``host_in_place=False`` from and into plain numpy
      arrays (leased device buffers, the driver's copies);
    * ``pinned``: the same from and into ``runtime.empty_pinned`` arrays;
    * ``staging``: ``host_in_place=False`` with CLAYOUT_OPENCL_HOST_PATH=staging
      (a pageable array pipelined in chunks through pinned stages: what a
      discrete device does; on a device that shares host memory the plan
      takes the driver's copy, the ``pageable`` column).

    The floors: the source's bytes to the device and the destination's
    bytes back, by the driver's copy from and into pinned arrays (the bus's
    limit) and from and into pageable ones; and the device's own copy of
    the destination's bytes (clEnqueueCopyBuffer, or ...ToImage). Rounds in
    turn, medians of ``repeat`` after the warm-up that bakes a shape's
    program. Columns: ms, and each call against the floor it should meet;
    ``cases``: names of CASES to time (None: all). After each size: host
    to_image against a reorder of the same bytes, per path."""
    import pyopencl as cl   # only with a device
    from runtime import empty_pinned
    from runtime.opencl import images
    from runtime.opencl.device import EngineOptions
    from runtime.opencl.engine import OpenCLEngine, default
    from runtime.opencl.moves import host_path
    queue = (engine or default()).queue
    engines = {"in place": OpenCLEngine(queue=queue, host_in_place=True),
               "pageable": OpenCLEngine(queue=queue, host_in_place=False)}
    old = os.environ.get("CLAYOUT_OPENCL_HOST_PATH")
    os.environ["CLAYOUT_OPENCL_HOST_PATH"] = "staging"
    try:
        engines["staging"] = OpenCLEngine(queue=queue, host_in_place=False)
    finally:
        if old is None:
            del os.environ["CLAYOUT_OPENCL_HOST_PATH"]
        else:
            os.environ["CLAYOUT_OPENCL_HOST_PATH"] = old
    discrete = engines["pageable"]
    report(f"device: {discrete.device.describe()}")
    report(f"pageable path: {discrete.device.describe()}: "
           f"{host_path(discrete.device).describe()}; staging: "
           f"{host_path(engines['staging'].device).describe()}")
    report("| case | size | MB | device copy ms | pinned floor ms | pageable floor ms | "
           "in place ms | pageable ms | / pageable floor | pinned ms | / pinned floor | "
           "staging ms | / pageable floor |")
    report("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for size in sizes:
        for name, src_tag, dst in CASES:
            if cases is not None and name not in cases:
                continue
            dims = SIZES[size]
            if src_tag == "oihw":   # a filter of this size, as tools/bench_opencl.py times it
                c, h = dims[1], dims[2]
                dims = (c * 8 if c >= 64 else c, 256 if h <= 224 else 512, 3, 3)
            src = MemoryDesc(dims, tag=src_tag)
            dstd = dst_desc(dst, dims)
            image = ImageDesc(image_layout(dst[6:]), dims) if dst.startswith("image:") else None
            x = np.random.default_rng(0).standard_normal(src.span).astype(np.float32)
            target = image or dstd
            calls = {k: public_call(x, src, target, e) for k, e in engines.items()}
            pinned_x = empty_pinned(x.shape, np.float32, engine=discrete)
            pinned_x[...] = x
            calls["pinned"] = public_call(pinned_x, src, target, discrete,
                                          empty=lambda shape, dt: empty_pinned(
                                              shape, dt, engine=discrete))
            a = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, dstd.size)
            if image is None:
                into = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, dstd.size)
                where = {}
            else:
                try:
                    into = images.create(queue.context, image, discrete.limits)
                except ClayoutError as exc:   # tiled, not one copy: no limit to compare with
                    report(f"| {name} | {'x'.join(map(str, dims))} | skipped: {exc} |")
                    continue
                where = {"offset": 0, "origin": images.origin(image),
                         "region": images.region(image)}
            up = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, x.nbytes)
            down = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, dstd.size)
            host_in, host_out = x, np.empty(dstd.span, np.float32)
            pin_in = empty_pinned(x.shape, np.float32, engine=discrete)
            pin_out = empty_pinned((dstd.span,), np.float32, engine=discrete)

            def limit(a=a, into=into, where=where):
                cl.enqueue_copy(queue, into, a, **where)
                queue.finish()

            def floor(h_in, h_out):
                def run():
                    cl.enqueue_copy(queue, up, h_in, is_blocking=False)
                    cl.enqueue_copy(queue, h_out, down, is_blocking=True)
                return run
            ms = timed_in_turn({"limit": limit, "pinned floor": floor(pin_in, pin_out),
                                "pageable floor": floor(host_in, host_out), **calls},
                               repeat, warm=EngineOptions.read().specialize_after + 3)
            got = [np.asarray(calls[k]()).copy() for k in ("in place", "pageable", "pinned",
                                                           "staging")]
            assert all(np.array_equal(g, got[0]) for g in got), \
                f"the host paths disagree on {name}"
            row = {"size": size, "case": name, "bytes": dstd.size, **ms}
            rows.append(row)
            report(f"| {name} | {'x'.join(map(str, dims))} | {dstd.size / 1e6:.1f} | "
                   f"{ms['limit']:.2f} | {ms['pinned floor']:.2f} | {ms['pageable floor']:.2f} | "
                   f"{ms['in place']:.2f} | {ms['pageable']:.2f} | "
                   f"{ms['pageable'] / ms['pageable floor']:.2f} | {ms['pinned']:.2f} | "
                   f"{ms['pinned'] / ms['pinned floor']:.2f} | {ms['staging']:.2f} | "
                   f"{ms['staging'] / ms['pageable floor']:.2f} |")
        at = [r for r in rows if r["size"] == size]
        if at:
            report(f"geomean {size}: pageable {geomean(r['pageable'] / r['pageable floor'] for r in at):.2f}"
                   f"x its floor, pinned {geomean(r['pinned'] / r['pinned floor'] for r in at):.2f}"
                   f"x its floor, in place {geomean(r['in place'] / r['limit'] for r in at):.2f}"
                   "x the device copy")
            pair = {r["case"]: r for r in at}
            image, plain = pair.get("NCHW->in_out_channel"), pair.get("NCHW->NHWC")
            if image and plain and image["bytes"] == plain["bytes"]:
                report(f"host to_image / reorder of the same bytes, {size}: " + ", ".join(
                    f"{k} {image[k] / plain[k]:.2f}" for k in ("pageable", "pinned", "staging",
                                                                "in place")) + " (goal <= 1.1)")
    return rows
