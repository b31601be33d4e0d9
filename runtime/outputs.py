"""``runtime.read_output``: a network's output to the result a user wants,
in one pass (docs/outputs.md; the rules: runtime/algebra/output.py).

The door takes the output as a Memory (any image storage or buffer, on the
engine it lives on) or a host array in the layout's host form, checks every
argument, and hands the engine the output's side, its memory and the rule:
the cpu and reference engines read it back by one conversion and evaluate
on the host, the OpenCL engine runs one kernel and reads back only the
result (runtime/opencl/output.py)."""
from __future__ import annotations

import numpy as np

from . import engine as engines
from .algebra import dtypes
from .algebra.catalog import buffer_tag, image_layout
from .algebra.checks import as_ints
from .algebra.desc import MemoryDesc
from .algebra.hostarray import host_input, physical_shape
from .algebra.layout import ImageDesc
from .algebra.output import OutputRule, Pending, output_rule
from .door_checks import checked_image, runner_of, wait_list
from .errors import ClayoutError
from .hostside import host_out
from .memory import Memory


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
    side, data, eng = _source(src, layout, dims, engine, check_padding)
    rule = output_rule(side.dims, side.dtype, dequantize, activation, argmax, threshold,
                       top_k, dst, dtype, shape=side.dims if dims is None else dims)
    _check_out(out, rule, data if isinstance(data, np.ndarray) else np.empty(0))
    if not isinstance(wait, bool):
        raise ClayoutError(f"read_output: wait={wait!r}; allowed: True or False")
    wait_for = wait_list(wait_for, "read_output")
    if isinstance(data, np.ndarray) and eng.domain != "host" and not side.is_zero:
        # a host array on a device: uploaded into pooled device memory, consumed here
        with eng.host_input(side, data) as storage:
            pending = eng.read_output(side, storage, rule, out, wait_for)
            if wait:   # finished while the device copy is its own (a top_k over the cap reads
                pending.result()   # it again)
    else:
        pending = eng.read_output(side, data, rule, out, wait_for)
    return pending.result() if wait else pending


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
    """``out`` as every door checks it (runtime/hostside.py host_out); a
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


__all__ = ["read_output", "Pending"]
