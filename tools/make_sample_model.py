#!/usr/bin/env python3
"""Build runtime/data/sample_cnn.onnx, the small CNN that `clayout demo` converts.

Deterministic: the same onnx version writes the same bytes (seeded weights,
fixed names, opset and IR version), so the shipped file can be checked with
``python tools/make_sample_model.py --check``.

Graph (input 1x3x16x16):
  Conv 3->8 3x3 pad 1 (+bias) -> BatchNormalization -> Relu
  -> depthwise Conv group 8, multiplier 2, 3x3 pad 1 (+bias) -> Relu
  -> Conv 1x1 16->16 (no bias; its weight in a Constant node, as Paddle exports)
  -> GlobalAveragePool
  -> Reshape to (1, 16) (an int64 shape initializer: skipped by `clayout model`)
  -> Gemm 16->10 transB=1 (+bias; its weight a Constant (16, 10) read through a
     Transpose, as tf2onnx exports: `clayout model` folds the chain)
  -> output 1x10
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "data",
                           "sample_cnn.onnx")


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(20240601)

    def f32(name, *shape, scale=0.5):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        f32("conv1.weight", 8, 3, 3, 3),
        f32("conv1.bias", 8, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn1.scale"),
        f32("bn1.bias", 8, scale=0.1),
        f32("bn1.mean", 8, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 2.0, 8).astype(np.float32), "bn1.var"),
        f32("dw2.weight", 16, 1, 3, 3),
        f32("dw2.bias", 16, scale=0.1),
        f32("pw3.weight", 16, 16, 1, 1),
        numpy_helper.from_array(np.array([1, 16], dtype=np.int64), "flatten.shape"),
        f32("fc.weight", 10, 16),
        f32("fc.bias", 10, scale=0.1),
    ]
    pw3, fc = inits.pop(8), inits.pop(9)       # these two become Constant nodes
    fc_io = numpy_helper.from_array(numpy_helper.to_array(fc).T.copy(), "fc.weight_io")
    nodes = [
        helper.make_node("Constant", [], ["pw3.weight"], name="pw3.weight", value=pw3),
        helper.make_node("Constant", [], ["fc.weight_io"], name="fc.weight_io", value=fc_io),
        helper.make_node("Transpose", ["fc.weight_io"], ["fc.weight"], name="fc.transpose",
                         perm=[1, 0]),
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean",
                                                "bn1.var"], ["b1"], name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "dw2.weight", "dw2.bias"], ["c2"], name="dw2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "pw3.weight"], ["c3"], name="pw3", kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["g3"], name="pool"),
        helper.make_node("Reshape", ["g3", "flatten.shape"], ["f3"], name="flatten"),
        helper.make_node("Gemm", ["f3", "fc.weight", "fc.bias"], ["output"], name="fc", transB=1),
    ]
    return finished(nodes, inits, "clayout_sample_cnn", "make_sample_model.py")


def finished(nodes, inits, name: str, script: str) -> onnx.ModelProto:
    """The sample graph (input 1x3x16x16, output 1x10) as a checked opset-13,
    IR-7 model: what both sample builders end with."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name=f"clayout tools/{script}",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def write_or_check(build, default_out: str, doc: str, argv=None) -> int:
    """Write build()'s model to --output (whole or not at all), or with
    --check compare it with the file there; the exit status."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("-o", "--output", default=default_out, help="where to write the model")
    parser.add_argument("--check", action="store_true",
                        help="compare with the file at --output instead of writing it")
    args = parser.parse_args(argv)
    data = build().SerializeToString(deterministic=True)
    if args.check:
        with open(args.output, "rb") as f:
            same = f.read() == data
        print(f"{args.output}: {'up to date' if same else 'differs from a fresh build'}")
        return 0 if same else 1
    tmp = args.output + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, args.output)
    print(f"wrote {os.path.normpath(args.output)} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(write_or_check(build, DEFAULT_OUT, __doc__))
