"""Sparse TensorFlow Lite tensors: the records of a tensor's SparsityParameters
and ``densify``, which rebuilds the dense tensor from its packed values.

A sparse constant (the input of a DENSIFY op) is stored as the values it
keeps plus, for each level of a traversal, either a DENSE size or a CSR
pair (segments, indices). A tensor of rank n with a k-dimensional block is
seen as n + k "expanded" dims: original dim ``block_map[j]`` of size d with
block size b becomes an outer dim of d / b and a block dim ``n + j`` of b.
``traversal_order`` lists the expanded dims in storage order (the n
original dims, then the k block dims, as the schema says); level l walks
expanded dim ``traversal_order[l]``: a DENSE level its ``dense_size``
coordinates (position = parent * size + i), a SPARSE_CSR level the
coordinates ``indices[segments[p]:segments[p + 1]]`` under parent position p
(position = the index's place). The last level's positions index the
values; elements that no level reaches are 0. A block's size is the
dense_size of its block dim's level; ``block_map`` must increase (LiteRT
pairs block dims with dims in that order). Metadata that breaks a rule
raises one ClayoutError line naming the tensor, the level and the number.

>>> import numpy as np
>>> csr = DimMeta(True, 0, np.array([0, 1, 1, 3]), np.array([2, 0, 3]))
>>> sp = Sparsity((0, 1), (), (DimMeta(False, 3, None, None), csr))
>>> densify(np.array([5., 6., 7.]), (3, 4), sp, "w")
array([[0., 0., 5., 0.],
       [0., 0., 0., 0.],
       [6., 0., 0., 7.]])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ClayoutError
from ...limits import check_host_bytes


@dataclass(frozen=True)
class DimMeta:
    """One level of a sparse tensor's traversal (a DimensionMetadata)."""
    sparse: bool                    # SPARSE_CSR (else DENSE)
    dense_size: int                 # DENSE: the dim's size
    segments: np.ndarray | None     # SPARSE_CSR: array_segments, int64
    indices: np.ndarray | None      # SPARSE_CSR: array_indices, int64


@dataclass(frozen=True)
class Sparsity:
    """A tensor's SparsityParameters: traversal order, block map, levels."""
    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dim_metadata: tuple[DimMeta, ...]


class _Fail:
    """Raises the one-line error of one tensor (``fail(text)``)."""

    def __init__(self, name: str):
        self.prefix = f"tensor {name!r} (sparse): "

    def __call__(self, text: str):
        raise ClayoutError(self.prefix + text + "; a corrupt model?")


def _ints(values, what: str, fail: _Fail) -> tuple[int, ...]:
    """``values`` as a tuple of Python ints, else a one-line error."""
    try:
        out = tuple(int(v) for v in values)
    except (TypeError, ValueError, OverflowError):
        fail(f"{what} is not a list of integers ({values!r})")
    return out


def _level_name(level: int, meta: DimMeta) -> str:
    return f"level {level} ({'SPARSE_CSR' if meta.sparse else 'DENSE'})"


def _check_orders(n: int, sparsity: Sparsity, fail: _Fail):
    """Rank, traversal order and block map; returns (order, block_map)."""
    order = _ints(sparsity.traversal_order, "traversal_order", fail)
    block_map = _ints(sparsity.block_map or (), "block_map", fail)
    k = len(block_map)
    if k > n:
        fail(f"block_map has {k} entries for a rank-{n} tensor (at most {n} allowed)")
    levels = len(sparsity.dim_metadata)
    if len(order) != n + k or levels != n + k:
        fail(f"traversal_order has {len(order)} entries and dim_metadata {levels} levels; "
             f"a rank-{n} tensor with {k} block dims needs {n + k} of each")
    if sorted(order[:n]) != list(range(n)) or sorted(order[n:]) != list(range(n, n + k)):
        fail(f"traversal_order {list(order)} is not a permutation of the dims 0..{n - 1} "
             f"followed by one of the block dims {n}..{n + k - 1}")
    for j, dim in enumerate(block_map):
        if not 0 <= dim < n:
            fail(f"block_map[{j}] is {dim}, not a dim of the rank-{n} tensor (0..{n - 1})")
    if any(a >= b for a, b in zip(block_map, block_map[1:])):
        fail(f"block_map {list(block_map)} is not increasing; TFLite pairs the block dims "
             f"with the dims they split in increasing order")
    return order, block_map


def _expanded_dims(shape, order, block_map, metas, fail: _Fail) -> list[int]:
    """The n + k expanded dims: each original dim divided by its block, then
    the block sizes (each the dense_size of its block dim's level)."""
    n = len(shape)
    level_of = {dim: level for level, dim in enumerate(order)}
    expanded = list(shape) + [0] * len(block_map)
    for j, dim in enumerate(block_map):
        level = level_of[n + j]
        size = metas[level].dense_size
        if size <= 0:
            fail(f"block dim {n + j} ({_level_name(level, metas[level])}) has block size "
                 f"{size}; a block size must be > 0")
        if shape[dim] % size:
            fail(f"block size {size} of block dim {n + j} does not divide dim {dim} "
                 f"(size {shape[dim]})")
        expanded[dim] = shape[dim] // size
        expanded[n + j] = size
    return expanded


def _csr_arrays(level: int, meta: DimMeta, fail: _Fail):
    """A CSR level's segments and indices as 1-D int64 arrays."""
    arrays = []
    for what, value in (("segments", meta.segments), ("indices", meta.indices)):
        if value is None:
            fail(f"{_level_name(level, meta)} has no array_{what}")
        try:
            array = np.asarray(value)
            if array.dtype.kind not in "iu" and array.size:
                raise TypeError(array.dtype)
            array = array.astype(np.int64, copy=False).reshape(-1)
        except (TypeError, ValueError, OverflowError):
            fail(f"{_level_name(level, meta)} array_{what} is not integers")
        arrays.append(array)
    return arrays


