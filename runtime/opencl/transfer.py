"""Pipelined transfers: a pageable host array crosses to a discrete device,
and back, in chunks through pinned staging arrays, the host copies on
worker threads overlapping the device's copies (DMA).

A driver copies pageable memory serially: it stages a piece into its own
pinned memory, waits for the DMA, stages the next (an H100: 9.1 ms to the
device and 5.1 ms back for 64 MiB, against 1.23 ms each way from pinned
memory). Staging the whole array through one pinned array is serial too (a
whole memcpy, then the whole DMA). Here the array goes in ``Chunks`` of a
few MiB through ``stages`` pinned arrays leased from the engine's pool
(runtime/opencl/memory.py): while chunk i's DMA runs, the worker threads
copy chunks i+1, i+2 into the other stages; a stage is copied into again
only once its DMA has completed. Back from the device the mirror: chunk
i+1's DMA runs while a worker copies chunk i out of its stage.

The chunking is planned once per (chunk size, bytes) (``chunks``, cached);
the plan (runtime/opencl/moves.py ``host_path``) chooses the chunk size and
the stages from the device's facts: a discrete device pipelines, a device
that shares host memory does not (its "DMA" is a memcpy on the same cores:
staging would add one). Every command is ordered as the engine orders all
of them (runtime/opencl/events.py): the chunk writes wait for what is
pending on the buffer and end in one marker recorded as its write; the
chunk reads wait for the caller's event and end in one marker recorded as
a read. The staging arrays go back to the pool only once their copies
have completed.

>>> chunks(10 << 20, 4 << 20).parts
((0, 4194304), (4194304, 4194304), (8388608, 2097152))
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from ..cache import LRU
from . import events

# host copies: two threads (one thread's memcpy nearly saturates a socket's
# bandwidth; a second overlaps page faults and the enqueues)
WORKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="clayout-host")


@dataclass(frozen=True)
class Chunks:
    """How ``nbytes`` cross in pieces of at most ``size`` bytes: ``parts``,
    (offset, bytes) in order."""
    size: int
    nbytes: int
    parts: tuple[tuple[int, int], ...]


PLANS = LRU("pipelined transfer chunks", "CLAYOUT_CHUNK_CACHE", 256)


def chunks(nbytes: int, size: int) -> Chunks:
    """The chunks of a transfer of ``nbytes`` in pieces of ``size`` (cached:
    planned once per (size, bytes)); zero bytes have no chunk."""
    def make() -> Chunks:
        return Chunks(size, nbytes, tuple((off, min(size, nbytes - off))
                                          for off in range(0, nbytes, size)))
    return PLANS.get((int(size), int(nbytes)), make)


def _stages(launcher, stack: contextlib.ExitStack, count: int, size: int) -> list:
    return [stack.enter_context(launcher.memory.lease_pinned(size)) for _ in range(count)]


def upload(launcher, buf, data: np.ndarray, path, queue=None) -> cl.Event | None:
    """Write the contiguous host array ``data`` into the device buffer
    ``buf`` (at offset 0) in ``path``'s chunks through its pinned stages,
    on ``queue`` (default: the engine's); returns the event of the whole
    write (recorded as ``buf``'s write). When it returns the array has been
    read (the caller may reuse it)."""
    flat = data.reshape(-1).view(np.uint8)
    plan = chunks(flat.nbytes, path.chunk)
    if not plan.parts:
        return None
    queue = launcher.queue if queue is None else queue
    first = events.after((), (buf,)) or None
    k = min(path.stages, len(plan.parts))
    with contextlib.ExitStack() as stack:
        stages = _stages(launcher, stack, k, path.chunk)
        dma: list = [None] * k
        copies: dict = {}
        writes: list = []
        stack.callback(_settle, writes, copies)   # the stages go back only once read

        def copy_in(j: int) -> None:   # stage j % k free (its last DMA done), then copy
            s = j % k
            if dma[s] is not None:
                dma[s].wait()
            off, n = plan.parts[j]
            copies[j] = WORKERS.submit(np.copyto, stages[s][:n], flat[off:off + n])

        for j in range(k):
            copy_in(j)
        for i, (off, n) in enumerate(plan.parts):
            copies.pop(i).result()
            s = i % k
            dma[s] = cl.enqueue_copy(queue, buf, stages[s][:n], dst_offset=off,
                                     wait_for=first, is_blocking=False)
            writes.append(dma[s])
            if i + k < len(plan.parts):
                copy_in(i + k)
        whole = cl.enqueue_marker(queue, wait_for=writes)
    return events.done(whole, (), (buf,))


def download(launcher, data: np.ndarray, buf, event, path) -> None:
    """Read the device buffer ``buf`` (from offset 0) into the contiguous
    host array ``data`` once ``event`` is done, in ``path``'s chunks through
    its pinned stages, and wait."""
    flat = data.reshape(-1).view(np.uint8)
    plan = chunks(flat.nbytes, path.chunk)
    if not plan.parts:
        return
    queue = launcher.queue
    wait = events.after((buf,), (), [event]) or None
    k = min(path.stages, len(plan.parts))
    with contextlib.ExitStack() as stack:
        stages = _stages(launcher, stack, k, path.chunk)
        dma: dict = {}
        copies: dict = {}
        reads: list = []
        stack.callback(_settle, reads, copies, dma)   # the stages go back only once written

        def read(j: int) -> None:
            off, n = plan.parts[j]
            dma[j] = cl.enqueue_copy(queue, stages[j % k][:n], buf, src_offset=off,
                                     wait_for=wait, is_blocking=False)

        for j in range(k):
            read(j)
        for i, (off, n) in enumerate(plan.parts):
            if i not in dma:   # its stage is free once the copy out of it k chunks ago is done
                copies.pop(i - k).result()
                read(i)
            done = dma.pop(i)
            done.wait()
            reads.append(done)
            copies[i] = WORKERS.submit(np.copyto, flat[off:off + n], stages[i % k][:n])
        for future in list(copies.values()):
            future.result()
        events.done(cl.enqueue_marker(queue, wait_for=reads), (buf,))


def _settle(commands: list, copies: dict, more: dict | None = None) -> None:
    """Wait for every command and host copy still using the stages (on any
    exit: a stage leased again must not be in use)."""
    pending = list(commands) + (list(more.values()) if more else [])
    for future in copies.values():
        future.exception()   # waits; an error is the caller's to see, raised where it is used
    if pending:
        cl.wait_for_events(pending)
