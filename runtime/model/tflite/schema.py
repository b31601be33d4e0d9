"""Facts of the TensorFlow Lite flatbuffer schema (schema.fbs) that
:mod:`runtime.model.tflite.file` reads: the builtin operators' names by code,
the tensor types, and the field slots of the tables it decodes.

A table's fields are numbered by their order in the schema (slot 0, 1, ...;
a generated accessor's ``Offset(4 + 2 * slot)``). These are facts, checked
against the generated code of the ``tflite`` package by tests/model/test_tflite_file.py.

Example::

    >>> BUILTIN_OPERATORS[3], BUILTIN_OPERATORS[CUSTOM]
    ('CONV_2D', 'CUSTOM')
    >>> TENSOR_TYPES[9]
    ('int8', 1)
"""
from __future__ import annotations

# BuiltinOperator: the name of each code (the tuple's index)
BUILTIN_OPERATORS = (
    # 0..5
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
    # 6..10
    "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP",
    # 11..15
    "L2_NORMALIZATION", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION",
    # 16..23
    "LSTM", "MAX_POOL_2D", "MUL", "RELU", "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR",
    # 24..31
    "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH", "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL",
    # 32..36
    "CUSTOM", "EMBEDDING_LOOKUP_SPARSE", "PAD", "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER",
    # 37..43
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN", "SUB", "DIV", "SQUEEZE",
    # 44..47
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP",
    # 48..54
    "TOPK_V2", "SPLIT", "LOG_SOFTMAX", "DELEGATE", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU",
    # 55..62
    "MAXIMUM", "ARG_MAX", "MINIMUM", "LESS", "NEG", "PADV2", "GREATER", "GREATER_EQUAL",
    # 63..69
    "LESS_EQUAL", "SELECT", "SLICE", "SIN", "TRANSPOSE_CONV", "SPARSE_TO_DENSE", "TILE",
    # 70..77
    "EXPAND_DIMS", "EQUAL", "NOT_EQUAL", "LOG", "SUM", "SQRT", "RSQRT", "SHAPE",
    # 78..85
    "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD", "REDUCE_MAX", "PACK", "LOGICAL_OR", "ONE_HOT",
    # 86..92
    "LOGICAL_AND", "LOGICAL_NOT", "UNPACK", "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY", "SQUARE",
    # 93..98
    "ZEROS_LIKE", "FILL", "FLOOR_MOD", "RANGE", "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU",
    # 99..106
    "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS", "SPLIT_V", "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N",
    # 107..114
    "GATHER_ND", "COS", "WHERE", "RANK", "ELU", "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE",
    # 115..120
    "MATRIX_SET_DIAG", "ROUND", "HARD_SWISH", "IF", "WHILE", "NON_MAX_SUPPRESSION_V4",
    # 121..126
    "NON_MAX_SUPPRESSION_V5", "SCATTER_ND", "SELECT_V2", "DENSIFY", "SEGMENT_SUM", "BATCH_MATMUL",
    # 127..132
    "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM", "CALL_ONCE", "BROADCAST_TO", "RFFT2D", "CONV_3D",
    # 133..138
    "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT",
    # 139..143
    "HASHTABLE_SIZE", "REDUCE_ALL", "CONV_3D_TRANSPOSE", "VAR_HANDLE", "READ_VARIABLE",
    # 144..148
    "ASSIGN_VARIABLE", "BROADCAST_ARGS", "RANDOM_STANDARD_NORMAL", "BUCKETIZE", "RANDOM_UNIFORM",
    # 149..153
    "MULTINOMIAL", "GELU", "DYNAMIC_UPDATE_SLICE", "RELU_0_TO_1", "UNSORTED_SEGMENT_PROD",
    # 154..158
    "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_SUM", "ATAN2", "UNSORTED_SEGMENT_MIN", "SIGN",
    # 159..163
    "BITCAST", "BITWISE_XOR", "RIGHT_SHIFT", "STABLEHLO_LOGISTIC", "STABLEHLO_ADD",
    # 164..167
    "STABLEHLO_DIVIDE", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_RESHAPE",
    # 168..170
    "STABLEHLO_CLAMP", "STABLEHLO_CONCATENATE", "STABLEHLO_BROADCAST_IN_DIM",
    # 171..174
    "STABLEHLO_CONVOLUTION", "STABLEHLO_SLICE", "STABLEHLO_CUSTOM_CALL", "STABLEHLO_REDUCE",
    # 175..178
    "STABLEHLO_ABS", "STABLEHLO_AND", "STABLEHLO_COSINE", "STABLEHLO_EXPONENTIAL",
    # 179..183
    "STABLEHLO_FLOOR", "STABLEHLO_LOG", "STABLEHLO_MINIMUM", "STABLEHLO_NEGATE", "STABLEHLO_OR",
    # 184..187
    "STABLEHLO_POWER", "STABLEHLO_REMAINDER", "STABLEHLO_RSQRT", "STABLEHLO_SELECT",
    # 188..191
    "STABLEHLO_SUBTRACT", "STABLEHLO_TANH", "STABLEHLO_SCATTER", "STABLEHLO_COMPARE",
    # 192..194
    "STABLEHLO_CONVERT", "STABLEHLO_DYNAMIC_SLICE", "STABLEHLO_DYNAMIC_UPDATE_SLICE",
    # 195..198
    "STABLEHLO_PAD", "STABLEHLO_IOTA", "STABLEHLO_DOT_GENERAL", "STABLEHLO_REDUCE_WINDOW",
    # 199..203
    "STABLEHLO_SORT", "STABLEHLO_WHILE", "STABLEHLO_GATHER", "STABLEHLO_TRANSPOSE", "DILATE",
    # 204..207
    "STABLEHLO_RNG_BIT_GENERATOR", "REDUCE_WINDOW", "STABLEHLO_COMPOSITE", "STABLEHLO_SHIFT_LEFT",
    # 208..208
    "STABLEHLO_CBRT",
)
CUSTOM = 32   # BuiltinOperator.CUSTOM: the name is the OperatorCode's custom_code

