"""The plan of one move on one device: everything the engine decides about a
conversion between two sides, decided once and cached, so that an enqueue
only applies it.

``move_plan(src, dst, device)`` (two sides, a runtime.opencl.device.Device)
gives a :class:`MovePlan`:

* ``access``: how kernels reach the image side, if any: ``direct``
  (read_image*/write_image*), ``staged`` (the image's dense buffer, then one
  buffer<->image copy), ``dense`` (the image is its dense buffer: a buffer
  storage, or a host array of an image no image object here can hold), or
  ``buffers`` (no image); ``why`` says what decided it;
* ``kernel``: the kernel (runtime/opencl/plan.py) or a byte copy, of the
  family ``family_of`` chose for the device (``tiled``, ``family_why``):
  moves that transpose go through local-memory tiles on a GPU, one work
  item a vector on a CPU device (measured faster there: local memory is
  ordinary memory); a move that does not transpose is direct either way;
* ``host``: how host arrays reach the device (:class:`HostPath`): in place
  (USE_HOST_PTR, a device that shares host memory), or copied into leased
  device memory and back, a pinned array directly and a pageable one by the
  driver's copy or pipelined in chunks through pinned stages
  (runtime/opencl/transfer.py). Where both ends are host arrays off a
  host-unified device the image side is ``dense`` (its host form crosses,
  no image object).

The rules are the device's facts and the engine's options, nothing read per
call: ``staged`` images on CPU devices (PoCL emulates image access in
software; staging measured 1.2-2.3x faster there), always for one-channel
half images (PoCL 3.1 mishandles CL_R + CL_HALF_FLOAT) and formats the device
lacks; in place on host-unified devices; on a discrete device, a pageable
array pipelined through pinned stages (the driver's own copy is serial: an
H100's measured pageable rates, 9.1 ms to the device and 5.1 back for
64 MiB, against 1.23 ms each way pinned); CLAYOUT_OPENCL_HOST_PATH=driver
or =staging forces one route, for the bench to measure both.

>>> from runtime.opencl.device import Device, EngineOptions          # doctest: +SKIP
>>> p = move_plan(MemoryDesc((1, 8, 2, 2)), ImageDesc(image_layout("in_out_channel"),
...               (1, 8, 2, 2)), device)                        # doctest: +SKIP
>>> p.access, p.why                                             # doctest: +SKIP
('staged', 'a CPU device: image access is emulated, staging is faster')
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..cache import LRU
from . import baking, images, programs
from .tiled import LOCAL_BYTES, TILE_BYTES, TILE_ITEMS
from .plan import ByteCopy, Kernel, bake_after, plan, side_key

# a plan holds its sides and a kernel (its text kept once: runtime/opencl/plan.py): bounded
# in entries and in bytes, weighed as the sides plus the text
PLANS = LRU("OpenCL move plans", "CLAYOUT_PLAN_CACHE", 4096,
            weigh=lambda p: 2048 + len(getattr(p._kernel[0], "source", "")), budget=32 << 20)


@dataclass(frozen=True)
class HostPath:
    """How a host array crosses to the device and back: ``in_place`` (the
    kernels work on the caller's arrays through USE_HOST_PTR), else through
    leased device memory, a pinned array (runtime.empty_pinned) directly and
    a pageable one by ``pageable``: "driver" (the driver's own copy) or
    "staging" (pipelined: ``chunk`` bytes at a time through ``stages``
    pinned arrays, runtime/opencl/transfer.py); ``why`` says what decided it."""
    in_place: bool
    pageable: str
    chunk: int = 0
    stages: int = 0
    why: str = ""

    def describe(self) -> str:
        if self.in_place:
            return "in place (the device shares host memory)"
        how = "the driver" if self.pageable == "driver" else \
            f"chunks of {self.chunk >> 10} KiB through {self.stages} pinned stages, pipelined"
        return ("copied through pooled device memory; pinned arrays directly, pageable ones "
                f"by {how}")


@dataclass(frozen=True, eq=False)
class MovePlan:
    """One move on one device, decided: see the module docstring. ``kernel``
    is the generic kernel until the shape is hot, then the baked one
    (runtime/opencl/plan.py's rule, ``bake_after``: counted here, once per
    plan, not per call site), built on a worker thread and swapped in when
    it is ready (runtime/opencl/baking.py): no call of a steady loop builds."""
    src: object
    dst: object
    image: object | None
    access: str
    why: str
    host: HostPath
    aliased: bool
    through_buffers: bool
    tiled: bool
    family_why: str
    _kernel: list = field(repr=False)   # [the kernel now, uses left before baking or None,
    #                                     the generic kernel where baked by use, uses to bake]
    context: object = field(repr=False, default=None)   # where the baked program is built

    @property
    def kernel(self) -> Kernel | ByteCopy:
        state = self._kernel
        now, left, generic = state[0], state[1], state[2]
        if left is not None:      # generic until hot (a race bakes a call early or late: same bits)
            left -= 1
            state[1] = left
            if left <= 0:         # hot: the baked program built off this thread, swapped in
                state[1] = None
                baking.later(self._baked, self._build, lambda k: state.__setitem__(0, k))
        elif generic is not None and now is not generic and \
                not programs.baked_in_use(self.context, now.source, generic.source):
            # the full program cache gave the baked program up (it goes first: runtime/cache.py):
            # the generic one serves until the shape is hot again (twice as many calls each
            # time: a cache too small for its working set rebuilds less and less) and it is
            # rebuilt off this thread
            state[0], state[1], state[3] = generic, state[3], 2 * state[3]
            return generic
        return state[0]

    def _baked(self) -> Kernel | ByteCopy:
        return plan(self.src, self.dst, staged=self.through_buffers, aliased=self.aliased,
                    bake=True, tiled=self.tiled)

    def _build(self, kernel) -> None:
        if isinstance(kernel, Kernel):
            programs.kernel(self.context, kernel.source)

    @property
    def generic(self) -> bool:
        """Whether the kernel it runs now is the generic one (not yet baked)."""
        return bool(getattr(self._kernel[0], "generic", False))

    @property
    def frame(self) -> bool:
        """Whether the source is a camera frame (its kernel takes the taps buffer)."""
        return bool(self.src.is_frame)

    @property
    def image_object(self) -> bool:
        """Whether the image side is held in an image object (direct access)."""
        return self.access == "direct"


def access_of(image, device) -> tuple[str, str]:
    """(access, why) of the ImageDesc ``image`` on ``device``."""
    if image.storage.on_buffer:
        return "dense", f"{image.storage.name} storage: the image is its dense buffer"
    if image.dtype.name == "f16" and image.lanes == 1:
        return "staged", "a one-channel half image (PoCL 3.1 mishandles CL_R + CL_HALF_FLOAT)"
    why = images.unsupported(device.context, image)
    if why:
        return "dense", f"no image object here: {why}"
    if device.stages_images:
        return "staged", ("image_access='staged'" if device.options.image_access == "staged"
                          else "a CPU device: image access is emulated, staging is faster")
    return "direct", ("image_access='direct'" if device.options.image_access == "direct"
                      else "a device with image hardware: read_image*/write_image*")


def family_of(device) -> tuple[bool, str]:
    """(tiled, why): whether moves that transpose run the tiled family on
    ``device`` (the engine's option or CLAYOUT_OPENCL_TILED, else its facts:
    a GPU whose local memory is on chip and whose groups hold the tile)."""
    chosen = device.options.tiled
    if chosen is not None:
        return chosen, f"tiled={chosen} (the engine's option or CLAYOUT_OPENCL_TILED)"
    fits = device.max_work_group >= TILE_ITEMS and device.local_memory >= LOCAL_BYTES
    if device.kind == "gpu" and device.local_is_dedicated and fits:
        return True, ("a GPU with on-chip local memory: a transposing move reads and writes "
                      "whole lines through local-memory tiles")
    if device.kind == "gpu":
        return False, ("a GPU without on-chip local memory of "
                       f"{TILE_BYTES // 1024} KiB or groups of {TILE_ITEMS}: direct")
    return False, (f"a {device.kind.upper()} device: one work item a vector (local memory is "
                   "ordinary memory there; the direct family measured faster)")


# a pipelined transfer's chunk: large enough that each DMA runs at the bus's rate (PCIe
# reaches it from about 1 MiB a copy), small enough that the first DMA starts early and
# the stages stay a few MiB of pinned memory per call in flight
CHUNK_BYTES = 4 << 20
STAGES = 3


def host_path(device) -> HostPath:
    """How host arrays reach ``device`` (the rule of the module docstring):
    in place where the device shares host memory (or the option says so);
    else a pageable array pipelined through pinned stages on a discrete
    device, by the driver's copy on one that shares host memory (its copy
    is one memcpy; staging would add a second), unless
    CLAYOUT_OPENCL_HOST_PATH says which."""
    if device.host_in_place:
        return HostPath(True, "driver", why="the device shares host memory: the kernels "
                        "work on the caller's arrays")
    chosen = device.options.host_path
    if chosen == "driver" or (chosen == "auto" and device.host_unified):
        why = ("CLAYOUT_OPENCL_HOST_PATH=driver" if chosen == "driver" else
               "a device that shares host memory: the driver's copy is one memcpy")
        return HostPath(False, "driver", why=why)
    chunk = device.options.chunk_bytes or CHUNK_BYTES
    chunk = max(4096, min(chunk, device.max_alloc))
    why = ("CLAYOUT_OPENCL_HOST_PATH=staging" if chosen == "staging" else
           "a discrete device: pageable memory crosses pipelined through pinned stages")
    return HostPath(False, "staging", chunk, STAGES, why)


def bake_point(src, dst, options) -> int | None:
    """When the move ``src`` -> ``dst`` gets its baked program under an
    engine's ``options`` (EngineOptions: the specialize bytes and count):
    0 at once, n on its n-th call, None never (runtime/opencl/plan.py's
    ``bake_after``). A frame bakes only when hot, whatever its size: a new
    crop builds nothing. The one rule: every move plan and ``clayout kernel``
    ask it."""
    rule = (options.specialize_bytes, options.specialize_after)
    if src.is_frame:
        rule = (rule[0] if rule[0] < 0 else 1 << 62, rule[1])
    return bake_after((src.plain if src.is_frame else src.memory, dst.memory), rule)


def move_plan(src, dst, device, aliased: bool = False, dense: bool = False) -> MovePlan:
    """The plan of ``src`` -> ``dst`` on ``device``; ``aliased``: the same
    buffer and desc on both sides (a padding pass); ``dense``: the caller
    holds the image side as its dense buffer whatever its access (tiles).
    Cached per (device, sides, flags)."""
    def make() -> MovePlan:
        image = src if src.is_image else dst if dst.is_image else None
        access, why = ("buffers", "no image side") if image is None else \
            access_of(image, device)
        if dense and access not in ("buffers", "dense"):
            access, why = "dense", ("the caller holds the image as its dense buffer (host "
                                    "arrays off a host-unified device; tiles): no image object")
        through = dense or access != "direct"
        after = bake_point(src, dst, device.options)
        tiled, family_why = family_of(device)
        kernel = plan(src, dst, staged=through, aliased=aliased, bake=after == 0, tiled=tiled)
        by_use = after is not None and after > 0 and isinstance(kernel, Kernel)
        return MovePlan(src, dst, image, access, why, host_path(device), aliased, through,
                        tiled, family_why, [kernel, after if after else None,
                                            kernel if by_use else None, after], device.context)
    source = ("frame", src) if src.is_frame else side_key(src)
    return PLANS.get((device.key, source, side_key(dst), aliased, dense), make)
