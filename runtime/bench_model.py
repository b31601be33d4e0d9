"""Model load time: one ONNX model's weights converted on each engine, in one run.

What an inference engine pays at start-up: every weight of the model placed on
its image. Four figures, side by side:

* **cold**: the OpenCL engine in a new process whose PoCL and pyopencl caches
  are empty folders (engine creation, program builds and conversion);
* **builds**: the programs that cold run built;
* **warm**: the same conversion again in this process (programs built);
* **cpu**: the cpu engine in this process.

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

from . import engine, model

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from runtime import engine, model
from runtime.opencl import programs
onnx_model = model.onnx_graph.load(sys.argv[1])
t1 = time.perf_counter()
eng = engine.get("opencl")
model.convert_model(onnx_model, sys.argv[1], sys.argv[2], engine=eng)
t2 = time.perf_counter()
print(json.dumps({"seconds": t2 - t1, "builds": programs.STATS["builds"],
                  "device": eng.device.name.strip()}))
"""


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


def _cold(path: str, dtype: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, POCL_CACHE_DIR=os.path.join(tmp, "pocl"),
                   XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        os.makedirs(env["POCL_CACHE_DIR"])
        done = subprocess.run([sys.executable, "-c", _CHILD, path, dtype], env=env,
                              capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"cold run failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(path: str, dtype: str = "f32", repeat: int = 3, out=print) -> dict:
    """Measure and print the four figures for the model at ``path``."""
    onnx_model = model.onnx_graph.load(path)
    cpu = engine.get("cpu")
    count = len(model.convert_model(onnx_model, path, dtype, engine=cpu)[1]["tensors"])
    cpu_s = _timed(lambda: model.convert_model(onnx_model, path, dtype, engine=cpu), repeat)
    result = {"model": os.path.basename(path), "tensors": count, "cpu": cpu_s}
    if engine.opencl_available():
        cold = _cold(path, dtype)
        eng = engine.get("opencl")
        model.convert_model(onnx_model, path, dtype, engine=eng)    # builds, if any
        warm = _timed(lambda: model.convert_model(onnx_model, path, dtype, engine=eng), repeat)
        result.update(cold=cold["seconds"], builds=cold["builds"], warm=warm,
                      device=cold["device"])
    out(f"model load: {result['model']}, {count} tensors to images ({dtype}); "
        f"medians of {repeat}")
    out("| engine | programs built | cold s | warm s | x cpu (cold / warm) |")
    out("|---|---|---|---|---|")
    if "cold" in result:
        out(f"| opencl ({result['device']}) | {result['builds']} | {result['cold']:.3f} | "
            f"{result['warm']:.3f} | {result['cold'] / cpu_s:.1f} / {result['warm'] / cpu_s:.1f} |")
    else:
        out("| opencl | - | - | - | no OpenCL device with image support |")
    out(f"| cpu | 0 | {cpu_s:.3f} | {cpu_s:.3f} | 1.0 / 1.0 |")
    return result


def main(model_arg: str, dtype: str = "f32", repeat: int = 3) -> int:
    if model_arg == "synthetic":
        with tempfile.TemporaryDirectory() as tmp:
            run(synthetic_model(os.path.join(tmp, "synthetic60.onnx")), dtype, repeat)
        return 0
    run(model_arg, dtype, repeat)
    return 0
