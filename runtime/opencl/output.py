"""``read_output`` on an OpenCL device: one kernel (templates/output.cl.mako)
reads the output's layout through its accessor (runtime/opencl/accessor.py:
every storage, the index math of every conversion) and writes only the
result: the tensor in its buffer tag, the argmax indices, or a threshold's
selected elements, compacted into buffers of ``CAP`` (the host sorts those
few; with top_k and more selected than the buffers hold, the kernel runs
again with buffers for all of them).

**Generic per family, baked when hot.** The program is generic: the
output's dims (through generic accessors) and the rule's channel count,
spatial size and index decoding are kernel arguments, so its source
depends on the output's family only (layout structure, dtypes, rank, the
rule's kind): a new output shape builds nothing (before, every shape built
its own program: 30 shapes, 30 builds, 247 ms a call). An output read
again and again (at least ``HOT_BYTES``, more than the engine's
``specialize_after`` times) gets its baked program (every number a
literal), built off the calling thread (runtime/opencl/baking.py) and run
from the call after it is ready; the two give the same bits.

**The threshold's counter.** A work-group counts its selected elements in
local memory and takes their place with one global atomic (before: one
``atomic_inc`` on one global counter per selected element, serialized at
L2 on a GPU). The launch's work-group size is explicit, from the device's
facts (``local_size``). A tensor result that the kernel writes whole is
not zero-filled first; one with padding or gaps is.

Its float32 operations are those of runtime/algebra/output_math.py (exp
is the device's: within its ulp bound, not numpy's bits)."""
from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from .. import sources
from ..algebra.hostarray import physical_shape
from ..algebra.output import CAP, OutputRule, Pending, check_count, finish_selected
from ..algebra.output_math import evaluate
from ..algebra.c_index import Numbers
from ..cache import LRU
from . import baking, events, programs
from .accessor import accessor
from .plan import HOT_BYTES
from .trace import Accesses

NAME = "clayout_read_output"
mf = cl.mem_flags
LOCAL = 256   # work items a group, at most (the device's max_work_group_size caps it)


@dataclass(frozen=True)
class OutputKernel:
    """One rendered output kernel: its ``source``, the values of its own
    number arguments (``numbers``: C, S, the decoding; empty when baked),
    and whether it is the generic one."""
    source: str
    numbers: tuple
    generic: bool


def render(side, rule: OutputRule, bake: bool, acc: Accesses | None = None) -> OutputKernel:
    """The kernel reading ``side`` (the output's ImageDesc or MemoryDesc)
    by ``rule``: baked (every number a literal) or generic; its accesses
    written by ``acc`` (runtime/opencl/trace.py: traced, the kernel takes
    the log last)."""
    acc = acc or Accesses()
    src = accessor(side, name="src", generic=not bake, trace=acc)
    dst = accessor(rule.dst, name="dst", access="write", generic=not bake, trace=acc) \
        if rule.result == "tensor" else None
    t = {"f32": "float", "f16": "float", "bf16": "float", "s32": "int", "s8": "int",
         "u8": "uint"}[rule.src.name]
    num = Numbers(bake, prefix="o_n")
    channels, spatial = num(rule.channels, "int"), num(rule.spatial, "int")
    decode = _decode("i", rule.dims, num) + (_decode("j", rule.shape, num) if dst else [])
    flat = f"(n * {channels} + c) * {spatial} + s"

    def selected(value: str, key: str) -> str:
        return " ".join((acc.store("flat", "at", "s32", flat), acc.store("val", "at", "f32", value),
                         acc.store("key", "at", "f32", key)))
    summary = (f"{rule.result} of {side.describe()}" if bake else
               f"{rule.result}, generic: the output's numbers are arguments")
    text = sources.template("output.cl.mako").render(
        src=src, dst=dst, t=t, name=NAME, C=channels, S=spatial, decode=decode,
        dst_args="".join(f", j{k}" for k in range(2, len(rule.shape))),
        rest_args="".join(f", i{k}" for k in range(2, len(rule.dims))),
        dequantize=rule.scale is not None, activation=rule.activation, result=rule.result,
        keys_are_p=rule.keys_are_p, summary=summary, log=acc.param, log_arg=acc.arg,
        scale=acc.load("scale", "c", "f32"), zero=acc.load("zero", "c", "s32"),
        arg=acc.store("arg", f"n * {spatial} + s", "s32", "at"), selected=selected,
        numbers="".join(f", const int {name}" for name, _, _ in num.args))
    return OutputKernel(text, tuple(np.int32(v) for _, _, v in num.args), not bake)


