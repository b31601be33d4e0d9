"""The launcher: what puts one engine's work on its device.

A ``Launcher`` holds the engine's ``device`` (a Device: context, queue,
facts) and ``memory`` (a DeviceMemory: the pool and every object made) and
enqueues: a move plan's kernel (``run_plan``, ``apply_plan`` with its
staging where the plan stages an image), one move between two storages
(``enqueue``), a named kernel of a source (``run_kernel``: the compute
kernels, the transform stage, the output kernel), the zero fill of a fresh
output (``zero_rest``). The modules that turn a conversion into commands
(host.py, transfer.py, frame.py, output.py, tiles.py, transform.py) take a
launcher, not the engine: the engine (runtime/opencl/engine.py) keeps the
contract and wires them; nothing here calls back into it.

Every command names what it reads and writes and waits for clayout's
earlier commands on those objects (runtime/opencl/events.py). A cached
kernel object is shared between engines (runtime/opencl/programs.py): its
``set_args`` with the enqueue is serialized by one lock.
"""
from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl

from . import events, images, programs
from . import frame as frame_c
from .moves import move_plan
from .plan import ByteCopy

# a cl.Kernel holds its arguments and the program cache shares it between engines:
# set_args + enqueue must not interleave across threads
_LAUNCH_LOCK = threading.Lock()


class Launcher:
    """The enqueues of one engine's ``device`` with its ``memory``."""

    def __init__(self, device, memory):
        self.device, self.memory = device, memory

    @property
    def queue(self) -> cl.CommandQueue:
        return self.device.queue

    def launch(self, kernel, src, dst, wait_for=None, extra=()) -> cl.Event:
        """Enqueue a planned kernel (or byte copy) from ``src`` into ``dst``;
        ``extra``: the buffers a kernel takes after dst (a frame's taps).
        It waits for what it must follow on ``src`` and ``dst`` and for
        ``wait_for``, and is recorded on them."""
        queue = self.device.queue
        wait = events.after((src, *extra), (dst,), wait_for) or None
        if isinstance(kernel, ByteCopy):   # a byte copy and a zero tail: no program
            count, total = kernel.count, kernel.total
            parts = [cl.enqueue_copy(queue, dst, src, byte_count=count, wait_for=wait)]
            if total > count:
                parts.append(cl.enqueue_fill_buffer(queue, dst, np.uint8(0), count,
                                                    total - count, wait_for=wait))
            return events.done(cl.enqueue_marker(queue, wait_for=parts), (src,), (dst,))
        knl = programs.kernel(self.device.context, kernel.source)
        with _LAUNCH_LOCK:  # the kernel object is shared: its args are set per launch
            programs.set_args(knl, (src, dst, *extra, *kernel.args))
            event = cl.enqueue_nd_range_kernel(queue, knl, kernel.launch, kernel.local,
                                               wait_for=wait)
        return events.done(event, (src, *extra), (dst,))

    def run_plan(self, p, src, dst, wait_for=None) -> cl.Event:
        """Enqueue a move plan's kernel from ``src`` into ``dst`` (a frame's
        kernel also takes the frame's taps buffer, runtime/opencl/frame.py)."""
        if not p.frame:
            return self.launch(p.kernel, src, dst, wait_for)
        with frame_c.taps(self, p.src) as taps:   # leased: back to the pool once enqueued
            return self.launch(p.kernel, src, dst, wait_for, (taps,))

    def run_kernel(self, source: str, name: str, global_size, args, wait_for=None,
                   local_size=None, reads=(), writes=()) -> cl.Event:
        """Launch kernel ``name`` of ``source`` (built once per context and
        cached) over ``global_size`` work items (in groups of ``local_size``,
        None: the device's choice) with ``args``; ``reads`` / ``writes``: the
        memory objects it reads and writes (ordered and recorded)."""
        knl = programs.kernel(self.device.context, source, name)
        wait = events.after(reads, writes, wait_for) or None
        with _LAUNCH_LOCK:
            programs.set_args(knl, args)
            event = cl.enqueue_nd_range_kernel(self.device.queue, knl, tuple(global_size),
                                               local_size, wait_for=wait)
        return events.done(event, reads, writes)

    def enqueue(self, src, src_mem, dst, dst_mem, zero_first: bool = False,
                aliased: bool = False, dense: bool = False, wait_for=()) -> cl.Event | None:
        """One move on device memory: write dst's footprint in ``dst_mem`` (a
        cl.Buffer, or a cl.Image for an image side) from ``src_mem``, as
        the move's plan says. ``zero_first`` also zeroes the rest of a
        buffer's span (a fresh output); ``aliased``: the same buffer and
        desc on both sides (rewrites the padding, keeps the data);
        ``dense``: an image side is a cl.Buffer holding the image's dense
        desc, not an image object (always so for the buffer storages).
        ``wait_for``: events its first commands wait for."""
        if src.is_zero or dst.is_zero:
            return None
        p = move_plan(src, dst, self.device, aliased, dense)
        wait = self.zero_rest(dst_mem, dst.memory) if zero_first and not dst.is_image else []
        return self.apply_plan(p, src_mem, dst_mem, wait + list(wait_for or ()), dense)

    def apply_plan(self, p, src_mem, dst_mem, wait=(), dense: bool = False):
        """Enqueue the move plan ``p`` (runtime/opencl/moves.py) from
        ``src_mem`` into ``dst_mem`` after the events ``wait``: its kernel,
        with a pooled staging buffer and a buffer<->image copy where it
        stages (the staging buffer back to the pool at once, its next lease
        ordered after these commands by their events); the event of the
        last command."""
        image, dst = p.image, p.dst
        if dense or p.access in ("direct", "dense", "buffers"):
            return self.run_plan(p, src_mem, dst_mem, wait)
        queue = self.device.queue
        region = dict(origin=images.origin(image), region=images.region(image))
        with self.memory.lease_buffer(image.memory.size) as stage:
            if dst.is_image:
                self.run_plan(p, src_mem, stage, wait)
                copy = cl.enqueue_copy(queue, dst_mem, stage, offset=0,
                                       wait_for=events.after((stage,), (dst_mem,)), **region)
                return events.done(copy, (stage,), (dst_mem,))
            copy = cl.enqueue_copy(queue, stage, src_mem, offset=0,
                                   wait_for=events.after((src_mem,), (stage,), wait) or None,
                                   **region)
            events.done(copy, (src_mem,), (stage,))
            return self.run_plan(p, stage, dst_mem, wait)

    def zero_rest(self, dst_buf, dst) -> list:
        """For a fresh output: zero dst's whole span where the kernel will not
        write all of it (gaps, offset0, a submemory's neighbours); the events
        to wait for."""
        if dst.is_dense and dst.offset0 == 0:
            return []
        fill = cl.enqueue_fill_buffer(self.device.queue, dst_buf, np.uint8(0), 0,
                                      dst.span_bytes,
                                      wait_for=events.after((), (dst_buf,)) or None)
        return [events.done(fill, (), (dst_buf,))]
