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
from . import events, images, transfer
from .moves import host_path, move_plan

mf = cl.mem_flags


def move(engine, src, dst, data, out=None) -> np.ndarray:
    """The host array ``data`` (src's memory) converted into dst's, in ``out``
    (or a new array): the plan's kernel between the arrays as the plan's
    host path takes them to the device and back."""
    shape = host_shape(dst)
    if src.is_zero or dst.is_zero or math.prod(shape) == 0:
        return zeros(out, shape, dst.dtype.np)
    arr = np.ascontiguousarray(data)
    # both ends host arrays: off a host-unified device, the image's dense host form crosses
    p = move_plan(src, dst, engine.device, dense=not engine.device.host_in_place)
    out = np.empty(shape, dtype=dst.dtype.np) if out is None else out
    source = image_in(engine, src, arr) if src.is_image and p.image_object else \
        array_in(engine, arr, p.host)
    target = image_out(engine, dst, out) if dst.is_image and p.image_object else \
        array_out(engine, out, p.host)
    with source as (src_mem, wait), target as (dst_mem, back):
        if not dst.is_image:
            wait = wait + engine.zero_rest(dst_mem, dst.memory)
        back(engine.run_plan(p, src_mem, dst_mem, wait or None))
    return out


@contextlib.contextmanager
def array_in(engine, arr: np.ndarray, host):
    """(a buffer holding the contiguous host array ``arr``, the events to
    wait for) for a ``with`` block: the array itself on a host-unified
    device, else leased device memory it is written into (a pageable
    array through pinned staging where the plan says so)."""
    flat = arr.reshape(-1)
    if host.in_place:
        yield engine.memory.host_buffer(flat, mf.READ_ONLY), []
        return
    with engine.memory.lease_buffer(flat.nbytes, mf.READ_ONLY) as buf:
        yield buf, [upload(engine, buf, flat, host)]


def upload(engine, buf, flat: np.ndarray, host, wait: bool = False) -> cl.Event:
    """Write ``flat`` into the device buffer ``buf``: a pinned array (or
    the driver's own copy of a pageable one) directly, waiting where
    ``wait`` says (the caller's array consumed on return); else pipelined
    through pinned stages (runtime/opencl/transfer.py: the array read
    when it returns). The write follows the commands still pending on
    ``buf`` (a pooled buffer's last lease)."""
    if host.pageable == "staging" and not engine.memory.is_pinned(flat):
        return transfer.upload(engine, buf, flat, host)
    after = events.after((), (buf,)) or None
    return events.done(cl.enqueue_copy(engine.queue, buf, flat, wait_for=after,
                                       is_blocking=wait), (), (buf,))


@contextlib.contextmanager
def array_out(engine, out: np.ndarray, host):
    """(a buffer the kernel writes ``out`` through, ``back(event)`` that
    makes ``out`` hold it once ``event`` is done) for a ``with`` block."""
    queue = engine.queue
    flat = out.reshape(-1)
    if host.in_place:
        buf = engine.memory.host_buffer(flat, mf.WRITE_ONLY)

        def back(event):   # out is the buffer's memory: a map makes the writes visible
            mapped, _ = cl.enqueue_map_buffer(queue, buf, cl.map_flags.READ, 0, out.shape,
                                              out.dtype, wait_for=[event] if event else None)
            mapped.base.release(queue).wait()
        yield buf, back
        return
    with engine.memory.lease_buffer(flat.nbytes, mf.READ_WRITE) as buf:
        def back(event):
            download(engine, flat, buf, event, host)
        yield buf, back


def download(engine, flat: np.ndarray, buf, event, host) -> None:
    """Read the device buffer ``buf`` into ``flat`` once ``event`` is
    done, and wait: directly, or pipelined through pinned stages."""
    if host.pageable == "staging" and not engine.memory.is_pinned(flat):
        transfer.download(engine, flat, buf, event, host)
        return
    wait = events.after((buf,), (), [event] if event is not None else None) or None
    events.done(cl.enqueue_copy(engine.queue, flat, buf, wait_for=wait, is_blocking=True),
                (buf,))


@contextlib.contextmanager
def image_in(engine, side, arr: np.ndarray):
    """(an image object holding the host image ``arr``, events to wait for)."""
    with engine.memory.lease_image(side, mf.READ_ONLY) as image:
        event = cl.enqueue_copy(engine.queue, image, arr.reshape(side.array_shape),
                                origin=images.origin(side), region=images.region(side),
                                wait_for=events.after((), (image,)) or None, is_blocking=False)
        yield image, [events.done(event, (), (image,))]


@contextlib.contextmanager
def image_out(engine, side, out: np.ndarray):
    """(an image object the kernel writes, ``back(event)`` reading it into ``out``)."""
    with engine.memory.lease_image(side, mf.WRITE_ONLY) as image:
        def back(event):
            cl.enqueue_copy(engine.queue, out, image, origin=images.origin(side),
                            region=images.region(side),
                            wait_for=[event] if event is not None else None,
                            is_blocking=True)
        yield image, back


def zeros(out, shape, dtype) -> np.ndarray:
    """The result of a conversion with nothing to convert: all zero."""
    if out is None:
        return np.zeros(shape, dtype=dtype)
    out[...] = 0
    return out


@contextlib.contextmanager
def held(engine, side, array: np.ndarray):
    """Pooled device memory of ``side`` (an image object for an image that
    lives in one, else a buffer) holding the host ``array``, written and
    waited for when the block is entered: the caller may reuse the array at
    once (the engine contract's ``host_input``). Back to the pool at the
    end, its next lease ordered after the commands that use it here
    (runtime/opencl/events.py)."""
    if side.is_image and not side.storage.on_buffer:
        with engine.memory.lease_image(side, mf.READ_ONLY) as image:
            engine.memory.write(image, side, array)
            yield image
        return
    flat = np.ascontiguousarray(array).reshape(-1)
    with engine.memory.lease_buffer(max(1, flat.nbytes)) as buf:
        upload(engine, buf, flat, host_path(engine.device), wait=True)
        yield buf
