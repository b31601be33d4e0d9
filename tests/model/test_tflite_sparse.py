"""runtime.model.tflite.sparse.densify against LiteRT's DENSIFY kernel.

Each case makes a dense array with zero blocks, rows and tails, encodes it
with ``sparsify`` below (an encoder written here, independent of densify:
it walks the array in traversal order and keeps, at a CSR level, each
coordinate whose subtree holds a nonzero, or any coordinate it is told to
keep), writes ``sparse constant -> DENSIFY -> out`` with tests/tflite_builder.py
and checks, bit for bit: densify(values, shape, sparsity) == the dense array
== what LiteRT's interpreter computed for ``out``. The real sparse model
(MediaPipe's face_detection_full_range_sparse: float16 OHWI weights, CSR on
the last dim, uint8/uint16 index arrays) is checked the same way, tensor by
tensor. Hostile metadata raises one ClayoutError line naming the tensor.
"""
import importlib

import numpy as np
import pytest
from hypothesis import given, strategies as st

from runtime.errors import ClayoutError
from runtime.model.tflite.sparse import DimMeta, Sparsity, densify
from conftest import needs, same_bits
from strategies import scaled

tflite = needs("tflite")
needs("ai_edge_litert.interpreter")
from tests.tflite_builder import T, Op, build, run_litert  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/tflite/__init__.py", "runtime/model/tflite/sparse.py")

DTYPES = ["float32", "float16", "int8"]     # what LiteRT's DENSIFY takes


