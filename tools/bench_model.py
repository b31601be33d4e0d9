"""Model load time: one ONNX model's weights converted on each engine, in one run.

What an inference engine pays at start-up: every weight of the model placed on
its image. Each start-up figure is a new process doing the whole job (Python
start, imports, reading the model, making the engine, converting every
weight), timed from outside, so both engines pay the same fixed costs:

* **cold**: the opencl engine with empty PoCL and pyopencl caches (fresh
  ``POCL_CACHE_DIR`` and ``XDG_CACHE_HOME``): every program is built;
* **builds**: the programs that cold run built;
* **warm**: the opencl engine again, caches kept (the second start);
* **cpu**: the cpu engine, the same job.

A second table gives the conversion alone inside one process (programs
already built on opencl), the part a user pays per model once started.

Run: ``python tools/bench.py --model MODEL.onnx`` (or ``clayout bench --model``);
``--model synthetic`` converts a model of 60 convolutions with 60 distinct
weight shapes, made on the fly.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from runtime import engine, model

_CHILD = """
import time
start = time.perf_counter()
import json, sys
from runtime import engine, model
path, dtype, name = sys.argv[1:4]
t = {"imports": time.perf_counter() - start}
mark = time.perf_counter()
device = {"kernels": [], "transfers": []}
if name == "opencl":   # the default engine's device, its queue profiling every command
    import pyopencl as cl
    from runtime.opencl import programs
    from runtime.opencl.device import pick_context
    from runtime.opencl.engine import OpenCLEngine
    eng = OpenCLEngine(queue=cl.CommandQueue(
        pick_context(), properties=cl.command_queue_properties.PROFILING_ENABLE))

    def recorded(fn, kind):
        def call(*args, **kwargs):
            result = fn(*args, **kwargs)
            device[kind].append(result[1] if isinstance(result, tuple) else result)
            return result
        return call
    cl.enqueue_nd_range_kernel = recorded(cl.enqueue_nd_range_kernel, "kernels")
    for f in ("enqueue_copy", "enqueue_map_buffer", "enqueue_fill_buffer"):
        setattr(cl, f, recorded(getattr(cl, f), "transfers"))
else:
    eng = engine.get(name)
t["engine"] = time.perf_counter() - mark
mark = time.perf_counter()
graph = model.load(path)
t["model read"] = time.perf_counter() - mark
mark = time.perf_counter()
model.convert_model(graph, path, dtype, engine=eng)
spent = time.perf_counter() - mark
if name == "opencl":
    eng.queue.finish()
for kind, events in device.items():
    t[kind] = sum(e.profile.end - e.profile.start for e in events) * 1e-9
t["builds"] = programs.STATS["seconds"] if name == "opencl" else 0.0
t["host work"] = spent - t["builds"] - t["kernels"] - t["transfers"]
print(json.dumps({"builds": programs.STATS["builds"] if name == "opencl" else 0,
                  "device": eng.device.name if name == "opencl" else "numpy",
                  "phases": t}))
"""

# the phases a start-up's time is split into (the child's own clock; the rest of the
# wall time is the Python interpreter starting and exiting)
PHASES = {"imports": "Python modules imported (numpy, runtime, onnx reading)",
          "engine": "the engine made: pyopencl imported, context and queue created",
          "model read": "the ONNX file read and parsed",
          "builds": "OpenCL programs built (clBuildProgram)",
          "kernels": "conversion kernels on the device (profiling events; PoCL compiles a "
                     "kernel for its work-group size at its first launch, outside them)",
          "transfers": "copies, maps and fills on the device (profiling events)",
          "host work": "the rest of the conversions: planning, rendering, checks, launches, "
                       "waiting, numpy work (the cpu engine's conversions are all here)"}


def synthetic_model(path: str, count: int = 60) -> str:
    """A model of ``count`` 3x3 convolutions with distinct weight shapes
    (channels 8, 9, 10, ...), written to ``path``; returns the path."""
    import onnx   # the optional model extra: only a synthetic model needs it here
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    prev, channels = "x", 3
    for i in range(count):
        out_ch = 8 + i
        w = rng.standard_normal((out_ch, channels, 3, 3)).astype(np.float32)
        b = rng.standard_normal(out_ch).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"conv{i}.weight"),
                  numpy_helper.from_array(b, f"conv{i}.bias")]
        nodes.append(helper.make_node("Conv", [prev, f"conv{i}.weight", f"conv{i}.bias"],
                                      [f"y{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
        prev, channels = f"y{i}", out_ch
    graph = helper.make_graph(
        nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _start_up(path: str, dtype: str, engine: str, env: dict) -> dict:
    """One new process converting the model on ``engine``: its wall time
    (``seconds``), the programs it built and its device."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, path, dtype, engine], env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{engine} start-up run failed: "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]), seconds=seconds)


