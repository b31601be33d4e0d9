"""The storage half of the opencl engine: Memory objects on the device.

A buffer side lives in a ``cl.Buffer``, an image side in a ``cl.Image``
(runtime/opencl/images.py makes it). Storage is allocated zeroed, or is the
caller's own: their ``cl.Buffer`` / ``cl.Image``, or a numpy array used in
place through ``USE_HOST_PTR`` (a buffer) or copied into a new image.
Attaching storage to a desc with padding restores the padding invariants
(block tails zero, halo the fill), as oneDNN's set_data_handle does.
``OpenCLEngine`` (runtime/opencl/engine.py) takes these methods in.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pyopencl as cl

from ..algebra.catalog import check_fits
from ..algebra.hostarray import host_shape
from ..errors import ClayoutError
from . import images

mf = cl.mem_flags


class DeviceStorage:
    """allocate, attach, read, write, map and same of the engine contract
    (runtime/contract.py), on the engine's context and queue."""

    def allocate(self, side):
        if side.is_image:
            check_fits(side, self.image_limits)
        if side.is_zero:
            return None
        if side.is_image:
            storage = images.create(self.context, side, self.image_limits)
            self.write(storage, side, np.zeros(side.array_shape, side.dtype.np))
            return storage
        nbytes = side.span * side.dtype.itemsize
        storage = self.new_buffer(nbytes)
        fill = cl.enqueue_fill_buffer(self.queue, storage, np.uint8(0), 0, nbytes)
        # the zeroing is part of making this Memory: on an out-of-order queue
        # nothing else would order it before the first write or kernel
        if not self.in_order:
            fill.wait()
        return storage

    def attach(self, side, data):
        """The caller's cl.Buffer / cl.Image, or a numpy array already checked
        against ``side`` (runtime.memory): a buffer's is used in place, an
        image's copied into a new image."""
        if side.is_image:
            check_fits(side, self.image_limits)
            if isinstance(data, cl.Image):
                wrong = images.matches(data, side)
                if wrong:
                    raise ClayoutError(wrong)
                return data
            return images.create(self.context, side, self.image_limits,
                                 hostbuf=np.ascontiguousarray(data))
        nbytes = side.span * side.dtype.itemsize
        if isinstance(data, cl.Buffer):
            if data.size < nbytes:
                raise ClayoutError(f"cl.Buffer of {data.size} bytes is too small for "
                                   f"{side!r}: it needs {nbytes} bytes")
            storage = data
        else:
            storage = cl.Buffer(self.context, mf.READ_WRITE | mf.USE_HOST_PTR,
                                hostbuf=np.asarray(data).reshape(-1))
        if not side.is_zero and (side.has_padding or any(side.halo_lower) or
                                 any(side.halo_upper)):
            self.enqueue(side, storage, side, storage, aliased=True)
        return storage

    def read(self, storage, side) -> np.ndarray:
        out = np.zeros(host_shape(side), dtype=side.dtype.np)
        if side.is_image:
            cl.enqueue_copy(self.queue, out, storage, origin=images.origin(side),
                            region=images.region(side))
        else:
            cl.enqueue_copy(self.queue, out, storage)
        return out

    def write(self, storage, side, array) -> None:
        arr = np.ascontiguousarray(array).reshape(host_shape(side))
        if side.is_image:
            cl.enqueue_copy(self.queue, storage, arr, origin=images.origin(side),
                            region=images.region(side))
        else:
            cl.enqueue_copy(self.queue, storage, arr)

    @contextlib.contextmanager
    def map(self, storage, side, write: bool = True):
        """A buffer is mapped in place (no copy on a CPU device); an image is
        read out and, with ``write``, written back on exit."""
        if side.is_image:
            arr = self.read(storage, side)
            yield arr
            if write:
                self.write(storage, side, arr)
            return
        flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
        arr, _ = cl.enqueue_map_buffer(self.queue, storage, flags, 0, (side.span,),
                                       side.dtype.np)
        try:
            yield arr
        finally:
            arr.base.release(self.queue)

    def same(self, a, b) -> bool:
        return a.int_ptr == b.int_ptr