def _decode(name: str, dims, num: Numbers) -> list[str]:
    """C lines giving ``name``2.. (the indices past axis 1 of ``dims``) from
    the flat ``s`` (the outermost needs no modulo: s < S)."""
    rest = dims[2:]
    lines = []
    for k, n in enumerate(rest):
        below = math.prod(rest[k + 1:])
        digit = "s" if below == 1 and num.bake else f"(s / {num(below, 'int')})"
        if k:
            digit = f"({digit} % {num(n, 'int')})"
        lines.append(f"const int {name}{k + 2} = {digit};")
    return lines


@dataclass(eq=False)
class OutputPlan:
    """What one (output side, rule) runs on one device: the ``generic``
    kernel until the output is hot (``uses_left`` more calls; None: never
    or done), then the baked one (built off the calling thread, swapped in
    when ready; given up for the generic one again where the full program
    cache dropped it)."""
    side: object
    rule: OutputRule
    context: object
    generic: OutputKernel
    hot_after: int | None
    kernel: OutputKernel = None
    uses_left: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        self.kernel, self.uses_left = self.generic, self.hot_after

    def next_kernel(self) -> OutputKernel:
        with self.lock:
            left = self.uses_left
            if left is not None:
                left -= 1
                self.uses_left = None if left <= 0 else left
                if left <= 0:
                    baking.later(lambda: render(self.side, self.rule, True), self._build,
                                 self._swap)
            elif not self.kernel.generic and not programs.baked_in_use(
                    self.context, self.kernel.source, self.generic.source, NAME):
                # given up by the full program cache: generic until hot again (twice as
                # many calls each time), then rebuilt off the calling thread
                self.kernel, self.uses_left = self.generic, self.hot_after
                self.hot_after *= 2
            return self.kernel

    def _build(self, kernel: OutputKernel) -> None:
        programs.kernel(self.context, kernel.source, NAME, background=True)

    def _swap(self, kernel: OutputKernel) -> None:
        with self.lock:
            self.kernel = kernel


# a plan holds its generic text and, once hot, a baked one: weighed as two texts
PLANS = LRU("OpenCL output plans", "CLAYOUT_OUTPUT_PLAN_CACHE", 256,
            weigh=lambda p: 2048 + 2 * len(p.generic.source), budget=16 << 20)


def output_plan(launcher, side, rule: OutputRule) -> OutputPlan:
    """The plan of reading ``side`` by ``rule`` on ``launcher``'s device (cached)."""
    device = launcher.device

    def make() -> OutputPlan:
        limit, after = device.options.specialize_bytes, device.options.specialize_after
        hot = limit >= 0 and after > 0 and side.memory.size >= HOT_BYTES
        return OutputPlan(side, rule, device.context, render(side, rule, False),
                          after + 1 if hot else None)
    return PLANS.get((device.key, side, rule), make)


def local_size(device) -> int:
    """The work-group size of an output kernel on ``device``: ``LOCAL``,
    or the device's largest group where that is smaller."""
    return max(1, min(LOCAL, device.max_work_group))


def source(side, rule: OutputRule) -> str:
    """The generic kernel's OpenCL C for reading ``side`` by ``rule`` (what
    ``clayout kernel`` and the tests read)."""
    return render(side, rule, False).source


def read(launcher, side, storage, rule: OutputRule, out=None, wait_for=()) -> Pending:
    """Enqueue the kernel on ``storage`` (the device memory of ``side``,
    after ``wait_for`` and clayout's own writes of it) and the
    read back of its result (into ``out`` where given); the Pending waits
    for them and finishes on the host, its ``event`` the read back's. The
    result's device buffers are leased from the engine's pool until then."""
    if rule.batch == 0 or rule.spatial == 0 or rule.channels == 0:
        return Pending.of(evaluate(rule, np.zeros(rule.dims, rule.src.np)) if out is None
                          else out)
    plan = output_plan(launcher, side, rule)
    kernel = plan.next_kernel()
    memory, queue = launcher.memory, launcher.device.queue
    generic = kernel.generic
    args = accessor(side, name="src", generic=generic).args(storage)
    numbers = _numbers(launcher, rule) + kernel.numbers
    group = local_size(launcher.device)
    size, local = (_round_up(rule.spatial, group), rule.batch), (group, 1)
    launch = (kernel.source, size, local)
    stack = contextlib.ExitStack()
    source_mem = (storage,)
    if rule.result == "threshold":
        return _threshold(launcher, stack, launch, args, rule, numbers, source_mem, wait_for)
    if rule.result == "argmax":
        host = out if out is not None else np.empty(rule.argmax_dims, np.int32)
        res = stack.enter_context(memory.lease_buffer(host.nbytes))
        done = _run(launcher, launch, args + (res,) + numbers, wait_for, source_mem, (res,))
    else:
        host = out if out is not None else np.empty(physical_shape(rule.dst), rule.dst.dtype.np)
        res = stack.enter_context(memory.lease_buffer(rule.dst.span_bytes))
        if not written_whole(rule.dst):   # padding or gaps the kernel leaves: zero
            _fill(queue, res, rule.dst.span_bytes)
        dst = accessor(rule.dst, name="dst", access="write", generic=generic).args(res)
        done = _run(launcher, launch, args + dst + numbers, wait_for, source_mem, (res,))
    back = events.done(cl.enqueue_copy(queue, host.reshape(-1).view(np.uint8), res,
                                       wait_for=[done], is_blocking=False), (res,))

    def finish():
        with stack:
            back.wait()
        return host
    return Pending(finish, lambda: _complete(back), event=back)


