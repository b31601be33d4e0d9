#!/usr/bin/env python3
"""Build runtime/data/sample_quantized.onnx, a small quantized CNN for docs/cli.md.

It holds both forms of quantized weights that `clayout model` meets in exports:
QDQ (what onnxruntime's quantize_static makes) and an integer operator after a
DynamicQuantizeLinear (what quantize_dynamic makes). Deterministic like
tools/make_sample_model.py: ``python tools/make_quantized_sample.py --check``
compares the shipped file with a fresh build.

Graph (input 1x3x16x16 float):
  QuantizeLinear -> DequantizeLinear (the input's activation scale, uint8)
  -> Conv 3->8 3x3: weight DequantizeLinear(int8, per-channel scale, axis 0),
     bias DequantizeLinear(int32, per-channel scale) -> Relu
  -> DynamicQuantizeLinear -> ConvInteger 8->16 1x1 (uint8 weight, per-tensor
     zero point) -> Cast -> Mul by (the input's run-time scale * the weight's scale)
  -> GlobalAveragePool -> Reshape (1, 16)
  -> MatMul 16->10: weight DequantizeLinear(int8, per-tensor scale and zero point)
  -> output 1x10
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from make_sample_model import finished, write_or_check

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "data",
                           "sample_quantized.onnx")


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(20260114)

    def array(name, values):
        return numpy_helper.from_array(np.asarray(values), name)

    inits = [
        array("input.scale", np.float32(1 / 64)), array("input.zero_point", np.uint8(128)),
        array("conv1.weight_q", rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)),
        array("conv1.weight_scale", rng.uniform(0.002, 0.01, 8).astype(np.float32)),
        array("conv1.weight_zero_point", np.zeros(8, np.int8)),
        array("conv1.bias_q", rng.integers(-3000, 3000, 8).astype(np.int32)),
        array("conv1.bias_scale", rng.uniform(2e-5, 1e-4, 8).astype(np.float32)),
        array("conv1.bias_zero_point", np.zeros(8, np.int32)),
        array("pw2.weight_q", rng.integers(0, 256, (16, 8, 1, 1)).astype(np.uint8)),
        array("pw2.weight_zero_point", np.uint8(131)),
        array("pw2.weight_scale", np.float32(0.0042)),
        array("flatten.shape", np.array([1, 16], np.int64)),
        array("fc.weight_q", rng.integers(-127, 128, (16, 10)).astype(np.int8)),
        array("fc.weight_scale", np.float32(0.0031)),
        array("fc.weight_zero_point", np.int8(-2)),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["input", "input.scale", "input.zero_point"], ["iq"],
                         name="input.quantize"),
        helper.make_node("DequantizeLinear", ["iq", "input.scale", "input.zero_point"], ["x"],
                         name="input.dequantize"),
        helper.make_node("DequantizeLinear", ["conv1.weight_q", "conv1.weight_scale",
                                              "conv1.weight_zero_point"], ["conv1.weight"],
                         name="conv1.weight_dq", axis=0),
        helper.make_node("DequantizeLinear", ["conv1.bias_q", "conv1.bias_scale",
                                              "conv1.bias_zero_point"], ["conv1.bias"],
                         name="conv1.bias_dq", axis=0),
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("DynamicQuantizeLinear", ["r1"], ["r1q", "r1.scale", "r1.zero_point"],
                         name="r1.quantize"),
        helper.make_node("Mul", ["r1.scale", "pw2.weight_scale"], ["pw2.scales"],
                         name="pw2.scales_mul"),
        helper.make_node("ConvInteger", ["r1q", "pw2.weight_q", "r1.zero_point",
                                         "pw2.weight_zero_point"], ["pw2.acc"], name="pw2"),
        helper.make_node("Cast", ["pw2.acc"], ["pw2.accf"], name="pw2.cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["pw2.accf", "pw2.scales"], ["c2"], name="pw2.rescale"),
        helper.make_node("GlobalAveragePool", ["c2"], ["g2"], name="pool"),
        helper.make_node("Reshape", ["g2", "flatten.shape"], ["f2"], name="flatten"),
        helper.make_node("DequantizeLinear", ["fc.weight_q", "fc.weight_scale",
                                              "fc.weight_zero_point"], ["fc.weight"],
                         name="fc.weight_dq"),
        helper.make_node("MatMul", ["f2", "fc.weight"], ["output"], name="fc"),
    ]
    return finished(nodes, inits, "clayout_sample_quantized", "make_quantized_sample.py")


if __name__ == "__main__":
    sys.exit(write_or_check(build, DEFAULT_OUT, __doc__))