def _check_csr(level: int, meta: DimMeta, parents: int, dim_size: int, fail: _Fail):
    """Validates one CSR level below ``parents`` positions; returns
    (segments, indices, positions after the level)."""
    segments, indices = _csr_arrays(level, meta, fail)
    where = _level_name(level, meta)
    if len(segments) != parents + 1:
        fail(f"{where} has {len(segments)} segments entries; its {parents} parent positions "
             f"need {parents + 1}")
    if segments[0] != 0:
        fail(f"{where} segments start at {segments[0]}, not 0")
    steps = np.diff(segments)
    if steps.size and steps.min() < 0:
        bad = int(np.argmax(steps < 0))
        fail(f"{where} segment {bad} ends at {segments[bad + 1]}, before it starts at "
             f"{segments[bad]} (segments must not decrease)")
    total = int(segments[-1])
    if total > len(indices):
        bad = int(np.argmax(segments > len(indices))) - 1
        fail(f"{where} segment {bad} ends at {segments[bad + 1]}, past its {len(indices)} "
             f"indices")
    used = indices[:total]
    if used.size and (used.min() < 0 or used.max() >= dim_size):
        bad = int(np.argmax((used < 0) | (used >= dim_size)))
        fail(f"{where} index {bad} is {used[bad]}, outside its dim of size {dim_size} "
             f"(0..{dim_size - 1} allowed)")
    return segments, used, total


def _plan_levels(expanded, order, metas, values_count: int, fail: _Fail) -> list:
    """Validates every level; returns per level ('dense', size) or ('csr',
    segments, indices). Only Python ints are computed from the sizes, so a
    count that could only come from hostile sizes allocates nothing: each
    count is bounded by the next CSR level's real segments or by the values."""
    plan, positions = [], 1
    for level, meta in enumerate(metas):
        dim_size = expanded[order[level]]
        if meta.sparse:
            segments, indices, positions = _check_csr(level, meta, positions, dim_size, fail)
            plan.append(("csr", segments, indices))
            continue
        if meta.dense_size != dim_size:
            fail(f"{_level_name(level, meta)} has dense_size {meta.dense_size} but walks "
                 f"expanded dim {order[level]} of size {dim_size}")
        positions *= dim_size
        plan.append(("dense", dim_size))
    if positions != values_count:
        fail(f"the levels reach {positions} values but the buffer holds {values_count}")
    return plan


def _walk(plan) -> list[np.ndarray]:
    """Each level's coordinate of every stored value, in storage order.

    Positions at every level are 0..count-1 in order (a DENSE level makes
    parent * size + i, a CSR level the ranges segments[p]..segments[p+1]-1,
    both increasing), so a level needs only each new position's parent."""
    coords: list[np.ndarray] = []
    count = 1
    for step in plan:
        if step[0] == "dense":
            size = step[1]
            parent = np.repeat(np.arange(count, dtype=np.int64), size)
            own = np.tile(np.arange(size, dtype=np.int64), count)
            count *= size
        else:
            segments, indices = step[1], step[2]
            parent = np.repeat(np.arange(count, dtype=np.int64), np.diff(segments))
            own = indices
            count = len(indices)
        coords = [c[parent] for c in coords] + [own]
    return coords


def densify(values: np.ndarray, shape: tuple[int, ...], sparsity: Sparsity,
            name: str) -> np.ndarray:
    """The dense tensor (``values``' dtype, ``shape``) of a TFLite sparse
    tensor named ``name``: its stored ``values`` put where the levels of
    ``sparsity`` say, 0 elsewhere. Metadata that does not describe such a
    tensor raises one ClayoutError naming the tensor, the level and the
    number that is wrong."""
    fail = _Fail(name)
    shape = _ints(shape, "shape", fail)
    for axis, size in enumerate(shape):
        if size < 0:
            fail(f"dim {axis} of shape {list(shape)} is {size}; sizes must be >= 0")
    values = np.asarray(values).reshape(-1)
    count = int(np.prod(shape, dtype=object)) if shape else 1
    check_host_bytes(count * values.dtype.itemsize, f"tensor {name!r} (sparse), densified "
                     f"to {list(shape)},", "its shape in the model is too large; a corrupt model?")
    order, block_map = _check_orders(len(shape), sparsity, fail)
    metas = []
    for level, meta in enumerate(sparsity.dim_metadata):
        if not isinstance(meta, DimMeta):
            fail(f"dim_metadata[{level}] is a {type(meta).__name__}, not a DimMeta")
        size = _ints([meta.dense_size or 0], f"level {level} dense_size", fail)[0]
        metas.append(DimMeta(bool(meta.sparse), size, meta.segments, meta.indices))
    expanded = _expanded_dims(shape, order, block_map, metas, fail)
    plan = _plan_levels(expanded, order, metas, len(values), fail)
    dense = np.zeros(count, values.dtype)
    if not len(values):
        return dense.reshape(shape)
    level_coords = _walk(plan)
    expanded_coords = [None] * len(order)
    for level, dim in enumerate(order):
        expanded_coords[dim] = level_coords[level]
    n = len(shape)
    original = list(expanded_coords[:n])
    for j, dim in enumerate(block_map):
        original[dim] = original[dim] * expanded[n + j] + expanded_coords[n + j]
    flat = np.zeros(len(values), np.int64)
    for axis in range(n):
        flat = flat * shape[axis] + original[axis]
    dense[flat] = values
    return dense.reshape(shape)
