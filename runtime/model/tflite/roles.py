"""What each TensorFlow Lite operator makes of its constant inputs: the
TFLite half of ``clayout model``'s role table (the ONNX half is
:func:`runtime.model.onnx.roles.role_of`).

TFLite stores convolution weights channels-last, so each role's ``steps``
turn the stored tensor into clayout's logical one:

==============================  ================  ===============================================
operator (input)                role              logical dims from the TFLite tensor
==============================  ================  ===============================================
CONV_2D (1)                     filter            OHWI (O, kH, kW, I) -> (O, I, kH, kW)
DEPTHWISE_CONV_2D (1)           depthwise         (1, kH, kW, C*M) -> (M, C, kH, kW),
                                                  [m, c, h, w] = tflite[0, h, w, c*M + m]
TRANSPOSE_CONV (1),             filter            OHWI (O, kH, kW, I) -> (O, I, kH, kW)
Convolution2DTransposeBias (1)
FULLY_CONNECTED (1)             fc_weight         (O, I) -> (O, I, 1, 1)
BATCH_MATMUL (1)                fc_weight         (K, N) -> (N, K, 1, 1); adj_y: (N, K) as stored;
                                                  (G, K, N) -> (G*N, K, 1, 1)
LSTM / RNN / SVDF 2-D weights   fc_weight         (rows, cols) -> (rows, cols, 1, 1)
biases (CONV_2D, DEPTHWISE,     argument          the vector (one non-unit dim)
FULLY_CONNECTED 2; TRANSPOSE_CONV
3; Convolution2DTransposeBias 2);
PRELU alpha; per-channel
ADD/SUB/MUL/DIV constants
==============================  ================  ===============================================

C, the depthwise input's channel count, is read from the operator's input
tensor (its last dim), else from ``depth_multiplier``. Every other constant
(PAD paddings, RESHAPE shapes, CONCATENATION inputs, a custom op's inputs but
MediaPipe's Convolution2DTransposeBias) has no role and is listed with why.

Example::

    >>> from runtime.model.graph import Use
    >>> role_of((8, 3, 3, 4), Use("CONV_2D", "#0", 1, front="tflite")).dims
    (8, 4, 3, 3)
"""
from __future__ import annotations

from ..graph import ConstantRole, argument_role
from ..tensor import Reshape, Transpose

OHWI = (Transpose((0, 3, 1, 2)),)
TRANSPOSED_CONV_OPS = ("TRANSPOSE_CONV", "Convolution2DTransposeBias")
BIAS_INPUT = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2, "TRANSPOSE_CONV": 3,
              "Convolution2DTransposeBias": 2}
ELEMENTWISE_OPS = ("ADD", "SUB", "MUL", "DIV")
SEQUENCE_OPS = ("LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "RNN",
                "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "SVDF")
WEIGHT_INPUT = {op: 1 for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL",
                                  "CONV_3D", "CONV_3D_TRANSPOSE", "EMBEDDING_LOOKUP")
                + TRANSPOSED_CONV_OPS}
FLOAT_TYPES = ("float32", "float16", "float64", "bfloat16")
# operators whose constant inputs are weights: one with no image role never
# goes unnoticed (a plain buffer, or with --images-only the command fails naming it)
COMPUTE_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "CONV_3D",
               "CONV_3D_TRANSPOSE", "EMBEDDING_LOOKUP") + TRANSPOSED_CONV_OPS + SEQUENCE_OPS


def _conv(shape: tuple, op: str) -> ConstantRole:
    if len(shape) != 4:
        return ConstantRole(reason=f"{op} weight of rank {len(shape)}: expected OHWI (O, kH, kW, I)")
    o, kh, kw, i = shape
    return ConstantRole("filter", (o, i, kh, kw), OHWI,
                f"TFLite OHWI {tuple(shape)} transposed to (O,I,kH,kW)", source_layout="OHWI")


def _depthwise(shape: tuple, use) -> ConstantRole:
    if len(shape) != 4 or shape[0] != 1:
        return ConstantRole(reason=f"DEPTHWISE_CONV_2D weight of shape {tuple(shape)}: expected "
                    "(1, kH, kW, C*M)")
    _, kh, kw, cm = shape
    channels = input_channels(use)
    if not channels:
        mult = int(getattr(use.proto, "options", {}).get("depth_multiplier", 0) or 0)
        channels = cm // mult if mult > 0 and cm % mult == 0 else 0
    if not channels or cm % channels:
        return ConstantRole(reason=f"DEPTHWISE_CONV_2D weight of shape {tuple(shape)}: its input's "
                    "channel count is unknown or does not divide C*M")
    mult = cm // channels
    return ConstantRole("depthwise", (mult, channels, kh, kw),
                (Reshape((kh, kw, channels, mult)), Transpose((3, 2, 0, 1))),
                f"TFLite (1,kH,kW,C*M) with C={channels}, M={mult}: "
                "[m,c,h,w] = tflite[0,h,w,c*M+m]", source_layout="1HWC")