def start_up(path: str, dtype: str, repeat: int, opencl: bool) -> dict:
    """Medians of ``repeat`` new processes each: cpu, and with ``opencl`` the
    cold (empty caches every time) and warm (caches of the cold runs) opencl."""
    env = dict(os.environ)
    cpus = [_start_up(path, dtype, "cpu", env) for _ in range(repeat)]
    out = {"cpu": statistics.median(c["seconds"] for c in cpus), "phases": {"cpu": cpus}}
    if not opencl:
        return out
    with tempfile.TemporaryDirectory() as tmp:
        colds = []
        for i in range(repeat):
            cache = dict(env, POCL_CACHE_DIR=os.path.join(tmp, f"pocl{i}"),
                         XDG_CACHE_HOME=os.path.join(tmp, f"cache{i}"))
            os.makedirs(cache["POCL_CACHE_DIR"])
            colds.append(_start_up(path, dtype, "opencl", cache))
        warms = [_start_up(path, dtype, "opencl", cache) for _ in range(repeat)]
    out.update(cold=statistics.median(c["seconds"] for c in colds), builds=colds[0]["builds"],
               warm=statistics.median(w["seconds"] for w in warms), device=colds[0]["device"])
    out["phases"].update(cold=colds, warm=warms)
    return out


def phase_table(phases: dict, out=print) -> None:
    """Where a start-up's time goes: the median seconds of each phase per run kind."""
    kinds = list(phases)
    out("where the time goes (medians, s):")
    out("| phase | " + " | ".join(kinds) + " | what |")
    out("|---|" + "---|" * len(kinds) + "---|")
    for name, what in PHASES.items():
        cells = [f"{statistics.median(r['phases'][name] for r in phases[k]):.3f}"
                 for k in kinds]
        out(f"| {name} | " + " | ".join(cells) + f" | {what} |")
    cells = [f"{statistics.median(r['seconds'] - sum(r['phases'].values()) for r in phases[k]):.3f}"
             for k in kinds]
    out("| interpreter | " + " | ".join(cells) + " | Python starting and exiting |")


def _timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(path: str, dtype: str = "f32", repeat: int = 3, out=print) -> dict:
    """Measure and print the start-up and in-process figures for the model at ``path``."""
    onnx_model = model.load(path)
    cpu = engine.get("cpu")
    count = len(model.convert_model(onnx_model, path, dtype, engine=cpu)[1]["tensors"])
    opencl = engine.opencl_available()
    result = {"model": os.path.basename(path), "tensors": count,
              "start_up": start_up(path, dtype, repeat, opencl),
              "cpu": _timed(lambda: model.convert_model(onnx_model, path, dtype, engine=cpu),
                            repeat)}
    if opencl:
        eng = engine.get("opencl")
        model.convert_model(onnx_model, path, dtype, engine=eng)    # builds, if any
        result["opencl"] = _timed(lambda: model.convert_model(onnx_model, path, dtype,
                                                              engine=eng), repeat)
    up, cpu_s = result["start_up"], result["start_up"]["cpu"]
    out(f"model load: {result['model']}, {count} tensors to images ({dtype}); "
        f"medians of {repeat}")
    out("start-up (a new process: imports, model, engine, every weight converted):")
    out("| engine | programs built | cold s | warm s | x cpu (cold / warm) |")
    out("|---|---|---|---|---|")
    if "cold" in up:
        out(f"| opencl ({up['device']}) | {up['builds']} | {up['cold']:.3f} | "
            f"{up['warm']:.3f} | {up['cold'] / cpu_s:.1f} / {up['warm'] / cpu_s:.1f} |")
    else:
        out("| opencl | - | - | - | no OpenCL device with image support |")
    out(f"| cpu | 0 | {cpu_s:.3f} | {cpu_s:.3f} | 1.0 / 1.0 |")
    phase_table(up["phases"], out)
    conv = f"{result['opencl']:.3f} s ({result['opencl'] / result['cpu']:.1f} x cpu)" \
        if opencl else "-"
    out(f"conversion alone, in one process (programs built): opencl {conv}, "
        f"cpu {result['cpu']:.3f} s")
    return result


def main(model_arg: str, dtype: str = "f32", repeat: int = 3) -> int:
    if model_arg == "synthetic":
        with tempfile.TemporaryDirectory() as tmp:
            run(synthetic_model(os.path.join(tmp, "synthetic60.onnx")), dtype, repeat)
        return 0
    run(model_arg, dtype, repeat)
    return 0
