"""``runtime.read_output``: a network's output to the result a user wants,
in one pass (docs/outputs.md; the rules: runtime/algebra/output.py).

The door takes the output as a Memory (any image storage or buffer, on the
engine it lives on) or a host array in the layout's host form, checks every
argument, and hands the engine the output's side, its memory and the rule:
the cpu and reference engines read it back by one conversion and evaluate
on the host, the OpenCL engine runs one kernel and reads back only the
result (runtime/opencl/output.py)."""
from __future__ import annotations

import contextlib

import numpy as np

from .. import engine as engines
from ..algebra import dtypes
from ..algebra.catalog import buffer_tag, image_layout
from ..algebra.checks import as_ints
from ..algebra.desc import MemoryDesc
from ..algebra.hostarray import host_input, physical_shape
from ..algebra.layout import ImageDesc
from ..algebra.output import OutputRule, Pending, output_rule
from .checks import check_padding_lanes, checked_image, host_out, runner_of, wait_list
from .prepared_call import SIGNATURES, signature
from ..errors import ClayoutError
from ..memory import Memory


def read_output(src, layout=None, dims=None, *, dequantize=None, activation=None,
                argmax=False, threshold=None, top_k=None, dst=None, dtype="f32",
                engine=None, out=None, wait=True, check_padding=True, wait_for=None):
    """A network output ``src`` (of logical ``dims`` (N, C, ...) in
    ``layout``: an image layout or a buffer tag) read back as the result a
    user wants, in one pass: ``dequantize`` = (scale, zero_point) (each a
    number or one per channel) for integer outputs, then ``activation``
    (None, "sigmoid", or "softmax" over axis 1), then one of

    * the tensor (default): a host array in buffer tag ``dst`` (default:
      plain row-major, nchw for 4-D; its physical shape) of ``dtype`` f32
      or f16;
    * ``argmax=True``: int32 indices over axis 1, of dims (N, ...) without
      axis 1 (ties and NaNs: the first, as numpy.argmax);
    * ``threshold=t``: ``(indices, values)`` of the elements whose value
      exceeds t, indices (K, rank) int32 in row-major order, values (K,)
      float32; with ``top_k=k`` the k largest by descending value.

    ``src``: a runtime.Memory (``layout`` and ``dims`` may be left out; the
    Memory's engine computes, an OpenCL one reading back only the result)
    or a host array in the layout's host form (an image array (height,
    width[, 4]), a buffer's physical array). ``out``: a host array of the
    result's shape and dtype (not for a threshold, whose length varies).
    ``wait=False`` returns a ``Pending`` (``.done()``, ``.result()``,
    ``.event``): the kernel and the read back are enqueued and the call
    returns; a host array ``src`` has been uploaded (or read) by then, so
    the caller may overwrite it at once. ``wait_for``: device events the
    kernel waits for (the command that wrote ``src``).
    A host array is checked as the other doors check theirs: a buffer 1-D
    or exactly its physical shape (a shape that only matches in size is
    refused), an image exactly its host shape with every padding lane 0
    (``check_padding=False`` reads an image another engine left garbage in).

    >>> x = np.array([[0.5, 2.0, -1.0], [3.0, 3.0, 0.0]], np.float32)
    >>> read_output(x, "nc", (2, 3), argmax=True, engine="cpu")
    array([1, 0], dtype=int32)
    """
    if wait is not True and wait is not False:
        raise ClayoutError(f"read_output: wait={wait!r}; allowed: True or False")
    key = signature("read_output", src, (layout, _frozen(dims), dequantize, activation, argmax,
                                         threshold, top_k, dst, dtype, engine, type(out),
                                         check_padding))
    prep = SIGNATURES.peek(key) if key is not None else None
    if prep is not None:
        return prep(src, out, wait, wait_for)
    side, data, eng = _source(src, layout, dims, engine, check_padding)
    rule = output_rule(side.dims, side.dtype, dequantize, activation, argmax, threshold,
                       top_k, dst, dtype, shape=side.dims if dims is None else dims)
    host = isinstance(data, np.ndarray)
    prep = PreparedOutput(side, rule, eng, np.shape(src) if host else None,
                          data.dtype if host else None, check_padding)
    if key is not None and host and data.size == src.size and \
            data.ctypes.data == src.ctypes.data:   # the caller's array as it is
        SIGNATURES.get(key, lambda: prep)   # the next call of this signature is prep's
    return prep.finish(data, out, wait, wait_list(wait_for, "read_output"))


