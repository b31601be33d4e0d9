"""GPUs as records of named facts, for planning and for the access model.

No machine clayout is built and tested on has a GPU, yet its kernels are
for GPUs. A :class:`Gpu` is one GPU's facts, stated once: what OpenCL would
report of it (local memory a group may take, the largest group, image
limits) and what its memory system does with a warp's accesses (the warp,
the 32-byte sector, local-memory banks, compute units and what each holds
at once). ``device(gpu, base)`` makes the runtime.opencl.device.Device
record a plan is made for (runtime/opencl/moves.py's ``move_plan``), exactly
as a real device's facts are read into one; ``base`` lends the context and
queue of the device this machine has, which the access model
(runtime/opencl/access_model.py) runs the traced kernels on.

>>> GPUS["h100"].compute_units, GPUS["h100"].warp, GPUS["h100"].sector
(132, 32, 32)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..algebra.storage import Limits
from ..errors import ClayoutError
from .device import Device, EngineOptions


@dataclass(frozen=True)
class Gpu:
    """One GPU's facts (module docstring). Sizes in bytes.

    ``local_per_group``: __local memory one work-group may take (what
    CL_DEVICE_LOCAL_MEM_SIZE reports: 48 KiB on NVIDIA's OpenCL);
    ``local_per_unit``: what a compute unit (an SM) holds for all its
    resident groups, ``local_reserved``: what it keeps per group besides;
    ``threads_per_unit``, ``groups_per_unit``: its residency limits;
    ``access_bytes``: the widest access one work item makes in one
    instruction (a 16-byte vector); ``base_align``: the alignment of a
    buffer's start (CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes)."""
    name: str
    title: str
    compute_units: int
    bandwidth: float                     # GB/s of device memory, for the bench's predictions
    warp: int = 32
    sector: int = 32
    line: int = 128
    banks: int = 32
    bank_bytes: int = 4
    threads_per_unit: int = 2048
    groups_per_unit: int = 32
    local_per_unit: int = 228 << 10
    local_reserved: int = 1 << 10
    local_per_group: int = 48 << 10
    max_work_group: int = 1024
    access_bytes: int = 16
    base_align: int = 512
    image2d: tuple[int, int] = (32768, 32768)
    global_memory: int = 80 << 30

    def resident_groups(self, items: int, local_bytes: int) -> int:
        """Work-groups of ``items`` work items holding ``local_bytes`` of
        local memory that one compute unit runs at once (registers aside)."""
        warps = -(-items // self.warp)
        by_threads = self.threads_per_unit // (warps * self.warp)
        by_local = self.local_per_unit // (local_bytes + self.local_reserved) \
            if local_bytes else self.groups_per_unit
        return max(0, min(self.groups_per_unit, by_threads, by_local))

    def occupancy(self, items: int, local_bytes: int) -> float:
        """Theoretical occupancy: the resident warps over the most a unit holds."""
        warps = -(-items // self.warp)
        return self.resident_groups(items, local_bytes) * warps / (self.threads_per_unit //
                                                                  self.warp)

    def waves(self, groups: int, items: int, local_bytes: int) -> float:
        """How many times over the launch's ``groups`` fill every compute unit."""
        at_once = self.resident_groups(items, local_bytes) * self.compute_units
        return groups / at_once if at_once else float("inf")


GPUS = {
    "h100": Gpu("h100", "NVIDIA H100 (clayout's record)", compute_units=132, bandwidth=3350.0),
    "h200": Gpu("h200", "NVIDIA H200 (clayout's record)", compute_units=132, bandwidth=4800.0,
                global_memory=141 << 30),
    # a modest GPU of the same kind: fewer, smaller units, 16 KiB images
    "gpu": Gpu("gpu", "a generic GPU (clayout's record)", compute_units=16, bandwidth=256.0,
               threads_per_unit=1536, groups_per_unit=16, local_per_unit=64 << 10,
               local_reserved=0, local_per_group=32 << 10, base_align=256,
               image2d=(16384, 16384), global_memory=8 << 30),
}


def gpu(name: str) -> Gpu:
    """The record named ``name`` (``GPUS``), or one clear error naming them."""
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise ClayoutError(f"no GPU record {name!r}; records: {', '.join(GPUS)}") from None


def device(record: Gpu, base: Device) -> Device:
    """The Device record of ``record`` for planning: its facts, the default
    options (the facts decide, whatever this process's settings), and the
    context and queue of ``base`` (image formats are asked of it; traced
    kernels run on it)."""
    limits = dataclasses.replace(base.limits, image2d=record.image2d)
    return dataclasses.replace(
        base, name=record.title, platform="clayout GPU records", kind="gpu",
        host_unified=False, in_order=True, image_support=True, limits=limits,
        max_alloc=record.global_memory // 4, global_memory=record.global_memory,
        local_memory=record.local_per_group, local_is_dedicated=True,
        max_work_group=record.max_work_group, extensions=frozenset(), options=EngineOptions())
