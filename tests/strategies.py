"""Shared hypothesis strategies and helpers for clayout's tests.

Values: physical arrays are filled with numpy from a drawn seed (hypothesis
lists of thousands of elements are slow), mixing benchdnn's tie/saturation
values, IEEE specials and random bit patterns.

Descs: plain tags (any permutation), single- and double-blocked tags, user
strides with gaps and offset0, submemory of a blocked parent, halo-padded
descs; dims with tails (1, 3, 5, 17) and zero-volume dims, kept small because
the reference is slow by design.

Settings: ``SETTINGS`` (the example count of the test profile that
tests/conftest.py loads: dev 30, ci 50, thorough 120; derandomized in CI)
and ``FEW`` (5/12 of it: 50 in the thorough tier) for expensive properties.
A test that needs another size asks ``scaled(fraction)``: a fraction of the
profile's count (at least 2), so that no decorator fixes a count.
"""

from __future__ import annotations

import contextlib

import math
import os

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from runtime import IMAGE_LAYOUTS, ClayoutError, MemoryDesc
from runtime.cpu import geometry, plan as cpu_plan
from runtime.algebra.dtypes import NAMES as DTYPES  # f32 f16 bf16 s32 s8 u8
from runtime.algebra.dtypes import IMAGE_NAMES as IMAGE_DTYPES
from runtime.algebra.tags import LETTERS

from conftest import BITS, bits

_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SETTINGS = settings(deadline=None, derandomize=_CI or settings.default.derandomize,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def scaled(fraction: float, parent: settings = SETTINGS) -> settings:
    """``parent`` with ``fraction`` of the profile's max_examples (at least 2):
    ``scaled(2.5)`` is 300 examples in the thorough tier, 125 in ci, 75 in dev."""
    return settings(parent, max_examples=max(2, round(SETTINGS.max_examples * fraction)))


FEW = scaled(5 / 12)

# The named layouts that place the tensor itself, for tests over any dims and
# dtype; the Winograd layouts (a transform stage: 3x3 or 5x5 float filters
# only) are tested in test_winograd.py.
MOVED = {name: layout for name, layout in IMAGE_LAYOUTS.items() if layout.transform is None}

NP = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
      "bf16": np.dtype(ml_dtypes.bfloat16), "s32": np.dtype(np.int32),
      "s8": np.dtype(np.int8), "u8": np.dtype(np.uint8)}
FLOATS = ("f32", "f16", "bf16")
TAIL_SIZES = (0, 1, 2, 3, 4, 5, 17)
BLOCK_SIZES = (1, 2, 3, 4, 4, 8, 16, 16)

# benchdnn's fill values plus IEEE specials and ties of each target type
SPECIAL_FLOATS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 16.0, 64.0, -0.0, 2.5, -2.5, 127.5, 255.5,
                  -127.5, -128.5, 128.5, 65520.0, 65504.0, 65519.0, -65520.0, 3.4e38, -3.4e38,
                  float("nan"), float("inf"), float("-inf"), 1e-45, -1e-45, 1e-40, 6e-8,
                  5.96e-8, 1e-39, 9.2e-41, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,
                  1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 2147483520.0, 2147483648.0,
                  -2147483648.0, -2147483904.0, 4294967296.0, 16777217.0, 0.49999997,
                  -0.5, -1.5, 3.5, 1e10, -1e10)
SPECIAL_INTS = (0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 65504, 65519, 65520, 16777216,
                16777217, 16842753, 2147483647, -2147483648, 2147483520, -2147483647)