# TensorType: (numpy dtype name or TFLite type in lower case, bytes per element;
# 0 where elements have no fixed size; int4 packs two elements per byte)
TENSOR_TYPES = {
    0: ("float32", 4), 1: ("float16", 2), 2: ("int32", 4), 3: ("uint8", 1), 4: ("int64", 8),
    5: ("string", 0), 6: ("bool", 1), 7: ("int16", 2), 8: ("complex64", 8), 9: ("int8", 1),
    10: ("float64", 8), 11: ("complex128", 16), 12: ("uint64", 8), 13: ("resource", 0),
    14: ("variant", 0), 15: ("uint32", 4), 16: ("uint16", 2), 17: ("int4", 0),
    18: ("bfloat16", 2),
}
# types numpy has no dtype of (their arrays are not made)
NOT_NUMPY = ("string", "resource", "variant", "int4", "bfloat16")

# field slots of each table read (name: slot)
MODEL = {"version": 0, "operator_codes": 1, "subgraphs": 2, "description": 3, "buffers": 4,
         "metadata_buffer": 5, "metadata": 6, "signature_defs": 7}
METADATA = {"name": 0, "buffer": 1}
SIGNATURE_DEF = {"inputs": 0, "outputs": 1, "signature_key": 2, "subgraph_index": 4}
TENSOR_MAP = {"name": 0, "tensor_index": 1}
OPERATOR_CODE = {"deprecated_builtin_code": 0, "custom_code": 1, "version": 2,
                 "builtin_code": 3}
SUBGRAPH = {"tensors": 0, "inputs": 1, "outputs": 2, "operators": 3, "name": 4}
TENSOR = {"shape": 0, "type": 1, "buffer": 2, "name": 3, "quantization": 4, "is_variable": 5,
          "sparsity": 6, "shape_signature": 7}
QUANTIZATION = {"min": 0, "max": 1, "scale": 2, "zero_point": 3, "details_type": 4,
                "details": 5, "quantized_dimension": 6}
SPARSITY = {"traversal_order": 0, "block_map": 1, "dim_metadata": 2}
DIMENSION_METADATA = {"format": 0, "dense_size": 1, "array_segments_type": 2,
                      "array_segments": 3, "array_indices_type": 4, "array_indices": 5}
BUFFER = {"data": 0, "offset": 1, "size": 2}
OPERATOR = {"opcode_index": 0, "inputs": 1, "outputs": 2, "builtin_options_type": 3,
            "builtin_options": 4, "custom_options": 5, "mutating_variable_inputs": 7,
            "intermediates": 8}

# DimensionType
DENSE, SPARSE_CSR = 0, 1
# SparseIndexVector union: member type -> numpy dtype of its table's values (slot 0)
SPARSE_INDEX_VECTORS = {1: "<i4", 2: "<u2", 3: "<u1"}

# BuiltinOptions decoded, by operator name: (union member type, the options
# table's fields as (name, slot, struct code, default))
OPTIONS = {
    "CONV_2D": (1, (("padding", 0, "b", 0), ("stride_w", 1, "i", 0), ("stride_h", 2, "i", 0),
                    ("fused_activation_function", 3, "b", 0), ("dilation_w_factor", 4, "i", 1),
                    ("dilation_h_factor", 5, "i", 1))),
    "DEPTHWISE_CONV_2D": (2, (("padding", 0, "b", 0), ("stride_w", 1, "i", 0),
                              ("stride_h", 2, "i", 0), ("depth_multiplier", 3, "i", 0),
                              ("fused_activation_function", 4, "b", 0),
                              ("dilation_w_factor", 5, "i", 1),
                              ("dilation_h_factor", 6, "i", 1))),
    "FULLY_CONNECTED": (8, (("fused_activation_function", 0, "b", 0),
                            ("weights_format", 1, "b", 0), ("keep_num_dims", 2, "?", False),
                            ("asymmetric_quantize_inputs", 3, "?", False))),
    "TRANSPOSE_CONV": (49, (("padding", 0, "b", 0), ("stride_w", 1, "i", 0),
                            ("stride_h", 2, "i", 0), ("fused_activation_function", 3, "b", 0))),
    "BATCH_MATMUL": (101, (("adj_x", 0, "?", False), ("adj_y", 1, "?", False),
                           ("asymmetric_quantize_inputs", 2, "?", False))),
    # the constant operators the reader evaluates (runtime.model.tflite.fold)
    "CONCATENATION": (10, (("axis", 0, "i", 0), ("fused_activation_function", 1, "b", 0))),
    "GATHER": (23, (("axis", 0, "i", 0), ("batch_dims", 1, "i", 0))),
    "PACK": (59, (("values_count", 0, "i", 0), ("axis", 1, "i", 0))),
    "STRIDED_SLICE": (32, (("begin_mask", 0, "i", 0), ("end_mask", 1, "i", 0),
                           ("ellipsis_mask", 2, "i", 0), ("new_axis_mask", 3, "i", 0),
                           ("shrink_axis_mask", 4, "i", 0), ("offset", 5, "?", False))),
}
