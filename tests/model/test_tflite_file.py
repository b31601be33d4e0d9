"""runtime.model.tflite.file, our bounded .tflite reader: the schema facts it
uses checked against the ``tflite`` package's generated code, every tensor and
operator of MediaPipe's five models cross-checked with that package, and
files that are not right (truncated, corrupt, offsets past the end, shapes
that do not match their buffers, folders, missing or empty files), each one
ClayoutError line.

Synthetic models are written with the ``tflite`` package's generated builders
(``model_bytes``), so their field slots are the package's, not ours.
"""
import importlib
import inspect
import os
import random
import re
import struct

import numpy as np
import pytest

from conftest import needs

tflite = needs("tflite")
flatbuffers = needs("flatbuffers")
from runtime.errors import ClayoutError
from runtime.model.tflite import file as tflite_file, schema
from runtime.model.tflite.flatbuffer import FlatBuffer

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/tflite/__init__.py", "runtime/model/tflite/file.py",
           "runtime/model/tflite/flatbuffer.py", "runtime/model/tflite/schema.py")

NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
UNION = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}


def fails(data_or_path, *words):
    """The one-line ClayoutError that reading raises; it names ``words``."""
    with pytest.raises(ClayoutError) as info:
        if isinstance(data_or_path, bytes):
            tflite_file.parse(data_or_path, "m.tflite")
        else:
            tflite_file.load(str(data_or_path))
    text = str(info.value)
    assert "\n" not in text and all(w in text for w in words), text
    return text


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# -- the schema facts ---------------------------------------------------------------------------
@pytest.mark.parametrize("table, slots", [
    ("Model", schema.MODEL), ("OperatorCode", schema.OPERATOR_CODE),
    ("SubGraph", schema.SUBGRAPH), ("Tensor", schema.TENSOR),
    ("QuantizationParameters", schema.QUANTIZATION), ("SparsityParameters", schema.SPARSITY),
    ("DimensionMetadata", schema.DIMENSION_METADATA), ("Buffer", schema.BUFFER),
    ("Operator", schema.OPERATOR), ("Metadata", schema.METADATA),
    ("SignatureDef", schema.SIGNATURE_DEF), ("TensorMap", schema.TENSOR_MAP)])
def test_field_slots_are_the_generated_codes(table, slots):
    cls = getattr(importlib.import_module(f"tflite.{table}"), table)
    for name, slot in slots.items():
        source = inspect.getsource(getattr(cls, camel(name)))
        assert re.search(r"Offset\((\d+)\)", source).group(1) == str(4 + 2 * slot), (table, name)


def test_enums_are_the_generated_ones():
    assert all(getattr(tflite.BuiltinOperator, n) == i
               for i, n in enumerate(schema.BUILTIN_OPERATORS))
    assert len(schema.BUILTIN_OPERATORS) == len(NAMES)
    assert schema.CUSTOM == tflite.BuiltinOperator.CUSTOM
    types = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    assert set(types) == set(schema.TENSOR_TYPES)
    for code, (name, size) in schema.TENSOR_TYPES.items():
        assert name == types[code].lower()
        if name not in schema.NOT_NUMPY:
            assert np.dtype(name).itemsize == size
    assert (schema.DENSE, schema.SPARSE_CSR) == (tflite.DimensionType.DENSE,
                                                 tflite.DimensionType.SPARSE_CSR)
    assert schema.SPARSE_INDEX_VECTORS.keys() == {tflite.SparseIndexVector.Int32Vector,
                                                  tflite.SparseIndexVector.Uint16Vector,
                                                  tflite.SparseIndexVector.Uint8Vector}


