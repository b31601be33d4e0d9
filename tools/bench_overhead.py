"""The overhead of a small conversion (tools/bench.py --overhead): what a
call costs beyond the bytes it moves, in one run, rounds in turn.

* cpu engine, 1x3x8x8 f32: ``to_image``, ``from_image`` and ``reorder``,
  with and without ``out=``, as a prepared call (``runtime.prepare``) and
  as the ordinary door called again with the same kinds of arguments,
  against ``np.copyto`` of the same bytes;
* OpenCL (where a device is): a Memory -> Memory ``to_image`` prepared and
  ordinary against pyopencl's own enqueue of the same kernel (its
  arguments set, one enqueue; every call finishes the queue, as the
  others do); host arrays prepared against the engine's copies of the same
  bytes (up and back);
* read_output: a classifier's softmax top-5 (1x1000) and a detector's
  sigmoid, threshold 0.5, top-100 (1x16x80x80), prepared and ordinary,
  against from_image + numpy on each engine.
"""
from __future__ import annotations

import numpy as np

import runtime
from bench_call import timed_in_turn
from runtime import Memory, MemoryDesc
from runtime.engine import opencl_available

DIMS = (1, 3, 8, 8)


def _us(ms: float) -> str:
    return f"{ms * 1000:7.1f} us"


def cpu_rows(repeat: int, inner: int, report=print) -> dict:
    """{row: {column: ms}} for the cpu engine's small calls."""
    x = np.random.default_rng(0).standard_normal(DIMS).astype(np.float32)
    img = runtime.to_image(x, "in_out_channel", engine="cpu")
    nchw, nhwc = MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nhwc")
    img_out, back_out = np.empty_like(img), np.empty_like(x)
    flat_out, copy_dst = np.empty(x.size, np.float32), np.empty_like(img)
    to_img = runtime.prepare.to_image(DIMS, "f32", "in_out_channel", engine="cpu")
    from_img = runtime.prepare.from_image(img.shape, "f32", "in_out_channel", DIMS,
                                          engine="cpu")
    reo = runtime.prepare.reorder(nchw, nhwc, engine="cpu")
    rows = {
        "to_image": {"copyto": lambda: np.copyto(copy_dst, img),
                     "prepared": lambda: to_img(x),
                     "ordinary": lambda: runtime.to_image(x, "in_out_channel", engine="cpu")},
        "to_image out=": {"copyto": lambda: np.copyto(copy_dst, img),
                          "prepared": lambda: to_img(x, out=img_out),
                          "ordinary": lambda: runtime.to_image(x, "in_out_channel",
                                                               engine="cpu", out=img_out)},
        "from_image": {"copyto": lambda: np.copyto(back_out, x),
                       "prepared": lambda: from_img(img),
                       "ordinary": lambda: runtime.from_image(img, "in_out_channel", DIMS,
                                                              engine="cpu")},
        "from_image out=": {"copyto": lambda: np.copyto(back_out, x),
                            "prepared": lambda: from_img(img, out=back_out),
                            "ordinary": lambda: runtime.from_image(img, "in_out_channel", DIMS,
                                                                   engine="cpu",
                                                                   out=back_out)},
        "reorder": {"copyto": lambda: np.copyto(flat_out, x.reshape(-1)),
                    "prepared": lambda: reo(x),
                    "ordinary": lambda: runtime.reorder(x, nchw, nhwc, engine="cpu")},
        "reorder out=": {"copyto": lambda: np.copyto(flat_out, x.reshape(-1)),
                         "prepared": lambda: reo(x, out=flat_out),
                         "ordinary": lambda: runtime.reorder(x, nchw, nhwc, engine="cpu",
                                                             out=flat_out)},
    }
    return _table("cpu engine, 1x3x8x8 f32", rows, repeat, inner, report)


