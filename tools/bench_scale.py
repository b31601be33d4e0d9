"""Models at full size: `clayout model`'s time, throughput and peak memory per model size.

Synthetic models (``N`` convolutions, each weight 512x512x3x3 f32, 9.4 MB),
made on the fly in a temporary folder in three forms: one ``.onnx`` holding
every tensor (``inline``), an ``.onnx`` with its tensors in an external data
file (``external``), and a ``.tflite`` whose buffers follow the flatbuffer
(``tflite``, the form TFLite writes past 2 GB). Each row is one new process
running ``python -m runtime model M -o OUT`` (``--verify`` in its own rows),
timed from outside; its peak memory is the child's peak resident set
(``VmHWM``, printed by the child as it exits), beside what ``--dry-run``
says it will need (runtime.model.peak_estimate, in a process that has read
the model). MB/s counts the model's weight bytes over the whole command
(Python start, imports and reading the model included), and again after
start-up: over the time minus that of ``--dry-run`` on the same model.

Run: ``python tools/bench.py --models-at-scale`` (``--quick``: 10 and 40
convolutions only; ``--sizes 10,40,120,320`` for others).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

SHAPE = (512, 512, 3, 3)
WEIGHT_BYTES = int(np.prod(SHAPE)) * 4


def _weights(count: int):
    rng = np.random.default_rng(54)
    for _ in range(count):
        yield rng.standard_normal(SHAPE, dtype=np.float32)


def onnx_model(path: str, count: int, external: bool) -> str:
    """``count`` chained 3x3 convolutions of 512 channels, saved at ``path``
    (their tensors in ``path + '.data'`` when ``external``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits, prev = [], [], "x"
    for i, w in enumerate(_weights(count)):
        inits.append(numpy_helper.from_array(w, f"conv{i}.weight"))
        nodes.append(helper.make_node("Conv", [prev, f"conv{i}.weight"], [f"y{i}"],
                                      name=f"conv{i}", pads=[1, 1, 1, 1]))
        prev = f"y{i}"
    graph = helper.make_graph(nodes, "scale", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 512, 8, 8])], [helper.make_tensor_value_info(
            prev, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if external:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(path) + ".data", size_threshold=0)
    else:
        onnx.save(model, path)
    return path


def tflite_model(path: str, count: int) -> str:
    """The same convolutions as a .tflite (CONV_2D, OHWI filters), each
    buffer after the flatbuffer, named by its offset and size."""
    import importlib
    import flatbuffers
    fb = {n: importlib.import_module(f"tflite.{n}") for n in
          ("Tensor", "Operator", "SubGraph", "OperatorCode", "Buffer", "Model")}
    conv_2d = importlib.import_module("tflite.BuiltinOperator").BuiltinOperator.CONV_2D
    b = flatbuffers.Builder(1024)
    o, i, h, w = SHAPE

    def vector(kind, field, values, table=False):
        getattr(fb[kind], f"Start{field}Vector")(b, len(values))
        for v in reversed(values):
            b.PrependUOffsetTRelative(v) if table else b.PrependInt32(v)
        return b.EndVector()

    def table(kind, **fields):
        made = {k: v for k, v in fields.items()}
        fb[kind].Start(b)
        for k, v in made.items():
            getattr(fb[kind], f"Add{k}")(b, v)
        return fb[kind].End(b)

    tensors = []
    for k in range(count + 1):   # activations: the input and each conv's output (NHWC)
        name, shape = b.CreateString(f"y{k}"), vector("Tensor", "Shape", [1, 8, 8, o])
        tensors.append(table("Tensor", Shape=shape, Name=name))
    for k in range(count):       # the filters, OHWI, in buffer k + 1
        name, shape = b.CreateString(f"conv{k}/filter"), vector("Tensor", "Shape", [o, h, w, i])
        tensors.append(table("Tensor", Shape=shape, Buffer=k + 1, Name=name))
    ops = [table("Operator", OpcodeIndex=0,
                 Inputs=vector("Operator", "Inputs", [k, count + 1 + k]),
                 Outputs=vector("Operator", "Outputs", [k + 1])) for k in range(count)]
    subgraph = table("SubGraph", Tensors=vector("SubGraph", "Tensors", tensors, True),
                     Operators=vector("SubGraph", "Operators", ops, True),
                     Inputs=vector("SubGraph", "Inputs", [0]),
                     Outputs=vector("SubGraph", "Outputs", [count]))
    code = table("OperatorCode", BuiltinCode=conv_2d, DeprecatedBuiltinCode=conv_2d)
    # each offset a marker of the right width, patched once the flatbuffer's size is known
    marks = [0x7EAD_BEEF_0000_0000 + k for k in range(count)]
    buffers = [table("Buffer")] + [table("Buffer", Offset=m, Size=WEIGHT_BYTES) for m in marks]
    model = table("Model", Version=3,
                  OperatorCodes=vector("Model", "OperatorCodes", [code], True),
                  Subgraphs=vector("Model", "Subgraphs", [subgraph], True),
                  Buffers=vector("Model", "Buffers", buffers, True))
    b.Finish(model, file_identifier=b"TFL3")
    head = bytearray(b.Output())
    start = -(-len(head) // 64) * 64
    for k, mark in enumerate(marks):
        at = head.index(mark.to_bytes(8, "little"))
        head[at:at + 8] = (start + k * WEIGHT_BYTES).to_bytes(8, "little")
    with open(path, "wb") as f:
        f.write(head + bytes(start - len(head)))
        for weight in _weights(count):
            f.write(np.ascontiguousarray(weight.transpose(0, 2, 3, 1)).tobytes())
    return path


MAKERS = {"inline": lambda p, n: onnx_model(p + ".onnx", n, False),
          "external": lambda p, n: onnx_model(p + ".onnx", n, True),
          "tflite": lambda p, n: tflite_model(p + ".tflite", n)}


# `python -m runtime ARGS` that prints its own peak resident set (VmHWM) as it exits: a
# child's ru_maxrss would count its parent's memory at the fork
_CLAYOUT = """
import atexit, runpy, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            sys.stderr.write("\\npeak-rss-kib " + line.split()[1] + "\\n")
atexit.register(peak)
sys.argv = ["clayout"] + sys.argv[1:]
runpy.run_module("runtime", run_name="__main__")
"""


def measured(args: list[str]) -> tuple[float, int, str]:
    """(seconds, peak RSS in bytes, stdout) of ``clayout ARGS`` in a new process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CLAYOUT, *args], capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"clayout {' '.join(args)}: exit {done.returncode}: "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    peak = int(re.findall(r"peak-rss-kib (\d+)", done.stderr)[-1]) * 1024
    return seconds, peak, done.stdout


def estimate(path: str) -> str:
    """runtime.model.peak_estimate of the model, in a process of its own (what
    ``--dry-run`` says, and the process's own size after reading the model),
    as text; "-" for a build without it."""
    code = ("import json, sys; from runtime import model; plan, sources = "
            "model.plan_file(sys.argv[1]); print(json.dumps(model.peak_estimate(plan, sources)))")
    done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True)
    if done.returncode:
        return "-"
    return f"{json.loads(done.stdout)['total'] / 2**30:.2f} GiB"


def made(form: str, path: str, count: int) -> str:
    """The model, made in a process of its own (its arrays never in this one)."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import bench_scale; "
            f"print(bench_scale.MAKERS[{form!r}]({path!r}, {count}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def run(sizes=(10, 40, 120), forms=("inline", "external", "tflite"), engines=("cpu",),
        verify: bool = True, out=print) -> list[dict]:
    """Measure and print one row per (size, form, engine[, --verify])."""
    rows = []
    base = ["model"]
    out("| model (N conv 512x512x3x3 f32) | size | engine | time | MB/s | MB/s after start-up "
        "| peak RSS | x the largest weight | --dry-run says |")
    out("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="clayout-scale-") as tmp:
        for count in sizes:
            for form in forms:
                path = made(form, os.path.join(tmp, f"m{count}_{form}"), count)
                nbytes = count * WEIGHT_BYTES
                started, _, _ = measured(base + [path, "--dry-run", "-q"])
                said = estimate(path)
                for engine in engines:
                    for extra in ([], ["--verify"]) if verify else ([],):
                        target = os.path.join(tmp, "w.safetensors")
                        seconds, peak, _ = measured(base + [path, "-o", target, "-q",
                                                            "--engine", engine] + extra)
                        os.unlink(target)
                        row = {"count": count, "form": form, "engine": engine,
                               "verify": bool(extra), "bytes": nbytes, "seconds": seconds,
                               "started": started, "peak": peak, "said": said}
                        rows.append(row)
                        label = f"{count} convs, {form}" + (", --verify" if extra else "")
                        after = nbytes / 1e6 / max(seconds - started, 1e-3)
                        out(f"| {label} | {nbytes / 1e6:.0f} MB | {engine} | {seconds:.1f} s | "
                            f"{nbytes / 1e6 / seconds:.0f} | {after:.0f} | "
                            f"{peak / 2**30:.2f} GiB | {peak / WEIGHT_BYTES:.1f} | {said} |")
                for name in os.listdir(tmp):
                    if name.startswith(f"m{count}_{form}"):
                        os.unlink(os.path.join(tmp, name))
    return rows


def main(sizes: str | None = None, quick: bool = False, opencl: bool = False) -> int:
    chosen = tuple(int(s) for s in sizes.split(",")) if sizes else \
        ((10, 40) if quick else (10, 40, 120))
    from runtime.engine import opencl_available
    engines = ("cpu", "opencl") if opencl and opencl_available() else ("cpu",)
    run(chosen, engines=engines)
    return 0
