"""Host arrays on the device: how a conversion of host arrays reaches the
kernel and comes back, as a move's plan (runtime/opencl/moves.py) says.

On a device that shares host memory the kernels work on the caller's arrays
themselves (USE_HOST_PTR, then a map for coherency: at 1x64x512x512 f32 a
host call took 125 ms with an upload and a download copy, 55 ms without).
Elsewhere the arrays are copied into device memory leased from the engine's
pool (runtime/opencl/memory.py) and back: a pinned array
(runtime.empty_pinned) directly, a pageable one by the driver's copy or
pipelined in chunks through pinned stages (runtime/opencl/transfer.py);
the upload, the kernel and the read back are one chain of events, and the
call waits once, for the read back. Where both ends of a call are host
arrays on such a device, the plan holds an image side as its dense host
form (``dense``): the host image array is exactly that buffer's contents,
so the kernel writes (or reads) a plain buffer and no image object, no
clEnqueueRead/WriteImage, is involved; an image object only where the
caller asked for a device image (a Memory). In place, with direct access,
the image object is leased.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
import pyopencl as cl

from ..algebra.hostarray import host_shape
from ..algebra.output import Pending
from . import events, images, transfer
from .moves import host_path, move_plan

mf = cl.mem_flags


def move(launcher, src, dst, data, out=None, wait: bool = True):
    """The host array ``data`` (src's memory) converted into dst's, in ``out``
    (or a new array): the plan's kernel between the arrays as the plan's
    host path takes them to the device and back.

    ``wait=False``: a Pending of it. The input is consumed before it
    returns (written to the device, through the engine's upload queue off
    a host-unified device so that it overlaps the previous call's kernel and
    read back; copied on one that works in place); the kernel and the read
    back are enqueued, and ``result()`` waits for them (a pageable result
    crossing through pinned stages crosses then). The leased device memory
    goes back when the result is finished or the Pending dropped."""
    shape = host_shape(dst)
    if src.is_zero or dst.is_zero or math.prod(shape) == 0:
        result = zeros(out, shape, dst.dtype.np)
        return result if wait else Pending.of(result)
    arr = np.ascontiguousarray(data)
    # both ends host arrays: off a host-unified device, the image's dense host form crosses
    p = move_plan(src, dst, launcher.device, dense=not launcher.device.host_in_place)
    out = np.empty(shape, dtype=dst.dtype.np) if out is None else out
    with contextlib.ExitStack() as stack:
        src_mem, ready = stack.enter_context(
            image_in(launcher, src, arr, wait) if src.is_image and p.image_object else
            array_in(launcher, arr, p.host, wait))
        dst_mem, back = stack.enter_context(
            image_out(launcher, dst, out) if dst.is_image and p.image_object else
            array_out(launcher, out, p.host))
        if not dst.is_image:
            ready = ready + launcher.zero_rest(dst_mem, dst.memory)
        finish, last = back(launcher.run_plan(p, src_mem, dst_mem, ready or None))
        if wait:
            finish()
            return out
        held = stack.pop_all()
    settled: list = []

    def settle():   # once: the read back waited for (a dropped Pending's too: out is in use)
        if not settled:
            settled.append(True)
            finish()

    def result():
        settle()
        return out

    def release():   # held: the leases and memory objects (and the arrays they hold)
        try:
            settle()
        finally:
            held.close()
    return Pending(result, lambda: events.complete(last), last).then(release)


@contextlib.contextmanager
def array_in(launcher, arr: np.ndarray, host, wait: bool = True):
    """(a buffer holding the contiguous host array ``arr``, the events to
    wait for) for a ``with`` block: the array itself on a host-unified
    device, else leased device memory it is written into (a pageable
    array through pinned staging where the plan says so). ``wait=False``:
    the call returns before its result, so the array is consumed on entry
    (copied where the kernel would read it in place; written through the
    upload queue and waited for elsewhere)."""
    flat = arr.reshape(-1)
    if host.in_place:   # the buffer (held by this block) holds the array its kernels read
        buf = launcher.memory.host_buffer(flat if wait else flat.copy(), mf.READ_ONLY)
        yield buf, []
        return
    with launcher.memory.lease_buffer(flat.nbytes, mf.READ_ONLY) as buf:
        yield buf, [upload(launcher, buf, flat, host, consumed=not wait)]


def upload(launcher, buf, flat: np.ndarray, host, consumed: bool = False) -> cl.Event:
    """Write ``flat`` into the device buffer ``buf``: a pinned array (or
    the driver's own copy of a pageable one) directly; else pipelined
    through pinned stages (runtime/opencl/transfer.py: the array read when
    it returns). ``consumed``: the array is read when this returns, the
    write waited for on the device's upload queue (it waits only for
    itself, not for the main queue's kernels); else enqueued on the main
    queue, the caller waiting later. The write follows the commands still
    pending on ``buf`` (a pooled buffer's last lease)."""
    queue = launcher.device.upload_queue if consumed else launcher.queue
    if host.pageable == "staging" and not launcher.memory.is_pinned(flat):
        return transfer.upload(launcher, buf, flat, host, queue)
    after = events.after((), (buf,)) or None
    return events.done(cl.enqueue_copy(queue, buf, flat, wait_for=after,
                                       is_blocking=consumed), (), (buf,))


@contextlib.contextmanager
def array_out(launcher, out: np.ndarray, host):
    """(a buffer the kernel writes ``out`` through, ``back(event)``) for a
    ``with`` block. ``back(event)`` enqueues what makes ``out`` hold the
    buffer once ``event`` is done and returns (``finish()``, which waits
    for it, the event ``finish`` waits for)."""
    queue = launcher.queue
    flat = out.reshape(-1)
    if host.in_place:
        buf = launcher.memory.host_buffer(flat, mf.WRITE_ONLY)

        def back(event):   # out is the buffer's memory: a map makes the writes visible
            mapped, done = cl.enqueue_map_buffer(queue, buf, cl.map_flags.READ, 0, out.shape,
                                                 out.dtype, wait_for=[event] if event else None,
                                                 is_blocking=False)

            def finish():
                done.wait()
                mapped.base.release(queue).wait()
            return finish, done
        yield buf, back
        return
    with launcher.memory.lease_buffer(flat.nbytes, mf.READ_WRITE) as buf:
        def back(event):
            return download(launcher, flat, buf, event, host)
        yield buf, back


def download(launcher, flat: np.ndarray, buf, event, host):
    """Read the device buffer ``buf`` into ``flat`` once ``event`` is done:
    (``finish()``, the event it waits for). Directly: the read enqueued
    now, ``finish`` waits for it; pipelined through pinned stages: ``finish``
    makes the chunks cross (it waits for ``event`` first)."""
    if host.pageable == "staging" and not launcher.memory.is_pinned(flat):
        return (lambda: transfer.download(launcher, flat, buf, event, host)), event
    wait = events.after((buf,), (), [event] if event is not None else None) or None
    read = events.done(cl.enqueue_copy(launcher.queue, flat, buf, wait_for=wait,
                                       is_blocking=False), (buf,))
    return read.wait, read


@contextlib.contextmanager
def image_in(launcher, side, arr: np.ndarray, wait: bool = True):
    """(an image object holding the host image ``arr``, events to wait for);
    ``wait=False``: the array read on entry."""
    with launcher.memory.lease_image(side, mf.READ_ONLY) as image:
        event = cl.enqueue_copy(launcher.queue, image, arr.reshape(side.array_shape),
                                origin=images.origin(side), region=images.region(side),
                                wait_for=events.after((), (image,)) or None,
                                is_blocking=not wait)
        yield image, [events.done(event, (), (image,))]


@contextlib.contextmanager
def image_out(launcher, side, out: np.ndarray):
    """(an image object the kernel writes, ``back(event)`` reading it into
    ``out``: (``finish()``, its event), as array_out's)."""
    with launcher.memory.lease_image(side, mf.WRITE_ONLY) as image:
        def back(event):
            read = cl.enqueue_copy(launcher.queue, out, image, origin=images.origin(side),
                                   region=images.region(side),
                                   wait_for=[event] if event is not None else None,
                                   is_blocking=False)
            return read.wait, read
        yield image, back


def zeros(out, shape, dtype) -> np.ndarray:
    """The result of a conversion with nothing to convert: all zero."""
    if out is None:
        return np.zeros(shape, dtype=dtype)
    out[...] = 0
    return out


@contextlib.contextmanager
def held(launcher, side, array: np.ndarray):
    """Pooled device memory of ``side`` (an image object for an image that
    lives in one, else a buffer) holding the host ``array``, written and
    waited for when the block is entered: the caller may reuse the array at
    once (the engine contract's ``host_input``). Back to the pool at the
    end, its next lease ordered after the commands that use it here
    (runtime/opencl/events.py)."""
    if side.is_image and not side.storage.on_buffer:
        with launcher.memory.lease_image(side, mf.READ_ONLY) as image:
            launcher.memory.write(image, side, array)
            yield image
        return
    flat = np.ascontiguousarray(array).reshape(-1)
    with launcher.memory.lease_buffer(max(1, flat.nbytes)) as buf:
        upload(launcher, buf, flat, host_path(launcher.device), consumed=True)
        yield buf
