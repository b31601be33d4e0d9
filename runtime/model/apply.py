"""Offline conversion of an ONNX model's weights into image layouts (``clayout model``).

Read, plan, apply: a front end (runtime.model.front_ends) finds every constant
tensor (initializers, ``Constant`` nodes, folded chains, ``DequantizeLinear`` of
constants, subgraphs, external data); :func:`plan` gives each one a role from the
op that reads it (runtime.model.weights) and settles quantized weights
(runtime.model.integer_weights); :func:`runtime.model.plan.plan_model` decides,
from those and the options, one frozen ``Placement`` per tensor (layout, dims,
dtype, image size, bytes, or why it is a buffer or skipped) and the manifest;
:func:`convert_plan` only carries the plan out, placing each weight on its
image with :func:`runtime.to_image` and checking it against the plan;
runtime.model.stream.write_plan writes one safetensors file (one tensor per image, named
after the ONNX tensor) with the JSON manifest of :mod:`runtime.model.manifest`
in its metadata under ``clayout``. ``clayout model --dry-run`` stops after the plan.

Roles (logical dims are clayout's canonical ones; "steps" turn the ONNX tensor into
the logical one and are stored, so every image reads back to the ONNX weight):

=======================  ==================  ==============================================
consumer (input)         role / layout       logical dims from the ONNX tensor
=======================  ==================  ==============================================
Conv W, group 1          conv2d_filter       (O, I, kH, kW) as stored
Conv W, grouped          conv2d_filter       (O, I/group, kH, kW) as stored
Conv W, depthwise        dw_conv2d_filter    ONNX (C*M, 1, kH, kW) -> (M, C, kH, kW),
  (group = C, dim 1 = 1)                     [m, c] = onnx[c*M + m]
Conv W, 1-D (rank 3)     as above            ONNX (O, I, K) as (O, I, 1, K) first
ConvTranspose W, group 1 conv2d_filter       ONNX (I, O, kH, kW) -> (O, I, kH, kW)
ConvTranspose W, grouped conv2d_filter       ONNX (I, O/g, kH, kW) -> (O, I/g, kH, kW),
                                             [gi*O/g + o, i] = onnx[gi*I/g + i, o]
ConvTranspose W,         dw_conv2d_filter    ONNX (C, M, kH, kW) -> (M, C, kH, kW),
  depthwise (I = group)                      [m, c] = onnx[c, m]
Gemm B                   weight_width        (O, I, 1, 1): B if transB=1, else B.T
MatMul B, 2-D (K, N)     weight_width        (N, K, 1, 1) = B.T
MatMul B, 3-D (G, K, N)  weight_width        (G*N, K, 1, 1), [g*N + n, k] = B[g, k, n]
ConvInteger, QLinearConv as Conv W (s8/u8)   as Conv W; scale and zero point as NAME.scale,
W; MatMulInteger,        or MatMul B         NAME.zero_point (argument images)
QLinearMatMul B
biases of Conv,          argument            (W,): a tensor with one non-unit dim,
ConvTranspose, Gemm;                         flattened ((1, W), (W, 1, 1), (1, W, 1, 1));
QLinearConv (s32);                           QLinearConv's int32 bias on an s32 image
BatchNormalization scale,
B, mean, var; PRelu slope;
Instance/LayerNormalization
scale, B; per-channel
Add/Sub/Mul/Div constants
=======================  ==================  ==============================================

A TensorFlow Lite model's operators have their own table
(runtime.model.tflite.roles): the same roles, from channels-last tensors.
A weight reaches a role through the first op reading it that gives one. Other
tensors are listed in the manifest's ``skipped`` list with the op that reads
them and the reason (integer tensors, scalars, other ops, steps of a folded
chain). Each weight's layout is what :func:`runtime.placement.layout_choice`
chooses for its role (conv2d_filter: filter, weight_width: fc_weight,
dw_conv2d_filter: depthwise, argument) under ``max_image``, and its entry
records why (``choice``); a layout other than the role's own is noted as
``fallback_from``. When no candidate fits, its role's own
layout is split into tiles of at most ``max_image`` (the rule of
:mod:`runtime.algebra.tiles`), each stored as the tensor ``NAME.tile-R-C`` and listed
with its pixel range in the entry's ``tiles``. A weight of a compute op
(runtime.model.weights.COMPUTE_OPS: Conv, ConvTranspose, Gemm, MatMul, Einsum,
LSTM, GRU, RNN, Attention, the integer operators) that ends on no image (no
role, or with ``tiles=False`` over the limit) makes the conversion fail with
the list of them only with ``keep_buffers=False`` (``--images-only``); by default it
is stored as a plain buffer (layout ``buffer``, with its tag and dims), as is
every other float constant the model reads that no image takes.

With ``winograd`` (``--winograd ENGINE``: an engine of runtime.winograd.ENGINES,
or one Winograd layout's name) a float Conv filter of a square kernel size
that engine takes, read only by Conv nodes with strides 1, dilations 1 and
group 1, goes in the engine's Winograd layout (the image holds U = G·g·Gᵀ)
instead; its entry adds ``transform`` (the G's name) and ``choice`` says
``--winograd``. A Winograd image over ``max_image`` gives way to the usual
choice, and its ``choice`` says so. Kept integer weights are never Winograd.
``verify`` reads a Winograd image back with ``from_image`` and checks it
against the weight within ``transform.inverse_bound`` (not bit for bit).

An image over the engine's device limit (``engine.limits``; ``max_image``
describes the target device, which may allow more) is converted on the host by
the cpu engine, with the same bits, and listed in the manifest's
``host_converted``.

Example::

    >>> manifest, verified = convert_file("model.onnx", "w.safetensors", verify_all=True)
    ...                                                             # doctest: +SKIP
    >>> manifest["tensors"][0]["layout"], verified                  # doctest: +SKIP
    ('conv2d_filter', 11)
"""
from __future__ import annotations