def sparsify(dense, order, block_map=(), blocks=(), formats=None, index_type="int32",
             keep_zeros=None):
    """(values, sparsity dict for tflite_builder) of ``dense``: block dim j
    of size ``blocks[j]`` splits dim ``block_map[j]``; level l walks expanded
    dim ``order[l]`` and is "dense" or "csr" (``formats``). A CSR level keeps
    the coordinates whose subtree is not all zero, and those where
    ``keep_zeros`` (a random generator) says to keep a zero subtree too.
    ``index_type``: both index arrays' type, or (segments', indices')."""
    seg_type, idx_type = (index_type, index_type) if isinstance(index_type, str) else index_type
    n, k = dense.ndim, len(block_map)
    split, where = [], {}
    for axis, size in enumerate(dense.shape):
        if axis in block_map:
            j = list(block_map).index(axis)
            where[axis], where[n + j] = len(split), len(split) + 1
            split += [size // blocks[j], blocks[j]]
        else:
            where[axis] = len(split)
            split.append(size)
    expanded = dense.reshape(split).transpose([where[d] for d in range(n + k)])
    walk = expanded.transpose(order)
    formats = formats or ["dense"] * (n + k)
    segments, indices, values = [[0] for _ in formats], [[] for _ in formats], []

    def visit(node, level):
        if level == len(formats):
            values.append(node)
            return
        for i in range(node.shape[0]):
            if formats[level] == "csr":
                if not node[i].any() and not (keep_zeros and keep_zeros.random() < 0.3):
                    continue
                indices[level].append(i)
            visit(node[i], level + 1)
        if formats[level] == "csr":
            segments[level].append(len(indices[level]))

    visit(walk, 0)
    # every level says its size (a block dim's size is its level's dense_size, CSR too)
    metas = [{"format": f, "dense_size": walk.shape[l], **({
        "segments": segments[l], "indices": indices[l], "segments_type": seg_type,
        "indices_type": idx_type} if f == "csr" else {})} for l, f in enumerate(formats)]
    sparsity = {"traversal_order": list(order), "block_map": list(block_map),
                "dim_metadata": metas}
    return np.array(values, dense.dtype).reshape(-1), sparsity


def records(sparsity: dict) -> Sparsity:
    """The builder's dict as densify's records."""
    metas = tuple(DimMeta(True, m["dense_size"], np.array(m["segments"], np.int64),
                          np.array(m["indices"], np.int64)) if m["format"] == "csr" else
                  DimMeta(False, m["dense_size"], None, None) for m in sparsity["dim_metadata"])
    return Sparsity(tuple(sparsity["traversal_order"]), tuple(sparsity["block_map"]), metas)


def random_dense(shape, dtype, rng, zero_blocks=(), zero_fraction=0.4):
    """Nonzero random values (no -0.0), then zeros: single elements, the
    given index blocks, and the last row (a tail that is all zero)."""
    if dtype == "int8":
        dense = rng.integers(1, 128, shape) * rng.choice([-1, 1], shape)
    else:
        dense = rng.standard_normal(shape) + 0.25
    dense = dense.astype(dtype)
    dense[rng.random(shape) < zero_fraction] = 0
    for block in zero_blocks:
        dense[block] = 0
    if dense.ndim > 1 and dense.shape[0] > 2:
        dense[-1] = 0
    return dense


def litert_runs(order, block_map, formats) -> bool:
    """Whether LiteRT 2.3's DENSIFY can run the format: it dies (SIGFPE) when
    a block dim's level is SPARSE_CSR and aborts on 3 block dims walked in a
    cyclic order (it looks a block's size up at the wrong level)."""
    n = len(order) - len(block_map)
    return len(block_map) <= 2 and all(f == "dense" for d, f in zip(order, formats) if d >= n)


def check(dense, order, block_map=(), blocks=(), formats=None, index_type="int32",
          keep_zeros=None):
    """densify == dense == LiteRT's DENSIFY (where it runs), bit for bit."""
    values, sparsity = sparsify(dense, order, block_map, blocks, formats, index_type, keep_zeros)
    got = densify(values, dense.shape, records(sparsity), "w")
    assert same_bits(got, dense)
    formats = formats or ["dense"] * len(order)
    if values.size and litert_runs(order, block_map, formats):
        dtype = str(dense.dtype)
        model = build([T("w/sparse", dense.shape, dtype, data=values, sparsity=sparsity),
                       T("w", dense.shape, dtype)], [Op("DENSIFY", [0], [1])], [], [1])
        assert same_bits(run_litert(model)["w"], dense)
    return values, sparsity


FORMATS = {   # name: (shape, traversal order, block map, block sizes, level formats)
    # MediaPipe's sparse face detector: 1x1 conv weights (O, 1, 1, I), no
    # block, CSR over I, uint16 segments and uint8 indices, ~70% zeros
    "ohwi-like-mediapipe": ((32, 1, 1, 64), (0, 1, 2, 3), (), (), ["dense"] * 3 + ["csr"],
                            ("uint16", "uint8")),
    "csr-rows": ((5, 7), (0, 1), (), (), ["dense", "csr"]),
    "csr-csr": ((6, 9), (0, 1), (), (), ["csr", "csr"]),
    "col-major": ((5, 7), (1, 0), (), (), ["dense", "csr"]),
    "block-1x4": ((6, 12), (0, 1, 2), (1,), (4,), ["dense", "csr", "dense"]),
    "block-4x4": ((8, 12), (0, 1, 2, 3), (0, 1), (4, 4), ["dense", "csr", "dense", "dense"]),
    "block-2x2-transposed": ((6, 8), (1, 0, 3, 2), (0, 1), (2, 2),
                             ["dense", "csr", "dense", "dense"]),
    "ohwi-csr-last": ((8, 1, 1, 32), (0, 1, 2, 3), (), (), ["dense", "dense", "dense", "csr"]),
    "ohwi-block-last": ((6, 3, 3, 16), (0, 1, 2, 3, 4), (3,), (4,),
                        ["dense", "dense", "dense", "csr", "dense"]),
    "tails": ((7, 1, 5), (0, 1, 2), (), (), ["csr", "dense", "csr"]),
}
FORMATS = {name: case + ("int32",) * (len(case) == 5) for name, case in FORMATS.items()}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(FORMATS))
def test_formats_against_litert(name, dtype):
    shape, order, block_map, blocks, formats, index_type = FORMATS[name]
    rng = np.random.default_rng(sum(map(ord, name + dtype)))
    zero = [(slice(0, 2),)] + ([(slice(None), slice(4, 8))] if len(shape) == 2 else [])
    dense = random_dense(shape, dtype, rng, zero, 0.7 if "mediapipe" in name else 0.4)
    values, sparsity = check(dense, order, block_map, blocks, formats, index_type)
    assert values.size < dense.size        # the encoding dropped something


@pytest.mark.parametrize("index_type", ["uint8", "uint16", "int32"])
def test_index_types_and_stored_zero_subtrees(index_type):
    """Each index array type LiteRT reads; CSR levels that also store some
    all-zero subtrees (a valid encoding; their zeros come back as stored)."""
    rng = np.random.default_rng(7)
    dense = random_dense((8, 12), "float32", rng, [(slice(0, 3), slice(0, 4))])
    check(dense, (0, 1, 2), (1,), (4,), ["csr", "csr", "dense"], index_type,
          keep_zeros=np.random.default_rng(3))


