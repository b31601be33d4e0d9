"""Frame part of the benchmark: a camera frame to a model input, one call
against what users write today, in one run.

For each case (an NV21 frame of smooth random content -> a bilinear resize,
ImageNet mean and std, f16 ``in_out_channel``; and the YOLO case: 1280x720
NV21 -> 640x640 letterbox, fill 114, scale 1/255, f32 NCHW, against
OpenCV's chain of cvtColor, resize, copyMakeBorder and blobFromImage's
/255 as ``cv2 alone``) the calls below are timed in
turn (bench_call.timed_in_turn: one round of each, round after round, so a
drift of the machine reaches them all alike); each row is the median ms of a
call:

* ``chain``: cv2.cvtColor(COLOR_YUV2RGB_NV21), cv2.resize, (x - mean) / std
  in numpy float32, runtime.to_image(..., src="nhwc", dtype="f16", out=) on
  each engine (cpu, and opencl when a device exists);
* ``cv2 alone``: cv2.cvtColor + cv2.dnn.blobFromImage(rgb, 1/s, size, mean):
  it stops at a host NCHW f32 array and scales every channel by one factor
  (s the mean of the three stds), so it does less than the others;
* ``from_frame``: runtime.from_frame on the host frame, on cpu and on opencl,
  with ``out=`` a preallocated array and without;
* ``moving crop``: from_frame (out=) with another crop each call (12 in
  turn, about 60 % of the frame): what a tracker pays; no program is built
  for a new crop;
* ``device frame``: the frame already in a u8 buffer Memory on the device,
  from_frame into an image Memory (``out=``) and ``queue.finish()``: device
  time only, nothing crosses to the host.

The ratios the project's goals are stated in: chain / from_frame (with out=)
per engine (opencl >= 3x, cpu >= 1.5x), from_frame / cv2 alone per engine
(<= 1.0) and moving crop / repeated crop per engine (<= 3). Rows of opencl are left out without a device, rows of cv2 without
cv2 (a line says so each time).

Called by tools/bench.py (``--frames`` for this part alone).
"""
from __future__ import annotations

import os
import platform

import numpy as np

import runtime
from bench_call import timed_in_turn
from runtime.cpu import geometry

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
LAYOUT, DTYPE = "in_out_channel", "f16"
CASES = {  # name: ((frame width, height), (input width, height))
    "720p": ((1280, 720), (320, 320)),
    "480p": ((640, 480), (224, 224)),
    "yolo": ((1280, 720), (640, 640)),   # letterbox, fill 114, scale 1/255, f32 nchw
    "tiny": ((64, 48), (32, 32)),   # a smoke test of the bench itself
}
GOALS = (("chain / from_frame, cpu", 1.5, ">="), ("chain / from_frame, opencl", 3.0, ">="),
         ("from_frame(opencl) / cv2 alone", 1.0, "<="),
         ("from_frame(cpu) / cv2 alone", 1.0, "<="),
         ("moving crop / repeated, cpu", 3.0, "<="),
         ("moving crop / repeated, opencl", 3.0, "<="))
YOLO = dict(format="nv21", fit="letterbox", fill=114, scale=1 / 255, dtype="f32")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _smooth(rng, h: int, w: int, lo: float, hi: float, cell: int = 16) -> np.ndarray:
    """A (h, w) field: random values on a coarse grid, linearly interpolated,
    plus a little noise (what a camera sees: smooth areas, some grain)."""
    gh, gw = h // cell + 2, w // cell + 2
    coarse = rng.uniform(lo, hi, (gh, gw))

    def weights(n, g):   # (n, g): row i interpolates grid point positions
        pos = np.linspace(0, g - 1, n)
        return np.stack([np.interp(pos, np.arange(g), e) for e in np.eye(g)], 1)
    field = weights(h, gh) @ coarse @ weights(w, gw).T + rng.normal(0, 3, (h, w))
    return np.clip(np.rint(field), 0, 255).astype(np.uint8)


