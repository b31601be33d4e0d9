"""The compute kernels of cl_kernels/compute.cl, run on Memory objects.

Each op takes its inputs and output as Memory objects on one OpenCL engine,
in any layouts the accessors cover (images, buffers), builds the accessors
of their sides (x, w, b, ... for the inputs, y for the output, written), and
runs the kernel's one text compiled with them: one program per combination
of layouts (``generic``: per layout family, whatever the dims). Every output
element is computed, every padding lane of an output image written as 0.

>>> y = Memory.image("in_out_channel", (1, 8, 16, 16), engine=eng)       # doctest: +SKIP
>>> conv(x, w, b, y, strides=(1, 1), pads=(1, 1), dilations=(1, 1), groups=1)  # doctest: +SKIP
"""
from __future__ import annotations

import math
from importlib import resources

import numpy as np

from ..cache import memoized
from ..errors import ClayoutError
from ..opencl.accessor import accessor


@memoized("compute kernel source", "CLAYOUT_COMPUTE_SOURCE_CACHE", 1)
def kernels_text() -> str:
    return resources.files("runtime.cl_kernels").joinpath("compute.cl").read_text()


def _run(section: str, kernel: str, inputs, out, scalars=(), defines=(), generic=True):
    """Run ``kernel`` of the ``section`` of compute.cl over ``out``:
    ``inputs`` are (accessor name, Memory) pairs, ``out`` is y."""
    engine = out.engine
    for _, mem in inputs:
        if mem.engine.domain != engine.domain:
            raise ClayoutError(f"{mem!r} and the output {out!r} are on different engines")
    if out.storage is None or any(mem.storage is None for _, mem in inputs):
        return None   # nothing to compute (a zero-volume tensor)
    accs = [accessor(mem.side, name=name, generic=generic) for name, mem in inputs]
    y = accessor(out.side, name="y", access="write", generic=generic)
    source = "".join(a.source for a in accs) + y.source + \
        "".join(f"#define {d}\n" for d in (section, *defines)) + kernels_text()
    args = [v for a, (_, mem) in zip(accs, inputs) for v in a.args(mem.storage)]
    args += list(y.args(out.storage)) + list(scalars)
    dims = list(out.dims)
    if y.lane_axis is not None:
        dims[y.lane_axis] = -(-dims[y.lane_axis] // 4)
    return engine.launcher.run_kernel(source, kernel, (max(1, math.prod(dims)),), args)


def _ints(*values):
    return [np.int32(v) for v in values]


def conv(x, w, b, y, strides=(1, 1), pads=(0, 0), dilations=(1, 1), groups=1,
         depthwise=False, generic=True):
    """y = Conv(x, w) + b (ONNX semantics; symmetric ``pads`` (top, left)).
    ``w`` is (O, C/groups, kH, kW), or with ``depthwise`` (M, C, kH, kW)."""
    return _run("CLAYOUT_CONV", "clayout_conv", [("x", x), ("w", w), ("b", b)], y,
                _ints(*strides, *pads, *dilations, groups),
                ("CLAYOUT_DEPTHWISE_FILTER",) if depthwise else (), generic)


def gemm(x, w, b, y, generic=True):
    """y = x w^T + b, x (N, I, 1, 1), w (O, I, 1, 1), b (O)."""
    return _run("CLAYOUT_GEMM", "clayout_gemm", [("x", x), ("w", w), ("b", b)], y,
                generic=generic)


def pool(x, y, kernel, strides, pads=(0, 0), is_max=False, count_pad=False, generic=True):
    """MaxPool (``is_max``) or AveragePool; a global average is a kernel of H x W."""
    return _run("CLAYOUT_POOL", "clayout_pool", [("x", x)], y,
                _ints(*kernel, *strides, *pads, int(is_max), int(count_pad)), generic=generic)


def batchnorm(x, scale, bias, mean, var, y, eps=1e-5, generic=True):
    return _run("CLAYOUT_BATCHNORM", "clayout_batchnorm",
                [("x", x), ("s", scale), ("b", bias), ("m", mean), ("v", var)], y,
                [np.float32(eps)], generic=generic)


def add(x, b, y, generic=True):
    """y = x + b: ``b`` of x's dims, or a per-channel vector (rank 1)."""
    return _run("CLAYOUT_ADD", "clayout_add", [("x", x), ("b", b)], y, generic=generic)


def relu(x, y, generic=True):
    return _run("CLAYOUT_RELU", "clayout_relu", [("x", x)], y, generic=generic)


def conv_out_dims(x_dims, w_dims, strides, pads, dilations, depthwise=False, groups=1):
    """(N, O, OH, OW) of a convolution (symmetric pads)."""
    n, _, h, w = x_dims
    out = w_dims[0] * (w_dims[1] if depthwise else 1)
    kh, kw = w_dims[2], w_dims[3]
    oh = (h + 2 * pads[0] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + 2 * pads[1] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    return n, out, oh, ow
