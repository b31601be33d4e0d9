"""The reference: slow on purpose, obvious, and independent of the fast paths.

Buffers: every element's offset is evaluated with oneDNN's walk written out
here (inner blocks innermost first, then outer strides, plus offset0), from
the desc's fields alone. Named image layouts: every pixel's logical index is
evaluated with the formulas of the table in docs/layouts.md, written out below one by
one. Custom image layouts use the buffer walk of their desc.

Everything is vectorized with numpy index arrays; nothing here uses
``MemoryDesc.axes`` or the cpu engine.
"""
from __future__ import annotations


import numpy as np

from ..algebra import dtypes
from ..algebra.desc import MemoryDesc
from ..errors import ClayoutError
from ..algebra.layout import ImageLayout


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


def read_logical(data: np.ndarray, desc: MemoryDesc) -> np.ndarray:
    """The logical tensor (shape ``desc.dims``) held in physical ``data``."""
    flat = np.asarray(data).reshape(-1)
    if desc.is_zero:
        return np.zeros(desc.dims, dtype=flat.dtype)
    idx = _grid(desc.dims)
    q = [i + lo for i, lo in zip(idx, desc.halo_lower)]
    return flat[walk(desc, q)].reshape(desc.dims)


def write_physical(values: np.ndarray, desc: MemoryDesc) -> np.ndarray:
    """A fresh physical array for ``desc`` holding the logical ``values``
    (already of desc's dtype): halo positions get the fill value, block tails
    zero, and anything outside the desc's footprint zero."""
    out = np.zeros(desc.span, dtype=desc.dtype.np)
    if desc.is_zero:
        return out
    if any(desc.halo_lower) or any(desc.halo_upper):
        fill = dtypes.convert(np.array([desc.fill], dtype=np.float64).astype(np.float32),
                              desc.dtype)[0]
        q = _grid(desc.extent)
        inside = np.ones(q[0].shape, dtype=bool)
        for d, qd in enumerate(q):
            inside &= (qd >= desc.halo_lower[d]) & (qd < desc.halo_lower[d] + desc.dims[d])
        out[walk(desc, [qd[~inside] for qd in q])] = fill
    idx = _grid(desc.dims)
    q = [i + lo for i, lo in zip(idx, desc.halo_lower)]
    out[walk(desc, q)] = values.reshape(-1)
    return out


def reorder(data, src: MemoryDesc, dst: MemoryDesc) -> np.ndarray:
    if src.dims != dst.dims:
        raise ClayoutError(f"reorder needs equal dims, got {src.dims} and {dst.dims}")
    values = dtypes.convert(read_logical(data, src), dst.dtype)
    return write_physical(values, dst)


