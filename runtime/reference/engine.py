"""The reference engine: slow on purpose, obvious, and independent of the fast paths.

Buffers: every element's offset is evaluated with oneDNN's walk written out
here (inner blocks innermost first, then outer strides, plus offset0), from
the desc's fields alone. Named image layouts: every pixel's logical index is
evaluated with the layout's own formula (runtime/reference/formulas.py).
Custom image layouts use the buffer walk of their desc. A transform stage is
evaluated element by element in its documented order (the inverse is the one
host evaluation every engine shares: runtime.algebra.transform).

Everything is vectorized with numpy index arrays; nothing here uses
``MemoryDesc.axes``, the cpu engine or the kernels.
"""
from __future__ import annotations

import numpy as np

from ..algebra import dtypes
from ..algebra.desc import MemoryDesc
from ..contract import HostEngine, wait_events
from .formulas import FORMULAS, VOLUME
from .frame import frame_values


def walk(desc: MemoryDesc, q) -> np.ndarray:
    """Offsets of the halo-padded indices ``q`` (one int64 array per dim)."""
    pos = [np.array(v, dtype=np.int64, copy=True) for v in q]
    off = np.zeros(np.broadcast(*pos).shape, dtype=np.int64)
    stride = 1
    for blk, d in reversed(list(zip(desc.inner_blks, desc.inner_idxs))):
        off += (pos[d] % blk) * stride
        pos[d] //= blk
        stride *= blk
    for d in range(desc.ndims):
        off += pos[d] * desc.strides[d]
    return off + desc.offset0


def _grid(shape):
    return [g.ravel() for g in np.indices(shape, dtype=np.int64)] if shape else []


def _pixel_map(image):
    """For every lane of the image (row-major over height, width, lanes): the
    flat placed index it holds, or -1 for a padding lane."""
    layout, dims = image.layout, image.placed
    table = VOLUME if layout.kind == "volume" else FORMULAS
    if layout.name in table and layout.kind != "custom":
        to_logical, shape = table[layout.name]
        size = shape(dims)
        grid = _grid(tuple(reversed(size)) + (image.lanes,)) or \
            [np.zeros(0, np.int64)] * (len(size) + 1)
        idx = to_logical(*reversed(grid[:-1]), grid[-1], dims)
        valid = np.ones(np.shape(idx[0]), dtype=bool)
        flat = np.zeros(np.shape(idx[0]), dtype=np.int64)
        for i, n in zip(idx, dims):
            valid &= (i >= 0) & (i < n)
            flat = flat * n + i
        return np.where(valid, flat, -1)
    # a custom layout: invert the buffer walk of its (dense) desc
    desc = image.desc
    image_idx = _grid(desc.padded_dims)
    valid = np.ones(image_idx[0].shape if image_idx else 0, dtype=bool)
    for i, n in zip(image_idx, desc.dims):
        valid &= i < n
    where = np.full(image.width * image.height * image.depth * image.lanes, -1, dtype=np.int64)
    flat = np.zeros(valid.shape, dtype=np.int64)
    for i, n in zip(image_idx, desc.dims):
        flat = flat * n + i
    where[walk(desc, [i[valid] for i in image_idx])] = flat[valid]
    return where


def read(data, side) -> np.ndarray:
    """The logical tensor, flat and row-major, that ``data`` holds in ``side``."""
    flat = np.asarray(data).reshape(-1)
    if side.is_image:
        where = _pixel_map(side)
        values = np.zeros(int(np.prod(side.placed)), dtype=flat.dtype)
        values[where[where >= 0]] = flat[where >= 0]
        return values
    if side.is_zero:
        return np.zeros(0, dtype=flat.dtype)
    q = [i + lo for i, lo in zip(_grid(side.dims), side.halo_lower)]
    return flat[walk(side, q)]