def opencl_rows(repeat: int, inner: int, report=print) -> dict:
    """{row: {column: ms}} for the OpenCL engine's small calls."""
    import pyopencl as cl
    from runtime.opencl import programs
    from runtime.opencl.engine import default
    from runtime.opencl.moves import move_plan
    eng = default()
    q = eng.queue
    x = np.random.default_rng(0).standard_normal(DIMS).astype(np.float32)
    src = Memory.from_numpy(x, MemoryDesc(DIMS), engine=eng)
    img = Memory.image("in_out_channel", DIMS, engine=eng)
    conv = runtime.prepare.to_image(DIMS, "f32", "in_out_channel", engine=eng)
    plan = move_plan(src.side, img.side, eng.device)
    raw = None
    if plan.access in ("direct", "buffers") and not isinstance(plan.kernel, type(None)):
        knl = programs.kernel(eng.context, plan.kernel.source)
        k = plan.kernel

        def raw():   # pyopencl's own: its arguments set, one enqueue
            knl.set_args(src.storage, img.storage, *k.args)
            cl.enqueue_nd_range_kernel(q, knl, k.launch, k.local)
            q.finish()
    host_img = np.empty(runtime.image_layout("in_out_channel").array_shape(DIMS), np.float32)
    host_conv = runtime.prepare.to_image(DIMS, "f32", "in_out_channel", engine=eng)
    dev = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, x.nbytes)
    back = np.empty_like(x)

    def copies():   # the engine's floor for a host call: the same bytes up and back
        cl.enqueue_copy(q, dev, x, is_blocking=False)
        cl.enqueue_copy(q, back, dev, is_blocking=True)
    memory_row = {"prepared": lambda: (conv(src, out=img), q.finish()),
                  "ordinary": lambda: (runtime.to_image(src, "in_out_channel", out=img),
                                       q.finish())}
    if raw is not None:
        memory_row["pyopencl"] = raw
    rows = {"Memory -> Memory to_image": memory_row,
            "host to_image out=": {"copies": copies,
                                   "prepared": lambda: host_conv(x, out=host_img),
                                   "ordinary": lambda: runtime.to_image(
                                       x, "in_out_channel", engine=eng, out=host_img)}}
    return _table(f"opencl ({eng.device.name}), 1x3x8x8 f32 (plan: {plan.access})", rows,
                  repeat, inner, report)


def output_rows(repeat: int, inner: int, engines, report=print) -> dict:
    """read_output of a classifier and a detector, prepared and ordinary,
    against from_image + numpy, on each engine."""
    rng = np.random.default_rng(1)
    cls = rng.standard_normal((1, 1000)).astype(np.float32)
    det = rng.standard_normal((1, 16, 80, 80)).astype(np.float32) * 3
    results = {}
    for name, eng in engines:
        rows = {}
        for case, x, kw in (("classifier softmax top-5", cls,
                             dict(activation="softmax", threshold=float("-inf"), top_k=5)),
                            ("detector sigmoid > 0.5 top-100", det,
                             dict(activation="sigmoid", threshold=0.5, top_k=100))):
            img = runtime.to_image(x, "in_out_channel", engine="cpu")
            prep = runtime.prepare.read_output("in_out_channel", x.shape, engine=eng, **kw)
            rows[case] = {
                "chain": lambda img=img, x=x, kw=kw: _chain(img, x.shape, eng, kw),
                "prepared": lambda prep=prep, img=img: prep(img),
                "ordinary": lambda img=img, x=x, kw=kw: runtime.read_output(
                    img, "in_out_channel", x.shape, engine=eng, **kw)}
        results.update(_table(f"read_output on {name}", rows, repeat, inner, report))
    return results


def _chain(img, dims, eng, kw):
    """What users write without read_output: the tensor back, then numpy."""
    x = runtime.from_image(img, "in_out_channel", dims, engine=eng).astype(np.float64)
    if kw["activation"] == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
    else:
        p = 1 / (1 + np.exp(-x))
    flat = p.reshape(-1)
    chosen = np.flatnonzero(flat > kw["threshold"])
    order = chosen[np.argsort(-flat[chosen], kind="stable")][:kw["top_k"]]
    return np.stack(np.unravel_index(order, p.shape), 1), flat[order]


def _table(title: str, rows: dict, repeat: int, inner: int, report) -> dict:
    """Time every cell of ``rows`` (in turn) and print one line a row."""
    report(f"\n{title}: median of {repeat} rounds of {inner} calls")
    timed = {}
    for row, cells in rows.items():
        got = timed_in_turn(cells, repeat, inner, warm=3)
        timed[row] = got
        base = next((c for c in ("copyto", "copies", "pyopencl", "chain") if c in got), None)
        parts = [f"{c} {_us(v)}" for c, v in got.items()]
        extra = "" if base is None else "; over " + base + ": " + ", ".join(
            f"{c} +{(v - got[base]) * 1000:.1f} us" for c, v in got.items() if c != base)
        report(f"  {row:32s} " + ", ".join(parts) + extra)
    return timed


def run(repeat: int = 5, inner: int = 400, opencl: bool = True, report=print) -> dict:
    out = {"cpu": cpu_rows(repeat, inner, report)}
    engines = [("cpu", "cpu")]
    if opencl and opencl_available():
        out["opencl"] = opencl_rows(repeat, max(20, inner // 4), report)
        engines.append(("opencl", "opencl"))
    out["outputs"] = output_rows(repeat, max(10, inner // 20), engines, report)
    return out
