"""Device memory of one engine: every OpenCL buffer and image the engine
makes is made here, counted, and, where a call only needs it for its own
time, leased from a bounded pool (runtime/opencl/pool.py).

``DeviceMemory(device)`` (a runtime.opencl.device.Device) gives:

* **made** objects: ``buffer``, ``image``, ``host_buffer`` (the caller's host
  array used in place through USE_HOST_PTR), ``pinned_array`` (host memory
  the driver pins, runtime/opencl/pinned.py); ``made`` counts each kind;
* **leased** objects, for one call: ``lease_buffer``, ``lease_image``,
  ``lease_pinned`` (a pinned host array to stage a pageable one), given back
  at the end of the ``with`` block; the pool keeps at most
  ``device.pool_bytes`` of free ones and ``close`` releases them;
* the **storage of Memory objects** (the engine contract's ``allocate``,
  ``attach``, ``read``, ``write``, ``map``, ``same``, ``image_view``): a
  buffer side lives in a ``cl.Buffer``; an image side in what its storage
  is (runtime/opencl/images.py): a ``cl.Image``, or for the buffer storages
  a ``cl.Buffer`` of the image's dense desc, which a kernel binds as an
  ``image1d_buffer_t`` where the layout is an image buffer; every image is
  weighed against the device's limits before it is allocated;
* the **import** of a caller's ``cl.Buffer`` as an image
  (``view_buffer``: a view where the device allows it, else a copy and
  why; the rules are runtime/opencl/shared.py's).
"""
from __future__ import annotations

import contextlib
import threading
from collections import Counter

import numpy as np
import pyopencl as cl

from ..algebra.catalog import check_fits
from ..algebra.hostarray import host_shape
from ..errors import ClayoutError
from . import events, images, pinned, shared
from .pool import Pool, size_class

mf = cl.mem_flags


