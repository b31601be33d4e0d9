"""The storage half of the opencl engine: Memory objects on the device.

A buffer side lives in a ``cl.Buffer``; an image side in what its storage
is (runtime/opencl/images.py makes it): a ``cl.Image`` (image2d,
image2d_array, image3d), or, for the buffer storages (``buffer``,
``image_buffer``), a ``cl.Buffer`` holding the image's dense desc, which
conversions read and write as a buffer (no copy to or from an image). A
kernel binds an image buffer as the ``image1d_buffer_t`` over that buffer
(``image_view``); writes keep going through the buffer beneath. Every
image is weighed against the device's ``storage_limits`` before it is
allocated. Storage is allocated zeroed, or is the caller's own: their
``cl.Buffer`` (a buffer side or a buffer storage, size checked) / ``cl.Image``
(type, size and format checked), or a numpy array used in place through
``USE_HOST_PTR`` (a buffer side or a buffer storage) or copied into a new
image.
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
        if side.is_zero:
            return None
        if _image_object(side):   # images.create checks the limits, once
            storage = images.create(self.context, side, self.storage_limits)
            self.write(storage, side, np.zeros(side.array_shape, side.dtype.np))
            return storage
        if side.is_image:   # a buffer storage: its pixel bound before the allocation
            check_fits(side, self.storage_limits)
        nbytes = side.nbytes if side.is_image else side.span_bytes
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
        if side.is_zero and not isinstance(data, cl.MemoryObject):
            return None   # nothing to hold, as in allocate: OpenCL has no empty buffer or image
        if side.is_image:
            arr = None if isinstance(data, cl.MemoryObject) else np.asarray(data)
            in_place = arr is not None and side.storage.on_buffer and \
                arr.flags.c_contiguous and arr.flags.writeable
            if arr is not None and not in_place:   # a copy: images.create checks the limits
                return images.create(self.context, side, self.storage_limits,
                                     hostbuf=np.ascontiguousarray(arr))
            check_fits(side, self.storage_limits)
            if arr is None:   # the caller's cl.Buffer / cl.Image: its kind and size
                wrong = images.matches(data, side)
                if wrong:
                    raise ClayoutError(wrong)
                return data
            # a buffer storage's host array is the buffer: used in place
            return cl.Buffer(self.context, mf.READ_WRITE | mf.USE_HOST_PTR,
                             hostbuf=arr.reshape(-1))
        nbytes = side.span_bytes
        if isinstance(data, cl.Buffer):
            if data.size < nbytes:
                raise ClayoutError(f"cl.Buffer of {data.size} bytes is too small for "
                                   f"{side!r}: it needs {nbytes} bytes")
            storage = data
        else:
            storage = cl.Buffer(self.context, mf.READ_WRITE | mf.USE_HOST_PTR,
                                hostbuf=np.asarray(data).reshape(-1))
        if side.has_fixed_elements:
            self.enqueue(side, storage, side, storage, aliased=True)
        return storage

    def read(self, storage, side) -> np.ndarray:
        out = np.zeros(host_shape(side), dtype=side.dtype.np)
        if _image_object(side):
            cl.enqueue_copy(self.queue, out, storage, origin=images.origin(side),
                            region=images.region(side))
        else:
            cl.enqueue_copy(self.queue, out, storage)
        return out

    def write(self, storage, side, array) -> None:
        arr = np.ascontiguousarray(array).reshape(host_shape(side))
        if _image_object(side):
            cl.enqueue_copy(self.queue, storage, arr, origin=images.origin(side),
                            region=images.region(side))
        else:
            cl.enqueue_copy(self.queue, storage, arr)

    @contextlib.contextmanager
    def map(self, storage, side, write: bool = True):
        """A buffer (a buffer storage too) is mapped in place (no copy on a
        CPU device); an image is read out and, with ``write``, written back
        on exit."""
        if _image_object(side):
            arr = self.read(storage, side)
            yield arr
            if write:
                self.write(storage, side, arr)
            return
        flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
        arr, _ = cl.enqueue_map_buffer(self.queue, storage, flags, 0, host_shape(side),
                                       side.dtype.np)
        try:
            yield arr
        finally:
            arr.base.release(self.queue)

    def same(self, a, b) -> bool:
        return a.int_ptr == b.int_ptr

    def image_view(self, storage, side):
        """The object a kernel binds for ``side``'s ``storage``: for an image
        buffer the ``image1d_buffer_t`` over its buffer (made once per
        buffer; one ClayoutError says why where the device has no image
        buffers, too few pixels, or not its format), else the storage itself."""
        return images.bound(storage, side) if side.is_image else storage


def _image_object(side) -> bool:
    """True when ``side`` lives in a ``cl.Image`` (not a buffer, nor a buffer storage)."""
    return side.is_image and not side.storage.on_buffer