class PreparedOutput:
    """``read_output`` planned once: the output's ``side``, the ``rule``,
    the ``engine``; ``shape`` and ``dtype`` of the host array it takes (None
    where prepared for a Memory); the padding lanes of a host image checked
    each call where ``check_padding``. ``__call__(src, out=None, wait=True,
    wait_for=None)``: the result (or its Pending) of a host array in that
    form, or of a Memory of that side on the engine's device."""

    __slots__ = ("side", "rule", "engine", "shape", "dtype", "padding", "out_shape",
                 "out_dtype", "read")

    def __init__(self, side, rule: OutputRule, engine, shape=None, dtype=None,
                 check_padding: bool = True):
        self.side, self.rule, self.engine = side, rule, engine
        self.shape = None if shape is None else tuple(shape)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.padding = side if shape is not None and side.is_image and check_padding and \
            side.memory.has_padding else None
        self.out_shape = self.out_dtype = None
        self.read = engine.output_executor(side, rule)   # the engine's work, planned once
        if rule.result == "argmax":
            self.out_shape, self.out_dtype = rule.argmax_dims, np.dtype(np.int32)
        elif rule.result == "tensor":
            self.out_shape, self.out_dtype = physical_shape(rule.dst), rule.dst.dtype.np

    def __call__(self, src, out=None, wait: bool = True, wait_for=None):
        if wait is not True and wait is not False:
            raise ClayoutError(f"read_output: wait={wait!r}; allowed: True or False")
        if isinstance(src, Memory):
            if src.side != self.side or src.engine.domain != self.engine.domain:
                raise ClayoutError(f"read_output: this prepared call reads "
                                   f"{self.side.describe()} on {self.engine!r}; got {src!r}")
            data = src.storage if self.engine.domain != "host" else src.to_numpy()
        elif type(src) is np.ndarray and src.shape == self.shape and src.dtype == self.dtype \
                and src.flags.c_contiguous and src.flags.aligned:
            data = src
            if self.padding is not None:
                check_padding_lanes(src, self.padding, "read_output")
        else:
            if self.shape is None:
                raise ClayoutError(f"read_output: this prepared call reads a Memory of "
                                   f"{self.side.describe()}; got {type(src).__name__}")
            data = self._array(src)
        return self.finish(data, out, wait, wait_list(wait_for, "read_output")
                           if wait_for is not None else ())

    def _array(self, src) -> np.ndarray:
        arr = np.asarray(src)
        held = dtypes.native(arr) if arr.dtype.kind in "fiub" else arr
        if arr.shape != self.shape or held.dtype != self.dtype:
            raise ClayoutError(f"read_output: this prepared call takes an array of shape "
                               f"{self.shape} and dtype {self.dtype}; got shape {arr.shape}, "
                               f"dtype {arr.dtype} (prepare another call for it)")
        held = np.require(held, requirements=("C", "A"))
        if self.padding is not None:
            check_padding_lanes(held, self.padding, "read_output")
        return held

    def finish(self, data, out, wait: bool, wait_for):
        """The result of ``data`` (a host array as checked, or device storage)."""
        if out is not None:
            flags = out.flags if type(out) is np.ndarray else None
            if self.out_shape is None or flags is None or out.shape != self.out_shape or \
                    out.dtype != self.out_dtype or not flags.c_contiguous or \
                    not flags.writeable or (isinstance(data, np.ndarray) and
                                            np.may_share_memory(out, data)):
                _check_out(out, self.rule, data if isinstance(data, np.ndarray)
                           else np.empty(0))
        eng, side = self.engine, self.side
        if isinstance(data, np.ndarray) and eng.domain != "host" and not side.is_zero:
            # a host array on a device: uploaded into pooled device memory, its lease held
            # until the result is finished (a top_k over the cap reads it again)
            held = contextlib.ExitStack()
            with held:
                pending = self.read(held.enter_context(eng.host_input(side, data)), out,
                                    wait_for)
                if wait:
                    return pending.result()
                held = held.pop_all()
            return pending.then(held.close)
        else:
            pending = self.read(data, out, wait_for)
        return pending.result() if wait else pending

    def __repr__(self) -> str:
        held = f"arrays {self.shape} {self.dtype}" if self.shape is not None else "a Memory"
        return (f"<clayout prepared read_output: {self.side.describe()} ({held}) -> "
                f"{self.rule.result} on {self.engine.name}>")