def write(values: np.ndarray, side, out=None) -> np.ndarray:
    """``side``'s memory holding the logical ``values`` (already of its
    dtype): an image array, or a buffer whose halo holds the fill value and
    whose block tails are zero. ``out``: a buffer to write instead of a new
    one, only at the desc's footprint (its gaps keep what they held)."""
    if side.is_image:
        where = _pixel_map(side)
        image = np.zeros(where.shape, dtype=side.dtype.np)
        image[where >= 0] = values[where[where >= 0]]
        image = image.reshape(side.array_shape)
        if out is not None:
            out.reshape(-1)[...] = image.reshape(-1)
            return out
        return image
    desc = side
    if out is None:
        out = np.zeros(desc.span, dtype=desc.dtype.np)
    elif not desc.is_zero:
        out[walk(desc, _grid(desc.padded_dims))] = 0   # the whole footprint, tails included
    if desc.is_zero:
        return out
    if desc.has_halo:
        fill = dtypes.convert(np.array([desc.fill], dtype=np.float64).astype(np.float32),
                              desc.dtype)[0]
        q = _grid(desc.extent)
        inside = np.ones(q[0].shape, dtype=bool)
        for d, qd in enumerate(q):
            inside &= (qd >= desc.halo_lower[d]) & (qd < desc.halo_lower[d] + desc.dims[d])
        out[walk(desc, [qd[~inside] for qd in q])] = fill
    q = [i + lo for i, lo in zip(_grid(desc.dims), desc.halo_lower)]
    out[walk(desc, q)] = values.reshape(-1)
    return out


def forward(transform, values: np.ndarray) -> np.ndarray:
    """The transform of the logical tensor ``values``, term by term in
    float32: along each axis, output i = ((G[i,0]*x0 + G[i,1]*x1) + ...)."""
    g = np.array(transform.matrix, dtype=np.float64).astype(np.float32)
    x = dtypes.convert(values, "f32")
    for axis in transform.axes:
        shape = list(x.shape)
        shape[axis] = g.shape[0]
        out = np.empty(shape, np.float32)
        for i in range(g.shape[0]):
            acc = None
            for p in range(g.shape[1]):
                term = np.take(x, p, axis=axis) * g[i, p]
                acc = term if acc is None else acc + term
            out[(slice(None),) * axis + (i,)] = acc
        x = out
    if transform.split is not None:   # zeros up to a multiple of block, then (d/block, block)
        axis, block = transform.split
        d = x.shape[axis]
        padded = np.zeros(x.shape[:axis] + (-(-d // block) * block,) + x.shape[axis + 1:],
                          np.float32)
        padded[(slice(None),) * axis + (slice(0, d),)] = x
        x = padded.reshape(x.shape[:axis] + (padded.shape[axis] // block, block)
                           + x.shape[axis + 1:])
    return x


class ReferenceEngine(HostEngine):
    """Every element evaluated by the formulas."""
    name = "reference"
    exact_outputs = True

    def move(self, src, dst, data, out=None):
        result = write(dtypes.convert(read(data, src), dst.dtype), dst)
        if out is None:
            return result
        out.reshape(-1)[...] = result.reshape(-1)   # as if fresh: gaps and tails too
        return out

    def apply(self, step, data):
        if step.inverse:
            return super().apply(step, data)
        return forward(step.transform, np.asarray(data).reshape(step.src.dims)).reshape(-1)

    def reorder(self, data, src, dst, out=None):
        return self.move(src, dst, data, out)

    def reorder_into(self, data, src, target, dst, zeroed):
        write(dtypes.convert(read(data, src), dst.dtype), dst, target)

    # -- frames: every element from the formulas in float64, rounded once -----------------
    def _frame(self, frame, dst, data):
        """The frame's values in dst's dtype (rounded once from float64) and
        the plain NCHW desc holding them."""
        values = frame_values(np.asarray(data).reshape(frame.shape), frame.format.name,
                              crop=frame.crop, size=(frame.x.out, frame.y.out), fit=frame.fit,
                              fill=frame.fill, resize=frame.resize, mean=frame.mean,
                              std=frame.std, order=frame.order,
                              yuv=frame.yuv.name if frame.yuv is not None else "bt601",
                              antialias=frame.antialias, scale=frame.scale)
        return dtypes.host_array(values.reshape(-1), dst.dtype), MemoryDesc(frame.dims,
                                                                             dst.dtype)

    def from_frame(self, frame, dst, data, out=None):
        values, plain = self._frame(frame, dst, data)
        return self.convert(plain, dst, values, out)

    def frame_storage(self, frame, src, src_storage, dst, dst_storage, fresh, wait_for=()):
        wait_events(wait_for)
        values, plain = self._frame(frame, dst, self.read(src_storage, src))
        self.convert_storage(plain, values, dst, dst_storage, fresh)

    def convert_storage(self, src, src_storage, dst, dst_storage, fresh, wait_for=()):
        wait_events(wait_for)

        def last(s, d, value):   # dst's footprint only
            write(dtypes.convert(read(value, s), d.dtype), d, dst_storage)
        self.run_stages(src, dst, src_storage, last)


ENGINE = ReferenceEngine()
