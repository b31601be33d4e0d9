"""One conversion kernel: its OpenCL C source, its argument values and how
to launch it (runtime/opencl/plan.py chooses and caches the kernels; this
module builds one).

A conversion writes every position of the destination's footprint (halo and
block tails included) from its own physical axes. ``render_kernel`` goes in
steps, each returning a frozen record the next one reads:

1. ``plan_launch`` (runtime/opencl/launch.py), or ``plan_tiled``
   (runtime/opencl/tiled.py) for the tiled family: the launch and the axes
   each work item decodes;
2.-5. ``render_cell`` (runtime/opencl/cell.py): the C lines of one cell, the
   destination vector or pixel one store writes: its index, which of its
   elements are valid, its loads and its store;

and the one template ``convert.cl.mako`` puts the cell into the kernel with
its parameters. Every access is written by one emitter (runtime/opencl/trace.py),
which with ``trace`` also records it for the access model. The rest is this module's: the index type, the summary
line, the argument values, the work-group size and the family a generic
kernel's source depends on (``structure``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import sources
from ..algebra.c_index import Numbers, arg_value
from ..algebra.desc import MemoryDesc
from . import frame as frame_c, images
from .cell import render_cell
from .launch import GENERIC_LOCAL, VEC, Launch, local_size, plan_launch, tile_axis
from .tiled import TILE_ITEMS, plan_tiled
from .sides import Source, Target, gather_stride, run_length, source_step
from .trace import Accesses

KERNEL_NAME = "clayout_convert"


@dataclass(frozen=True)
class Kernel:
    """A rendered conversion: its source, its argument values and how to launch it."""
    source: str
    sizes: tuple[int, int, int]      # work items per dimension (the guard)
    local: tuple[int, int, int]      # work-group size
    vector: int                      # elements (or lanes) each work item writes
    src_image: bool
    dst_image: bool
    args: tuple = ()                 # values of the scalar arguments after src, dst
    generic: bool = False            # numbers passed as arguments (shared program)
    family: tuple = ()               # what the source of a generic kernel depends on
    tiling: object = None            # the tiles of the tiled family (tiled.Tiling), or None
    local_bytes: int = 0             # bytes of __local memory a work-group holds
    sites: tuple = ()                # its accesses (runtime/opencl/trace.py Site), in order
    traced: bool = False             # each access also records into clayout_log (the last arg)

    @property
    def tiled(self) -> bool:
        return self.tiling is not None

    @property
    def chosen(self) -> str:
        """What the plan chose, in words (``clayout kernel`` prints it)."""
        numbers = "generic (dims as arguments, one program per family)" if self.generic else \
            "baked (every number in the source, one program per shape)"
        reach = [f"{side} {'as an image object' if on else 'as a buffer'}"
                 for side, on in (("src", self.src_image), ("dst", self.dst_image))]
        if self.tiling is not None:
            t = self.tiling
            cells = (f"tiled: {t.across}x{t.along} cells of {self.vector} element(s) through "
                     f"local memory, {t.groups} group(s)")
        else:
            cells = f"direct: {self.vector} element(s) a work item"
        return (f"{numbers}; {', '.join(reach)}; {cells}; "
                f"launch {'x'.join(map(str, self.launch))} in groups of "
                f"{'x'.join(map(str, self.local))}")

    @property
    def launch(self) -> tuple[int, ...]:
        """Global size: a baked kernel's ``sizes`` rounded up to whole work
        groups; a generic kernel's work items in one dimension, rounded up
        to its one group size (the kernel decodes (g0, g1, g2) from it)."""
        sizes = (math.prod(self.sizes),) if self.generic else self.sizes
        return tuple(-(-s // lo) * lo for s, lo in zip(sizes, self.local))



def render_kernel(src: Source, dst: Target, aliased: bool = False, bake: bool = True,
                  tiled: bool = False, trace: bool = False) -> Kernel:
    """The kernel writing all of ``dst`` from ``src``; ``tiled``: of the
    tiled family where the move transposes (runtime/opencl/tiled.py; never
    aliased: a tile read by one work item is written by another); ``trace``:
    each access also records into a log (runtime/opencl/trace.py; the text
    with tracing off is the kernel's)."""
    index_type = _index_type(src.desc, dst.desc)
    num = Numbers(bake, magic_div=index_type == "uint")
    acc = Accesses(trace)
    launch = None
    if tiled and not aliased:
        launch = plan_tiled(dst.desc, dst.image, lambda a, n: source_step(src, a, n), num,
                            dst.desc.dtype.itemsize,
                            32 // min(src.desc.dtype.itemsize, dst.desc.dtype.itemsize))
    if launch is None:
        # a GPU's move that does not transpose: an element a work item (consecutive work items,
        # consecutive elements; a vector's element-aligned store would be split into scalars)
        launch = plan_launch(dst.desc, dst.image, lambda rest: tile_axis(src, rest, bake), num,
                             1 if src.frame is not None else None, 1 if tiled else 16)
    run = run_length(src, dst.desc, launch.vec_axis, launch.vector, bake)
    cell = render_cell(src, dst, launch, run, num, acc)
    tile_words = _tile_words(launch, dst.desc.dtype, acc, num)
    src_dt, dst_dt = src.desc.dtype, dst.desc.dtype
    restrict = "" if aliased else "restrict "
    reads = frame_c.describe(src.frame, bake) if src.frame else \
        f"{'image ' + src.image.layout.name if src.image else 'buffer'} {_side(src.desc, bake)}"
    summary = (f"{reads} -> {'image ' + dst.image.layout.name if dst.image else 'buffer'} "
               f"{_side(dst.desc, bake)}" + ("" if bake else " (generic: numbers are arguments)"))
    params = "".join(f", const {ctype} {name}" for name, ctype, _ in num.args) + acc.param
    source = sources.template("convert.cl.mako").render(
        summary=summary, name=KERNEL_NAME,
        helpers=sources.helpers() + acc.helpers
        + (frame_c.function(src.frame, bake, acc) if src.frame else ""),
        src_image=src.image is not None, index_type=index_type,
        pragmas=images.pragmas(dst.image, "write") if dst.image is not None else (),
        src_param=(images.param(src.image, "src", "read") if src.image is not None else
                   "__global const uchar *restrict src" if src.frame is not None else
                   f"__global const {src_dt.cl_scalar} *{restrict}src"),
        dst_param=(images.param(dst.image, "dst", "write") if dst.image is not None else
                   f"__global {dst_dt.cl_scalar} *{restrict}dst")
        + (f", {frame_c.PARAM}" if src.frame is not None else ""),
        params=params, ids=cell.index.ids, guard=cell.index.guard,
        prologue=list(cell.index.lines + cell.validity.lines), vector=launch.vector,
        dst_type=dst_dt.cl_scalar, runs=[vars(load) for load in cell.loads], store=cell.store,
        element=cell.element,
        tile=tile_words)
    args = tuple(arg_value(index_type if ctype == "idx_t" else ctype, value)
                 for _, ctype, value in num.args)
    gather = run == 1 and launch.vector > 1
    far = gather and dst.image is None and gather_stride(src, launch.vec_axis) >= 4096
    tile = launch.tile
    tiling = launch.tiling
    family = (structure(src.desc), src.image.layout.name if src.image else None,
              structure(dst.desc), dst.image.layout.name if dst.image else None, launch.vector,
              run, dst.desc.axes.index(tile) if dst.image is None and tile else None,
              index_type, aliased, bake,
              tiling and (tuple(tuple(-1 if a == VEC else dst.desc.axes.index(a) for a in g)
                                for g in launch.groups[:2]),
                          (tiling.across, tiling.along, tiling.sa, tiling.sb) if bake else ()))
    if tiling is not None:   # groups of TILE_ITEMS, one a tile, in one dimension
        sizes, local = (tiling.groups * TILE_ITEMS, 1, 1), (TILE_ITEMS,) + (1, 1) * bake
    else:
        sizes = launch.sizes
        local = (GENERIC_LOCAL,) if not bake else local_size(sizes, dst.image is not None,
                                                             gather, far)
    return Kernel(source, sizes, local, launch.vector, src.image is not None,
                  dst.image is not None, args, not bake, family, tiling,
                  tiling.words * dst.desc.dtype.itemsize if tiling else 0,
                  tuple(acc.sites), acc.trace)


def _tile_words(launch: Launch, dt, acc: Accesses, num: Numbers) -> dict | None:
    """What the template's tiled form needs: the tile's sides and cells (its
    shape: numbers, literals or arguments), how a phase's step ``e`` is a
    cell (ca, cb) (the load phase along B, the store phase across A), the
    local array's length, and how lane j of a cell is put into it and got
    from it (``tiled.local_layout``)."""
    t = launch.tiling
    if t is None:
        return None
    across, along = num(t.across, key=("tile", "across")), num(t.along, key=("tile", "along"))
    sa, sb = (num(v, key=("tile", k)) for k, v in (("sa", t.sa), ("sb", t.sb)))
    cell = f"ca * {sa} + cb * {sb}" if not num.bake else \
        " + ".join(f"{c} * {v}" if v != 1 else c for c, v in (("ca", t.sa), ("cb", t.sb)))
    plane = num(t.plane, key=("tile", "plane"))
    slots = [f"{j} * {plane} + {cell}" if j else cell for j in range(launch.vector)]
    words = {"by_element": t.by_element}
    if t.by_element:   # the load phase, an element a work item: lane j = e % V of cell e / V
        v = launch.vector
        words.update(elements=num(t.cells * v, key=("tile", "elements")),
                     element=(f"e % {v}u", num.div(f"(e / {v}u)", t.along, key=("tile", "along")),
                              num.mod(f"(e / {v}u)", t.along, key=("tile", "along"))),
                     put_element=acc.local_store("tile", f"j * {plane} + {cell}", dt, "v"))
    return {**words, "across": across, "along": along,
            "cells": num(t.cells, key=("tile", "cells")),
            "items": TILE_ITEMS, "words": t.words,
            "load": (num.div("e", t.along, key=("tile", "along")),
                     num.mod("e", t.along, key=("tile", "along"))),
            "store": (num.mod("e", t.across, key=("tile", "across")),
                      num.div("e", t.across, key=("tile", "across"))),
            "put": [] if t.by_element else [acc.local_store("tile", slot, dt, f"v{j}")
                                            for j, slot in enumerate(slots)],
            "get": [acc.local_load("tile", slot, dt) for slot in slots]}


# -- what a kernel depends on ------------------------------------------------------------------
def structure(desc: MemoryDesc) -> tuple:
    """What of a desc a generic kernel's source depends on: dtype, axis order,
    blocking, whether strides are a tag's or a user's, whether it has a halo."""
    return (desc.dtype.name, desc.order, desc.inner_idxs, desc.inner_blks,
            desc.tag is not None, desc.has_halo)


def _side(desc: MemoryDesc, bake: bool) -> str:
    """The summary line's name of one side: the whole desc when baked, its
    structure (tag, dtype) when generic, so the comment does not vary by dims."""
    if bake:
        return repr(desc)
    tag = desc.tag or "strided"
    halo = " halo" if desc.has_halo else ""
    return f"{desc.dtype.name} {tag}{halo}"


def _index_type(src: MemoryDesc, dst: MemoryDesc) -> str:
    span = max(src.span, dst.span, math.prod(dst.padded_dims))
    return "uint" if span < 2 ** 31 else "ulong"