def nv21_frame(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A deterministic (height * 3 / 2, width) u8 NV21 frame: the Y plane,
    then the V, U pairs at half size."""
    rng = np.random.default_rng(seed)
    y = _smooth(rng, height, width, 16, 235)
    vu = np.stack([_smooth(rng, height // 2, width // 2, 70, 186, 8) for _ in range(2)], -1)
    return np.concatenate([y, vu.reshape(height // 2, width)])


def _cv2():
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def crops(frame: np.ndarray, count: int = 12) -> list[tuple[int, int, int, int]]:
    """``count`` crops of the frame, each another (a tracker's box moving):
    about 60 % of the frame, shifted and resized a little each time."""
    fh, fw = frame.shape[0] * 2 // 3, frame.shape[1]
    w0, h0 = int(fw * 0.6) & ~1, int(fh * 0.6) & ~1
    sx, sy = (fw - w0) // count, (fh - h0) // count
    return [(sx * i, sy * i, w0 - 2 * (i % 3), h0 - 2 * (i % 3)) for i in range(count)]


def moving(call, boxes):
    """A call that takes the next of ``boxes`` as its crop each time."""
    state = [0]

    def run():
        state[0] = (state[0] + 1) % len(boxes)
        return call(boxes[state[0]])
    return run


def yolo_calls(frame: np.ndarray, size, cv2, engines: dict) -> dict:
    """The YOLO case: OpenCV's chain (cvtColor, resize to the letterboxed
    size, copyMakeBorder with 114, blobFromImage's /255 into NCHW f32)
    against from_frame on each engine, and a moving crop."""
    w, h = size
    fh, fw = frame.shape[0] * 2 // 3, frame.shape[1]
    r = min(w / fw, h / fh)
    sw, sh = round(fw * r), round(fh * r)
    top, left = (h - sh) // 2, (w - sw) // 2
    fns = {}
    if cv2 is not None:
        def chain():
            small = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV21), (sw, sh))
            boxed = cv2.copyMakeBorder(small, top, h - sh - top, left, w - sw - left,
                                       cv2.BORDER_CONSTANT, value=(114, 114, 114))
            return cv2.dnn.blobFromImage(boxed, 1 / 255)
        fns["cv2 alone"] = chain
    boxes = crops(frame)
    for name, eng in engines.items():
        out = np.empty((1, 3, h, w), np.float32)
        fns[f"from_frame {name} out="] = lambda eng=eng, out=out: runtime.from_frame(
            frame, "nchw", size=size, engine=eng, out=out, **YOLO)
        fns[f"moving crop {name}"] = moving(lambda box, eng=eng, out=out: runtime.from_frame(
            frame, "nchw", size=size, crop=box, engine=eng, out=out, **YOLO), boxes)
    got = {k: np.asarray(f()) for k, f in fns.items() if k.endswith("out=")}
    first = next(iter(got.values()))
    for k, v in got.items():
        assert np.array_equal(v, first), f"{k} disagrees"
    if "cv2 alone" in fns:
        diff = float(np.abs(fns["cv2 alone"]() - first).max())
        assert diff < 3 / 255, f"OpenCV's chain and from_frame differ by {diff:.4f}"
    return fns


def calls(frame: np.ndarray, size, cv2, cl_engine) -> dict:
    """name -> a call without arguments, for every row this machine can run;
    the results that must agree are checked here, once."""
    w, h = size
    mean32, std32 = np.float32(MEAN), np.float32(STD)
    kw = dict(format="nv21", size=size, mean=MEAN, std=STD, dtype=DTYPE)
    engines = {"cpu": "cpu"} | ({"opencl": cl_engine} if cl_engine is not None else {})
    shape = (h, w, 4)   # in_out_channel of (1, 3, h, w): one RGBA pixel per element
    fns = {}
    if cv2 is not None:
        for name, eng in engines.items():
            out = np.empty(shape, np.float16)

            def chain(eng=eng, out=out):
                rgb = cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV21)
                small = cv2.resize(rgb, size)
                x = (small.astype(np.float32) - mean32) / std32
                return runtime.to_image(x[None], LAYOUT, src="nhwc", dtype=DTYPE, engine=eng,
                                        out=out)
            fns[f"chain {name}"] = chain
        scale = 1 / float(np.mean(STD))
        fns["cv2 alone"] = lambda: cv2.dnn.blobFromImage(
            cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV21), scale, size, MEAN)
    boxes = crops(frame)
    for name, eng in engines.items():
        out = np.empty(shape, np.float16)
        fns[f"from_frame {name} out="] = lambda eng=eng, out=out: runtime.from_frame(
            frame, LAYOUT, engine=eng, out=out, **kw)
        fns[f"from_frame {name}"] = lambda eng=eng: runtime.from_frame(
            frame, LAYOUT, engine=eng, **kw)
        fns[f"moving crop {name}"] = moving(lambda box, eng=eng, out=out: runtime.from_frame(
            frame, LAYOUT, crop=box, engine=eng, out=out, **kw), boxes)
    if cl_engine is not None:
        mem = runtime.Memory(runtime.MemoryDesc(frame.shape, "u8"), engine=cl_engine, data=frame)
        img = runtime.Memory.image(LAYOUT, (1, 3, h, w), DTYPE, engine=cl_engine)

        def device():
            runtime.from_frame(mem, LAYOUT, out=img, **kw)
            cl_engine.queue.finish()
        fns["device frame"] = device
    _check(fns, img if cl_engine is not None else None)
    return fns


def _check(fns: dict, img) -> None:
    """from_frame agrees with itself on every engine and door (bit for bit),
    and with the chain within the chain's own rounding (u8 after cvtColor and
    after resize: a pixel unit or two, over std)."""
    got = {k: np.asarray(f(), np.float32) for k, f in fns.items() if k.startswith("from_frame")}
    if img is not None:
        fns["device frame"]()
        got["device frame"] = img.to_numpy().astype(np.float32)
    first = next(iter(got.values()))
    for k, v in got.items():
        assert np.array_equal(v, first), f"{k} disagrees with from_frame cpu out="
    for k in (k for k in fns if k.startswith("chain")):
        diff = float(np.abs(np.asarray(fns[k](), np.float32) - first)[..., :3].max())
        assert diff < 4 / min(STD), f"{k} and from_frame differ by {diff:.3f}"


def rows(cases, repeat: int, inner: int, opencl: bool = True, engine=None,
         report=print) -> list[dict]:
    """One dict per case: name, frame and input sizes, and each call's median
    ms (keys as ``calls`` names them); a line through ``report`` for each
    kind of row left out."""
    cv2 = _cv2()
    if cv2 is None:
        report("cv2 not installed: the chain and cv2-alone rows are left out")
    cl_engine, warm = None, 2
    if opencl:
        cl_engine = engine or _opencl(report)
        if cl_engine is not None:
            # past the shape's baked program
            warm = cl_engine.device.options.specialize_after + 3
    out = []
    for name in cases:
        (fw, fh), size = CASES[name]
        frame = nv21_frame(fw, fh)
        if name == "yolo":
            engines = {"cpu": "cpu"} | ({"opencl": cl_engine} if cl_engine is not None else {})
            fns = yolo_calls(frame, size, cv2, engines)
        else:
            fns = calls(frame, size, cv2, cl_engine)
        ms = timed_in_turn(fns, repeat, inner, warm)
        out.append({"case": name, "frame": (fw, fh), "size": size, "bytes": frame.nbytes,
                    "ms": ms})
    return out


def _opencl(report):
    from runtime.engine import opencl_available
    if not opencl_available():
        report("OpenCL: no device with image support; the opencl rows are left out")
        return None
    from runtime.opencl.engine import default
    return default()


def ratios(ms: dict) -> dict:
    """The goals' ratios of one case that its rows allow (name -> value)."""
    r = {}
    for eng in ("cpu", "opencl"):
        if f"chain {eng}" in ms and f"from_frame {eng} out=" in ms:
            r[f"chain / from_frame, {eng}"] = ms[f"chain {eng}"] / ms[f"from_frame {eng} out="]
    for eng in ("cpu", "opencl"):
        if "cv2 alone" in ms and f"from_frame {eng} out=" in ms:
            r[f"from_frame({eng}) / cv2 alone"] = ms[f"from_frame {eng} out="] / ms["cv2 alone"]
        if f"moving crop {eng}" in ms and f"from_frame {eng} out=" in ms:
            r[f"moving crop / repeated, {eng}"] = \
                ms[f"moving crop {eng}"] / ms[f"from_frame {eng} out="]
    return r


def header(engine=None) -> str:
    cv2 = _cv2()
    line = (f"CPU: {cpu_name()}, {os.cpu_count()} cores (clayout cpu engine "
            f"{geometry.THREADS} threads" +
            (f", cv2 {cv2.__version__} {cv2.getNumThreads()} threads)" if cv2 else ")"))
    if engine is not None:
        line += f"; OpenCL: {engine.device.name} ({engine.device.platform})"
    return line


def print_table(found: list[dict], report=print) -> None:
    """The rows in the style of tools/bench.py's tables: ms, and x = the
    chain on the same engine (cv2 alone: on cpu) / this call."""
    report(f"{'size':>17} {'call':<22} {'MiB':>6} {'ms':>9} {'x chain':>8}")
    for r in found:
        (fw, fh), (w, h) = r["frame"], r["size"]
        shown = f"{fw}x{fh}->{w}x{h}"
        for k, v in r["ms"].items():
            eng = "opencl" if "opencl" in k or k == "device frame" else "cpu"
            base = r["ms"].get(f"chain {eng}")
            x = f"{base / v:>7.2f}x" if base else f"{'-':>8}"
            report(f"{shown:>17} {k:<22} {r['bytes'] / 2**20:>6.2f} {v:>6.2f} ms {x}")
        for name, value in ratios(r["ms"]).items():
            goal, sense = next((g, s) for n, g, s in GOALS if n == name)
            ok = value >= goal if sense == ">=" else value <= goal
            report(f"{shown:>17} {name}: {value:.2f} (goal {sense} {goal}: "
                   f"{'met' if ok else 'NOT met'})")


def run(cases=("720p", "480p", "yolo"), repeat: int = 15, inner: int = 4, opencl: bool = True,
        report=print) -> list[dict]:
    """Time the frame cases and print their table; returns the rows."""
    report(f"Frames: NV21 -> bilinear resize, ImageNet mean/std, {DTYPE} {LAYOUT}; medians of "
           f"{repeat} rounds of {inner} calls each, the calls' rounds in turn")
    engine = _opencl(report) if opencl else None
    if not opencl:
        report("OpenCL: not asked for (--no-opencl); the opencl rows are left out")
    report(header(engine))
    found = rows(cases, repeat, inner, opencl=engine is not None, engine=engine, report=report)
    print_table(found, report)
    shown = set().union(*(r["ms"] for r in found))
    if "cv2 alone" in shown:
        report("cv2 alone stops at a host NCHW f32 array (cv2.dnn.blobFromImage) and scales all "
               "channels by one factor (1 / the stds' mean); the others write f16 "
               "in_out_channel with a std per channel")
    if "device frame" in shown:
        report("device frame: the frame in a device u8 buffer, from_frame into an image Memory, "
               "queue.finish(): device time only, nothing crosses to the host")
    return found
