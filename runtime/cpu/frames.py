"""The cpu engine's compiled frames: a camera frame's colour, sample and
normalize stages (docs/frames.md) in the compiled library
(templates/cpu_frame.c after the #defines of cpu_frame.c.mako, built with the
moves by runtime/cpu/native.py).

The C reads the frame's numbers and both axes' tables from the one float32
array ``runtime.algebra.frame_taps.tables(plan)`` (the array the OpenCL
kernel reads), and the format, the channel order and where the output goes
from ``spec`` (int64 words, ``SPEC`` names them): one build serves every
crop, size and normalization. Its float32 operations are those of
runtime/algebra/frame_sample.py in the same order (built with
-ffp-contract=off), so the two give the same bits; the tests hold it to that.

Two doors:

* ``sample(plan, frame)``: the (C, H, W) float32 the numpy path gives
  (``HostEngine.sample``);
* ``place(plan, frame, dst, out)``: straight into the destination's memory
  where it is a strided (C, H, W) in f32, f16, bf16, u8 or s8 (nchw, nhwc,
  in_out_channel and the other layouts whose pixels hold C values and
  padding lanes), rounded by the dtype rules as a conversion would: no
  float32 tensor in between. Else None, and the caller converts ``sample``'s.

Both take the engine's library (runtime/cpu/native.py ``Library``) and run
the output rows in bands on the engine's worker pool (runtime/cpu/pool.py,
``clayout_parallel``; a ctypes call releases the GIL, so callers on many
threads run at once, each alone where the pool is busy). Where the library
is not loaded (the numpy path, no compiler) ``sample`` is the numpy path
and ``place`` gives None.
"""
from __future__ import annotations

import math

import numpy as np

from . import geometry as g
from .native import FRAME_SPEC as SPEC
from .pool import serve
from ..algebra import frame_sample
from ..algebra.frame import FramePlan
from ..algebra.frame_taps import tables
from ..algebra.hostarray import host_shape
from ..cache import LRU

KINDS = {"packed": 0, "uv": 1, "vu": 1, "planes": 2}
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "u8": 3, "s8": 4}
# how the x stage reads the taps' bytes: auto (AVX2: windows, else gathers; the scalar way at
# a frame's last bytes and elsewhere), or one way alone for the tests to compare
XMODES = {"auto": 0, "scalar": 1, "gathers": 2}
PARTS = SPEC.index("parts")  # the spec's word of bands
SMALL_PIXELS = 1 << 13     # an output of at most this many pixels: one band, no workers
BANDS_PER_THREAD = 2       # bands per worker: one that wakes late still finds work
# ("target", dst's memory desc, dims) -> ``target``'s tuple (100 us at 640x640: a camera's
# destination is looked at once, whatever its crop) and ("run", id(plan), dst's desc, xmode,
# threads) -> what a call passes (``_prepared``: a camera's frames come with one plan)
SPECS = LRU("compiled frame specs", "CLAYOUT_FRAME_CACHE", 64)


def target(desc, dims) -> tuple | None:
    """Where ``desc`` (a MemoryDesc of logical ``dims`` (1, C, H, W)) puts
    element (c, h, w), as (dtype, channel, row and column strides in bytes,
    zero lanes after each pixel's C values), or None where the C does not
    write it: strides that are not linear, an offset, a halo, a dtype
    outside DTYPES, or padding other than lanes after each pixel's values."""
    name = desc.dtype.name
    if name not in DTYPES or tuple(desc.dims) != tuple(dims) or desc.offset0 or desc.has_halo:
        return None
    _, c, h, w = dims
    strides = []
    for d, n in ((1, c), (2, h), (3, w)):
        idx = [np.zeros(1, np.int64)] * 4
        idx[d] = np.arange(n, dtype=np.int64)
        off = np.asarray(desc.offsets(idx), np.int64).reshape(-1)
        step = int(off[1] - off[0]) if n > 1 else 0
        if not np.array_equal(off, off[0] + step * np.arange(n)) or off[0] != 0:
            return None
        strides.append(step)
    sc, sh, sw = strides
    sc = sc if c > 1 else 1   # one channel: its zero lanes follow it at the next element
    item = desc.dtype.itemsize
    if desc.span == c * h * w:
        zeros = 0        # every element is the tensor's (the offsets are then a bijection)
    elif (c == 1 or sc == 1) and sw > c and (h == 1 or sh == w * sw) and \
            desc.span == h * w * sw:
        zeros = sw - c   # each pixel: its C values, then zero lanes
    else:
        return None
    return name, sc * item, sh * item, sw * item, zeros