@pytest.mark.parametrize("formats", [["dense", "csr", "csr"], ["csr", "dense", "csr"]])
def test_csr_block_levels(formats):
    """A block dim's level may be SPARSE_CSR by the schema (its dense_size
    is the block size); LiteRT cannot run it, the encoder is the truth."""
    dense = random_dense((4, 8), "float16", np.random.default_rng(5), [(slice(1, 3), 3)])
    check(dense, (0, 1, 2), (1,), (4,), formats)


def test_three_block_dims_in_a_cyclic_order():
    dense = random_dense((4, 6, 8), "float32", np.random.default_rng(6), [(0, slice(0, 3))])
    check(dense, (0, 2, 1, 4, 5, 3), (0, 1, 2), (2, 3, 4), ["dense", "csr"] + ["dense"] * 4)


def test_large_buffers_load_in_litert():
    """Constants after the flatbuffer (Buffer.offset/size, as TFLite stores
    models over 2 GB): LiteRT reads them; buffer 0 stays empty."""
    rng = np.random.default_rng(11)
    dense = random_dense((6, 8), "float16", rng)
    values, sparsity = sparsify(dense, (0, 1), (), (), ["dense", "csr"])
    h = random_dense((3, 5), "float16", rng)
    tensors = [T("s", dense.shape, "float16", data=values, sparsity=sparsity),
               T("w", dense.shape, "float16"), T("h", h.shape, "float16", data=h),
               T("hf", h.shape)]
    ops = [Op("DENSIFY", [0], [1]), Op("DEQUANTIZE", [2], [3])]
    data = build(tensors, ops, [], [1, 3], large_buffers=True)
    model = tflite.Model.GetRootAsModel(data, 0)
    buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
    assert [(b.DataLength(), b.Offset() > 0) for b in buffers] == [(0, False)] + [(0, True)] * 2
    assert data[buffers[2].Offset():][:buffers[2].Size()] == h.tobytes()
    got = run_litert(data)
    assert same_bits(got["w"], dense) and same_bits(got["hf"], h.astype(np.float32))


def test_all_zero_tensor():
    """No stored value: densify gives zeros (LiteRT has no buffer to read)."""
    values, _ = check(np.zeros((4, 8), np.float32), (0, 1, 2), (1,), (4,),
                      ["dense", "csr", "dense"])
    assert values.size == 0


@st.composite
def sparse_cases(draw):
    """(dense, order, block_map, blocks, formats, index type, seed) over ranks
    1-4, block maps in any order, block-internal traversals, tails."""
    n = draw(st.integers(1, 4))
    blocked = sorted(draw(st.lists(st.integers(0, n - 1), unique=True, max_size=min(n, 2))))
    blocks = [draw(st.sampled_from([1, 2, 3, 4])) for _ in blocked]
    shape = []
    for axis in range(n):
        outer = draw(st.sampled_from([1, 2, 3, 5] if n > 2 else [1, 2, 3, 5, 7]))
        shape.append(outer * (blocks[blocked.index(axis)] if axis in blocked else 1))
    k = len(blocked)
    order = draw(st.permutations(range(n))) + draw(st.permutations(range(n, n + k)))
    formats = [draw(st.sampled_from(["dense", "csr"])) for _ in range(n + k)]
    index_type = draw(st.sampled_from(["uint8", "uint16", "int32"]))
    dtype = draw(st.sampled_from(DTYPES))
    return tuple(shape), dtype, order, blocked, blocks, formats, index_type, \
        draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from([0.0, 0.5, 0.9]))


@scaled(0.25)
@given(sparse_cases())
def test_random_sparsity_against_litert(case):
    shape, dtype, order, block_map, blocks, formats, index_type, seed, zeros = case
    rng = np.random.default_rng(seed)
    dense = random_dense(shape, dtype, rng, zero_fraction=zeros)
    check(dense, order, block_map, blocks, formats, index_type,
          keep_zeros=rng if seed % 3 == 0 else None)


# -- the real sparse model -----------------------------------------------------------------------
def index_array(table_type, table):
    """A DimensionMetadata's segments or indices union as int64."""
    name = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}[table_type]
    vector = getattr(importlib.import_module(f"tflite.{name}"), name)()
    vector.Init(table.Bytes, table.Pos)
    return vector.ValuesAsNumpy().astype(np.int64)