def written_whole(desc) -> bool:
    """Whether the kernel's stores (one per element inside the dims) cover
    all of ``desc``'s span: dense, no padding, no halo, no offset."""
    return desc.is_dense and desc.offset0 == 0 and desc.padded_dims == desc.dims \
        and not desc.has_halo


def _run(launcher, launch, args, wait_for, reads, writes) -> cl.Event:
    text, size, local = launch
    return launcher.run_kernel(text, NAME, size, args, wait_for, local_size=local,
                             reads=reads, writes=writes)


def _fill(queue, buf, nbytes: int, pattern=np.uint8(0)) -> cl.Event:
    """Zero a leased buffer, after its last lease's commands."""
    return events.done(cl.enqueue_fill_buffer(queue, buf, pattern, 0, nbytes,
                                              wait_for=events.after((), (buf,)) or None),
                       (), (buf,))


def _threshold(launcher, stack, launch, args, rule, numbers, source_mem, wait_for) -> Pending:
    """The selected elements: a counter and three buffers of ``cap`` entries
    (flat index, value, order key); with top_k and more selected than that,
    run again with room for all of them."""
    memory, queue = launcher.memory, launcher.device.queue

    def run(cap: int, inner: contextlib.ExitStack):
        count = inner.enter_context(memory.lease_buffer(4))
        bufs = [inner.enter_context(memory.lease_buffer(4 * cap)) for _ in range(3)]
        _fill(queue, count, 4, np.int32(0))
        done = _run(launcher, launch, args + (count, *bufs, rule.bound, np.int32(cap)) + numbers,
                    wait_for, source_mem, (count, *bufs))
        n = np.zeros(1, np.int32)
        return n, events.done(cl.enqueue_copy(queue, n, count, wait_for=[done],
                                              is_blocking=False), (count,)), bufs

    cap = min(CAP, math.prod(rule.dims))
    n, got, bufs = run(cap, stack)

    def finish():
        nonlocal n, got, bufs
        with stack:
            got.wait()
            if int(n[0]) > cap and rule.top_k is not None:
                n, got, bufs = run(int(n[0]), stack)
                got.wait()
            k = int(n[0])
            check_count(rule, k)
            host = [np.empty(k, np.int32), np.empty(k, np.float32), np.empty(k, np.float32)]
            if k:   # three reads, one wait
                cl.wait_for_events([cl.enqueue_copy(queue, arr, buf, is_blocking=False)
                                    for arr, buf in zip(host, bufs)])
        return finish_selected(rule, *host)
    return Pending(finish, lambda: _complete(got), event=got)


# the dequantize scales and zero points as device buffers, per launcher and numbers (a
# network's output reads the same every frame); a rule without them shares one pair
NUMBERS = LRU("OpenCL output numbers", "CLAYOUT_OUTPUT_NUMBERS_CACHE", 64)


def _numbers(launcher, rule: OutputRule) -> tuple:
    """The dequantize scales and zero points as two device buffers (made
    once per launcher and numbers; without dequantize one shared pair that
    the kernel does not read)."""
    key = (id(launcher.memory), rule.scale, rule.zero, rule.channels if rule.scale else 0)

    def make():
        c = rule.channels if rule.scale else 1
        return (launcher.memory, launcher.memory.buffer(
                    4 * c, mf.READ_ONLY, np.asarray(rule.scale or (1.0,) * c, np.float32)),
                launcher.memory.buffer(4 * c, mf.READ_ONLY,
                                     np.asarray(rule.zero or (0,) * c, np.int32)))
    return NUMBERS.get(key, make)[1:]


def _complete(event) -> bool:
    return event.command_execution_status == cl.command_execution_status.COMPLETE


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m
