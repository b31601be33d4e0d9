"""Prepared conversions: plan once from what does not change between
frames, then call with the data (docs/engines.md, "Prepared conversions").

A :class:`Prepared` is one door's parse kept without its data: the two
sides, the engine, the tiles or pitch, and the engine's planned work
(``Engine.executor``: on the cpu engine its plan looked up once). A call
checks only what can change between calls (the input's shape, dtype and
memory, ``out``, a host image's padding lanes) and runs it. A Prepared is
frozen: any number of threads may call one at once.

``runtime.prepare`` (runtime/doors/prepare.py) makes them from the
ordinary door's keywords with the input's shape and dtype (or a Memory's
side) in place of the input. The ordinary doors keep one per signature of
their arguments (``signature``: the array's type, shape, dtype and memory
flags, and every other argument as given): the first call parses in full,
so a mistake gets the door's own message; the next calls of that
signature are the Prepared's.
"""
from __future__ import annotations

import numpy as np

from .. import memory
from ..algebra import dtypes
from ..algebra.output import Pending
from ..cache import LRU
from ..contract import wait_events
from ..errors import ClayoutError
from ..settings import on_refresh
from ..memory import Memory
from ..algebra.hostarray import padding_tails, physical_shape
from ..algebra.pitch import pitched_shape
from .calls import FrameCall, FromImageCall, HostCall, HostFrameIntoMemoryCall, ReorderCall, \
    ToImageCall
from .checks import check_padding_lanes, host_out, tagged, wait_list

# the ordinary doors' prepared calls, by their arguments' signature (an engine left
# out is the default engine of the settings when kept: forgotten with them)
SIGNATURES = LRU("door signatures", "CLAYOUT_SIGNATURE_CACHE", 1024)
on_refresh(SIGNATURES.clear)


class Prepared:
    """``what`` (the door's name, for messages), ``call`` (its parse of host arrays, its
    input and out left out), ``shape`` and ``dtype`` (the host input it
    takes; ``physical``: a desc whose physical shape it takes too),
    ``padding`` (the image side whose padding lanes a call checks, or None).
    ``__call__(data, out=None, wait=True, wait_for=None)`` converts ``data``:
    a host array, or a Memory of the call's source side on its engine's
    device (the result a Memory)."""

    __slots__ = ("what", "call", "shape", "dtype", "shapes", "padding", "out_shape",
                 "out_dtype", "run", "flat", "held", "between", "tails")

    def __init__(self, what: str, call: HostCall, shape, dtype, padding=None, physical=None):
        self.what, self.padding = what, padding
        self.tails = padding_tails(padding.memory) if padding is not None else None
        self.call = _rebound(call, None, None)          # nothing of the stand-in kept
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.shapes = (self.shape,) if physical is None else \
            (self.shape, physical_shape(physical))
        kind = type(call)
        self.flat = kind in (ReorderCall, ToImageCall)   # the engine takes the 1-D elements
        self.out_dtype = call.dst.dtype.np
        self.out_shape = call.shape if call.shape is not None else \
            pitched_shape(call.dst, call.pitch) if kind is ToImageCall and call.pitch else \
            call.dst.array_shape if call.dst.is_image else (call.dst.span,)
        self.run = call.engine.executor(call.src, call.dst) \
            if kind in (ReorderCall, FromImageCall) or \
            (kind is ToImageCall and call.pitch is None) else None
        # the side a Memory input holds: the source, or a frame's bytes; the
        # conversion between two storages, planned at the first call on a Memory
        self.held = tagged(self.shape, "u8", None) if kind is FrameCall else call.src
        self.between = None

    # -- a call ---------------------------------------------------------------------------
    def __call__(self, data, out=None, wait: bool = True, wait_for=None):
        if wait is not True and wait is not False:
            raise ClayoutError(f"{self.what}: wait={wait!r}; allowed: True or False")
        wait_for = wait_list(wait_for, self.what) if wait_for is not None else ()
        if isinstance(data, Memory) or isinstance(out, Memory):
            result = self._on_memory(data, out, wait_for)
        else:
            result = self._on_host(data, out, wait_for, wait)
        if wait or isinstance(result, Pending):
            return result
        return Pending.of(result, getattr(result, "event", None))

    def _on_host(self, data, out, wait_for, wait: bool = True):
        arr = self._array(data)
        if self.padding is not None:
            check_padding_lanes(arr, self.padding, self.what, tails=self.tails)
        if out is not None:
            flags = out.flags if type(out) is np.ndarray else None
            if flags is None or out.shape != self.out_shape or out.dtype != self.out_dtype or \
                    not flags.c_contiguous or not flags.writeable or \
                    np.may_share_memory(out, arr):
                host_out(out, self.out_shape, self.call.dst.dtype, arr, self.what)
        if wait_for:
            wait_events(wait_for)
        taken = arr.reshape(-1) if self.flat else arr   # the input as the engine takes it
        if not wait and self.call.engine.enqueues:   # the device work left running
            return _rebound(self.call, taken, out).run_pending()
        if self.run is None:
            return _rebound(self.call, taken, out).run()
        if out is None:
            result = self.run(taken)
            return result if result.shape == self.out_shape else result.reshape(self.out_shape)
        self.run(taken, out if self.flat else out.reshape(-1))
        return out

    def _array(self, data) -> np.ndarray:
        """``data`` as the contiguous array the prepared call takes: itself
        where it is one, a view copied once, big-endian values in native
        order; else one ClayoutError saying what the call takes."""
        if type(data) is np.ndarray and data.dtype == self.dtype and data.shape in self.shapes:
            flags = data.flags
            if flags.c_contiguous and flags.aligned:
                return data
            return np.require(data, requirements=("C", "A"))   # a view: copied once
        arr = np.asarray(data)
        held = dtypes.native(arr) if arr.dtype.kind in "fiu" else arr
        if arr.shape not in self.shapes or held.dtype != self.dtype:
            takes = " or ".join(map(str, self.shapes))
            raise ClayoutError(f"{self.what}: this prepared call takes an array of shape "
                               f"{takes} and dtype {self.dtype}; got shape {arr.shape}, "
                               f"dtype {arr.dtype} (prepare another call for it)")
        return np.require(held, requirements=("C", "A"))

    def _on_memory(self, data, out, wait_for):
        """The call on a Memory of the source side (or a host frame into an
        out Memory), on the prepared engine's device."""
        call, engine = self.call, self.call.engine
        target = self._target(out, engine)
        if not isinstance(data, Memory):   # a host frame into a Memory: uploaded first
            if type(call) is not FrameCall:
                raise ClayoutError(f"{self.what}: out= a Memory goes with a Memory input; a "
                                   "host array takes a numpy out=")
            return HostFrameIntoMemoryCall(call.src, call.dst, self._array(data), target,
                                           engine, wait_for, frame=self.held).apply()
        if not _reaches(engine, data) or data.side != self.held:
            raise ClayoutError(f"{self.what}: this prepared call takes a Memory of "
                               f"{self.held.describe()} on {engine!r}; got {data!r}")
        if type(call) is FrameCall:
            return memory.from_frame(call.src, data, target or call.dst, engine, wait_for)
        if target is None:
            return memory.convert(data, call.dst, engine, wait_for)   # a new Memory, zeroed
        if self.between is None:
            self.between = engine.storage_executor(call.src, call.dst)
        if data.storage is not None and target.storage is not None:
            self.between(data.storage, target.storage, wait_for)
        return target

    def _target(self, out, engine):
        """``out``, a Memory of the result's side on the prepared call's
        device, or None (a new Memory)."""
        dst = self.call.dst
        if out is None:
            return None
        if not isinstance(out, Memory) or not _reaches(engine, out) or out.side != dst:
            got = repr(out) if isinstance(out, Memory) else type(out).__name__
            raise ClayoutError(f"{self.what}: out= with a Memory input takes a Memory of "
                               f"{dst.describe()} on {engine!r}; got {got}")
        return out

    def __repr__(self) -> str:
        call = self.call
        src = f"u8 frame {self.shape}" if type(call) is FrameCall else call.src.describe()
        return (f"<clayout prepared {self.what}: {src} -> {call.dst.describe()} on "
                f"{call.engine.name}>")