def sparsity_of(tensor) -> Sparsity:
    """A tensor's SparsityParameters, read by the tflite package."""
    sp = tensor.Sparsity()
    levels = [sp.DimMetadata(level) for level in range(sp.DimMetadataLength())]
    metas = tuple(DimMeta(d.Format() == 1, d.DenseSize(),
                          *((index_array(d.ArraySegmentsType(), d.ArraySegments()),
                             index_array(d.ArrayIndicesType(), d.ArrayIndices()))
                            if d.Format() == 1 else (None, None))) for d in levels)
    block_map = tuple(int(b) for b in sp.BlockMapAsNumpy()) if sp.BlockMapLength() else ()
    return Sparsity(tuple(int(t) for t in sp.TraversalOrderAsNumpy()), block_map, metas)


def test_real_sparse_model_against_litert(mediapipe_models):
    """Every sparse constant of face_detection_full_range_sparse (46, each
    float16 OHWI behind a DENSIFY) densifies to what LiteRT computed."""
    data = open(mediapipe_models["face_detection_full_range_sparse.tflite"], "rb").read()
    m = tflite.Model.GetRootAsModel(data, 0)
    g = m.Subgraphs(0)
    densified = {}
    for j in range(g.OperatorsLength()):
        op = g.Operators(j)
        code = m.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == 124:   # DENSIFY
            densified[int(op.Inputs(0))] = int(op.Outputs(0))
    computed = run_litert(data)
    checked = formats = 0
    for t in range(g.TensorsLength()):
        tensor = g.Tensors(t)
        if tensor.Sparsity() is None:
            continue
        assert tensor.Type() == 1        # float16
        values = np.frombuffer(m.Buffers(tensor.Buffer()).DataAsNumpy().tobytes(), np.float16)
        sparsity = sparsity_of(tensor)
        got = densify(values, tuple(tensor.ShapeAsNumpy()), sparsity, tensor.Name().decode())
        want = computed[g.Tensors(densified[t]).Name().decode()]
        assert same_bits(got, want), tensor.Name()
        formats += sparsity.block_map == () and \
            [level.sparse for level in sparsity.dim_metadata] == [False, False, False, True]
        checked += 1
    assert checked == formats == 46


# -- hostile metadata ----------------------------------------------------------------------------
def csr(segments, indices):
    return DimMeta(True, 0, np.array(segments, np.int64), np.array(indices, np.int64))


def dense_level(size):
    return DimMeta(False, size, None, None)


GOOD_VALUES = np.arange(1, 9, dtype=np.float32)         # 2 blocks of 1x4, in (3, 8)
GOOD = Sparsity((0, 1, 2), (1,), (dense_level(3), csr([0, 1, 1, 2], [0, 1]), dense_level(4)))


def replace_level(level, meta, base=GOOD):
    metas = list(base.dim_metadata)
    metas[level] = meta
    return Sparsity(base.traversal_order, base.block_map, tuple(metas))


