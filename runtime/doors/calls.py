"""The calls a door builds: one frozen class per kind of conversion, each
with its own ``apply()``.

runtime/doors/parse.py parses a door's arguments into one of these (the sides
checked, the engine resolved, the input as the engine takes it, ``out``
checked, the tiles planned); ``apply()`` converts and returns the result.
Nothing here checks or re-derives: a call is what its door decided.

* ``ReorderCall``: a host buffer into another buffer layout;
* ``ToImageCall`` / ``ToTilesCall``: a host buffer onto an image, whole
  (rows widened to a pitch where asked) or cut into tiles;
* ``FromImageCall`` / ``FromTilesCall``: a host image, whole or as tiles,
  back into a buffer;
* ``FrameCall``: a host frame sampled onto a buffer or an image;
* ``MemoryCall`` / ``MemoryFrameCall``: any of these on a ``Memory`` (the
  engine's storage), its result a Memory; the frame's own apply;
  ``HostFrameIntoMemoryCall``: a host frame into a Memory, uploaded first.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import memory
from ..algebra.output import Pending
from ..algebra.side import Side
from ..algebra.tiles import TilePlan
from ..contract import Engine, wait_events
from ..algebra.pitch import pitched
from ..memory import Memory


@dataclass(frozen=True)
class HostCall:
    """A call on host arrays: ``src`` and ``dst`` (the sides), the
    ``engine``, ``data`` (the input as the engine takes it: a buffer's 1-D
    physical array, an image array, a frame), ``out`` (a checked host
    array or None), ``shape`` (the result's host shape, or None for the
    engine's own) and ``wait_for`` (device events the call waits for, on
    the host, before it touches its arrays). ``apply()`` waits, then runs;
    ``apply(wait=False)``: a Pending of the result, the input consumed when
    it returns (on an engine that ``enqueues``, ``run_pending``: the device
    work left running; elsewhere the work done first)."""
    src: Side
    dst: Side
    engine: Engine
    data: object
    out: object = None
    shape: tuple[int, ...] | None = None
    wait_for: tuple = ()

    def apply(self, wait: bool = True):
        wait_events(self.wait_for)
        if wait:
            return self.run()
        if self.engine.enqueues:
            return self.run_pending()
        return Pending.of(self.run())

    def run(self):
        raise NotImplementedError

    def run_pending(self) -> Pending:
        """The call on an engine that enqueues, not waited for (by default
        run whole: a kind the engine has no pending form of)."""
        return Pending.of(self.run())

    def _result(self, result):
        if self.out is not None:
            return self.out
        return result if self.shape is None else result.reshape(self.shape)


class ReorderCall(HostCall):
    def run(self):
        return self._result(self.engine.convert(self.src, self.dst, self.data, self.out))

    def run_pending(self) -> Pending:
        return self.engine.convert(self.src, self.dst, self.data, self.out,
                                   wait=False).map(self._result)


@dataclass(frozen=True)
class ToImageCall(ReorderCall):
    """``pitch``: the result's rows are this many pixels long (None: the
    image's own width, converted as a reorder is; runtime/algebra/pitch.py)."""
    pitch: int | None = None

    def run(self):
        if self.pitch is None:
            return super().run()
        # the image, then its rows widened
        return pitched(self.engine.convert(self.src, self.dst, self.data), self.pitch, self.out)

    def run_pending(self) -> Pending:
        return super().run_pending() if self.pitch is None else Pending.of(self.run())


class FromImageCall(HostCall):
    def _convert(self, wait: bool = True):
        out = None if self.out is None else self.out.reshape(-1)
        return self.engine.convert(self.src, self.dst, self.data, out, wait=wait)

    def run(self):
        return self._result(self._convert())

    def run_pending(self) -> Pending:
        return self._convert(wait=False).map(self._result)


@dataclass(frozen=True)
class ToTilesCall(HostCall):
    """``tiles``: the cut of the image over the limit; the result is the
    tuple of tiles, row-major."""
    tiles: TilePlan | None = None

    def run(self):
        return self.engine.to_tiles(self.src, self.dst, self.data, self.tiles)


@dataclass(frozen=True)
class FromTilesCall(HostCall):
    """``data``: the tuple of tiles ``tiles`` plans."""
    tiles: TilePlan | None = None

    def run(self):
        return self._result(self.engine.from_tiles(self.src, self.data, self.tiles, self.dst))


class FrameCall(HostCall):
    """``src``: the FramePlan; ``data``: the frame's u8 array."""
    def _sample(self, **wait):
        out = self.out.reshape(-1) if self.out is not None and not self.dst.is_image \
            else self.out
        return self.engine.from_frame(self.src, self.dst, self.data, out, **wait)

    def run(self):
        return self._result(self._sample())

    def run_pending(self) -> Pending:
        return self._sample(wait=False).map(self._result)


@dataclass(frozen=True)
class MemoryCall:
    """A call on a Memory: ``data`` the source Memory, ``src`` its side,
    ``dst`` the destination's side, ``out`` the Memory to write into (None:
    a new one on ``engine``), ``engine`` the engine it runs on (the
    source's, or another on its device context: its queue), ``wait_for``
    device events its first commands wait for. ``apply()`` enqueues it and
    returns the destination, whose ``event`` is its last command's."""
    src: Side
    dst: Side
    data: Memory
    out: Memory | None
    engine: Engine
    wait_for: tuple = ()

    @property
    def target(self):
        """What the result is written into: ``out``, else a new Memory of ``dst``."""
        return self.out if self.out is not None else self.dst

    def apply(self, wait: bool = True):
        """The destination Memory (``wait=False``: a Pending of it, done once
        its last command is)."""
        result = self.enqueue()
        return result if wait else Pending.of(result, result.event)

    def enqueue(self) -> Memory:
        return memory.convert(self.data, self.target, self.engine, self.wait_for)


class MemoryFrameCall(MemoryCall):
    """A frame held in a u8 buffer Memory: ``src`` its FramePlan."""
    def enqueue(self) -> Memory:
        return memory.from_frame(self.src, self.data, self.target, self.engine, self.wait_for)


@dataclass(frozen=True)
class HostFrameIntoMemoryCall(MemoryCall):
    """A host frame into a Memory (``out``, or a new one on ``engine``):
    ``data`` the frame's u8 array, ``frame`` its u8 buffer side. The array
    is uploaded into pooled device memory (or read in place by a host
    engine) and consumed when ``apply()`` returns."""
    frame: Side | None = None

    def enqueue(self) -> Memory:
        with self.engine.host_input(self.frame, self.data) as storage:
            held = Memory(self.frame, self.engine, data=storage)
            return memory.from_frame(self.src, held, self.target, self.engine, self.wait_for)


Call = HostCall | MemoryCall

__all__ = ["Call", "HostCall", "ReorderCall", "ToImageCall", "FromImageCall", "ToTilesCall",
           "FromTilesCall", "FrameCall", "MemoryCall", "MemoryFrameCall",
           "HostFrameIntoMemoryCall"]
