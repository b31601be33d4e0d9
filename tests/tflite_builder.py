"""Writes small .tflite flatbuffers for tests, with the ``tflite`` package's
generated builders, and runs them in LiteRT's interpreter (the ground truth).

A model is a list of tensors (``T``: a constant when it has ``data`` or
``raw``), a list of operators (``Op``) and the subgraph's inputs/outputs:

>>> import numpy as np
>>> w = np.arange(12, dtype=np.float32).reshape(3, 4)
>>> data = build([T("x", (1, 4)), T("fc/w", (3, 4), data=w), T("y", (1, 3))],
...              [Op("FULLY_CONNECTED", [0, 1], [2])], inputs=[0], outputs=[2])
>>> run_litert(data, {0: np.ones((1, 4), np.float32)})["y"]
array([[ 6., 22., 38.]], dtype=float32)

Buffer 0 is the empty buffer; each constant has a buffer of its own, inside
the flatbuffer (16-byte aligned) or, with ``large_buffers``, after it,
named by Buffer.offset/size (offset from the file's start, as TFLite writes
models over 2 GB). A sparse tensor's ``data`` are its packed values and
``sparsity`` its SparsityParameters as a dict (see ``T``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import numpy as np

from conftest import needs

flatbuffers = needs("flatbuffers")
needs("tflite")
from tflite.ActivationFunctionType import ActivationFunctionType
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions
from tflite.FullyConnectedOptionsWeightsFormat import FullyConnectedOptionsWeightsFormat
from tflite.Padding import Padding

DTYPES = {"float32": 0, "float16": 1, "int32": 2, "uint8": 3, "int64": 4, "bool": 6,
          "int16": 7, "int8": 9, "float64": 10, "uint64": 12, "uint32": 15, "uint16": 16}
INDEX_TYPES = {"int32": (1, np.int32, "Int32Vector"), "uint16": (2, np.uint16, "Uint16Vector"),
               "uint8": (3, np.uint8, "Uint8Vector")}
# options tables whose name is not the op's name in CamelCase + "Options"
OPTION_TABLES = {"CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
                 "BATCH_MATMUL": "BatchMatMulOptions", "AVERAGE_POOL_2D": "Pool2DOptions",
                 "MAX_POOL_2D": "Pool2DOptions", "L2_POOL_2D": "Pool2DOptions",
                 "CONCATENATION": "ConcatenationOptions", "SUM": "ReducerOptions",
                 "MEAN": "ReducerOptions", "REDUCE_MAX": "ReducerOptions",
                 "RESHAPE": None, "DEQUANTIZE": None, "DENSIFY": None}
# fields the schema defaults to 0 where an op means 1
ONE_DEFAULTS = {"Conv2DOptions": ("stride_w", "stride_h"),
                "DepthwiseConv2DOptions": ("stride_w", "stride_h", "depth_multiplier"),
                "TransposeConvOptions": ("stride_w", "stride_h"),
                "Pool2DOptions": ("stride_w", "stride_h")}
ENUMS = {"padding": Padding, "fused_activation_function": ActivationFunctionType,
         "weights_format": FullyConnectedOptionsWeightsFormat}


@dataclass
class T:
    """A tensor; a constant when ``data`` or ``raw`` is given.

    ``sparsity``: {"traversal_order": [...], "block_map": [...], "dim_metadata":
    [{"format": "dense", "dense_size": 4} | {"format": "csr", "segments": [...],
    "indices": [...], "index_type": "int32" | "uint16" | "uint8"}]} (``index_type``
    sets both arrays' type; ``segments_type`` / ``indices_type`` set one)."""
    name: str
    shape: tuple
    dtype: str = "float32"
    data: np.ndarray | None = None
    scale: list | None = None
    zero_point: list | None = None
    quantized_dimension: int = 0
    sparsity: dict | None = None
    raw: bytes | None = None


@dataclass
class Op:
    """An operator: a builtin name ("CONV_2D") or, with ``custom``, a custom
    code. ``options`` are the options table's fields by their schema names
    (enums by name: "SAME", "RELU6"), plus "dilation" (n or (h, w)),
    "version" (the operator code's version) and "custom_options" (bytes)."""
    op: str
    inputs: list[int]
    outputs: list[int]
    options: dict = field(default_factory=dict)
    custom: bool = False


def camel(name: str) -> str:
    """'stride_w' -> 'StrideW', 'CONV_2D' -> 'Conv2D'."""
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


def module(name: str):
    """The generated module ``tflite.<name>`` (its builder functions)."""
    return importlib.import_module(f"tflite.{name}")


def int_vector(builder, start, values, dtype=np.int32) -> int:
    """A vector of ints, via the generated ``Start...Vector`` function."""
    return builder.CreateNumpyVector(np.asarray(values, dtype).reshape(-1)) if len(values) \
        else (start(builder, 0), builder.EndVector())[1]


def byte_vector(builder, payload: bytes, alignment: int = 16) -> int:
    """A [ubyte] vector whose first byte is ``alignment``-aligned in the file."""
    builder.StartVector(1, len(payload), alignment)
    builder.head -= len(payload)
    builder.Bytes[builder.head:builder.head + len(payload)] = payload
    return builder.EndVector()


def tensor_bytes(t: T) -> bytes | None:
    """A constant's buffer contents; None for an activation."""
    if t.raw is not None:
        return bytes(t.raw)
    if t.data is None:
        return None
    return np.ascontiguousarray(np.asarray(t.data).astype(np.dtype(t.dtype).newbyteorder("<"))
                                ).tobytes()


def union_vector(builder, values, index_type: str):
    """(type, offset) of an Int32Vector/Uint16Vector/Uint8Vector table."""
    code, dtype, name = INDEX_TYPES[index_type]
    gen = module(name)
    vec = builder.CreateNumpyVector(np.asarray(values, dtype).reshape(-1))
    getattr(gen, f"{name}Start")(builder)
    getattr(gen, f"{name}AddValues")(builder, vec)
    return code, getattr(gen, f"{name}End")(builder)


def sparsity_table(builder, sparsity: dict) -> int:
    """A SparsityParameters table from the dict of ``T.sparsity``."""
    DM = module("DimensionMetadata")
    SP = module("SparsityParameters")
    levels = []
    for meta in sparsity["dim_metadata"]:
        csr = meta.get("format", "dense") == "csr"
        if csr:
            kind = meta.get("index_type", "int32")
            seg = union_vector(builder, meta["segments"], meta.get("segments_type", kind))
            idx = union_vector(builder, meta["indices"], meta.get("indices_type", kind))
        DM.DimensionMetadataStart(builder)
        DM.DimensionMetadataAddFormat(builder, int(csr))
        DM.DimensionMetadataAddDenseSize(builder, int(meta.get("dense_size", 0)))
        if csr:
            DM.DimensionMetadataAddArraySegmentsType(builder, seg[0])
            DM.DimensionMetadataAddArraySegments(builder, seg[1])
            DM.DimensionMetadataAddArrayIndicesType(builder, idx[0])
            DM.DimensionMetadataAddArrayIndices(builder, idx[1])
        levels.append(DM.DimensionMetadataEnd(builder))
    order = int_vector(builder, SP.SparsityParametersStartTraversalOrderVector,
                       sparsity["traversal_order"])
    block_map = sparsity.get("block_map") or []
    blocks = int_vector(builder, SP.SparsityParametersStartBlockMapVector, block_map) \
        if block_map else None
    SP.SparsityParametersStartDimMetadataVector(builder, len(levels))
    for level in reversed(levels):
        builder.PrependUOffsetTRelative(level)
    metas = builder.EndVector()
    SP.SparsityParametersStart(builder)
    SP.SparsityParametersAddTraversalOrder(builder, order)
    if blocks is not None:
        SP.SparsityParametersAddBlockMap(builder, blocks)
    SP.SparsityParametersAddDimMetadata(builder, metas)
    return SP.SparsityParametersEnd(builder)


def quantization_table(builder, t: T) -> int:
    """A QuantizationParameters table (scale, zero_point, quantized_dimension)."""
    QP = module("QuantizationParameters")
    scale = builder.CreateNumpyVector(np.asarray(t.scale, np.float32).reshape(-1))
    zero = builder.CreateNumpyVector(np.asarray(
        t.zero_point if t.zero_point is not None else [0] * len(t.scale), np.int64).reshape(-1))
    QP.QuantizationParametersStart(builder)
    QP.QuantizationParametersAddScale(builder, scale)
    QP.QuantizationParametersAddZeroPoint(builder, zero)
    QP.QuantizationParametersAddQuantizedDimension(builder, t.quantized_dimension)
    return QP.QuantizationParametersEnd(builder)


def tensor_table(builder, t: T, buffer: int) -> int:
    """A Tensor table pointing at ``buffer``."""
    TT = module("Tensor")
    name = builder.CreateString(t.name)
    shape = int_vector(builder, TT.TensorStartShapeVector, list(t.shape))
    quant = quantization_table(builder, t) if t.scale is not None else None
    sparse = sparsity_table(builder, t.sparsity) if t.sparsity is not None else None
    TT.TensorStart(builder)
    TT.TensorAddShape(builder, shape)
    TT.TensorAddType(builder, DTYPES[t.dtype])
    TT.TensorAddBuffer(builder, buffer)
    TT.TensorAddName(builder, name)
    if quant is not None:
        TT.TensorAddQuantization(builder, quant)
    if sparse is not None:
        TT.TensorAddSparsity(builder, sparse)
    return TT.TensorEnd(builder)


def options_table(builder, op: Op, tensors: list[T]):
    """(BuiltinOptions type, offset) of the op's options table, or (0, None)."""
    table = OPTION_TABLES.get(op.op, camel(op.op) + "Options")
    if op.custom or table is None or not hasattr(BuiltinOptions, table):
        return 0, None
    fields = {k: v for k, v in op.options.items() if k not in ("version", "custom_options")}
    for key in ONE_DEFAULTS.get(table, ()):
        fields.setdefault(key, 1)
    if table == "DepthwiseConv2DOptions" and "depth_multiplier" not in op.options \
            and len(op.inputs) > 1:
        x, w = tensors[op.inputs[0]].shape, tensors[op.inputs[1]].shape
        fields["depth_multiplier"] = max(1, w[-1] // max(1, x[-1]))
    dilation = fields.pop("dilation", None)
    if dilation is not None:
        h, w = (dilation, dilation) if np.isscalar(dilation) else dilation
        fields["dilation_h_factor"], fields["dilation_w_factor"] = h, w
    gen = module(table)
    getattr(gen, f"{table}Start")(builder)
    for key, value in fields.items():
        if isinstance(value, str):
            value = getattr(ENUMS[key], value)
        add = getattr(gen, f"{table}Add{camel(key)}", None)
        if add is None:
            raise KeyError(f"{table} has no field {key!r}")
        add(builder, value)
    return getattr(BuiltinOptions, table), getattr(gen, f"{table}End")(builder)


def operator_table(builder, op: Op, opcode: int, tensors: list[T]) -> int:
    """An Operator table."""
    OT = module("Operator")
    ins = int_vector(builder, OT.OperatorStartInputsVector, op.inputs)
    outs = int_vector(builder, OT.OperatorStartOutputsVector, op.outputs)
    kind, options = options_table(builder, op, tensors)
    custom = op.options.get("custom_options")
    custom = builder.CreateNumpyVector(np.frombuffer(custom, np.uint8)) if custom else None
    OT.OperatorStart(builder)
    OT.OperatorAddOpcodeIndex(builder, opcode)
    OT.OperatorAddInputs(builder, ins)
    OT.OperatorAddOutputs(builder, outs)
    if options is not None:
        OT.OperatorAddBuiltinOptionsType(builder, kind)
        OT.OperatorAddBuiltinOptions(builder, options)
    if custom is not None:
        OT.OperatorAddCustomOptions(builder, custom)
    return OT.OperatorEnd(builder)


def opcode_table(builder, key) -> int:
    """An OperatorCode table for (name, custom, version)."""
    OC = module("OperatorCode")
    name, custom, version = key
    code = BuiltinOperator.CUSTOM if custom else getattr(BuiltinOperator, name)
    custom_code = builder.CreateString(name) if custom else None
    OC.OperatorCodeStart(builder)
    OC.OperatorCodeAddDeprecatedBuiltinCode(builder, min(code, 127))
    OC.OperatorCodeAddBuiltinCode(builder, code)
    OC.OperatorCodeAddVersion(builder, version)
    if custom_code is not None:
        OC.OperatorCodeAddCustomCode(builder, custom_code)
    return OC.OperatorCodeEnd(builder)


def table_vector(builder, start, tables: list[int]) -> int:
    """A vector of tables."""
    start(builder, len(tables))
    for table in reversed(tables):
        builder.PrependUOffsetTRelative(table)
    return builder.EndVector()


def flatbuffer(tensors, ops, inputs, outputs, description, payloads, places) -> bytes:
    """The model's flatbuffer; ``places`` (offset, size) per payload puts the
    constants outside it (Buffer.offset/size), else they are inside."""
    BT = module("Buffer")
    MT = module("Model")
    SG = module("SubGraph")
    builder = flatbuffers.Builder(1024)
    keys = list(dict.fromkeys((op.op, op.custom, int(op.options.get("version", 1)))
                              for op in ops))
    buffers, owner = [], {}
    for i, t in enumerate(tensors):
        if payloads[i] is not None:
            owner[i] = len(buffers) + 1
            buffers.append(None if places else byte_vector(builder, payloads[i]))
    buffer_tables = [(BT.BufferStart(builder), BT.BufferEnd(builder))[1]]
    for j, data in enumerate(buffers):
        BT.BufferStart(builder)
        if places:
            BT.BufferAddOffset(builder, places[j][0])
            BT.BufferAddSize(builder, places[j][1])
        else:
            BT.BufferAddData(builder, data)
        buffer_tables.append(BT.BufferEnd(builder))
    tensor_tables = [tensor_table(builder, t, owner.get(i, 0)) for i, t in enumerate(tensors)]
    op_tables = [operator_table(builder, op, keys.index((op.op, op.custom,
                                int(op.options.get("version", 1)))), tensors) for op in ops]
    code_tables = [opcode_table(builder, key) for key in keys]
    sg_tensors = table_vector(builder, SG.SubGraphStartTensorsVector, tensor_tables)
    sg_ops = table_vector(builder, SG.SubGraphStartOperatorsVector, op_tables)
    sg_in = int_vector(builder, SG.SubGraphStartInputsVector, list(inputs))
    sg_out = int_vector(builder, SG.SubGraphStartOutputsVector, list(outputs))
    sg_name = builder.CreateString("main")
    SG.SubGraphStart(builder)
    SG.SubGraphAddTensors(builder, sg_tensors)
    SG.SubGraphAddOperators(builder, sg_ops)
    SG.SubGraphAddInputs(builder, sg_in)
    SG.SubGraphAddOutputs(builder, sg_out)
    SG.SubGraphAddName(builder, sg_name)
    subgraph = SG.SubGraphEnd(builder)
    subgraphs = table_vector(builder, MT.ModelStartSubgraphsVector, [subgraph])
    codes = table_vector(builder, MT.ModelStartOperatorCodesVector, code_tables)
    buffer_vec = table_vector(builder, MT.ModelStartBuffersVector, buffer_tables)
    desc = builder.CreateString(description)
    MT.ModelStart(builder)
    MT.ModelAddVersion(builder, 3)
    MT.ModelAddOperatorCodes(builder, codes)
    MT.ModelAddSubgraphs(builder, subgraphs)
    MT.ModelAddDescription(builder, desc)
    MT.ModelAddBuffers(builder, buffer_vec)
    builder.Finish(MT.ModelEnd(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def build(tensors: list[T], ops: list[Op], inputs: list[int], outputs: list[int],
          description: str = "clayout test", large_buffers: bool = False) -> bytes:
    """The bytes of a .tflite file with one subgraph of ``tensors`` and ``ops``."""
    payloads = [tensor_bytes(t) for t in tensors]
    if not large_buffers:
        return flatbuffer(tensors, ops, inputs, outputs, description, payloads, None)
    blobs = [p for p in payloads if p is not None]
    # a first pass with offsets of the same width gives the flatbuffer's size
    probe = [(1 << 40, max(1, len(b))) for b in blobs]
    size = len(flatbuffer(tensors, ops, inputs, outputs, description, payloads, probe))
    places, tail, at = [], bytearray(), -(-size // 64) * 64
    for blob in blobs:
        places.append((at + len(tail), max(1, len(blob))))
        tail += blob + bytes(-(-max(1, len(blob)) // 64) * 64 - len(blob))
    head = flatbuffer(tensors, ops, inputs, outputs, description, payloads, places)
    assert len(head) == size, "the flatbuffer changed size between passes"
    return head + bytes(at - size) + bytes(tail)


def run_litert(model: bytes, feeds: dict[int, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every tensor's value (a copy, by name; the first of a repeated name)
    after LiteRT's builtin kernels ran ``model`` on ``feeds`` (tensor index ->
    array; zeros of each input's shape where not given). The names are the
    model's: LiteRT renames each DENSIFY output "Densify_output" when it
    allocates, so they are read before."""
    from conftest import needs
    litert = needs("ai_edge_litert.interpreter")
    Interpreter, OpResolverType = litert.Interpreter, litert.OpResolverType
    interpreter = Interpreter(
        model_content=bytes(model), experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    names = {d["index"]: d["name"] for d in interpreter.get_tensor_details()}
    interpreter.allocate_tensors()
    feeds = dict(feeds or {})
    for detail in interpreter.get_input_details():
        value = feeds.get(detail["index"])
        if value is None:
            value = np.zeros(detail["shape"], detail["dtype"])
        interpreter.set_tensor(detail["index"], np.asarray(value, detail["dtype"]))
    interpreter.invoke()
    values = {}
    for detail in interpreter.get_tensor_details():
        try:
            value = interpreter.get_tensor(detail["index"])
        except ValueError:          # a tensor without data (an unused activation)
            continue
        name = names.get(detail["index"], detail["name"])
        values.setdefault(name, np.array(value, copy=True))
    return values
