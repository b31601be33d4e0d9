"""The access model of one move, frame or output on a GPU record.

``model_move(src, dst, gpu, base)`` plans the move for the GPU record
``gpu`` (runtime/opencl/gpus.py) exactly as for a real device
(runtime/opencl/moves.py), renders the kernel that plan runs with every
access traced (runtime/opencl/trace.py), runs a few of its work-groups on
``base`` (the device this machine has: runtime/opencl/trace_run.py) and
gives a :class:`Modelled`: the kernel, the family and why, and its figures
(runtime/opencl/access_model.py). ``model_output`` does the same for
read_output's kernel. ``clayout kernel --gpu NAME --access`` prints one;
tools/bench.py prints the prediction beside what it measures.

>>> m = model_move(MemoryDesc((1, 64, 512, 512), tag="nchw"),          # doctest: +SKIP
...                MemoryDesc((1, 64, 512, 512), tag="nhwc"), gpu("h100"), default().device)
>>> m.family, m.figures.stores.efficiency_as_emitted                   # doctest: +SKIP
('tiled', 1.0)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ClayoutError
from . import gpus, trace_run
from .access_model import Figures, figures
from .moves import move_plan
from .plan import ByteCopy, plan
from .trace import Accesses



@dataclass(frozen=True)
class Modelled:
    """One kernel on one GPU record: ``kernel`` (the plan's, untraced:
    its source is what the device builds), ``family`` (tiled or direct)
    and ``why``, and the model's ``figures``."""
    kernel: object
    family: str
    why: str
    figures: Figures

    def summary(self, name: str) -> dict:
        """JSON-ready: the kernel's name, family, sizes and figures."""
        return {"kernel": name, "family": self.family, "why": self.why,
                **self.figures.summary()}


def model_move(src, dst, record: gpus.Gpu, base, bake: bool | None = None) -> Modelled:
    """The model of the move ``src`` -> ``dst`` (two sides; a FramePlan
    source for a frame) on ``record``; ``bake``: None lets the plan decide
    by size, as it does on a device; True or False picks the baked or the
    generic program."""
    device = gpus.device(record, base)
    p = move_plan(src, dst, device)
    kernel = p.kernel
    if isinstance(kernel, ByteCopy):
        raise ClayoutError(f"{src.describe()} -> {dst.describe()} is a byte copy on "
                           f"{record.title}: no kernel to model")
    if bake is not None and bake == kernel.generic:
        kernel = plan(src, dst, staged=p.through_buffers, aliased=p.aliased, bake=bake,
                      tiled=p.tiled)
    traced = plan(src, dst, staged=p.through_buffers, aliased=p.aliased,
                  bake=not kernel.generic, tiled=p.tiled, trace=True)
    run = trace_run.run(base, traced.source, "clayout_convert", traced.launch, traced.local,
                        trace_run.move_args(base, traced, p.src, p.dst))
    family = "tiled" if kernel.tiled else "direct"
    why = p.family_why if kernel.tiled or not p.tiled else \
        f"the move does not transpose; {p.family_why}"
    return Modelled(kernel, family, why, figures(run, traced.sites, record, traced.local_bytes))


def model_output(side, rule, record: gpus.Gpu, base) -> Modelled:
    """The model of read_output's kernel reading ``side`` by ``rule``
    (runtime.algebra.output.OutputRule) on ``record``: the program a steady
    call runs (baked where the output is hot-sized, else generic), in the
    engine's groups (runtime/opencl/output.py's local_size)."""
    import pyopencl as cl
    from . import output
    from .accessor import accessor
    from .plan import HOT_BYTES
    bake = side.memory.size >= HOT_BYTES
    acc = Accesses(trace=True)
    kernel = output.render(side, rule, bake, acc)
    context, mf = base.context, cl.mem_flags
    src_mem = trace_run._memory(base, side, side.is_image and side.storage.image_object)
    args = accessor(side, name="src", generic=not bake).args(src_mem)
    if rule.result == "tensor":
        res = cl.Buffer(context, mf.READ_WRITE, max(4, rule.dst.span_bytes))
        args += accessor(rule.dst, name="dst", access="write", generic=not bake).args(res)
    elif rule.result == "argmax":
        args += (cl.Buffer(context, mf.READ_WRITE, 4 * rule.batch * rule.spatial),)
    else:
        cap = 64
        bufs = [cl.Buffer(context, mf.READ_WRITE, 4 * cap) for _ in range(4)]
        args += (*bufs, rule.bound, np.int32(cap))
    c = rule.channels
    args += (cl.Buffer(context, mf.READ_ONLY, 4 * c), cl.Buffer(context, mf.READ_ONLY, 4 * c))
    args += kernel.numbers
    group = output.local_size(gpus.device(record, base))
    size = (-(-rule.spatial // group) * group, rule.batch)
    run = trace_run.run(base, kernel.source, output.NAME, size, (group, 1), args)
    return Modelled(None, "output", "one work item an output position, its channels in turn",
                    figures(run, tuple(acc.sites), record))