def input_channels(use) -> int:
    """The last dim of the operator's input 0 (its activation), 0 when unknown."""
    operator, subgraph = use.proto, use.graph
    inputs = getattr(operator, "inputs", ())
    if not inputs or subgraph is None or not 0 <= inputs[0] < len(subgraph.tensors):
        return 0
    shape = subgraph.tensors[inputs[0]].shape
    return int(shape[-1]) if shape and shape[-1] > 0 else 0


def _matmul(shape: tuple, use) -> ConstantRole:
    adj_y = bool(getattr(use.proto, "options", {}).get("adj_y", False))
    if len(shape) == 2 and adj_y:
        return ConstantRole("fc_weight", (shape[0], shape[1], 1, 1), (Reshape((*shape, 1, 1)),),
                    "BATCH_MATMUL y (N,K) with adj_y, as stored", source_layout="NK")
    if len(shape) == 2:
        dims = (shape[1], shape[0], 1, 1)
        return ConstantRole("fc_weight", dims, (Transpose((1, 0)), Reshape(dims)),
                    "BATCH_MATMUL y (K,N) transposed to (N,K)", source_layout="KN")
    if len(shape) == 3 and not adj_y:
        dims = (shape[0] * shape[2], shape[1], 1, 1)
        return ConstantRole("fc_weight", dims, (Transpose((0, 2, 1)), Reshape(dims)),
                    "BATCH_MATMUL y (G,K,N) to (G*N,K): [g*N+n, k] = y[g, k, n]",
                    source_layout="GKN")
    return ConstantRole(reason=f"BATCH_MATMUL weight of rank {len(shape)}"
                + (" with adj_y" if adj_y else "") + ": (K, N), (N, K) and (G, K, N) are mapped")


def role_of(shape: tuple, use) -> ConstantRole:
    """What being input ``use.index`` of the TFLite operator ``use.op``
    makes of a constant of ``shape``: its role, dims and steps, or why it
    has none (``use.proto``: the operator record; ``use.graph``: its subgraph)."""
    op, index = use.op, use.index
    shape = tuple(shape)
    if index == 1 and (op == "CONV_2D" or op in TRANSPOSED_CONV_OPS):
        return _conv(shape, op)
    if op == "DEPTHWISE_CONV_2D" and index == 1:
        return _depthwise(shape, use)
    if op == "FULLY_CONNECTED" and index == 1:
        if getattr(use.proto, "options", {}).get("weights_format", 0):
            return ConstantRole(reason="FULLY_CONNECTED weights in the shuffled 4x16 int8 format: "
                        "clayout reads the default (O, I) format only")
        if len(shape) != 2:
            return ConstantRole(reason=f"FULLY_CONNECTED weight of rank {len(shape)}: expected (O, I)")
        dims = (shape[0], shape[1], 1, 1)
        return ConstantRole("fc_weight", dims, (Reshape(dims),), "TFLite (O,I) as stored",
                    source_layout="OI")
    if op == "BATCH_MATMUL" and index == 1:
        return _matmul(shape, use)
    if op in SEQUENCE_OPS and len(shape) == 2:
        dims = (shape[0], shape[1], 1, 1)
        return ConstantRole("fc_weight", dims, (Reshape(dims),), f"{op} weight (rows, cols) as stored",
                    source_layout="OI")
    if BIAS_INPUT.get(op) == index or (op == "PRELU" and index == 1) or \
            (op in SEQUENCE_OPS and len(shape) == 1):
        return argument_role(op, index, shape, elementwise=False, source="TFLite")
    if op in ELEMENTWISE_OPS and index in (0, 1):
        return argument_role(op, index, shape, elementwise=True, source="TFLite")
    if getattr(use.proto, "custom", False):
        return ConstantRole(reason=f"custom op {op} input {index}: clayout knows the inputs of no custom "
                    "op but Convolution2DTransposeBias")
    return ConstantRole(reason=f"{op} input {index} has no image role")


def is_weight_input(use, dtype: str) -> bool:
    """Whether ``use`` reads a weight that must never be dropped: a float
    constant input of a COMPUTE_OPS operator, or its weight input whatever
    its type (not TRANSPOSE_CONV's int32 output shape)."""
    return use.op in COMPUTE_OPS and (dtype in FLOAT_TYPES or WEIGHT_INPUT.get(use.op) == use.index)


def use_role(shape: tuple, use) -> ConstantRole:
    """The role one use (a runtime.model.graph.Use) gives a constant of ``shape``."""
    return role_of(shape, use)


def param_reason(use) -> str:
    """TFLite keeps quantization parameters on the tensors, never as inputs: ""."""
    return ""


def conv_settings(use) -> tuple[tuple, tuple, int]:
    """(strides, dilations, group) of the CONV_2D ``use`` reads a filter for,
    in ONNX's terms: its options, and the group its input's channels give."""
    options = use.proto.options
    strides = (int(options.get("stride_h", 1)), int(options.get("stride_w", 1)))
    dilations = (int(options.get("dilation_h_factor", 1)),
                 int(options.get("dilation_w_factor", 1)))
    channels = input_channels(use)
    per_group = use.graph.tensors[use.proto.inputs[1]].shape[-1]
    group = channels // per_group if channels and per_group and \
        channels % per_group == 0 else 1
    return strides, dilations, group