R, V, TWO_BY_FOUR, HUGE = replace_level, GOOD_VALUES, GOOD.dim_metadata, 1 << 31
HOSTILE = {   # name: (sparsity, what the message says[, values[, shape]])
    "segments past indices": (R(1, csr([0, 1, 1, 900], [0, 1])),
                              "level 1 (SPARSE_CSR) segment 2 ends at 900, past its 2 indices"),
    "segments decrease": (R(1, csr([0, 2, 1, 2], [0, 1])), "segment 1 ends at 1, before it "
                          "starts at 2"),
    "segments start late": (R(1, csr([1, 1, 1, 2], [0, 1])), "segments start at 1, not 0"),
    "segments too short": (R(1, csr([0, 2], [0, 1])), "has 2 segments entries; its 3 parent "
                           "positions need 4"),
    "index past its dim": (R(1, csr([0, 1, 1, 2], [0, 2])), "index 1 is 2, outside its dim of "
                           "size 2 (0..1 allowed)"),
    "negative index": (R(1, csr([0, 1, 1, 2], [-1, 1])), "index 0 is -1"),
    "not a permutation": (Sparsity((0, 0, 2), (1,), TWO_BY_FOUR),
                          "traversal_order [0, 0, 2] is not a permutation"),
    "block dim first": (Sparsity((2, 0, 1), (1,), TWO_BY_FOUR),
                        "traversal_order [2, 0, 1] is not a permutation"),
    "too few levels": (Sparsity((0, 1, 2), (1,), TWO_BY_FOUR[:2]),
                       "dim_metadata 2 levels; a rank-2 tensor with 1 block dims needs 3"),
    "block map out of range": (Sparsity((0, 1, 2), (2,), TWO_BY_FOUR),
                               "block_map[0] is 2, not a dim of the rank-2 tensor (0..1)"),
    "block map repeats": (Sparsity((0, 1, 2, 3), (1, 1), TWO_BY_FOUR + (dense_level(4),)),
                          "block_map [1, 1] is not increasing"),
    "block map out of order": (Sparsity((0, 1, 2, 3), (1, 0), TWO_BY_FOUR + (dense_level(1),)),
                               "block_map [1, 0] is not increasing; TFLite pairs"),
    "block size not dividing": (R(2, dense_level(3)), "block size 3 of block dim 2 does not "
                                "divide dim 1 (size 8)"),
    "block size zero": (R(2, dense_level(0)), "has block size 0; a block size must be > 0"),
    "block size negative": (R(2, dense_level(-4)), "has block size -4"),
    "dense size wrong": (R(0, dense_level(4)), "level 0 (DENSE) has dense_size 4 but walks "
                         "expanded dim 0 of size 3"),
    "dense size negative": (R(0, dense_level(-3)), "dense_size -3"),
    "negative shape": (GOOD, "dim 1 of shape [3, -8] is -8", V, (3, -8)),
    "too many values": (GOOD, "the levels reach 8 values but the buffer holds 12",
                        np.arange(12, dtype=np.float32)),
    "too few values": (GOOD, "the levels reach 8 values but the buffer holds 5", V[:5]),
    "missing indices": (R(1, DimMeta(True, 0, np.array([0]), None)),
                        "level 1 (SPARSE_CSR) has no array_indices"),
    "terabytes": (Sparsity((0, 1, 2), (), tuple(map(dense_level, (1 << 20, 1 << 20, 1 << 10)))),
                  "over the host memory limit", V, (1 << 20, 1 << 20, 1 << 10)),
    "huge dims then a short CSR": (Sparsity((0, 1), (), (dense_level(HUGE), csr([0, 8], [0]))),
                                   "over the host memory limit", V, (HUGE, HUGE)),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_metadata_says_one_line(name):
    sparsity, says, values, shape = HOSTILE[name] + (V, (3, 8))[len(HOSTILE[name]) - 2:]
    with pytest.raises(ClayoutError) as info:
        densify(values, shape, sparsity, "conv/w")
    message = str(info.value)
    assert "\n" not in message and "'conv/w'" in message and says in message, message


def test_the_good_case_of_the_hostile_table():
    want = np.zeros((3, 8), np.float32)
    want[0, :4], want[2, 4:] = GOOD_VALUES[:4], GOOD_VALUES[4:]
    assert same_bits(densify(GOOD_VALUES, (3, 8), GOOD, "conv/w"), want)


@scaled(0.5)
@given(st.data())
def test_mutated_metadata_is_densified_or_refused(data):
    """Random numbers in a valid encoding's arrays, sizes and orders: densify
    returns the tensor's shape or raises ClayoutError, never another error."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dense = random_dense((6, 8), "float32", rng)
    values, sparsity = sparsify(dense, (0, 1, 2), (1,), (4,), ["csr", "csr", "dense"])
    sp = records(sparsity)
    level = data.draw(st.integers(0, 2))
    meta = sp.dim_metadata[level]
    small = st.integers(-3, 12)
    if meta.sparse:
        segments = np.array(data.draw(st.lists(small, max_size=8)), np.int64)
        indices = np.array(data.draw(st.lists(small, max_size=8)), np.int64)
        sp = replace_level(level, csr(segments, indices), sp)
    else:
        sp = replace_level(level, dense_level(data.draw(small)), sp)
    if data.draw(st.booleans()):
        sp = Sparsity(tuple(data.draw(st.lists(small, min_size=2, max_size=4))),
                      tuple(data.draw(st.lists(small, max_size=2))), sp.dim_metadata)
    count = data.draw(st.sampled_from([len(values), 0, 5, 64]))
    try:
        got = densify(np.ones(count, np.float32), (6, 8), sp, "w")
    except ClayoutError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("tensor 'w' (sparse): ")
    else:
        assert got.shape == (6, 8)