class DeviceMemory:
    """The memory of one engine's device (runtime.opencl.device.Device)."""

    def __init__(self, device):
        self.device = device
        self.pool = Pool(device.pool_bytes)
        self.made: Counter = Counter()   # buffers, images, host buffers, pinned: made so far
        self._lock = threading.Lock()
        self._told: set = set()

    @property
    def context(self) -> cl.Context:
        return self.device.context

    @property
    def queue(self) -> cl.CommandQueue:
        return self.device.queue

    def _count(self, kind: str) -> None:
        with self._lock:
            self.made[kind] += 1

    # -- made objects ---------------------------------------------------------------------
    def buffer(self, nbytes: int, flags=mf.READ_WRITE, hostbuf: np.ndarray | None = None
               ) -> cl.Buffer:
        """A new device buffer of ``nbytes`` (COPY_HOST_PTR from ``hostbuf``)."""
        if nbytes > self.device.max_alloc:
            raise ClayoutError(f"a buffer of {nbytes} bytes is over the device's max allocation "
                               f"{self.device.max_alloc} bytes ({self.device.name})")
        self._count("buffers")
        if hostbuf is not None:
            return cl.Buffer(self.context, flags | mf.COPY_HOST_PTR, hostbuf=hostbuf)
        return cl.Buffer(self.context, flags, size=max(1, nbytes))

    def host_buffer(self, arr: np.ndarray, flags) -> cl.Buffer:
        """The caller's contiguous host array as a buffer, in place (USE_HOST_PTR)."""
        self._count("host buffers")
        return cl.Buffer(self.context, flags | mf.USE_HOST_PTR, hostbuf=arr.reshape(-1))

    def image(self, side, flags=mf.READ_WRITE, hostbuf: np.ndarray | None = None):
        """A new image object (or a buffer storage's buffer) for the ImageDesc
        ``side``, refused before allocation when over the device's limits."""
        self._count("images")
        return images.create(self.context, side, self.device.limits, flags, hostbuf)

    def pinned_array(self, shape, dtype) -> np.ndarray:
        """A host array in memory the driver pins (CL_MEM_ALLOC_HOST_PTR, mapped
        once): runtime.empty_pinned."""
        dt = np.dtype(dtype)
        shape = tuple(int(n) for n in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes > self.device.max_alloc:
            raise ClayoutError(f"empty_pinned: {nbytes} bytes are over the device's max "
                               f"allocation {self.device.max_alloc} bytes ({self.device.name})")
        self._count("pinned")
        buf = cl.Buffer(self.context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, size=max(1, nbytes))
        arr, event = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ |
                                           cl.map_flags.WRITE, 0, shape, dt)
        event.wait()
        return pinned.register(arr, buf, self.context.int_ptr)

    def is_pinned(self, arr) -> bool:
        """Whether ``arr`` lies in a pinned array of this engine's context."""
        return pinned.block_of(arr, self.context.int_ptr) is not None

    # -- leased objects, for one call --------------------------------------------------------
    def lease_buffer(self, nbytes: int, flags=mf.READ_WRITE):
        """A device buffer of at least ``nbytes`` for a ``with`` block."""
        size = size_class(nbytes)
        return self.pool.lease(("buffer", size, int(flags)), size,
                               lambda: self.buffer(size, flags))

    def lease_image(self, side, flags=mf.READ_WRITE):
        """An image object of ``side``'s storage, format and extent for a ``with`` block."""
        key = ("image", side.storage.name, side.dtype.name, side.lanes, side.shape, int(flags))
        return self.pool.lease(key, side.nbytes, lambda: self.image(side, flags))

    @contextlib.contextmanager
    def lease_pinned(self, nbytes: int):
        """A pinned host array of ``nbytes`` bytes (uint8) for a ``with`` block."""
        size = size_class(nbytes)
        with self.pool.lease(("pinned", size), size,
                             lambda: self.pinned_array((size,), np.uint8)) as arr:
            yield arr[:nbytes]

    def close(self) -> None:
        """Release every pooled object (a later call makes new ones)."""
        self.pool.clear()

    def stats(self) -> dict:
        """The pool's numbers and the objects made, by kind."""
        with self._lock:
            made = dict(self.made)
        return {**self.pool.stats(), "made_by_kind": made}

    # -- the storage of Memory objects --------------------------------------------------------
    def allocate(self, side, zeroed: bool = True):
        """New storage of ``side``, zeroed on the device without a wait: a
        fill the storage's first user waits for by its event
        (runtime/opencl/events.py), on any queue; not zeroed where the
        caller writes it whole (``zeroed=False``)."""
        if side.is_zero:
            return None
        if _image_object(side):   # images.create checks the limits, once
            storage = self.image(side)
            if not zeroed:
                return storage
            zero = np.zeros(4, np.float32 if side.dtype.is_float else
                            np.int32 if side.dtype.np.kind == "i" else np.uint32)
            events.done(cl.enqueue_fill_image(self.queue, storage, zero,
                                              images.origin(side), images.region(side)),
                        (), (storage,))
            return storage
        if side.is_image:   # a buffer storage: its pixel bound before the allocation
            check_fits(side, self.device.limits)
        nbytes = side.nbytes if side.is_image else side.span_bytes
        storage = self.buffer(nbytes)
        if not zeroed:
            return storage
        events.done(cl.enqueue_fill_buffer(self.queue, storage, np.uint8(0), 0, nbytes),
                    (), (storage,))
        return storage

    def attach(self, side, data):
        """The caller's cl.Buffer / cl.Image, or a numpy array already checked
        against ``side`` (runtime.memory): a buffer's is used in place, an
        image's copied into a new image. The engine restores a padded
        desc's padding after (runtime/opencl/engine.py)."""
        if side.is_zero and not isinstance(data, cl.MemoryObject):
            return None   # nothing to hold, as in allocate: OpenCL has no empty buffer or image
        if side.is_image:
            arr = None if isinstance(data, cl.MemoryObject) else np.asarray(data)
            in_place = arr is not None and side.storage.on_buffer and \
                arr.flags.c_contiguous and arr.flags.writeable
            if arr is not None and not in_place:   # a copy: images.create checks the limits
                return self.image(side, hostbuf=np.ascontiguousarray(arr))
            check_fits(side, self.device.limits)
            if arr is None:   # the caller's cl.Buffer / cl.Image: its kind and size
                wrong = images.matches(data, side)
                if wrong:
                    raise ClayoutError(wrong)
                return data
            # a buffer storage's host array is the buffer: used in place
            return self.host_buffer(arr, mf.READ_WRITE)
        nbytes = side.span_bytes
        if isinstance(data, cl.Buffer):
            if data.size < nbytes:
                raise ClayoutError(f"cl.Buffer of {data.size} bytes is too small for "
                                   f"{side!r}: it needs {nbytes} bytes")
            return data
        return self.host_buffer(np.asarray(data), mf.READ_WRITE)

    def read(self, storage, side) -> np.ndarray:
        """A host copy of ``storage``, once clayout's writes of it are done."""
        out = np.zeros(host_shape(side), dtype=side.dtype.np)
        wait = events.after((storage,)) or None
        if _image_object(side):
            event = cl.enqueue_copy(self.queue, out, storage, origin=images.origin(side),
                                    region=images.region(side), wait_for=wait)
        else:
            event = cl.enqueue_copy(self.queue, out, storage, wait_for=wait)
        events.done(event, (storage,))
        return out

    def write(self, storage, side, array, wait: bool = True) -> None:
        """``array`` into ``storage``, after clayout's commands on it: waiting
        (the caller may reuse the array at once), or with ``wait=False``
        enqueued (the array must stay as it is until the event is done)."""
        arr = np.ascontiguousarray(array).reshape(host_shape(side))
        after = events.after((), (storage,)) or None
        if _image_object(side):
            event = cl.enqueue_copy(self.queue, storage, arr, origin=images.origin(side),
                                    region=images.region(side), wait_for=after,
                                    is_blocking=wait)
        else:
            event = cl.enqueue_copy(self.queue, storage, arr, wait_for=after, is_blocking=wait)
        events.done(event, (), (storage,))

    @contextlib.contextmanager
    def map(self, storage, side, write: bool = True):
        """A buffer (a buffer storage too) is mapped in place (no copy on a
        CPU device); an image is read out and, with ``write``, written back
        on exit. Either waits for clayout's commands on it first."""
        if _image_object(side):
            arr = self.read(storage, side)
            yield arr
            if write:
                self.write(storage, side, arr)
            return
        flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
        wait = (events.after((), (storage,)) if write else events.after((storage,))) or None
        arr, _ = cl.enqueue_map_buffer(self.queue, storage, flags, 0, host_shape(side),
                                       side.dtype.np, wait_for=wait, is_blocking=True)
        try:
            yield arr
        finally:
            unmapped = arr.base.release(self.queue)
            events.done(unmapped, () if write else (storage,), (storage,) if write else ())

    def same(self, a, b) -> bool:
        return a.int_ptr == b.int_ptr

    def image_view(self, storage, side):
        """What a kernel binds for ``side``'s ``storage``: an image buffer's
        ``image1d_buffer_t`` over its buffer, else the storage itself."""
        return images.bound(storage, side) if side.is_image else storage

    # -- import: a caller's cl.Buffer as an image --------------------------------------------
    def image_from_buffer(self) -> str | None:
        """Why the device cannot view a buffer as a 2-D image (None: it can)."""
        return shared.image_from_buffer_refusal(self.device)

    def pitch_alignment(self) -> int:
        """CL_DEVICE_IMAGE_PITCH_ALIGNMENT in pixels (0: none, or unreadable)."""
        found = self.device.alignments
        return 0 if found is None else found[0]

    def view_buffer(self, side, buffer, row_pitch=None) -> shared.BufferView:
        """The storage of the ImageDesc ``side`` on the caller's ``buffer``:
        a view, or a copy and why (runtime/opencl/shared.py has the rules);
        ``row_pitch`` in pixels, None for dense rows."""
        view = shared.view_buffer(self, side, buffer, row_pitch)
        if view.reason is not None:
            with self._lock:
                first = view.reason not in self._told
                self._told.add(view.reason)
            return shared.BufferView(view.storage, view.reason, first, view.row_pitch)
        return view


def _image_object(side) -> bool:
    """True when ``side`` lives in a ``cl.Image`` (not a buffer, nor a buffer storage)."""
    return side.is_image and not side.storage.on_buffer