# -- docs/layouts.md, one formula per named layout: pixel (x, y, lane k) -> logical index ----
def _cdiv(a, b):
    return -(-a // b)


def _in_out_channel(x, y, k, d):
    N, C, H, W = d
    return y // H, 4 * (x // W) + k, y % H, x % W


def _in_out_height(x, y, k, d):
    N, C, H, W = d
    HB = _cdiv(H, 4)
    return y // HB, x // W, 4 * (y % HB) + k, x % W


def _in_out_width(x, y, k, d):
    N, C, H, W = d
    WB = _cdiv(W, 4)
    return y // H, x // WB, y % H, 4 * (x % WB) + k


def _conv2d_filter(x, y, k, d):
    O, I, H, W = d
    return 4 * (y // (H * W)) + k, x, (y % (H * W)) // W, y % W


def _dw_conv2d_filter(x, y, k, d):
    M, I, H, W = d
    return x // (H * W), 4 * y + k, (x % (H * W)) // W, x % W


def _argument(x, y, k, d):
    return (4 * x + k,)


def _weight_height(x, y, k, d):
    O, I, H, W = d
    return 4 * y + k, x % I, x // (W * I), (x // I) % W


def _weight_width(x, y, k, d):
    O, I, H, W = d
    IB = _cdiv(I, 4)
    return y, 4 * (x % IB) + k, x // (W * IB), (x // IB) % W


def _c4_fyx_b(x, y, k, d):
    O, I, H, W = d
    f = 4 * x + k
    return y, f // (H * W), (f // W) % H, f % W


def _c1_b_fyx(x, y, k, d):
    O, I, H, W = d
    return x, y // (H * W), (y // W) % H, y % W


def _texture_2d(x, y, k, d):
    N, C, H, W = d
    S = _cdiv(C, 4)
    return x % N, 4 * (y % S) + k, y // S, x // N


FORMULAS = {  # name -> (pixel -> logical, dims -> (width, height))
    "in_out_channel": (_in_out_channel, lambda d: (_cdiv(d[1], 4) * d[3], d[0] * d[2])),
    "in_out_height": (_in_out_height, lambda d: (d[1] * d[3], d[0] * _cdiv(d[2], 4))),
    "in_out_width": (_in_out_width, lambda d: (d[1] * _cdiv(d[3], 4), d[0] * d[2])),
    "conv2d_filter": (_conv2d_filter, lambda d: (d[1], _cdiv(d[0], 4) * d[2] * d[3])),
    "dw_conv2d_filter": (_dw_conv2d_filter, lambda d: (d[0] * d[2] * d[3], _cdiv(d[1], 4))),
    "argument": (_argument, lambda d: (_cdiv(d[0], 4), 1)),
    "weight_height": (_weight_height, lambda d: (d[1] * d[2] * d[3], _cdiv(d[0], 4))),
    "weight_width": (_weight_width, lambda d: (_cdiv(d[1], 4) * d[2] * d[3], d[0])),
    "image_2d_weights_c4_fyx_b": (_c4_fyx_b, lambda d: (_cdiv(d[1] * d[2] * d[3], 4), d[0])),
    "image_2d_weights_c1_b_fyx": (_c1_b_fyx, lambda d: (d[0], d[1] * d[2] * d[3])),
    "texture_2d": (_texture_2d, lambda d: (d[3] * d[0], d[2] * _cdiv(d[1], 4))),
}


def _pixel_map(layout: ImageLayout, dims):
    """For every image element (row-major over height, width, lanes): the
    flat logical index it holds, or -1 for a padding lane."""
    dims = layout.logical_dims(dims)
    if layout.name in FORMULAS and layout.kind != "custom":
        to_logical, shape = FORMULAS[layout.name]
        width, height = shape(dims)
        y, x, k = _grid((height, width, layout.lanes)) or [np.zeros(0, np.int64)] * 3
        idx = to_logical(x, y, k, dims)
    else:
        # a custom layout: invert the buffer walk of its (dense) desc
        desc = layout.desc(dims)
        width, height = layout.image_shape(dims)
        nimage = height * width * layout.lanes
        image_idx = _grid(desc.padded_dims)
        valid = np.ones(image_idx[0].shape if image_idx else 0, dtype=bool)
        for i, n in zip(image_idx, desc.dims):
            valid &= i < n
        where = np.full(nimage, -1, dtype=np.int64)
        flat = np.zeros(valid.shape, dtype=np.int64)
        for i, n in zip(image_idx, desc.dims):
            flat = flat * n + i
        where[walk(desc, [i[valid] for i in image_idx])] = flat[valid]
        return where, (height, width)
    valid = np.ones(np.shape(idx[0]), dtype=bool)
    flat = np.zeros(np.shape(idx[0]), dtype=np.int64)
    for i, n in zip(idx, dims):
        valid &= (i >= 0) & (i < n)
        flat = flat * n + i
    return np.where(valid, flat, -1), (height, width)


def to_image(data, layout: ImageLayout, src: MemoryDesc, dtype) -> np.ndarray:
    dt = dtypes.image_dtype(dtype)
    values = dtypes.convert(read_logical(data, src), dt).reshape(-1)
    where, (height, width) = _pixel_map(layout, src.dims)
    image = np.zeros(where.shape, dtype=dt.np)
    image[where >= 0] = values[where[where >= 0]]
    return image.reshape((height, width, 4) if layout.lanes == 4 else (height, width))


def from_image(image, layout: ImageLayout, dst: MemoryDesc) -> np.ndarray:
    where, _ = _pixel_map(layout, dst.dims)
    values = np.zeros(dst.nelems, dtype=np.asarray(image).dtype)
    flat = np.asarray(image).reshape(-1)
    values[where[where >= 0]] = flat[where >= 0]
    return write_physical(dtypes.convert(values, dst.dtype).reshape(dst.dims), dst)


__all__ = ["walk", "read_logical", "write_physical", "reorder", "to_image", "from_image",
           "FORMULAS"]