def prepare_read_output(layout, dims, src_dtype="f32", *, dequantize=None, activation=None,
                        argmax=False, threshold=None, top_k=None, dst=None, dtype="f32",
                        engine=None, check_padding=True, memory=False) -> PreparedOutput:
    """``runtime.prepare.read_output``: ``read_output`` of outputs of logical
    ``dims`` in ``layout`` holding ``src_dtype``: host arrays in the layout's
    host form (an image array, a buffer's physical shape), or with
    ``memory=True`` Memory objects of that side on ``engine``'s device."""
    dt = dtypes.dtype(src_dtype)
    side = _side(layout, as_ints(dims, "dims"), dt)
    _no_transform(side)
    shape = None if memory else side.array_shape if side.is_image else physical_shape(side)
    rule = output_rule(side.dims, side.dtype, dequantize, activation, argmax, threshold,
                       top_k, dst, dtype, shape=dims)
    return PreparedOutput(side, rule, engines.get(engine), shape,
                          None if memory else side.dtype.np, check_padding)


def _frozen(dims):
    return tuple(dims) if isinstance(dims, list) else dims


def _source(src, layout, dims, engine, check_padding):
    """(side, what the engine reads: a host array or a device storage, engine)."""
    if isinstance(src, Memory):
        side = src.side
        runner = runner_of(src, engine)
        if layout is not None and _side(layout, side.dims, side.dtype) != side:
            raise ClayoutError(f"read_output: layout {layout!r} is not the Memory's "
                               f"({side.describe()}); leave layout out")
        _no_transform(side)
        data = src.storage if runner.domain != "host" else src.to_numpy()
        return side, data, runner
    if layout is None or dims is None:
        raise ClayoutError("read_output of a host array needs layout= (an image layout or a "
                           "buffer tag) and dims= (its logical dims, (N, C, ...))")
    arr = dtypes.host_array(src, None, "read_output input")   # as every door: its dtype
    side = _side(layout, as_ints(dims, "dims"), dtypes.of_array(arr))
    _no_transform(side)
    eng = engines.get(engine)
    if side.is_image:   # as from_image reads a host image: its shape and its padding lanes
        arr = checked_image(np.require(dtypes.native(arr), requirements=("C", "A")), side,
                            "read_output", check_padding)
    else:               # as reorder reads a host buffer: 1-D, or exactly its physical shape
        arr, side = host_input(arr, side, "read_output input", eng.reads_views)
    return side, arr, eng


def _side(layout, dims, dt):
    """The output's side: an ImageDesc of an image layout, else a MemoryDesc of a tag."""
    if isinstance(layout, MemoryDesc):
        return layout
    if isinstance(layout, ImageDesc):
        layout = layout.layout
    if buffer_tag(layout) is not None:
        return MemoryDesc(dims, dt, tag=layout)
    return ImageDesc(image_layout(layout), dims, dtypes.image_dtype(dt))


def _no_transform(side) -> None:
    if side.is_image and side.transform is not None:
        raise ClayoutError(f"read_output: {side.describe()} holds a weight's transform "
                           "(Winograd), not a network output")


def _check_out(out, rule: OutputRule, source) -> None:
    """``out`` as every door checks it (runtime/doors/checks.py host_out); a
    threshold's result has no fixed shape to write into."""
    if out is None:
        return
    if rule.result == "threshold":
        raise ClayoutError("read_output: out= with threshold; a threshold's result has as many "
                           "rows as values pass, so it is returned (leave out= out)")
    if rule.result == "argmax":
        host_out(out, rule.argmax_dims, dtypes.dtype("s32"), source, "read_output")
    else:
        host_out(out, physical_shape(rule.dst), rule.dst.dtype, source, "read_output")


__all__ = ["read_output", "Pending", "PreparedOutput", "prepare_read_output"]
