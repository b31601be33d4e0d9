"""Offline conversion of an ONNX model's weights into image layouts (``clayout model``).

Read, plan, apply: :func:`runtime.model.onnx_graph.read_constants` finds every constant
tensor (initializers, ``Constant`` nodes, folded chains, ``DequantizeLinear`` of
constants, subgraphs, external data); :func:`plan` gives each one a role from the
op that reads it (runtime.model.roles) and settles quantized weights
(runtime.model.integer_weights); :func:`convert_model` places each weight on its image
with :func:`runtime.to_image`; :func:`convert_file` writes one safetensors file
(one tensor per image, named after the ONNX tensor) with the JSON manifest of
:mod:`runtime.model.manifest` in its metadata under ``clayout``.

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
(runtime.model.roles.COMPUTE_OPS: Conv, ConvTranspose, Gemm, MatMul, Einsum,
LSTM, GRU, RNN, Attention, the integer operators) that ends on no image (no
role, or with ``tiles=False`` over the limit) makes the conversion fail with
the list of them, unless ``keep_buffers``: then it is stored as a plain buffer
(role ``buffer``, with its tag and dims).

With ``winograd`` (``--winograd ENGINE``: an engine of runtime.winograd.ENGINES,
or one Winograd layout's name) a float Conv filter of a square kernel size
that engine takes, read only by Conv nodes with strides 1, dilations 1 and
group 1, goes in the engine's Winograd layout (the image holds U = G·g·Gᵀ)
instead; its entry adds ``transform`` (the G's name) and ``choice`` says
``--winograd``. A Winograd image over ``max_image`` gives way to the usual
choice, and its ``choice`` says so. Kept integer weights are never Winograd.
``verify`` reads a Winograd image back with ``from_image`` and checks it
against the weight within ``transform.inverse_bound`` (not bit for bit).

An image over the engine's device limit (``engine.image_limits``; ``max_image``
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

import os

import numpy as np

from . import manifest as mf, onnx_graph
from .. import engine as engines
from .. import placement
from ..algebra import catalog, dtypes
from ..algebra.catalog import image_layout
from ..algebra.layout import ImageLayout
from ..algebra.tiles import tile_plan
from ..api import from_image, to_image
from ..errors import ClayoutError
from ..fileio import atomic_write, check_output
from .integer_weights import attach_parameters
from .roles import (FLOAT_DTYPES, Weight, float_dtype, logical_weight, onnx_weight, roles,
                          stored_values)
from .onnx_graph import load, printable  # noqa: F401  (load is part of this module's API)
from .winograd_weights import fits, winograd_layout, winograd_layouts, winograd_ok

MAX_IMAGE = (8192, 8192)   # the OpenCL 1.2 minimum of IMAGE2D_MAX_WIDTH/HEIGHT: fits every device
QUANTIZED_FORMS = ("fold", "keep")


def plan(constants, quantized: str = "fold") -> list[Weight]:
    """Every constant (from :func:`runtime.model.onnx_graph.read_constants`) with its
    role, each quantized weight followed by its parameters (``quantized``:
    "fold" stores a DequantizeLinear weight's float value, "keep" its integers)."""
    return attach_parameters(roles(constants), constants, quantized)


# -- conversion --------------------------------------------------------------------------------


def _choose_layout(w: Weight, max_image) -> tuple[ImageLayout | None, str, str]:
    """(layout, the role it fell back from or "", why): what
    ``placement.layout_choice`` chooses for the weight under ``max_image``;
    layout None when no candidate fits."""
    choice = placement.layout_choice(w.role, w.dims, limits=max_image)
    own = catalog.own_layout(w.role)
    if not choice.fits:
        width, height = choice.chosen.size
        return None, "", (f"{own} needs a {width}x{height} image, over --max-image "
                          f"{max_image[0]},{max_image[1]}, and no {choice.role} layout fits ("
                          + ", ".join(c.describe() for c in choice.rejected) + ")")
    return choice.layout, "" if choice.layout.name == own else own, choice.reason


def check_dtype(dtype) -> str | None:
    """``--dtype`` of ``clayout model``: f32, f16, or None (the weights' own float type)."""
    if dtype is None or dtype in ("f32", "f16"):
        return dtype
    raise ClayoutError(f"--dtype {dtype!r}: model images are f32 or f16 (default: the weights' "
                       "own float type)")


def _unplaced_error(unplaced) -> ClayoutError:
    shown = "; ".join(f"{printable(w.name)!r} {w.onnx_shape} ({printable(w.consumer)}): {why}"
                      for w, why in unplaced[:4])
    more = (f"; and {len(unplaced) - 4} more: "
            + ", ".join(repr(printable(w.name)) for w, _ in unplaced[4:])
            if len(unplaced) > 4 else "")
    hint = ("raise --max-image, drop --no-tiles to split them into tiles, or pass "
            "--keep-buffers" if any(w.role is not None for w, _ in unplaced) else
            "pass --keep-buffers")
    return ClayoutError(f"{len(unplaced)} weight(s) cannot go on an image: {shown}{more}; "
                        f"{hint} to store them as plain buffers")


def _check_keys(path: str, weights, plans, constants) -> None:
    """Every tensor key of the file is unique: weights, parameters, tiles."""
    every_name = {c.name for c in constants}
    for w in weights:
        if w.name == "__metadata__":   # safetensors' header key: the file would not load
            raise ClayoutError(f"{path}: a weight is named '__metadata__', the key safetensors "
                               "reserves for its metadata; rename it in the model")
        if w.param_of and w.name in every_name:
            raise ClayoutError(f"{path}: {printable(w.name)!r}, where clayout stores a parameter "
                               f"of the quantized weight {printable(w.param_of)!r}, is also the "
                               "name of a tensor of the model; rename that tensor in the model")
    every_name |= {w.name for w in weights}
    for name, split in plans.items():   # tile keys share the file with the weights' names
        for tile in split.tiles:
            if mf.tile_key(name, tile) in every_name:
                raise ClayoutError(
                    f"{path}: tile {printable(mf.tile_key(name, tile))!r} of the weight "
                    f"{printable(name)!r}, split for --max-image, is also the name of a tensor of "
                    "the model; tensor names must be unique: rename that tensor in the model, "
                    "or pass --no-tiles")


def _over_device(limits, layout, dims, split) -> bool:
    """Whether an image (or the tiles of ``split``) is over the device's limits."""
    if limits is None:
        return False
    width, height = split.max_image if split is not None else layout.image_shape(dims)
    return width > limits[0] or height > limits[1]


def convert_model(model, path: str, dtype=None, max_image=MAX_IMAGE, engine=None,
                  keep_buffers=False, progress=None, tiles=True, quantized="fold",
                  winograd=None):
    """Place every weight of ``model`` (read from ``path``) on its image.

    Returns (stored, manifest, originals): ``stored`` maps tensor names to host
    arrays (images, tiles under ``NAME.tile-R-C``, and buffers with
    ``keep_buffers``), ``manifest`` is the JSON-ready description,
    ``originals`` the arrays each stored tensor holds (the ONNX weight, a
    folded DequantizeLinear's float value, or a kept integer tensor). ``dtype``
    None: the weights' own float type (runtime.model.roles.float_dtype).
    ``tiles=False`` treats a weight no layout fits like one with no role
    instead of splitting it. ``quantized``: "fold" or "keep" (runtime.model.integer_weights).
    ``progress(done, total, nbytes)`` is called after each weight.
    ``winograd``: an engine of runtime.winograd.ENGINES (or one Winograd
    layout's name) whose Winograd layout takes each float Conv filter it can
    (square kernel of a size the engine takes, strides 1, dilations 1, group
    1) in place of the role's layout; such an entry has ``transform``."""
    layouts = winograd_layouts(winograd, dtype)
    check_dtype(dtype)
    if quantized not in QUANTIZED_FORMS:
        raise ClayoutError(f"--quantized {quantized!r}; allowed: {', '.join(QUANTIZED_FORMS)}")
    eng = engines.get(engine)
    host, limits = engines.get("cpu"), eng.image_limits
    constants = onnx_graph.read_constants(model, path)
    arrays = {c.name: c.array for c in constants}
    weights = plan(constants, quantized)
    if not any(w.onnx_dtype in FLOAT_DTYPES or w.compute for w in weights):
        raise ClayoutError(f"{path}: no floating-point tensor among its {len(weights)} constants "
                           "and no integer operator's weight: no weights to convert")
    dt = dtypes.dtype(dtype or float_dtype(weights))
    uses = {c.name: c.uses for c in constants}
    placed, unplaced, plans = [], [], {}
    for w in weights:
        wino = winograd_layout(w, uses.get(w.name, ()), layouts)
        if wino is not None:
            within, size = fits(wino, w.dims, max_image)
            if within:
                why = (f"--winograd {winograd}: a {w.dims[2]}x{w.dims[3]} Conv filter with "
                       f"strides 1, dilations 1 and group 1 goes in {wino.name} (U = G·g·Gᵀ "
                       f"of {wino.transform.name})")
                placed.append((w, wino, "", why))
                continue
        if w.role is not None:
            layout, fallback, why = _choose_layout(w, max_image)
            if wino is not None:   # the Winograd image is too large: the usual choice, said so
                why = (f"--winograd {winograd}: {wino.name} needs a {size} image, over "
                       f"--max-image {max_image[0]},{max_image[1]}; so as without --winograd: "
                       + why)
            if layout is None and tiles:   # the role's own layout, cut to fit
                own = catalog.own_layout(w.role)
                layout, plans[w.name] = image_layout(own), tile_plan(own, w.dims, max_image)
            if layout is None:
                unplaced.append((w, why))
            else:
                placed.append((w, layout, fallback, why))
        elif w.compute and w.consumer:
            unplaced.append((w, w.reason))
    if unplaced and not keep_buffers:
        raise _unplaced_error(unplaced)
    _check_keys(path, [w for w, *_ in placed + unplaced], plans, constants)
    stored, entries, originals, on_host, done_bytes = {}, [], {}, [], 0
    total = len(placed) + len(unplaced)
    for w, layout, fallback, why in placed:
        source = w.source if w.source is not None else arrays[w.name]
        if source.dtype == np.float64:   # not a clayout dtype: to f32 first, as stored_values
            source = source.astype(np.float32)
        logical = np.ascontiguousarray(logical_weight(source, w.steps))
        split = plans.get(w.name)
        here = eng
        if _over_device(limits, layout, w.dims, split):
            here = host
            on_host.append(w.name)
        try:
            image = to_image(logical, layout, dtype=w.store_dtype or dt.name, engine=here,
                             max_image=max_image if split is not None else None)
        except ClayoutError as exc:
            raise ClayoutError(f"tensor {printable(w.name)!r}: {exc}") from None
        originals[w.name] = w.source if w.source is not None else arrays[w.name]
        if split is not None:
            stored.update((mf.tile_key(w.name, t), a) for t, a in zip(split.tiles, image))
            entries.append(mf.tiled_entry(w, layout, image, split, why))
            done_bytes += sum(a.nbytes for a in image)
        else:
            stored[w.name] = image
            entries.append(mf.image_entry(w, layout, image, fallback, why))
            if layout.transform is not None:
                entries[-1]["transform"] = layout.transform.name
            done_bytes += image.nbytes
        if progress:
            progress(len(entries), total, done_bytes)
    for w, why in unplaced:
        source = w.source if w.source is not None else arrays[w.name]
        kind = w.store_dtype or (dt.name if w.onnx_dtype in FLOAT_DTYPES else "")
        if not kind:
            raise ClayoutError(f"tensor {printable(w.name)!r} ({w.onnx_dtype}) cannot be stored, "
                               f"not even as a buffer: {why}")
        if w.role is None:     # no role: the ONNX tensor as stored
            w.dims, w.steps = w.onnx_shape or (1,), (("reshape", w.onnx_shape or (1,)),)
        buffer = np.ascontiguousarray(stored_values(logical_weight(source, w.steps), kind))
        stored[w.name], originals[w.name] = buffer, source
        entries.append(mf.buffer_entry(w, buffer, why))
        done_bytes += buffer.nbytes
        if progress:
            progress(len(entries), total, done_bytes)
    names = {w.name for w, *_ in placed} | {w.name for w, _ in unplaced}
    skipped = [mf.skipped_entry(w) for w in weights if w.name not in names and not w.claimed]
    manifest = {"format": mf.FORMAT, "source": os.path.basename(path), "dtype": dt.name,
                "quantized": quantized, "max_image": list(max_image),
                "engine": eng.name, "host_converted": on_host}
    if winograd is not None:
        manifest["winograd"] = winograd
    manifest.update(tensors=entries, skipped=skipped)
    return stored, manifest, originals


def read_back(array, entry: dict, engine=None) -> np.ndarray:
    """The ONNX tensor read back from a stored image or buffer (in its dtype);
    for a tiled entry ``array`` is the tuple of its tiles
    (``manifest.stored_image(tensors, entry)`` gives either)."""
    if entry["layout"] == "buffer":
        logical = array.reshape(entry["dims"])
    else:
        logical = np.asarray(from_image(array, entry["layout"], entry["dims"], engine=engine))
    return onnx_weight(logical, mf.steps_of(entry), entry["onnx_shape"])


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


def convert_file(path: str, output: str, dtype=None, max_image=MAX_IMAGE, engine=None,
                 keep_buffers=False, verify_all=False, progress=None, tiles=True,
                 quantized="fold", winograd=None):
    """``clayout model``: convert ``path`` and write ``output`` atomically.

    With ``verify_all`` every tensor of the written bytes is read back (images
    with ``from_image``) and compared with what it holds before the file is
    renamed into place (bit for bit; Winograd images within their bound).
    Returns (manifest, number verified or None)."""
    winograd_layouts(winograd, dtype)
    check_dtype(dtype)
    check_output(output, [path])   # before the work: a special file, a missing folder, the input
    model = onnx_graph.load(path)
    stored, manifest, originals = convert_model(model, path, dtype, max_image, engine,
                                                keep_buffers, progress, tiles, quantized,
                                                winograd)
    data = mf.safetensors_bytes(stored, manifest)
    verified = None
    if verify_all:
        again, again_manifest = mf.read_bytes(data)
        bad = verify(again, again_manifest, originals, engine=engine)
        if bad:
            how = ("bit for bit (Winograd images: within their transform's inverse_bound)"
                   if any("transform" in e for e in manifest["tensors"]) else "bit for bit")
            raise ClayoutError(f"--verify: {len(bad)} of {len(manifest['tensors'])} tensors do "
                               f"not read back {how}: "
                               + ", ".join(repr(printable(n)) for n in bad[:8])
                               + (" ..." if len(bad) > 8 else "") + f"; {output} not written")
        verified = len(manifest["tensors"])
    atomic_write(output, lambda f: _write_chunks(f, data), [path])
    return manifest, verified


def _write_chunks(f, data: bytes, chunk: int = 8 << 20) -> None:
    """``f.write(data)`` in pieces, so that Ctrl-C or SIGTERM stops a large file
    mid-write (the handler runs between pieces) instead of after it."""
    view = memoryview(data)
    for start in range(0, len(view), chunk):
        f.write(view[start:start + chunk])


def weight_arrays(path: str) -> dict[str, np.ndarray]:
    """Every readable constant of the model at ``path`` by (qualified) name:
    the ONNX weights a stored file is checked against."""
    model = onnx_graph.load(path)
    return {c.name: c.array for c in onnx_graph.read_constants(model, path)
            if c.array is not None}