import numpy as np

from . import front_ends, manifest as mf
from .. import engine as engines
from ..algebra import dtypes
from ..algebra.catalog import image_layout
from ..api import from_image, to_image
from ..errors import ClayoutError
from .integer_weights import attach_parameters
from .front_ends import load  # noqa: F401  (load is part of this module's API)
from .graph import printable
from .plan import (MAX_IMAGE, QUANTIZED_FORMS, ModelPlan, Options,  # noqa: F401
                   check_dtype, plan_model)
from .tensor import logical_weight, source_weight
from .tensor_data import values
from .weights import Weight, roles, stored_values
from .winograd_weights import winograd_layouts, winograd_ok  # noqa: F401


def plan(constants, quantized: str = "fold") -> list[Weight]:
    """Every constant (from a front end's read_constants) with its
    role, each quantized weight followed by its parameters (``quantized``:
    "fold" stores a DequantizeLinear weight's float value, "keep" its integers)."""
    return attach_parameters(roles(constants), constants, quantized)[0]


def plan_file(path: str, options: Options = Options()) -> tuple[ModelPlan, dict]:
    """(plan, sources) of the model at ``path``: :func:`plan_model` of what
    :func:`runtime.model.front_ends.load` reads; nothing is converted or written."""
    return plan_model(front_ends.load(path), path, options)


# -- conversion --------------------------------------------------------------------------------
def convert_plan(plan: ModelPlan, sources: dict, progress=None) -> tuple[dict, dict]:
    """Carry out ``plan``: (stored, originals). ``stored`` maps tensor names
    to host arrays (images, tiles under ``NAME.tile-R-C``, buffers) in the
    file's order; ``originals`` the arrays each stored tensor holds (its
    ``sources`` entry). Each array is checked against its Placement, so the
    plan (and ``--dry-run``) says what is written. ``progress(done, total,
    nbytes)`` is called after each tensor."""
    stored, originals, done_bytes = {}, {}, 0
    tensors = plan.stored
    for count, p in enumerate(tensors, 1):
        source = values(sources[p.name])
        arrays = convert_tensor(plan, p, source)
        stored.update(zip(mf.keys_of(p), arrays))
        originals[p.name] = source
        done_bytes += p.bytes
        if progress:
            progress(count, len(tensors), done_bytes)
    return stored, originals


def convert_tensor(plan: ModelPlan, p, source) -> tuple[np.ndarray, ...]:
    """The arrays of one stored tensor ``p`` (a Placement of ``plan``) made
    from ``source`` (its array): the image, its tiles in row-major order, or
    the buffer; each checked against the plan."""
    if p.kind == "buffer":
        arrays = (np.ascontiguousarray(stored_values(logical_weight(source, p.steps), p.dtype)),)
    else:
        # float64 is not a clayout dtype: to f32 first, as stored_values does
        source = source.astype(np.float32) if source.dtype == np.float64 else source
        logical = np.ascontiguousarray(logical_weight(source, p.steps))
        del source   # a copy (a transposing step) does not keep the source alive
        engine = engines.get("cpu" if p.on_host else plan.options.engine)
        try:
            image = to_image(logical, image_layout(p.layout), dtype=p.dtype, engine=engine,
                             max_image=plan.options.max_image if p.tiles else None)
        except ClayoutError as exc:
            raise ClayoutError(f"tensor {printable(p.name)!r}: {exc}") from None
        arrays = tuple(image) if p.tiles else (image,)
    _check_against_plan(p, arrays)
    return arrays


