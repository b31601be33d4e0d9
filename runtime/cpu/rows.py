"""Zero-padded destinations written row block by row block (the cpu plan's "rows").

When a destination has zero padding between its elements (an image whose
lanes are padded, as conv2d_filter with O=1), zeroing it first and copying
after reads and writes it twice from memory. Here, where one box pair's
destination rows tile the whole buffer, each block of rows is assembled in a
zeroed buffer that stays in cache (the data written into it, the padding left
zero) and then copied out whole: the destination is written once. The buffer's
rows are padded by a cache line when their bytes are a multiple of 1 KiB, so
that a strided pass over them does not alias in L1.
"""
from __future__ import annotations


import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import blocked, geometry as g



def row_axes(d, offset0: int, span: int):
    """(outer axis, row axis) of the destination view ``d`` (element offset,
    shape, strides) when its rows tile [offset0, span) exactly: the outer
    axis steps whole rows' blocks, the row axis steps rows that follow each
    other, and everything else lies inside the first row; else None."""
    axes = sorted((i for i in range(len(d.shape)) if d.shape[i] > 1), key=lambda i: -d.strides[i])
    if len(axes) < 2 or any(d.strides[i] <= 0 for i in axes):
        return None
    o0, o1 = axes[:2]
    st0, st1 = d.strides[o0], d.strides[o1]
    lead = d.offset - offset0
    inside = lead + sum((d.shape[i] - 1) * d.strides[i] for i in axes[2:])
    if d.shape[o1] * st1 != st0 or d.shape[o0] * st0 != span - offset0 or not 0 <= inside < st1:
        return None
    return o0, o1


def row_pitch(run: int, itemsize: int) -> int:
    """Elements per staged row: padded by one cache line when the row's bytes
    are a multiple of 1 KiB, so that rows do not alias in the L1 cache."""
    return run + g.LINE_BYTES // itemsize if (run * itemsize) % g.ALIAS_BYTES == 0 else run


def copy_rows(src_buf, s, dst_buf, d, offset0: int, span: int, put, run_all,
              workers: int) -> bool:
    """Write view ``s`` of src_buf into view ``d`` of dst_buf, and zeros
    everywhere else in [offset0, span), when the rows of ``d`` tile it
    (``row_axes``); else write nothing and return False. ``put(dst, src)``
    copies (converting), ``run_all`` runs calls over the pool."""
    axes = row_axes(d, offset0, span)
    if axes is None:
        return False
    o0, o1 = axes
    st0, st1, item = d.strides[o0], d.strides[o1], dst_buf.itemsize
    pitch = row_pitch(st1, item)
    rest = [i for i in range(len(d.shape)) if i not in axes]
    rest_shape = tuple(d.shape[i] for i in rest)
    lead = d.offset - offset0   # where the data starts inside a row
    most = max(1, g.STAGE_BYTES // (pitch * item))
    n_rows = -(-d.shape[o1] // -(-d.shape[o1] // most))   # even blocks: a thin last one transposes badly
    blocks = [(k, r) for k in range(d.shape[o0]) for r in range(0, d.shape[o1], n_rows)]

    # the source as (outer, row, rest...): a block is then a cheap slice of it
    src_all = as_strided(src_buf[s.offset:], (d.shape[o0], d.shape[o1]) + rest_shape,
                         tuple(st * src_buf.itemsize for st in
                               [s.strides[o0], s.strides[o1]] + [s.strides[i] for i in rest]))
    into_strides = tuple(st * item for st in [pitch] + [d.strides[i] for i in rest])

    def work(part):
        buf = np.zeros(n_rows * pitch, dst_buf.dtype)  # padding stays zero: only data is rewritten
        rows = buf.reshape(n_rows, pitch)
        into_all = as_strided(buf[lead:], (n_rows,) + rest_shape, into_strides)
        axes_t = blocked.blockable(into_all, src_all[0, :n_rows])
        if axes_t is not None:
            # one ufunc per block along whole source runs: 128-element blocks would read
            # conv2d_filter's 64 far source rows 4 times each (35 ms, not 15)
            u = blocked.unsigned(into_all.dtype)
            order = blocked.loop_order(into_all, *axes_t)
            row_at = order.index(0)
            into_all = into_all.view(u).transpose(order)
        for k, r in part:
            n = min(n_rows, d.shape[o1] - r)
            src = src_all[k, r:r + n]
            if axes_t is None:
                put(into_all[:n], src)
            else:
                np.positive(src.view(u).transpose(order),
                            out=into_all[(slice(None),) * row_at + (slice(0, n),)])
            start = offset0 + k * st0 + r * st1
            np.copyto(dst_buf[start:start + n * st1].reshape(n, st1), rows[:n, :st1])

    per = -(-len(blocks) // workers)
    run_all([lambda p=blocks[i:i + per]: work(p) for i in range(0, len(blocks), per)])
    return True
