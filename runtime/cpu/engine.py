"""The cpu engine: host arrays converted on the host (docs/engines.md).

An engine has one path, chosen when it is made: ``CpuEngine(path="auto")``
takes the compiled library where a C compiler builds it, ``"compiled"``
demands it, ``"numpy"`` never uses it; ``CpuEngine()`` reads CLAYOUT_CPU
then, once (``ENGINE``, the default engine, is made so at import). Its
library (runtime/cpu/native.py) is loaded on first use and kept; nothing is
read from the environment per call.

A reorder is planned once per pair of descs and library (runtime/cpu/plan.py:
every choice is there, cached; one lookup a call) and applied here: the
plan's copies run as compiled moves (runtime/cpu/compiled.py) or numpy
methods (runtime/cpu/copy.py), both on the one worker pool
(runtime/cpu/pool.py); its padding is written as the plan says. An image is
the dense buffer of its layout's desc, so every conversion of the engine
(runtime/contract.py ``HostEngine``) is one such reorder.

Frames (``from_frame``) and ``read_output`` run compiled (runtime/cpu/frames.py,
outputs.py) on the engine's library where it is loaded, else numpy.

Threads: plans are frozen and their cache is thread-safe; the library is the
same object whichever thread loads it first; the worker pool is made once and
shared, so any number of callers may convert at once.
"""
from __future__ import annotations

import numpy as np

from ..algebra import conversion, dtypes
from ..algebra.hostarray import host_shape
from ..algebra.desc import MemoryDesc
from ..contract import HostEngine, wait_events
from ..errors import ClayoutError
from . import compiled, copy, frames, native, outputs
from .plan import Plan, plan


def fill_value(desc: MemoryDesc, what: str):
    if what == "zero":
        return desc.dtype.np.type(0)
    return dtypes.convert(np.array([desc.fill], dtype=np.float32), desc.dtype)[0]


def apply(p: Plan, src_buf: np.ndarray, dst_buf: np.ndarray, dst: MemoryDesc,
          zeroed: bool) -> None:
    """Write plan ``p`` of a reorder into ``dst`` from ``src_buf`` (its source's
    physical elements) into ``dst_buf`` (dst's), touching only dst's footprint.
    ``zeroed`` says dst_buf is known to be all zero already (a fresh array)."""
    if p.via is not None:   # through a plain logical intermediate
        first, second = p.steps
        tmp = np.empty(p.via.span, dtype=dst.dtype.np)
        apply(first, src_buf, tmp, p.via, False)
        apply(second, tmp, dst_buf, dst, zeroed)
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