@pytest.mark.parametrize("op", sorted(schema.OPTIONS))
def test_options_slots_types_and_defaults(op):
    """Each options table written by the generated builder with odd values
    (and empty, for the defaults) reads the same with our reader and theirs."""
    member, spec = schema.OPTIONS[op]
    cls_name = UNION[member]
    assert cls_name == {"CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
                        "FULLY_CONNECTED": "FullyConnectedOptions",
                        "TRANSPOSE_CONV": "TransposeConvOptions",
                        "BATCH_MATMUL": "BatchMatMulOptions",
                        "CONCATENATION": "ConcatenationOptions", "GATHER": "GatherOptions",
                        "PACK": "PackOptions", "STRIDED_SLICE": "StridedSliceOptions"}[op]
    module = importlib.import_module(f"tflite.{cls_name}")
    for filled in (False, True):
        b = flatbuffers.Builder(64)
        getattr(module, f"{cls_name}Start")(b)
        values = {}
        for k, (name, _, code, _) in enumerate(spec):
            values[name] = {"b": -3 - k, "i": 70000 + k, "?": True}[code]
            if filled:
                getattr(module, f"{cls_name}Add{camel(name)}")(b, values[name])
        b.Finish(getattr(module, f"{cls_name}End")(b))
        data = bytes(b.Output())
        theirs = getattr(module, cls_name).GetRootAs(data, 0)
        ours = FlatBuffer(data, "t", "test").root("options")
        for name, slot, code, default in spec:
            got = ours.scalar(slot, code, default, name)
            assert got == getattr(theirs, camel(name))() == (values[name] if filled else got)
            assert type(got) is (bool if code == "?" else int)


# -- synthetic models ---------------------------------------------------------------------------
def ivec(b, values, kind="Int32", size=4):
    b.StartVector(size, len(values), size)
    for v in reversed(values):
        getattr(b, f"Prepend{kind}")(v)
    return b.EndVector()


