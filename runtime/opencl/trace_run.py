"""Run a few work-groups of a traced kernel and read what each work item
accessed (runtime/opencl/trace.py writes the kernels; the access model,
runtime/opencl/access_model.py, reads the records).

A traced kernel is launched one work-group at a time, at that group's
global offset (a tiled kernel takes its group id from its global id when it
traces, so the offset is the whole of its place): the first group, one in
the middle, and the last. Each launch writes the records of its work items
into a log of ``trace.REGION`` words each; ``Run`` holds them, per group,
as numpy arrays, with the weight each group stands for in the launch (the
middle one for every group but the first and the last).

The kernel's memory is the real size of its sides (the addresses are the
kernel's own; nothing here reads the values), made on the device the
records are taken on (PoCL here, or oclgrind: every implementation gives
the same records).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from ..errors import ClayoutError
from ..algebra.frame_taps import tables
from . import images, programs
from .trace import RECORDS, REGION

mf = cl.mem_flags


@dataclass(frozen=True)
class Group:
    """One work-group's records: per record, the work item (linear local
    id), the site and the index (an element index, or a packed pixel), in
    each work item's order; ``weight``: how many of the launch's groups it
    stands for; ``kept_all``: no work item made more than ``trace.RECORDS``."""
    index: int
    weight: int
    item: np.ndarray
    site: np.ndarray
    at: np.ndarray
    kept_all: bool


@dataclass(frozen=True)
class Run:
    """The groups traced of one launch of ``groups`` work-groups of
    ``items`` work items (global size ``launch``, groups of ``local``)."""
    launch: tuple[int, ...]
    local: tuple[int, ...]
    groups: int
    traced: tuple[Group, ...]

    @property
    def items(self) -> int:
        return math.prod(self.local)


def chosen_groups(count: int) -> list[tuple[int, int]]:
    """(group index, weight) of the groups traced out of ``count``: the first,
    the middle and the last, the middle weighing for all the others."""
    if count <= 2:
        return [(g, 1) for g in range(count)]
    return [(0, 1), (count // 2, count - 2), (count - 1, 1)]


def run(device, source: str, name: str, launch, local, args) -> Run:
    """Launch the traced kernel ``name`` of ``source`` on ``device`` (a
    runtime.opencl.device.Device) group by group (``chosen_groups``), with
    ``args`` (the log appended last)."""
    launch, local = tuple(launch), tuple(local)
    per_dim = [g // lo for g, lo in zip(launch, local)]
    count = math.prod(per_dim)
    items = math.prod(local)
    context, queue = device.context, device.queue
    knl = programs.kernel(context, source, name)
    log = cl.Buffer(context, mf.READ_WRITE, items * REGION * 4)
    host = np.empty((items, REGION), np.uint32)
    traced = []
    for index, weight in chosen_groups(count):
        place, rest = [], index
        for n in per_dim:
            place.append(rest % n)
            rest //= n
        offset = tuple(p * lo for p, lo in zip(place, local))
        cl.enqueue_fill_buffer(queue, log, np.uint32(0), 0, host.nbytes)
        programs.set_args(knl, (*args, log))
        cl.enqueue_nd_range_kernel(queue, knl, local, local, global_work_offset=offset)
        cl.enqueue_copy(queue, host, log)
        traced.append(_group(index, weight, host))
    return Run(launch, local, count, tuple(traced))


def _group(index: int, weight: int, host: np.ndarray) -> Group:
    counts = host[:, 0].astype(np.int64)
    kept = np.minimum(counts, RECORDS)
    records = host[:, 1:].reshape(len(host), RECORDS, 3)
    mask = np.arange(RECORDS)[None, :] < kept[:, None]
    item = np.broadcast_to(np.arange(len(host))[:, None], mask.shape)[mask]
    chosen = records[mask]
    at = chosen[:, 1].astype(np.uint64) | (chosen[:, 2].astype(np.uint64) << np.uint64(32))
    return Group(index, weight, item.astype(np.int64), chosen[:, 0].astype(np.int64),
                 at.astype(np.int64), bool((counts <= RECORDS).all()))


# -- a move's memory ------------------------------------------------------------------------
def move_args(device, kernel, src, dst) -> tuple:
    """The arguments of a move kernel's launch on ``device``: memory the size
    of each side (an image object where the kernel reaches it as one), a
    frame's bytes and taps, the kernel's numbers."""
    context = device.context
    if src.is_frame:
        first = (cl.Buffer(context, mf.READ_ONLY, max(1, src.nbytes)),)
        taps = tables(src)
        extra = (cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=taps),)
    else:
        first = (_memory(device, src, kernel.src_image),)
        extra = ()
    return (*first, _memory(device, dst, kernel.dst_image), *extra, *kernel.args)


def _memory(device, side, as_image: bool):
    if not as_image:
        return cl.Buffer(device.context, mf.READ_WRITE, max(1, side.memory.size))
    try:
        return images.create(device.context, side, device.limits)
    except ClayoutError as why:
        raise ClayoutError(f"the access model runs kernels on {device.describe()}, which "
                           f"holds no image object of {side.describe()}: {why}") from None
