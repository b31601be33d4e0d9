"""The forward transform stage (runtime/algebra/transform.py) on the device.

``render(transform, dims)`` gives the kernel of the stage for a logical
tensor of ``dims``: one work item per element of the placed float32 tensor
(``transform.out_dims(dims)``, row-major), reading the plain float32 logical
tensor (row-major). Each work item gathers the r**k inputs its element
depends on (k transformed axes) and evaluates, in registers, exactly the
order the transform documents: along the first axis, then the next, each
output ``((G[i,0]*x0 + G[i,1]*x1) + ...)`` with every term kept, every
product and sum a float32 operation, no contraction into fused
multiply-adds (``FP_CONTRACT OFF``). G's float32 numbers are written as
exact hex-float literals. Elements in the zero padding of a split axis are
0.0f.

The source depends on the transform and the rank only; the sizes are
arguments, so a model's weights of every shape share one program per
transform (runtime/opencl/programs.py caches it). ``launch`` enqueues it on
device buffers through the engine's launcher (``on_device`` between two
storages, ``on_host`` on host arrays). The inverse stage is not here: every
engine runs it on the host.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..algebra import dtypes
from ..algebra.c_index import f32_literal
from ..cache import memoized
from ..errors import ClayoutError
from .. import sources
from . import host
from .launch import GENERIC_LOCAL
from .moves import host_path

KERNEL_NAME = "clayout_transform"


@dataclass(frozen=True)
class TransformKernel:
    """A rendered forward stage: its source, the scalar arguments after
    (src, dst), and the number of placed elements (work items)."""
    source: str
    args: tuple
    total: int

    @property
    def global_size(self) -> tuple[int]:
        return (-(-self.total // GENERIC_LOCAL) * GENERIC_LOCAL,)


def render(transform, dims) -> TransformKernel:
    """The kernel of ``transform`` for a logical tensor of ``dims``."""
    dims = tuple(int(d) for d in dims)
    out = transform.out_dims(dims)            # refuses dims the transform does not take
    total, volume = math.prod(out), math.prod(dims)
    wide = max(total, volume) >= 2 ** 31
    scalar = np.uint64 if wide else np.uint32
    strides = tuple(math.prod(dims[a + 1:]) for a in range(len(dims)))
    args = out + (total,) + strides
    if transform.split is not None:           # the split axis's length before padding
        axis = transform.split[0]
        args += (transform.tile if axis in transform.axes else dims[axis],)
    return TransformKernel(_source(transform, len(dims), wide), tuple(scalar(a) for a in args),
                           total)


def launch(launcher, kernel: TransformKernel, src, dst, wait_for=None):
    """Enqueue ``kernel`` from the cl.Buffer ``src`` (the logical tensor)
    into ``dst`` (the placed tensor); its event, None when there is nothing
    to write."""
    if kernel.total == 0:
        return None
    return launcher.run_kernel(kernel.source, KERNEL_NAME, kernel.global_size,
                               (src, dst) + kernel.args, wait_for,
                               local_size=(GENERIC_LOCAL,), reads=(src,), writes=(dst,))


def literal(value: np.float32) -> str:
    """The exact C literal of one float32 number."""
    if math.isnan(float(value)):
        raise ClayoutError("a transform matrix holds NaN; it has no kernel")
    return f32_literal(value)


@memoized("transform kernel sources", "CLAYOUT_TRANSFORM_CACHE", 64)
def _source(transform, rank: int, wide: bool) -> str:
    axes, taps = transform.axes, transform.taps
    split = transform.split
    rows = [[literal(v) for v in row] for row in transform.f32_matrix()]
    out_rank = rank + (split is not None)
    # c<a>: the index along logical axis a of the transformed (unsplit) tensor
    coords = []
    for a in range(rank):
        o = a + (split is not None and a > split[0])
        value = f"o{o} * {split[1]} + o{o + 1}" if split is not None and a == split[0] \
            else f"o{o}"
        coords.append(f"const idx_t c{a} = {value};")
    base = " + ".join(f"c{a} * s{a}" for a in range(rank) if a not in axes) or "0"
    loads = []
    for ps in itertools.product(range(taps), repeat=len(axes)):
        offset = "".join(f" + {_times(p, f's{a}')}" for p, a in zip(ps, axes) if p)
        loads.append(f"const float {_name(0, ps)} = src[base{offset}];")
    steps = []
    for j, axis in enumerate(axes, start=1):
        lines = []
        for rest in itertools.product(range(taps), repeat=len(axes) - j):
            terms = [f"G[c{axis}][{p}] * {_name(j - 1, (p,) + rest)}" for p in range(taps)]
            expr = terms[0]
            for term in terms[1:]:
                expr = f"({expr} + {term})"
            lines.append(f"const float {_name(j, rest)} = {expr};")
        steps.append((axis, lines))
    params = [", ".join(f"const idx_t n{d}" for d in range(out_rank)), "const idx_t total",
              ", ".join(f"const idx_t s{a}" for a in range(rank))] + \
        (["const idx_t limit"] if split else [])
    name = " ".join(str(transform.name).split())
    summary = f"{name}: G {transform.tile}x{taps} along axes {list(axes)}" + \
        (f", axis {split[0]} split in blocks of {split[1]}" if split else "") + \
        f", rank {rank}"
    return sources.template("transform.cl.mako").render(
        summary=summary, index_type="ulong" if wide else "uint", tile=transform.tile,
        taps=taps, rows=rows, name=KERNEL_NAME, params=params,
        out_rank=out_rank, coords=coords, base=base, loads=loads, steps=steps,
        pad_guard=f"c{split[0]} >= limit" if split else None, result=_name(len(axes), ()))


def _name(stage: int, digits) -> str:
    """The register holding a value after ``stage`` axes, at the taps ``digits``
    of the axes still to do."""
    return f"v{stage}" + "".join(f"_{p}" for p in digits)


def _times(p: int, stride: str) -> str:
    return stride if p == 1 else f"{p} * {stride}"


def on_device(launcher, steps, src_storage, dst_storage, wait_for=()):
    """Move, forward transform, move (the three ``steps`` of a conversion
    onto a transform layout) on ``launcher``'s device, between two storages,
    after ``wait_for``; the event of the last command."""
    first, step, last = steps
    kernel = render(step.transform, step.src.dims)
    placed = launcher.memory.buffer(kernel.total * 4)
    if first.src == first.dst:   # already the plain f32 tensor: read in place
        logical, event = src_storage, None
    else:
        logical = launcher.memory.buffer(math.prod(step.src.dims) * 4)
        event = launcher.enqueue(first.src, src_storage, first.dst, logical, wait_for=wait_for)
    event = launch(launcher, kernel, logical, placed,
                   [event] if event is not None else list(wait_for or ()))
    return launcher.enqueue(last.src, placed, last.dst, dst_storage,
                            wait_for=[event] if event is not None else ())


def on_host(launcher, step, data) -> np.ndarray:
    """The forward stage ``step`` as one kernel on the host array ``data``
    (the plain logical tensor; float32 after a conversion where it is
    another type): the placed float32 tensor, 1-D."""
    kernel = render(step.transform, step.src.dims)
    values = np.ascontiguousarray(data).reshape(-1)
    if values.dtype != np.float32:
        values = dtypes.convert(values, "f32")
    if kernel.total == 0:
        return np.zeros(0, np.float32)
    out = np.empty(kernel.total, np.float32)
    path = host_path(launcher.device)
    with host.array_in(launcher, values, path) as (src_buf, wait), \
            host.array_out(launcher, out, path) as (dst_buf, back):
        finish, _ = back(launch(launcher, kernel, src_buf, dst_buf, wait or None))
        finish()
    return out