def tvec(b, offsets):
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def model_bytes(tensors, buffers, ops=(), codes=((3, 3, ""),), inputs=(), outputs=(),
                offsets=None):
    """A one-subgraph model. ``tensors``: dicts (name, shape, type, buffer,
    quant=(scale, zero_point, dim)); ``buffers``: bytes, or an int: that many
    bytes kept outside the flatbuffer (offset/size), appended after it unless
    ``offsets`` says where; ``ops``: (code index, inputs, outputs, options
    (union type, {field: value}) or None); ``codes``: (deprecated, builtin, custom)."""
    def once(where):
        b = flatbuffers.Builder(1024)
        bufs = []
        for k, data in enumerate(buffers):
            vec = b.CreateByteVector(data) if isinstance(data, bytes) else None
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
            else:
                tflite.BufferAddOffset(b, where[k])
                tflite.BufferAddSize(b, data)
            bufs.append(tflite.BufferEnd(b))
        made = []
        for t in tensors:
            name, shape = b.CreateString(t["name"]), ivec(b, list(t["shape"]))
            quant = None
            if "quant" in t:
                scale, zero, dim = t["quant"]
                s, z = ivec(b, scale, "Float32"), ivec(b, zero, "Int64", 8)
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, s)
                tflite.QuantizationParametersAddZeroPoint(b, z)
                tflite.QuantizationParametersAddQuantizedDimension(b, dim)
                quant = tflite.QuantizationParametersEnd(b)
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddName(b, name)
            tflite.TensorAddType(b, t.get("type", 0))
            tflite.TensorAddBuffer(b, t.get("buffer", 0))
            if quant is not None:
                tflite.TensorAddQuantization(b, quant)
            made.append(tflite.TensorEnd(b))
        operators = []
        for index, ins, outs, options in ops:
            opt = None
            if options:
                member, values = options
                cls = UNION[member]
                module = importlib.import_module(f"tflite.{cls}")
                getattr(module, f"{cls}Start")(b)
                for field, value in values.items():
                    getattr(module, f"{cls}Add{camel(field)}")(b, value)
                opt = getattr(module, f"{cls}End")(b)
            i, o = ivec(b, list(ins)), ivec(b, list(outs))
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, index)
            tflite.OperatorAddInputs(b, i)
            tflite.OperatorAddOutputs(b, o)
            if opt is not None:
                tflite.OperatorAddBuiltinOptionsType(b, options[0])
                tflite.OperatorAddBuiltinOptions(b, opt)
            operators.append(tflite.OperatorEnd(b))
        opcodes = []
        for deprecated, builtin, custom in codes:
            c = b.CreateString(custom) if custom else None
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, deprecated)
            tflite.OperatorCodeAddBuiltinCode(b, builtin)
            if c is not None:
                tflite.OperatorCodeAddCustomCode(b, c)
            opcodes.append(tflite.OperatorCodeEnd(b))
        ts, os_, si, so = tvec(b, made), tvec(b, operators), ivec(b, list(inputs)), \
            ivec(b, list(outputs))
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, ts)
        tflite.SubGraphAddOperators(b, os_)
        tflite.SubGraphAddInputs(b, si)
        tflite.SubGraphAddOutputs(b, so)
        sg = tflite.SubGraphEnd(b)
        sgs, bv, cv = tvec(b, [sg]), tvec(b, bufs), tvec(b, opcodes)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddSubgraphs(b, sgs)
        tflite.ModelAddBuffers(b, bv)
        tflite.ModelAddOperatorCodes(b, cv)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    outside = [k for k, d in enumerate(buffers) if not isinstance(d, bytes)]
    if offsets is not None or not outside:
        return once(offsets or {})
    size = len(once({k: 1 << 40 for k in outside}))
    where, at = {}, (size + 15) // 16 * 16
    for k in outside:
        where[k], at = at, at + buffers[k]
    data = once(where)
    assert len(data) == size
    tail = bytes(range(256)) * (at // 256 + 1)
    return data + tail[len(data):at]


W = {"name": "w", "shape": (2, 3), "type": 0, "buffer": 1}


def test_a_synthetic_model_reads_right():
    w = np.arange(6, dtype=np.float32)
    q = {"name": "q", "shape": (2, 1), "type": 9, "buffer": 2, "quant": ([0.5, 0.25], [1, -2], 0)}
    x = {"name": b"x\xff", "shape": (1, 3)}   # not UTF-8: replaced
    data = model_bytes([W, q, x, {"name": "y", "shape": (1, 2)}],
                       [b"", w.tobytes(), b"\x05\xfb"],
                       ops=[(0, (2, 0, -1), (3,), (8, {"keep_num_dims": True,
                                                       "weights_format": 1})),
                            (1, (3,), (3,), None), (2, (3,), (3,), None)],
                       codes=((9, 9, ""), (127, 300, ""), (32, 32, "MyOp")),
                       inputs=(2,), outputs=(3,))
    m = tflite_file.parse(data, "m.tflite")
    sg = m.subgraphs[0]
    assert (m.version, sg.inputs, sg.outputs) == (3, (2,), (3,))
    assert np.array_equal(tflite_file.tensor_array(sg.tensors[0]), w.reshape(2, 3))
    t = sg.tensors[1]
    assert (t.dtype, t.data, t.quantization.quantized_dimension) == ("int8", b"\x05\xfb", 0)
    assert t.quantization.scale.dtype == np.float32 and list(t.quantization.scale) == [.5, .25]
    assert t.quantization.zero_point.dtype == np.int64
    assert list(tflite_file.tensor_array(t).ravel()) == [5, -5]
    assert sg.tensors[2].name == "x\ufffd"
    assert sg.tensors[2].data is None and tflite_file.tensor_array(sg.tensors[2]) is None
    fc, unknown, custom = sg.operators
    assert (fc.op, fc.custom, fc.inputs) == ("FULLY_CONNECTED", False, (2, 0, -1))
    assert dict(fc.options) == {"fused_activation_function": 0, "weights_format": 1,
                                "keep_num_dims": True, "asymmetric_quantize_inputs": False}
    assert (unknown.op, custom.op, custom.custom, dict(custom.options)) == \
        ("BUILTIN_300", "MyOp", True, {})


def test_buffers_kept_outside_the_flatbuffer(tmp_path):
    w = np.arange(6, dtype=np.float32)
    data = model_bytes([W], [b"", 24])
    start = struct.unpack_from("<Q", data, data.index(struct.pack("<Q", len(data) - 24)))[0]
    data = data[:start] + w.tobytes()
    (tmp_path / "m.tflite").write_bytes(data)
    assert tflite_file.is_tflite(str(tmp_path / "m.tflite"))
    t = tflite_file.load(str(tmp_path / "m.tflite")).subgraphs[0].tensors[0]
    assert np.array_equal(tflite_file.tensor_array(t), w.reshape(2, 3))
    fails(data[:-1], f"m.tflite: buffer 1 of tensor 'w' claims 24 bytes at offset {start}, past "
          f"the end of the {len(data) - 1}-byte file (truncated?)")
    fails(model_bytes([W], [b"", 24], offsets={1: 9000}), "claims 24 bytes at offset 9000")
    # offset 1 / size 0 are sentinels: an empty buffer
    assert tflite_file.parse(model_bytes([W], [b"", 0], offsets={1: 1})) \
        .subgraphs[0].tensors[0].data is None


@pytest.mark.parametrize("tensor, holds, words", [
    ({"name": "w", "shape": (8, 3, 3, 3), "type": 0}, 800,
     "tensor 'w' with shape (8, 3, 3, 3) of float32 needs 864 bytes, its buffer 1 holds 800"),
    ({"name": "h", "shape": (5,), "type": 1}, 12,
     "tensor 'h' with shape (5,) of float16 needs 10 bytes, its buffer 1 holds 12"),
    ({"name": "i4", "shape": (3, 3), "type": 17}, 4,
     "tensor 'i4' with shape (3, 3) of int4 needs 5 bytes, its buffer 1 holds 4"),
    ({"name": "n", "shape": (2, -1), "type": 0}, 8,
     "tensor 'n' has a negative dim -1 at position 1 of its shape (2, -1)"),
])
def test_a_shape_that_does_not_match_its_buffer(tensor, holds, words):
    fails(model_bytes([dict(tensor, buffer=1)], [b"", bytes(holds)]), "m.tflite: " + words)


def test_sizes_that_need_no_check():
    ok = [{"name": "s", "shape": (2,), "type": 5, "buffer": 1},       # string: no fixed size
          {"name": "u", "shape": (2,), "type": 42, "buffer": 1},      # unknown type
          {"name": "i4", "shape": (3, 3), "type": 17, "buffer": 2},   # int4: ceil(9 / 2)
          {"name": "b16", "shape": (2,), "type": 18, "buffer": 3}]
    sg = tflite_file.parse(model_bytes(ok, [b"", b"abc", bytes(5), bytes(4)])).subgraphs[0]
    assert [t.dtype for t in sg.tensors] == ["string", "type 42", "int4", "bfloat16"]
    assert all(tflite_file.tensor_array(t) is None for t in sg.tensors)


@pytest.mark.parametrize("case, words", [
    (dict(ops=[(0, (0, 7), (0,), None)]), "operator 0 (CONV_2D) of subgraph 0: input 1 is "
     "tensor 7, but the subgraph has 1 tensors"),
    (dict(ops=[(0, (0,), (-1,), None)]), "operator 0 (CONV_2D) of subgraph 0: output 0 is tensor -1"),
    (dict(ops=[(4, (0,), (0,), None)]), "operator 0 of subgraph 0 uses operator code 4, but the "
     "model has 1 operator codes"),
    (dict(inputs=(-1,)), "subgraph 0 input 0 is tensor -1"),
    (dict(outputs=(1,)), "subgraph 0 output 0 is tensor 1"),
])
def test_indices_out_of_range(case, words):
    fails(model_bytes([W], [b"", bytes(24)], **case), words)


def test_a_buffer_index_out_of_range():
    fails(model_bytes([dict(W, buffer=5)], [b""]),
          "tensor 'w' uses buffer 5, but the model has 1 buffers")


def test_a_vtable_or_field_outside():
    data = bytearray(model_bytes([W], [b"", bytes(24)]))
    root = struct.unpack_from("<I", data, 0)[0]
    bad = bytearray(data)
    struct.pack_into("<i", bad, root, -10 ** 6)
    fails(bytes(bad), "not a valid TensorFlow Lite model: the model at byte", "has its vtable at "
          f"byte {root + 10 ** 6}, outside the {len(data)}-byte file (truncated or corrupt?)")
    vtable = root - struct.unpack_from("<i", data, root)[0]
    struct.pack_into("<H", data, vtable + 4 + 2 * schema.MODEL["subgraphs"], 60000)
    fails(bytes(data), "field subgraphs of the model", "lies at offset 60000, outside its")


def test_a_count_the_file_cannot_hold():
    data = bytearray(model_bytes([dict(W, shape=(2, 3, 1, 1, 1, 1))], [b"", bytes(24)]))
    at = data.index(struct.pack("<6i", 2, 3, 1, 1, 1, 1)) - 4
    struct.pack_into("<I", data, at, 10 ** 9)
    fails(bytes(data), f"the shape vector of tensor 0 of subgraph 0 at byte {at} claims "
          "1000000000 elements of 4 bytes, which run past the end of the")


def shared_model(shape_length: int, tensors: int, subgraphs: int) -> bytes:
    """A model whose subgraphs vector points ``subgraphs`` times at one
    subgraph, whose tensors vector points ``tensors`` times at one tensor."""
    b = flatbuffers.Builder(1024)
    shape = ivec(b, [1] * shape_length)
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    ts = tvec(b, [tflite.TensorEnd(b)] * tensors)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, ts)
    sgs = tvec(b, [tflite.SubGraphEnd(b)] * subgraphs)
    tflite.BufferStart(b)
    bv = tvec(b, [tflite.BufferEnd(b)])
    tflite.ModelStart(b)
    tflite.ModelAddSubgraphs(b, sgs)
    tflite.ModelAddBuffers(b, bv)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_shared_references_are_bounded():
    """Vectors whose entries all point at one table: the work they would
    multiply is refused (bytes copied, then tables visited), not done."""
    assert tflite_file.parse(shared_model(4, 3, 2)).subgraphs[1].tensors[2].shape == (1,) * 4
    fails(shared_model(1000, 3000, 1), "is read after more than twice the",
          "references shared over and over")
    fails(shared_model(0, 300, 300), "is one table more than the",
          "references shared over and over")