def _reaches(engine, mem: Memory) -> bool:
    """Whether a call prepared on ``engine`` converts ``mem``: a Memory of
    the same engine, or of another OpenCL engine on the same context (its
    storage is the device's; the commands are ordered by events)."""
    return mem.engine is engine or (mem.engine.domain == engine.domain and
                                    engine.domain != "host")


def _rebound(call, data, out):
    """``call`` with another input and out, the rest as parsed."""
    new = object.__new__(type(call))
    new.__dict__.update(call.__dict__)
    object.__setattr__(new, "data", data)
    object.__setattr__(new, "out", out)
    return new


# -- the ordinary doors' signatures -----------------------------------------------------------
def signature(what: str, data, args: tuple):
    """The key of a door call on a contiguous, aligned ndarray in one of
    clayout's dtypes (native order) and arguments that each hash (every
    argument as given), or None: parsed afresh."""
    if type(data) is not np.ndarray:
        return None
    flags = data.flags
    if not (flags.c_contiguous and flags.aligned and data.dtype.isnative):
        return None
    key = (what, data.shape, data.dtype.char) + args
    try:
        hash(key)
    except TypeError:
        return None
    return key


def keep(key, what: str, call, data, padding=None) -> None:
    """Keep the Prepared of a door's first call under ``key``, where the
    call's input is the caller's array as it is (not a copy or a rounding
    of it, which a later call would have to make again)."""
    if key is None or not isinstance(call, HostCall) or isinstance(call.data, tuple):
        return
    held = call.data
    if not isinstance(held, np.ndarray) or held.dtype != data.dtype or \
            held.size != data.size or held.ctypes.data != data.ctypes.data:
        return   # a copy, a rounding or a window of the input: made again each call
    SIGNATURES.get(key, lambda: Prepared(what, call, data.shape, data.dtype, padding))


__all__ = ["Prepared", "SIGNATURES", "signature", "keep"]
