"""The cpu engine: host arrays converted on the host (docs/engines.md).

A reorder is planned once per pair of descs (runtime/cpu/plan.py: every
choice is there, cached) and applied here: the plan's copies run as compiled
moves (runtime/cpu/compiled.py) or numpy methods on the shared thread pool
(runtime/cpu/copy.py), its padding is written as the plan says. An image is
the dense buffer of its layout's desc, so every conversion of the engine
(runtime/contract.py ``HostEngine``) is one such reorder.

Frames (``from_frame``) run compiled (runtime/cpu/frames.py) where the
library is loaded, straight into the destination where it can, else numpy.

Threads: plans are frozen and their cache is thread-safe; the worker pools
are made once and shared, so any number of callers may convert at once.
"""
from __future__ import annotations

import numpy as np

from ..algebra import dtypes
from ..algebra.desc import MemoryDesc
from ..contract import HostEngine
from . import copy, frames, outputs
from .plan import plan


def fill_value(desc: MemoryDesc, what: str):
    if what == "zero":
        return desc.dtype.np.type(0)
    return dtypes.convert(np.array([desc.fill], dtype=np.float32), desc.dtype)[0]


def reorder_into(src_buf: np.ndarray, src: MemoryDesc, dst_buf: np.ndarray, dst: MemoryDesc,
                 zeroed: bool = False) -> None:
    """Write the reorder of ``src_buf`` (src's physical elements) into
    ``dst_buf`` (dst's), touching only dst's footprint. ``zeroed`` says dst_buf
    is known to be all zero already (a fresh array)."""
    if src.is_zero or dst.is_zero:
        return
    p = plan(src, dst)
    if p.via is not None:   # through a plain logical intermediate
        tmp = np.empty(p.via.span, dtype=dst.dtype.np)
        reorder_into(src_buf, src, tmp, p.via)
        reorder_into(tmp, p.via, dst_buf, dst, zeroed)
        return
    padding = "none" if zeroed else p.padding
    if padding == "rows":    # the one pair and the zeros around it, in one pass
        copy.run_rows(src_buf, dst_buf, p.rows, dst.offset0, dst.span, dst.dtype)
    else:
        if padding == "memset":   # one memset instead of many thin tail boxes
            copy.zero(dst_buf[dst.offset0:dst.span])
        for c in p.copies:
            copy.run(c, src_buf, dst_buf, dst.dtype)
    # halo boxes after the data (the two never overlap); zero boxes when nothing zeroed them
    for view, what in p.fills:
        if what == "halo" or padding == "boxes":
            np.copyto(view.of(dst_buf), fill_value(dst, what))


def reorder(data: np.ndarray, src: MemoryDesc, dst: MemoryDesc, out=None) -> np.ndarray:
    """A 1-D physical array of dst holding ``data`` (src's physical elements),
    as if fresh: everything outside dst's footprint zero. ``out``: the array to
    write (dst.span elements, contiguous), whatever it held; else a new one."""
    # gaps and offset0 lie outside the footprint reorder_into writes
    zero = src.is_zero or dst.is_zero or not dst.is_dense or bool(dst.offset0)
    if out is not None:
        flat = out.reshape(-1)
        if zero:
            copy.zero(flat)
    else:
        # a new array starts from zeros (np.zeros maps zero pages lazily) where
        # the copy also leaves block tails only zero-filled
        zero = zero or plan(src, dst).padding != "none"
        out = flat = (np.zeros if zero else np.empty)(dst.span, dtype=dst.dtype.np)
    reorder_into(np.asarray(data).reshape(-1), src, flat, dst, zeroed=zero)
    return out


class CpuEngine(HostEngine):
    """The fast path on the host: compiled moves, or numpy."""
    name = "cpu"

    def reorder(self, data, src, dst, out=None):
        return reorder(data, src, dst, out)

    def reorder_into(self, data, src, target, dst, zeroed):
        reorder_into(np.asarray(data).reshape(-1), src, target, dst, zeroed)

    # -- frames: compiled where the library is loaded (runtime/cpu/frames.py), else numpy
    def sample(self, frame, data):
        return frames.sample(frame, np.asarray(data).reshape(frame.shape))

    def from_frame(self, frame, dst, data, out=None):
        """Straight into dst's memory where the compiled frames write it
        (nchw, nhwc, in_out_channel, ...), else ``sample``'s tensor converted."""
        placed = frames.place(frame, np.asarray(data), dst, out)
        return placed if placed is not None else super().from_frame(frame, dst, data, out)

    # -- outputs: compiled rows where the library is loaded (runtime/cpu/outputs.py), else numpy
    def read_output(self, side, data, rule, out=None):
        done = outputs.read(self, side, data, rule, out)
        return done if done is not None else super().read_output(side, data, rule, out)


ENGINE = CpuEngine()