# -- files that are not models ------------------------------------------------------------------
def test_paths_that_are_not_files(tmp_path):
    fails(tmp_path / "none.tflite", "none.tflite: no such file")
    fails(tmp_path, f"cannot read {tmp_path}: it is a folder, not a regular file")
    (tmp_path / "e.tflite").write_bytes(b"")
    fails(tmp_path / "e.tflite", "e.tflite: empty file, not a TensorFlow Lite model")
    (tmp_path / "z.tflite").write_bytes(bytes(4096))
    fails(tmp_path / "z.tflite", "not a TensorFlow Lite model (no TFL3 identifier at byte 4)")
    assert not tflite_file.is_tflite(str(tmp_path / "z.tflite"))
    assert not tflite_file.is_tflite(str(tmp_path)) and not tflite_file.is_tflite("/nonexistent")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        assert not tflite_file.is_tflite(str(tmp_path / "fifo"))   # not opened: would block
        fails(tmp_path / "fifo", "it is a FIFO")


def test_zeros_and_random_bytes_with_the_identifier():
    fails(b"\0\0\0\0TFL3" + bytes(4000), "not a valid TensorFlow Lite model")
    rng = random.Random(7)
    for _ in range(200):
        data = bytearray(rng.randbytes(rng.randrange(8, 2048)))
        data[4:8] = b"TFL3"
        if rng.random() < 0.5:   # a plausible root offset
            struct.pack_into("<I", data, 0, rng.randrange(8, len(data)))
        try:
            tflite_file.parse(bytes(data), "r.tflite")
        except ClayoutError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("r.tflite: ")


