"""The discrete path's frame and output rows of tools/bench.py (``--frames``,
``--outputs``): the public call on host arrays through an OpenCL engine
with ``host_in_place=False`` (what a GPU that does not share host memory
runs) against the bus's floors measured in the same rounds.

The floors of a call are the same bytes copied to a device buffer and back
(its input's bytes up, its result's bytes down), by the driver's copy from
and into pageable numpy arrays and from and into pinned ones
(runtime.empty_pinned). Rows:

* frames, 1920x1080 NV21 -> 1x3x1280x1280 f32 NCHW letterbox (19.7 MB):
  ``repeated`` (one crop, out= a pageable array), ``pinned`` (the frame and
  out= pinned), ``moving crop`` (a crop never seen before each call, three
  sizes in turn: the generic program, nothing built), ``two in turn`` and
  ``two in flight`` (two pinned frames, waited for one by one, or both
  given with ``wait=False`` first); ratios: repeated / pageable floor,
  pinned / pinned floor, moving / repeated, in flight / in turn;
* outputs (seg argmax, det sigmoid + threshold + top_k, cls softmax top-5)
  from a host array of the output: read_output against the floors of its
  bytes up and the result's bytes down.
"""
from __future__ import annotations

import numpy as np

import runtime
from bench_call import timed_in_turn
from bench_frame import crops, nv21_frame

FRAME = ((1920, 1080), (1280, 1280))
YOLO = dict(format="nv21", fit="letterbox", fill=114, scale=1 / 255, dtype="f32")


def engines():
    """(the discrete engine, its queue), or (None, why) without a device."""
    from runtime.engine import opencl_available
    if not opencl_available():
        return None, "OpenCL: no device with image support; the discrete rows are left out"
    from runtime.opencl.engine import OpenCLEngine, default
    return OpenCLEngine(queue=default().queue, host_in_place=False), None


def floors(engine, up: int, down: int) -> dict:
    """name -> a call: ``up`` bytes to a device buffer and ``down`` bytes
    back, by the driver from and into pageable arrays and pinned ones."""
    import pyopencl as cl
    queue, ctx = engine.queue, engine.context
    dev_in = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, max(1, up))
    dev_out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, max(1, down))
    pageable = (np.ones(up, np.uint8), np.empty(down, np.uint8))
    pinned = (runtime.empty_pinned(up, np.uint8, engine=engine),
              runtime.empty_pinned(down, np.uint8, engine=engine))

    def floor(host_in, host_out):
        def run():
            cl.enqueue_copy(queue, dev_in, host_in, is_blocking=False)
            cl.enqueue_copy(queue, host_out, dev_out, is_blocking=True)
        return run
    return {"pageable floor": floor(*pageable), "pinned floor": floor(*pinned)}


def in_flight(call, frames, outs) -> dict:
    """Two frames from pinned arrays into pinned results: ``two in turn``
    (each call waits), ``two in flight`` (both given with ``wait=False``,
    then both results asked: the second frame's upload overlaps the first's
    kernel and read back where the device can)."""
    frames[1][...] = frames[0]

    def in_turn():
        for f, o in zip(frames, outs):
            call(f, o)

    def flight():
        pending = [call(f, o, wait=False) for f, o in zip(frames, outs)]
        for p in pending:
            p.result()
    return {"two in turn": in_turn, "two in flight": flight}