def assert_same_bits(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g, w = bits(got), bits(want)
    if not np.array_equal(g, w):
        where = np.argwhere(g != w)
        i = tuple(where[0])
        raise AssertionError(f"{what}: {len(where)} elements differ; first at {i}: "
                             f"got {got[i]!r} (0x{int(g[i]):x}) want {want[i]!r} (0x{int(w[i]):x})")


def special_values(name: str) -> np.ndarray:
    """The special pool cast (with numpy/ml_dtypes, saturating ints) into dtype ``name``."""
    dt = NP[name]
    if name in FLOATS:
        floats = np.array(SPECIAL_FLOATS + tuple(float(v) for v in SPECIAL_INTS), np.float64)
        fin = ml_dtypes.finfo(dt)
        extra = np.array([fin.max, fin.min, fin.tiny, fin.smallest_subnormal,
                          -fin.smallest_subnormal], np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.concatenate([floats, extra]).astype(np.float32).astype(dt)
    info = np.iinfo(dt)
    ints = np.array(SPECIAL_INTS + (info.min, info.max, info.max - 1, info.min + 1), np.int64)
    return np.clip(ints, info.min, info.max).astype(dt)


def fill(name: str, n: int, seed: int, mode: str = "mixed") -> np.ndarray:
    """``n`` values of dtype ``name``: 'special' (the pool), 'bits' (random bit
    patterns: NaN payloads, subnormals), 'small' (small integers, exact in every
    dtype) or 'mixed' (each element from one of the three)."""
    rng = np.random.default_rng(seed)
    dt = NP[name]
    pool = special_values(name)
    special = pool[rng.integers(0, len(pool), n)] if n else np.zeros(0, dt)
    rand = rng.integers(0, 1 << (8 * dt.itemsize), n, dtype=np.uint64).astype(
        BITS[dt.itemsize]).view(dt)
    small = rng.integers(-8 if dt.kind != "u" else 0, 9, n).astype(dt)
    if mode == "special":
        return special
    if mode == "bits":
        return rand
    if mode == "small":
        return small
    pick = rng.integers(0, 3, n)
    return np.where(pick == 0, special, np.where(pick == 1, rand, small)).astype(dt)


fill_modes = st.sampled_from(("mixed", "special", "bits", "small"))
seeds = st.integers(0, 2 ** 32 - 1)
dtype_names = st.sampled_from(DTYPES)
image_dtype_names = st.sampled_from(IMAGE_DTYPES)


# -- tags -------------------------------------------------------------------------
@st.composite
def tags(draw, ndims: int, max_blocked: int = 2, allow_double: bool = True,
         sizes=BLOCK_SIZES) -> str:
    """A well-formed letter tag of ``ndims`` dims: any permutation, up to
    ``max_blocked`` blocked dims, each blocked once or twice, blocks in any order."""
    order = draw(st.permutations(range(ndims)))
    nblocked = draw(st.integers(0, min(max_blocked, ndims)))
    blocked = draw(st.lists(st.sampled_from(range(ndims)), min_size=nblocked,
                            max_size=nblocked, unique=True)) if nblocked else []
    blocks = []
    for d in blocked:
        count = draw(st.integers(1, 2)) if allow_double else 1
        for _ in range(count):
            blocks.append((d, draw(st.sampled_from(sizes))))
    blocks = draw(st.permutations(blocks)) if blocks else []
    bset = {d for d, _ in blocks}
    outer = "".join(LETTERS[d].upper() if d in bset else LETTERS[d] for d in order)
    return outer + "".join(f"{size}{LETTERS[d]}" for d, size in blocks)


@st.composite
def small_dims(draw, ndims: int, sizes=TAIL_SIZES, max_volume: int = 600):
    dims = draw(st.lists(st.sampled_from(sizes), min_size=ndims, max_size=ndims))
    while math.prod(max(d, 1) for d in dims) > max_volume:
        i = max(range(ndims), key=lambda k: dims[k])
        dims[i] = {17: 5, 5: 3, 4: 3, 3: 2, 2: 1}.get(dims[i], 1)
    return tuple(dims)


MAX_SPAN = 6000  # physical elements, padding included


@st.composite
def tagged_descs(draw, dtype=None, ndims=None, dims=None, tag=None):
    dt = draw(dtype_names) if dtype is None else dtype
    if dims is None:
        nd = draw(st.integers(1, 4)) if ndims is None else ndims
        dims = draw(small_dims(nd))
    if tag is None:
        tag = draw(tags(len(dims)))
    desc = MemoryDesc(dims, dt, tag=tag)
    if desc.span > MAX_SPAN:
        desc = MemoryDesc(dims, dt, tag=_plain_of(tag))
    return desc


def _plain_of(tag: str) -> str:
    """The plain tag with the same outer order: 'aBcd16b' -> 'abcd'."""
    outer = tag[:next((i for i, ch in enumerate(tag) if ch.isdigit()), len(tag))]
    return outer.lower()


@st.composite
def strided_descs(draw, dtype=None, dims=None):
    """Plain descs with user strides: any dim order, gaps between dims, offset0."""
    dt = draw(dtype_names) if dtype is None else dtype
    if dims is None:
        dims = draw(small_dims(draw(st.integers(1, 4)), max_volume=300))
    order = draw(st.permutations(range(len(dims))))  # outer to inner
    strides = [0] * len(dims)
    running = draw(st.sampled_from((1, 1, 2, 3)))
    for d in reversed(order):
        strides[d] = running
        running = running * max(dims[d], 1) + draw(st.sampled_from((0, 0, 1, 5)))
    offset0 = draw(st.sampled_from((0, 0, 1, 7)))
    return MemoryDesc(dims, dt, strides=strides, offset0=offset0)


@st.composite
def submemory_descs(draw, dtype=None, ndims=None):
    """(parent, sub): sub = parent.submemory(dims, offsets) following oneDNN's rules."""
    dt = draw(dtype_names) if dtype is None else dtype
    nd = draw(st.integers(1, 4)) if ndims is None else ndims
    parent_dims = draw(small_dims(nd, sizes=(1, 2, 3, 5, 8, 17), max_volume=400))
    parent = MemoryDesc(parent_dims, dt, tag=draw(tags(nd, allow_double=False)))
    if parent.span > MAX_SPAN:
        parent = MemoryDesc(parent_dims, dt)
    return parent, draw(sub_of(parent))


@st.composite
def sub_of(draw, parent):
    """parent.submemory(dims, offsets) with dims and offsets drawn by oneDNN's rules."""
    dims, offsets = [], []
    for d, n in enumerate(parent.dims):
        blk = parent.blocks_of(d)
        if n == 0:
            dims.append(0)
            offsets.append(0)
            continue
        off = draw(st.sampled_from([k * blk for k in range((n - 1) // blk + 1)]))
        rest = n - off
        choices = {rest} | {k * blk for k in range(0, rest // blk + 1)} | set(
            range(0, min(blk, rest)))
        dims.append(draw(st.sampled_from(sorted(choices))))
        offsets.append(off)
    return parent.submemory(dims, offsets)


@st.composite
def halo_descs(draw, dtype=None, ndims=None, dims=None):
    dt = draw(dtype_names) if dtype is None else dtype
    if dims is None:
        nd = draw(st.integers(1, 4)) if ndims is None else ndims
        dims = draw(small_dims(nd, max_volume=200))
    nd = len(dims)
    lower = draw(st.lists(st.sampled_from((0, 0, 1, 2)), min_size=nd, max_size=nd))
    upper = draw(st.lists(st.sampled_from((0, 0, 1, 3)), min_size=nd, max_size=nd))
    fillv = draw(st.sampled_from((0.0, 1.0, -1.0, 2.5, -0.0, 255.5, float("nan"),
                                  float("inf"), 3.4e38, -7.0)))
    tag = draw(tags(nd))
    desc = MemoryDesc(dims, dt, tag=tag, halo=(lower, upper), fill=fillv)
    if desc.span > MAX_SPAN:
        desc = MemoryDesc(dims, dt, tag=_plain_of(tag), halo=(lower, upper), fill=fillv)
    return desc


@st.composite
def permuted_descs(draw, dtype=None, dims=None):
    """desc.permute_axes(perm) of a tagged or strided desc, with the given dims."""
    if dims is None:
        dims = draw(small_dims(draw(st.integers(1, 4))))
    perm = draw(st.permutations(range(len(dims))))
    before = tuple(dims[perm[i]] for i in range(len(dims)))
    base = draw(st.one_of(tagged_descs(dtype=dtype, dims=before),
                          strided_descs(dtype=dtype, dims=before)))
    out = base.permute_axes(perm)
    assert out.dims == tuple(dims)
    return out


@st.composite
def reshaped_descs(draw, dtype=None, dims=None):
    """A desc reached by reshape(): a unit dim removed, or two dims joined."""
    if dims is None:
        dims = draw(small_dims(draw(st.integers(1, 4))))
    d = draw(st.integers(0, len(dims) - 1))
    split = [f for f in (2, 3, 4, 5) if dims[d] % f == 0 and dims[d] > f]
    if split and draw(st.booleans()):
        f = draw(st.sampled_from(split))
        before = dims[:d] + (f, dims[d] // f) + dims[d + 1:]
    else:
        before = dims[:d] + (1,) + dims[d:]
    if len(before) > 12:
        return draw(tagged_descs(dtype=dtype, dims=dims))
    base = draw(st.one_of(tagged_descs(dtype=dtype, dims=before),
                          strided_descs(dtype=dtype, dims=before)))
    try:
        out = base.reshape(dims)
    except ClayoutError:
        return draw(tagged_descs(dtype=dtype, dims=dims))
    assert out.dims == tuple(dims)
    return out


@st.composite
def any_descs(draw, dtype=None, dims=None):
    """One desc of any family for the given dims (or drawn dims)."""
    kind = draw(st.sampled_from(("tag", "tag", "strided", "halo", "sub", "perm", "reshape")))
    if kind == "sub" and dims is None:
        return draw(submemory_descs(dtype=dtype))[1]
    if kind == "perm":
        return draw(permuted_descs(dtype=dtype, dims=dims))
    if kind == "reshape":
        return draw(reshaped_descs(dtype=dtype, dims=dims))
    if kind == "strided":
        return draw(strided_descs(dtype=dtype, dims=dims))
    if kind == "halo":
        return draw(halo_descs(dtype=dtype, dims=dims))
    return draw(tagged_descs(dtype=dtype, dims=dims))



@contextlib.contextmanager
def small_tiles(small: int = 1 << 10, tile: int = 1 << 9, stage_bytes: int | None = None):
    """Make the cpu fast path tile (and thread) small arrays: its tiled,
    staged and peeled code then runs, with many tile borders, on data the
    reference checks quickly. The cpu plans are made for the geometry, so
    their cache is emptied on the way in and out."""
    names = ("SMALL_ELEMS", "SMALL_BYTES", "TILE_ELEMS", "FAR_TILE_ELEMS", "FAR_READ_RUN",
             "STAGE_BYTES")
    old = {n: getattr(geometry, n) for n in names}
    new = dict(SMALL_ELEMS=small, SMALL_BYTES=small, TILE_ELEMS=tile, FAR_TILE_ELEMS=tile * 4,
               FAR_READ_RUN=tile // 8, STAGE_BYTES=stage_bytes or old["STAGE_BYTES"])
    cpu_plan.PLANS.clear()
    for n, v in new.items():
        setattr(geometry, n, v)
    try:
        yield
    finally:
        for n, v in old.items():
            setattr(geometry, n, v)
        cpu_plan.PLANS.clear()