def spec(plan: FramePlan, where: tuple, xmode: str = "auto", threads: int = 0) -> np.ndarray:
    """The ``spec`` words of ``plan`` written to ``where`` (``target``'s
    tuple), the x stage's way of reading the taps (``XMODES``) and the bands
    for ``threads`` threads (0: the engine's; one band for a small output)."""
    fmt = plan.format
    dtype, oc, orow, ocol, zeros = where
    rgb = tuple(fmt.rgb) + (0,) * (3 - len(fmt.rgb))
    source = tuple(plan.source) + (plan.source[-1],) * (3 - plan.channels)
    uoff, voff = (0, 1) if fmt.chroma == "uv" else (1, 0)
    _, _, h, w = plan.dims
    threads = threads or g.THREADS
    small = plan.x.scaled * plan.y.scaled <= SMALL_PIXELS and h * w <= 4 * SMALL_PIXELS
    parts = 1 if small or threads == 1 else threads * BANDS_PER_THREAD
    words = {"kind": KINDS[fmt.chroma or "packed"], "bytes": fmt.bytes, "rgb0": rgb[0],
             "rgb1": rgb[1], "rgb2": rgb[2], "uoff": uoff, "voff": voff,
             "channels": plan.channels, "source0": source[0], "source1": source[1],
             "source2": source[2], "dtype": DTYPES[dtype], "oc": oc, "orow": orow,
             "ocol": ocol, "zeros": zeros, "h": h, "w": w, "xmode": XMODES[xmode],
             "parts": parts}
    out = np.array([words[k] for k in SPEC], np.int64)
    out.flags.writeable = False
    return out


def _frame_bytes(plan: FramePlan, frame) -> np.ndarray:
    """The frame as the C reads it: C-contiguous u8 of the plan's shape."""
    arr = np.ascontiguousarray(frame, dtype=np.uint8)
    if arr.size != math.prod(plan.shape):
        raise ValueError(f"a frame of {arr.size} bytes for a plan of shape {plan.shape}")
    return arr


def _prepared(plan: FramePlan, desc, xmode: str, threads: int) -> tuple:
    """(plan, its taps, the spec words, their two addresses) for writing
    into ``desc``'s memory (None: the plain (C, H, W) float32), or (plan,
    None, ...) where the C does not write it. Keyed by the plan's id (hashing
    a plan took 1.5 us, its taps' cache 5 us, an array's ctypes address 3 us):
    the entry holds the plan, so no other plan has that id while it is cached."""
    def make():
        if desc is None:
            where = plain_target(plan)
        else:
            where = SPECS.get(("target", desc, plan.dims), lambda: target(desc, plan.dims))
        if where is None:
            return plan, None, None, 0, 0
        taps, words = tables(plan), spec(plan, where, xmode, threads)
        return plan, taps, words, taps.ctypes.data, words.ctypes.data
    return SPECS.get(("run", id(plan), desc, xmode, threads), make)


def _run(lib, prepared: tuple, frame, out: np.ndarray, threads: int) -> bool:
    """The frame's stages written into ``out`` (a C-contiguous array of the
    bytes the spec addresses) by library ``lib``; False where the C could not
    allocate its buffers (``out`` then holds nothing promised)."""
    plan, _, words_array, taps, words = prepared
    src = _frame_bytes(plan, frame)
    if words_array[PARTS] > 1:
        serve(lib)
    done = lib.function("clayout_frame")(src.ctypes.data, taps, out.ctypes.data, words,
                                         threads or g.THREADS)
    return done == 0


def plain_target(plan: FramePlan) -> tuple:
    """``target``'s tuple of the plain (C, H, W) float32 array."""
    _, _, h, w = plan.dims
    return "f32", 4 * h * w, 4 * w, 4, 0


def sample(plan: FramePlan, frame: np.ndarray, out: np.ndarray | None = None, *, library,
           xmode: str = "auto", threads: int = 0) -> np.ndarray:
    """The model input (C, H, W) float32 of ``frame`` (an array of
    ``plan.shape``): compiled where ``library`` (the engine's) is loaded, else
    (or where it could not allocate) runtime.algebra.frame_sample.sample, the
    same bits."""
    if out is None:
        out = np.empty(plan.dims[1:], np.float32)
    plain = out.dtype == np.float32 and out.shape == plan.dims[1:] and out.flags.c_contiguous
    if library.dll is not None and plain and not plan.is_zero and \
            _run(library, _prepared(plan, None, xmode, threads), frame, out, threads):
        return out
    return frame_sample.sample(plan, np.asarray(frame).reshape(plan.shape), out)


def place(plan: FramePlan, frame: np.ndarray, dst, out: np.ndarray | None = None, *, library,
          xmode: str = "auto", threads: int = 0) -> np.ndarray | None:
    """``frame`` converted straight into dst's memory (``dst``: the result's
    side, an ImageDesc or a MemoryDesc): ``out`` (its host array,
    C-contiguous, whatever it held) or a new array of host_shape(dst),
    returned; None where the C does not write dst's memory (``target``),
    ``library`` (the engine's) is not loaded, or it could not allocate."""
    if library.dll is None or plan.is_zero:
        return None
    desc = dst.memory
    prepared = _prepared(plan, desc, xmode, threads)
    if prepared[1] is None:
        return None
    result = np.empty(host_shape(dst), dst.dtype.np) if out is None else out
    if result.nbytes != desc.span * desc.dtype.itemsize or not result.flags.c_contiguous:
        return None
    return result if _run(library, prepared, frame, result, threads) else None


__all__ = ["SPEC", "SPECS", "sample", "place", "target", "spec"]
