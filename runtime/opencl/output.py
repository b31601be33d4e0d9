"""``read_output`` on an OpenCL device: one kernel (templates/output.cl.mako)
reads the output's layout through its accessor (runtime/opencl/accessor.py:
every storage, the index math of every conversion) and writes only the
result: the tensor in its buffer tag, the argmax indices, or a threshold's
selected elements, compacted by an atomic counter into buffers of ``CAP``
(the host sorts those few; with top_k and more selected than the buffers
hold, the kernel runs again with buffers for all of them).

The program is baked for the output's side and the rule's shape (one build
per network output); the dequantize numbers, the threshold and the cap are
arguments. Its float32 operations are those of runtime/algebra/output_math.py
(exp is the device's: within its ulp bound, not numpy's bits)."""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np
import pyopencl as cl

from .. import sources
from ..algebra.hostarray import physical_shape
from ..algebra.output import CAP, OutputRule, Pending, check_count, finish_selected
from ..algebra.output_math import evaluate
from ..cache import memoized
from ..algebra.c_index import Numbers
from . import events
from .accessor import accessor
from .launch import decode
from .trace import Accesses

NAME = "clayout_read_output"
mf = cl.mem_flags


@memoized("output kernels", "CLAYOUT_OUTPUT_KERNEL_CACHE", 64)
def source(side, rule: OutputRule) -> str:
    """The kernel's OpenCL C for reading ``side`` (the output's ImageDesc or
    MemoryDesc) by ``rule``."""
    return render(side, rule, Accesses())


def render(side, rule: OutputRule, acc: Accesses) -> str:
    """``source``, its accesses written by ``acc`` (runtime/opencl/trace.py:
    traced, the kernel takes the log last)."""
    src = accessor(side, name="src", trace=acc)
    dst = accessor(rule.dst, name="dst", access="write", trace=acc) \
        if rule.result == "tensor" else None
    t = {"f32": "float", "f16": "float", "bf16": "float", "s32": "int", "s8": "int",
         "u8": "uint"}[rule.src.name]
    at = f"(n * {rule.channels} + c) * {rule.spatial} + s"
    return sources.template("output.cl.mako").render(
        src=src, dst=dst, t=t, name=NAME, C=rule.channels, S=rule.spatial, log=acc.param,
        log_arg=acc.arg, scale=acc.load("scale", "c", "f32"), zero=acc.load("zero", "c", "s32"),
        arg=acc.store("arg", f"n * {rule.spatial} + s", "s32", "at"),
        selected=" ".join((acc.store("flat", "at", "s32", at), acc.store("val", "at", "f32", "p"),
                           acc.store("key", "at", "f32", "k"))),
        decode=_decode("i", rule.dims) + (_decode("j", rule.shape) if dst is not None else []),
        dst_args="".join(f", j{k}" for k in range(2, len(rule.shape))),
        rest_args="".join(f", i{k}" for k in range(2, len(rule.dims))),
        dequantize=rule.scale is not None, activation=rule.activation, result=rule.result,
        keys_are_p=rule.keys_are_p)


def read(engine, side, storage, rule: OutputRule, out=None, wait_for=()) -> Pending:
    """Enqueue the kernel on ``storage`` (the device memory of ``side``,
    after ``wait_for`` and clayout's own writes of it) and the
    read back of its result (into ``out`` where given); the Pending waits
    for them and finishes on the host, its ``event`` the read back's. The
    result's device buffers are leased from the engine's pool until then."""
    if rule.batch == 0 or rule.spatial == 0 or rule.channels == 0:
        return Pending.of(evaluate(rule, np.zeros(rule.dims, rule.src.np)) if out is None
                          else out)
    text = source(side, rule)
    memory, queue = engine.memory, engine.device.queue
    args = accessor(side, name="src").args(storage)
    numbers = _numbers(engine, rule)
    size = (_round_up(rule.spatial, 64), rule.batch)
    stack = contextlib.ExitStack()
    source_mem = (storage,)
    if rule.result == "threshold":
        return _threshold(engine, stack, text, args, rule, numbers, size, source_mem, wait_for)
    if rule.result == "argmax":
        host = out if out is not None else np.empty(rule.argmax_dims, np.int32)
        res = stack.enter_context(memory.lease_buffer(host.nbytes))
        done = engine.run_kernel(text, NAME, size, args + (res,) + numbers, wait_for,
                                 reads=source_mem, writes=(res,))
    else:
        host = out if out is not None else np.empty(physical_shape(rule.dst), rule.dst.dtype.np)
        res = stack.enter_context(memory.lease_buffer(rule.dst.span_bytes))
        _fill(queue, res, rule.dst.span_bytes)
        dst = accessor(rule.dst, name="dst", access="write").args(res)
        done = engine.run_kernel(text, NAME, size, args + dst + numbers, wait_for,
                                 reads=source_mem, writes=(res,))
    back = events.done(cl.enqueue_copy(queue, host.reshape(-1).view(np.uint8), res,
                                       wait_for=[done], is_blocking=False), (res,))

    def finish():
        with stack:
            back.wait()
        return host
    return Pending(finish, lambda: _complete(back), event=back)


def _fill(queue, buf, nbytes: int, pattern=np.uint8(0)) -> cl.Event:
    """Zero a leased buffer, after its last lease's commands."""
    return events.done(cl.enqueue_fill_buffer(queue, buf, pattern, 0, nbytes,
                                              wait_for=events.after((), (buf,)) or None),
                       (), (buf,))


def _threshold(engine, stack, text, args, rule, numbers, size, source_mem, wait_for) -> Pending:
    """The selected elements: a counter and three buffers of ``cap`` entries
    (flat index, value, order key); with top_k and more selected than that,
    run again with room for all of them."""
    memory, queue = engine.memory, engine.device.queue

    def run(cap: int, inner: contextlib.ExitStack):
        count = inner.enter_context(memory.lease_buffer(4))
        bufs = [inner.enter_context(memory.lease_buffer(4 * cap)) for _ in range(3)]
        _fill(queue, count, 4, np.int32(0))
        done = engine.run_kernel(text, NAME, size, args + (count, *bufs, rule.bound,
                                                           np.int32(cap)) + numbers, wait_for,
                                 reads=source_mem, writes=(count, *bufs))
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


_NUMBERS: dict = {}
_NUMBERS_LOCK = threading.Lock()


def _numbers(engine, rule: OutputRule) -> tuple:
    """The dequantize scales and zero points as two device buffers, made once
    per engine and numbers (a network's output reads the same every frame)."""
    key = (id(engine.memory), rule.scale, rule.zero, rule.channels)
    with _NUMBERS_LOCK:
        if key not in _NUMBERS:
            if len(_NUMBERS) > 64:
                _NUMBERS.clear()
            c = rule.channels
            _NUMBERS[key] = (
                engine.memory.buffer(4 * c, mf.READ_ONLY,
                                     np.asarray(rule.scale or (1.0,) * c, np.float32)),
                engine.memory.buffer(4 * c, mf.READ_ONLY,
                                     np.asarray(rule.zero or (0,) * c, np.int32)))
        return _NUMBERS[key]


def _decode(name: str, dims) -> list[str]:
    """C lines giving ``name``2.. (the indices past axis 1 of ``dims``) from the
    flat ``s``, by the launch's digit decoding (runtime/opencl/launch.py)."""
    axes = range(2, len(dims))
    return [f"const int {name}{a} = {d};"
            for a, d in decode("s", axes, dims[2:], Numbers(bake=True))]


def _complete(event) -> bool:
    return event.command_execution_status == cl.command_execution_status.COMPLETE


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m