class CpuEngine(HostEngine):
    """The fast path on the host: compiled moves, or numpy. ``path``: "auto",
    "compiled" or "numpy" (the module says what each takes), anything else a
    ClayoutError naming them; None: CLAYOUT_CPU's value, read here, where a
    value that is not one of them is the ClayoutError of every use (so that
    a mistyped setting never stops ``import runtime``)."""
    name = "cpu"

    def __init__(self, path: str | None = None):
        self._library = self._refused = None
        if path is None:
            try:
                path = native.choice()
            except ClayoutError as exc:
                self._refused = str(exc)
        self.path = path if self._refused else native.checked(path)

    @property
    def library(self) -> native.Library:
        """The engine's library, loaded (or built) on first use and kept: its
        ``dll`` None on the numpy path. Path "compiled" where it cannot be
        built: a ClayoutError saying why, at every use."""
        if self._library is None:
            if self._refused:
                raise ClayoutError(self._refused)
            self._library = native.library(self.path)
        return self._library

    def status(self) -> str:
        """What the engine uses and why, in one line."""
        try:
            return self.library.reason
        except ClayoutError as exc:
            return str(exc)

    def plan(self, src: MemoryDesc, dst: MemoryDesc) -> Plan:
        """The plan of src -> dst on this engine's path (runtime/cpu/plan.py)."""
        return plan(src, dst, self.library)

    def reorder(self, data, src, dst, out=None):
        """A 1-D physical array of dst holding ``data`` (src's physical
        elements), as if fresh: everything outside dst's footprint zero.
        ``out``: the array to write (dst.span elements, contiguous), whatever
        it held; else a new one."""
        empty = src.is_zero or dst.is_zero
        p = None if empty else self.plan(src, dst)
        # gaps and offset0 lie outside the footprint a plan writes
        zero = empty or not dst.is_dense or bool(dst.offset0)
        if out is not None:
            flat = out.reshape(-1)
            if zero:
                copy.zero(flat)
        else:
            # a new array starts from zeros (np.zeros maps zero pages lazily) where
            # the copy also leaves block tails only zero-filled
            zero = zero or p.padding != "none"
            out = flat = (np.zeros if zero else np.empty)(dst.span, dtype=dst.dtype.np)
        if p is not None:
            apply(p, np.asarray(data).reshape(-1), flat, dst, zero)
        return out

    def executor(self, src, dst):
        """A one-move conversion with its plan looked up once (no stages, no
        regrouping, no plan lookup a call); anything else as ``convert``."""
        steps = conversion.stages(src, dst)
        if len(steps) != 1 or src.is_zero or dst.is_zero:
            return super().executor(src, dst)
        s, d = src.memory, dst.memory
        if s.dims != d.dims:
            try:
                s = s.reshape(d.dims)
            except ClayoutError:   # a regrouping through a copy: the general path
                return super().executor(src, dst)
        p = self.plan(s, d)
        gaps = not d.is_dense or bool(d.offset0)      # outside the footprint a plan writes
        fresh_zero = gaps or p.padding != "none"
        shape, span, np_dtype = host_shape(dst), d.span, d.dtype.np
        one = compiled.one_call(p) if not fresh_zero else None
        if one is not None:   # one compiled call writes every byte: no Python around it
            call, src_offset, dst_offset, box = one

            def run(data, out=None):
                if out is None:
                    out = np.empty(shape, np_dtype)
                call(compiled.address(data) + src_offset, compiled.address(out) + dst_offset,
                     box)
                return out
            return run

        def run(data, out=None):
            if out is None:
                flat = (np.zeros if fresh_zero else np.empty)(span, np_dtype)
                apply(p, data.reshape(-1), flat, d, fresh_zero)
                return flat.reshape(shape)
            flat = out.reshape(-1)
            if gaps:
                copy.zero(flat)
            apply(p, data.reshape(-1), flat, d, gaps)
            return out
        return run

    def reorder_into(self, data, src, target, dst, zeroed):
        """Write the reorder of ``data`` (src's physical elements) into
        ``target`` (dst's), touching only dst's footprint."""
        if not (src.is_zero or dst.is_zero):
            apply(self.plan(src, dst), np.asarray(data).reshape(-1), target, dst, zeroed)

    # -- frames: compiled where the library is loaded (runtime/cpu/frames.py), else numpy
    def sample(self, frame, data):
        return frames.sample(frame, np.asarray(data).reshape(frame.shape), library=self.library)

    def from_frame(self, frame, dst, data, out=None):
        """Straight into dst's memory where the compiled frames write it
        (nchw, nhwc, in_out_channel, ...), else ``sample``'s tensor converted."""
        placed = frames.place(frame, np.asarray(data), dst, out, library=self.library)
        return placed if placed is not None else super().from_frame(frame, dst, data, out)

    # -- outputs: compiled rows where the library is loaded (runtime/cpu/outputs.py), else numpy
    def read_output(self, side, data, rule, out=None, wait_for=()):
        return self.output_executor(side, rule)(data, out, wait_for)

    def output_executor(self, side, rule):
        """read_output planned once on the engine's library
        (runtime/cpu/outputs.py), else numpy."""
        run = outputs.planned(self, side, rule)
        numpy_path = super().read_output

        def read(data, out=None, wait_for=()):
            wait_events(wait_for)
            done = run(data, out) if run is not None else None
            return done if done is not None else numpy_path(side, data, rule, out)
        return read


ENGINE = CpuEngine()


def reorder(data: np.ndarray, src: MemoryDesc, dst: MemoryDesc, out=None) -> np.ndarray:
    """``ENGINE.reorder`` (the default engine's, as it is now)."""
    return ENGINE.reorder(data, src, dst, out)


def reorder_into(src_buf: np.ndarray, src: MemoryDesc, dst_buf: np.ndarray, dst: MemoryDesc,
                 zeroed: bool = False) -> None:
    """``ENGINE.reorder_into`` (the default engine's, as it is now)."""
    ENGINE.reorder_into(src_buf, src, dst_buf, dst, zeroed)