# -- MediaPipe's models --------------------------------------------------------------------------
def index_vector(kind, table):
    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}[kind]()
    cls.Init(table.Bytes, table.Pos)
    return cls.ValuesAsNumpy()


def check_tensor(ours, theirs, model):
    assert ours.name == theirs.Name().decode("utf-8", "replace")
    assert ours.shape == tuple(int(d) for d in (theirs.ShapeAsNumpy() if theirs.ShapeLength()
                                                else ()))
    assert ours.dtype == schema.TENSOR_TYPES[theirs.Type()][0] and ours.buffer == theirs.Buffer()
    buffer = model.Buffers(theirs.Buffer())
    data = buffer.DataAsNumpy().tobytes() if buffer.DataLength() else None
    assert ours.data == data and ours.is_variable == theirs.IsVariable()
    q = theirs.Quantization()
    if q is None or not q.ScaleLength():
        assert ours.quantization is None
    else:
        assert np.array_equal(ours.quantization.scale, q.ScaleAsNumpy())
        assert np.array_equal(ours.quantization.zero_point, q.ZeroPointAsNumpy() if
                              q.ZeroPointLength() else [])
        assert ours.quantization.quantized_dimension == q.QuantizedDimension()
    s = theirs.Sparsity()
    assert (s is None) == (ours.sparsity is None)
    if s is not None:
        assert ours.sparsity.traversal_order == tuple(s.TraversalOrderAsNumpy())
        assert ours.sparsity.block_map == (tuple(s.BlockMapAsNumpy()) if s.BlockMapLength()
                                           else ())
        assert len(ours.sparsity.dim_metadata) == s.DimMetadataLength()
        for k, dim in enumerate(ours.sparsity.dim_metadata):
            d = s.DimMetadata(k)
            assert (dim.sparse, dim.dense_size) == (d.Format() == 1, d.DenseSize())
            if dim.sparse:
                assert dim.segments.dtype == dim.indices.dtype == np.int64
                assert np.array_equal(dim.segments, index_vector(d.ArraySegmentsType(),
                                                                 d.ArraySegments()))
                assert np.array_equal(dim.indices, index_vector(d.ArrayIndicesType(),
                                                                d.ArrayIndices()))
            else:
                assert dim.segments is None and dim.indices is None