def _check_against_plan(p, arrays) -> None:
    """The arrays of a tensor are what its Placement says (dtype, shape of
    each, bytes): the plan computed them from the layout, and ``--dry-run``
    prints them, so a difference is a bug, never the user's input."""
    kinds = {dtypes.of_array(a).name for a in arrays}
    nbytes = sum(a.nbytes for a in arrays)
    shapes = [tuple(a.shape) for a in arrays]
    if kinds != {p.dtype} or nbytes != p.bytes or shapes != list(mf.array_shapes(p)):
        raise AssertionError(f"tensor {printable(p.name)!r}: converted to {len(arrays)} "
                             f"array(s) {shapes} of {nbytes} bytes of "
                             f"{', '.join(sorted(kinds))}; its plan says "
                             f"{list(mf.array_shapes(p))} of {p.bytes} bytes of {p.dtype}")


def convert_model(model, path: str, dtype=None, max_image=MAX_IMAGE, engine=None,
                  keep_buffers=True, progress=None, tiles=True, quantized="fold",
                  winograd=None):
    """Place every weight of ``model`` (read from ``path``) on its image:
    :func:`runtime.model.plan.plan_model`, then :func:`convert_plan`.

    Returns (stored, manifest, originals): ``stored`` maps tensor names to
    host arrays (images, tiles under ``NAME.tile-R-C``, and buffers unless
    ``keep_buffers=False``), ``manifest`` is the JSON-ready description,
    ``originals`` the arrays each stored tensor holds (the ONNX weight, a
    folded DequantizeLinear's float value, or a kept integer tensor). The
    options are those of :class:`runtime.model.plan.Options`: ``dtype``
    None is the weights' own float type (runtime.model.weights.float_dtype);
    ``tiles=False`` treats a weight no layout fits like one with no role
    instead of splitting it; ``quantized``: "fold" or "keep"
    (runtime.model.integer_weights); ``winograd``: an engine of
    runtime.winograd.ENGINES (or one Winograd layout's name) whose Winograd
    layout takes each float Conv filter it can (square kernel of a size the
    engine takes, strides 1, dilations 1, group 1) in place of the role's
    layout; such an entry has ``transform``. ``progress(done, total,
    nbytes)`` is called after each weight."""
    options = Options(dtype, max_image, engines.get(engine), keep_buffers, tiles, quantized,
                      winograd)
    the_plan, sources = plan_model(model, path, options)
    stored, originals = convert_plan(the_plan, sources, progress)
    return stored, the_plan.manifest(), originals


def read_back(array, entry: dict, engine=None) -> np.ndarray:
    """The ONNX tensor read back from a stored image or buffer (in its dtype);
    for a tiled entry ``array`` is the tuple of its tiles
    (``manifest.stored_image(tensors, entry)`` gives either)."""
    if entry["layout"] == "buffer":
        logical = array.reshape(entry["dims"])
    else:
        logical = np.asarray(from_image(array, entry["layout"], entry["dims"], engine=engine))
    return source_weight(logical, mf.steps_of(entry), entry["source_shape"])


def verify(stored: dict, manifest: dict, originals: dict, engine=None) -> list[str]:
    """Names of the stored tensors that do not read back to what they hold bit
    for bit (the ONNX weight rounded to the entry's dtype, a folded
    DequantizeLinear's value, or the kept integers), or for a Winograd image
    (an entry with ``transform``) within the transform's ``inverse_bound``;
    [] when all do. Tensors converted on the host (``host_converted``) are
    read back there too."""
    bad, on_host = [], set(manifest.get("host_converted", ()))
    for entry in manifest["tensors"]:
        here = "cpu" if entry["name"] in on_host else engine
        if "transform" in entry:
            if not winograd_ok(mf.stored_image(stored, entry), entry, originals[entry["name"]],
                                engine=here):
                bad.append(entry["name"])
            continue
        back = read_back(mf.stored_image(stored, entry), entry, engine=here)
        want = stored_values(originals[entry["name"]], entry["dtype"])
        if back.shape != want.shape or not np.array_equal(mf.bits(back), mf.bits(want)):
            bad.append(entry["name"])
    return bad


def weight_arrays(path: str) -> dict[str, np.ndarray]:
    """Every readable constant of the model at ``path`` by (qualified) name:
    the ONNX weights a stored file is checked against."""
    model = front_ends.load(path)
    return {c.name: values(c.array) for c in front_ends.read_constants(model, path)
            if c.array is not None}