def tracked(call, box, frame_size):
    """A call that takes a new crop each time, never one seen before (a
    tracker's box: it drifts by two pixels a call and changes size every
    third): what a moving crop costs when nothing is cached for it."""
    x0, y0, w0, h0 = box
    fw, fh = frame_size
    state = [0]

    def run():
        k = state[0] = state[0] + 1
        w, h = w0 - 2 * (k % 3), h0 - 2 * (k % 3)
        span_x, span_y = max(1, (fw - w) // 2), max(1, (fh - h) // 2)
        x = 2 * (k % span_x)
        y = 2 * ((k // span_x) % span_y)
        return call((x, y, w, h))
    return run


def frame_rows(repeat: int, inner: int, report=print, engine=None, case=FRAME) -> dict:
    """The frame rows (module docstring; ``case``: ((frame width, height),
    (input width, height))); returns the medians (ms) by name."""
    engine = engine or engines()[0]
    (fw, fh), size = case
    frame = nv21_frame(fw, fh)
    out_shape = (1, 3, size[1], size[0])
    out = np.empty(out_shape, np.float32)
    pin_frame = runtime.empty_pinned(frame.shape, np.uint8, engine=engine)
    pin_frame[...] = frame
    pin_out = runtime.empty_pinned(out_shape, np.float32, engine=engine)
    boxes = crops(frame)
    box = boxes[0]
    fns = {"repeated": lambda: runtime.from_frame(frame, "nchw", size=size, crop=box,
                                                  engine=engine, out=out, **YOLO),
           "pinned": lambda: runtime.from_frame(pin_frame, "nchw", size=size, crop=box,
                                                engine=engine, out=pin_out, **YOLO),
           "moving crop": tracked(lambda b: runtime.from_frame(
               frame, "nchw", size=size, crop=b, engine=engine, out=out, **YOLO), boxes[0],
               (fw, fh)),
           **in_flight(lambda f, o, **kw: runtime.from_frame(
               f, "nchw", size=size, crop=box, engine=engine, out=o, **YOLO, **kw),
               [pin_frame, runtime.empty_pinned(frame.shape, np.uint8, engine=engine)],
               [pin_out, runtime.empty_pinned(out_shape, np.float32, engine=engine)]),
           **floors(engine, frame.nbytes, out.nbytes)}
    assert np.array_equal(np.asarray(fns["repeated"]()), np.asarray(fns["pinned"]()))
    ms = timed_in_turn(fns, repeat, inner, warm=engine.device.options.specialize_after + 3)
    report(f"frames on {engine.device.describe()} with host_in_place=False: {fw}x{fh} NV21 -> "
           f"1x3x{size[1]}x{size[0]} f32 NCHW letterbox; medians of {repeat} rounds of {inner}")
    for k, v in ms.items():
        report(f"  {k:<16} {v:8.2f} ms")
    report(f"  repeated / pageable floor {ms['repeated'] / ms['pageable floor']:.2f}, "
           f"pinned / pinned floor {ms['pinned'] / ms['pinned floor']:.2f}, "
           f"moving crop / repeated {ms['moving crop'] / ms['repeated']:.2f} (goal <= 2), "
           f"two in flight / two in turn {ms['two in flight'] / ms['two in turn']:.2f} "
           "(goal <= 0.6 on a discrete GPU; a CPU device shares its cores: about 1)")
    return ms


def output_rows(cases, repeat: int, inner: int, report=print, engine=None) -> dict:
    """The output rows (module docstring) for ``cases`` of tools/bench_output.py."""
    from bench_output import CASES
    engine = engine or engines()[0]
    report(f"outputs on {engine.device.describe()} with host_in_place=False, from a host "
           f"array (its bytes up, the result's down); medians of {repeat} rounds of {inner}")
    found = {}
    rng = np.random.default_rng(0)
    for case in cases:
        dims, dtype, kw = CASES[case]
        x = rng.standard_normal(dims).astype(np.float16 if dtype == "f16" else np.float32)
        if case == "det":   # a detector's mostly background scores, as bench_output draws them
            x = x * np.float32(1.5) - np.float32(4)
        tag = "nchw" if len(dims) == 4 else "nc"
        res = runtime.read_output(x, tag, dims, engine="cpu", **kw)
        result_bytes = sum(r.nbytes for r in res) if isinstance(res, tuple) else res.nbytes
        fns = {"read_output": lambda x=x, tag=tag, dims=dims, kw=kw: runtime.read_output(
            x, tag, dims, engine=engine, **kw), **floors(engine, x.nbytes, result_bytes)}
        ms = timed_in_turn(fns, repeat, inner, warm=3)
        found[case] = ms
        report(f"  {case:5s} read_output {ms['read_output']:8.3f} ms, pageable floor "
               f"{ms['pageable floor']:.3f} ms ({ms['read_output'] / ms['pageable floor']:.2f}x), "
               f"pinned floor {ms['pinned floor']:.3f} ms "
               f"({ms['read_output'] / ms['pinned floor']:.2f}x); {x.nbytes} bytes up, "
               f"{result_bytes} back")
    return found