def check_operator(ours, theirs, model):
    code = model.OperatorCodes(theirs.OpcodeIndex())
    number = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    assert ours.custom == (number == 32)
    assert ours.op == (code.CustomCode().decode() if ours.custom else NAMES[number])
    assert ours.inputs == tuple(theirs.InputsAsNumpy()) and \
        ours.outputs == tuple(theirs.OutputsAsNumpy())
    member, spec = schema.OPTIONS.get(ours.op, (None, ()))
    if member is None or theirs.BuiltinOptionsType() != member:
        assert dict(ours.options) == {}
        return
    options = getattr(tflite, UNION[member])()
    table = theirs.BuiltinOptions()
    options.Init(table.Bytes, table.Pos)
    assert dict(ours.options) == {name: getattr(options, camel(name))() for name, *_ in spec}


def test_mediapipe_models_read_as_the_tflite_package_reads_them(mediapipe_models):
    seen = set()
    for name, path in sorted(mediapipe_models.items()):
        ours = tflite_file.load(path)
        raw = open(path, "rb").read()
        model = tflite.Model.GetRootAs(raw, 0)
        assert ours.version == model.Version() and ours.description == \
            model.Description().decode()
        assert len(ours.subgraphs) == model.SubgraphsLength()
        for sg, k in zip(ours.subgraphs, range(model.SubgraphsLength())):
            theirs = model.Subgraphs(k)
            assert sg.inputs == tuple(theirs.InputsAsNumpy())
            assert sg.outputs == tuple(theirs.OutputsAsNumpy())
            assert len(sg.tensors) == theirs.TensorsLength()
            for t in sg.tensors:
                check_tensor(t, theirs.Tensors(t.index), model)
                array = tflite_file.tensor_array(t)
                if t.data is not None and t.sparsity is None:
                    assert array.shape == t.shape and array.tobytes() == t.data
                seen.add(("sparse" if t.sparsity else "dense", t.dtype, t.data is not None))
            assert len(sg.operators) == theirs.OperatorsLength()
            for op in sg.operators:
                check_operator(op, theirs.Operators(op.index), model)
                seen.add((op.op, bool(op.options)))
    assert {("sparse", "float16", True), ("CONV_2D", True), ("DEPTHWISE_CONV_2D", True),
            ("FULLY_CONNECTED", True), ("Convolution2DTransposeBias", False)} <= seen


def test_a_truncated_model_is_one_error_line(mediapipe_models):
    """The flatbuffer of face_detection_short_range ends where an empty ZIP
    archive (TFLite's metadata files) begins: cut anywhere before it, the
    model is refused; only the archive's bytes may go unnoticed."""
    data = open(mediapipe_models["face_detection_short_range.tflite"], "rb").read()
    end = len(data) - 22
    assert data[end:end + 4] == b"PK\x05\x06"
    for length in sorted(set(range(64)) | set(range(0, end, 997)) | {end - 1}):
        text = fails(data[:length], "m.tflite: ")
        assert "TensorFlow Lite model" in text and ("truncated" in text or length < 8), text
    assert tflite_file.parse(data[:end], "m.tflite").subgraphs[0].operators
