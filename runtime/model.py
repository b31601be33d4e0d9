"""Offline conversion of an ONNX model's weights into image layouts (``clayout model``).

Read, plan, apply: :func:`runtime.onnx_graph.read_constants` finds every constant
tensor (initializers, ``Constant`` nodes, folded chains, subgraphs, external data);
:func:`plan` gives each one a role from the op that reads it; :func:`convert_model`
places each weight on its image with :func:`runtime.to_image`; :func:`convert_file`
writes one safetensors file (one tensor per image, named after the ONNX tensor) with
the JSON manifest of :mod:`runtime.manifest` in its metadata under ``clayout``.

Roles (logical dims are clayout's canonical ones; "steps" turn the ONNX tensor into
the logical one and are stored, so every image reads back to the ONNX weight):

=======================  ==================  ==============================================
consumer (input)         role / layout       logical dims from the ONNX tensor
=======================  ==================  ==============================================
Conv W, group 1          conv2d_filter       (O, I, kH, kW) as stored
Conv W, grouped          conv2d_filter       (O, I/group, kH, kW) as stored
Conv W, depthwise        dw_conv2d_filter    ONNX (C*M, 1, kH, kW) -> (M, C, kH, kW),
  (group = C, dim 1 = 1)                     [m, c] = onnx[c*M + m]
ConvTranspose W, group 1 conv2d_filter       ONNX (I, O, kH, kW) -> (O, I, kH, kW)
ConvTranspose W, grouped conv2d_filter       ONNX (I, O/g, kH, kW) -> (O, I/g, kH, kW),
                                             [gi*O/g + o, i] = onnx[gi*I/g + i, o]
ConvTranspose W,         dw_conv2d_filter    ONNX (C, M, kH, kW) -> (M, C, kH, kW),
  depthwise (I = group)                      [m, c] = onnx[c, m]
Gemm B                   weight_width        (O, I, 1, 1): B if transB=1, else B.T
MatMul B, 2-D (K, N)     weight_width        (N, K, 1, 1) = B.T
MatMul B, 3-D (G, K, N)  weight_width        (G*N, K, 1, 1), [g*N + n, k] = B[g, k, n]
biases of Conv,          argument            (W,): a tensor with one non-unit dim,
ConvTranspose, Gemm;                         flattened ((1, W), (W, 1, 1), (1, W, 1, 1))
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
:mod:`runtime.tiles`), each stored as the tensor ``NAME.tile-R-C`` and listed
with its pixel range in the entry's ``tiles``. A tensor that ends on no image
(one with no role that feeds a Conv, ConvTranspose, Gemm or MatMul, or with
``tiles=False`` one over the limit) makes the conversion fail with the list of
them, unless ``keep_buffers``: then it is stored as a plain buffer (role
``buffer``, with its tag and dims).

Example::

    >>> manifest, verified = convert_file("model.onnx", "w.safetensors", verify_all=True)
    ...                                                             # doctest: +SKIP
    >>> manifest["tensors"][0]["layout"], verified                  # doctest: +SKIP
    ('conv2d_filter', 11)
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from . import manifest as mf, onnx_graph, placement
from .algebra import dtypes
from .api import from_image, to_image
from .errors import ClayoutError
from .fileio import atomic_write, check_output
from .algebra import catalog
from .algebra.catalog import image_layout
from .algebra.layout import ImageLayout
from .onnx_graph import load, printable  # noqa: F401  (load is part of this module's API)
from .algebra.tiles import tile_plan

MAX_IMAGE = (8192, 8192)   # the OpenCL 1.2 minimum of IMAGE2D_MAX_WIDTH/HEIGHT: fits every device
COMPUTE_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
ELEMENTWISE_OPS = ("Add", "Sub", "Mul", "Div", "PRelu")
FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")
ARGUMENT_INPUTS = {"Conv": (2,), "ConvTranspose": (2,), "Gemm": (2,),
                   "BatchNormalization": (1, 2, 3, 4), "PRelu": (1,),
                   "InstanceNormalization": (1, 2), "LayerNormalization": (1, 2),
                   "Add": (0, 1), "Sub": (0, 1), "Mul": (0, 1), "Div": (0, 1)}


@dataclass
class Weight:
    """One constant tensor and what clayout does with it."""
    name: str
    onnx_shape: tuple[int, ...]
    onnx_dtype: str
    consumer: str = ""            # "Conv conv1 input 1", or "" when unused
    origin: str = ""              # "initializer", "Constant node c0 -> Cast k", ...
    role: str = "skipped"         # a named image layout, or "skipped"
    dims: tuple[int, ...] = ()    # clayout's logical dims
    steps: tuple = ()             # (("transpose", perm) | ("reshape", shape), ...) ONNX -> logical
    mapping: str = ""             # the steps in words
    reason: str = ""              # why it was skipped
    compute: bool = False         # read by a Conv/ConvTranspose/Gemm/MatMul: never dropped
    folded_into: list | None = None   # the tensors a folded chain made from this one


# -- roles ------------------------------------------------------------------------------------
def _filter_role(w: Weight, op: str, group: int) -> None:
    """Conv and ConvTranspose weights (rank 4 checked by the caller)."""
    s = w.onnx_shape
    if op == "Conv" and group > 1 and s[1] == 1 and s[0] % group == 0:
        mult = s[0] // group
        w.role, w.dims = "dw_conv2d_filter", (mult, group, s[2], s[3])
        w.steps = (("reshape", (group, mult, s[2], s[3])), ("transpose", (1, 0, 2, 3)))
        w.mapping = f"ONNX (C*M,1,kH,kW) with C={group}, M={mult}: [m,c] = onnx[c*M+m]"
    elif op == "Conv":
        w.role, w.dims = "conv2d_filter", s
        w.mapping = "ONNX (O,I,kH,kW) as stored" + (f" (group {group}: I per group)"
                                                   if group > 1 else "")
    elif group == 1:
        w.role, w.dims, w.steps = "conv2d_filter", (s[1], s[0], s[2], s[3]), \
            (("transpose", (1, 0, 2, 3)),)
        w.mapping = "ONNX (I,O,kH,kW) transposed to (O,I,kH,kW)"
    elif s[0] == group:
        w.role, w.dims, w.steps = "dw_conv2d_filter", (s[1], s[0], s[2], s[3]), \
            (("transpose", (1, 0, 2, 3)),)
        w.mapping = f"ONNX (C,M,kH,kW) with C={group}, M={s[1]} transposed: [m,c] = onnx[c,m]"
    elif s[0] % group:
        w.reason = f"ConvTranspose weight dim 0 ({s[0]}) is not a multiple of group {group}"
    else:
        per = s[0] // group
        w.role, w.dims = "conv2d_filter", (group * s[1], per, s[2], s[3])
        w.steps = (("reshape", (group, per, s[1], s[2], s[3])), ("transpose", (0, 2, 1, 3, 4)),
                   ("reshape", w.dims))
        w.mapping = (f"ONNX (I,O/g,kH,kW) with g={group} to (O,I/g,kH,kW): "
                     f"[gi*{s[1]}+o, i] = onnx[gi*{per}+i, o]")


def _role(w: Weight, op: str, index: int, node) -> None:
    """Fill in w's role, dims and steps for being input ``index`` of ``node``."""
    shape = w.onnx_shape
    if op in ("Conv", "ConvTranspose") and index == 1:
        if len(shape) != 4:
            w.reason = f"{op} weight of rank {len(shape)}: image layouts take 2-D convolutions only"
            return
        return _filter_role(w, op, int(onnx_graph._attr(node, "group", 1)))
    if op == "Gemm" and index == 1:
        if len(shape) != 2:
            w.reason = f"Gemm B of rank {len(shape)}"
            return
        trans = bool(onnx_graph._attr(node, "transB", 0))
        out, inp = (shape[0], shape[1]) if trans else (shape[1], shape[0])
        w.role, w.dims = "weight_width", (out, inp, 1, 1)
        w.steps = ((() if trans else (("transpose", (1, 0)),)) + (("reshape", w.dims),))
        w.mapping = "Gemm B (O,I) with transB=1, as stored" if trans else \
            "Gemm B (I,O) with transB=0, transposed to (O,I)"
        return
    if op == "MatMul" and index == 1:
        if len(shape) == 2:
            w.role, w.dims = "weight_width", (shape[1], shape[0], 1, 1)
            w.steps = (("transpose", (1, 0)), ("reshape", w.dims))
            w.mapping = "MatMul B (I,O) transposed to (O,I)"
        elif len(shape) == 3:
            w.role, w.dims = "weight_width", (shape[0] * shape[2], shape[1], 1, 1)
            w.steps = (("transpose", (0, 2, 1)), ("reshape", w.dims))
            w.mapping = "MatMul B (G,I,O) to (G*O,I): [g*O+o, i] = B[g, i, o]"
        else:
            w.reason = f"MatMul weight of rank {len(shape)}: 2-D and 3-D weights are mapped"
        return
    if index not in ARGUMENT_INPUTS.get(op, ()):
        w.reason = f"{op} input {index} has no image role"
        return
    big = [d for d in shape if d != 1]
    if not big and op in ELEMENTWISE_OPS:   # broadcast to every element, not one per channel
        w.reason = "scalar constant: pass it as a kernel argument"
    elif len(big) > 1:
        w.reason = f"{op} input {index} of shape {shape} is not a per-channel vector"
    else:                                   # a bias of one output channel is still a vector
        length = big[0] if big else 1
        w.role, w.dims, w.steps = "argument", (length,), (("reshape", (length,)),)
        w.mapping = "as stored" if len(shape) == 1 else f"ONNX {shape} flattened"


def plan(constants) -> list[Weight]:
    """Every constant (from :func:`runtime.onnx_graph.read_constants`) with its role."""
    weights = []
    for c in constants:
        w = Weight(c.name, c.shape, c.onnx_dtype, origin=c.origin)
        weights.append(w)
        if c.array is None:
            w.reason = f"{c.onnx_dtype} constant: clayout reads numeric tensors only"
        elif not c.uses and c.folded_into:
            w.consumer, w.folded_into = "(folded)", list(c.folded_into)
            w.reason = "a step of a folded chain: the tensor named in folded_into holds its value"
        elif not c.uses:
            w.reason = "not used by any node"
        elif c.onnx_dtype not in FLOAT_DTYPES:
            w.consumer = str(c.uses[0])
            w.reason = (f"{c.onnx_dtype} tensor (shape, index or quantized data): "
                        "only float weights go on images")
        elif c.array.size == 0:
            w.consumer, w.reason = str(c.uses[0]), "empty tensor (0 elements)"
        else:
            for use in c.uses:     # the first use that gives a role decides
                trial = Weight(w.name, w.onnx_shape, w.onnx_dtype)
                _role(trial, use.op, use.index, use.proto)
                if trial.role != "skipped" or use is c.uses[0]:
                    w.consumer, w.role, w.dims, w.steps, w.mapping, w.reason = \
                        str(use), trial.role, trial.dims, trial.steps, trial.mapping, trial.reason
                if trial.role != "skipped":
                    break
            w.compute = any(u.op in COMPUTE_OPS for u in c.uses)
    return weights


# -- the steps and their inverse -------------------------------------------------------------------
def logical_weight(array: np.ndarray, steps) -> np.ndarray:
    """The ONNX tensor as clayout's logical tensor (``steps`` from a Weight or
    manifest entry)."""
    for kind, arg in steps:
        array = array.transpose(arg) if kind == "transpose" else array.reshape(arg)
    return array


def onnx_weight(logical: np.ndarray, steps, onnx_shape) -> np.ndarray:
    """The inverse of :func:`logical_weight`: back to the ONNX tensor's shape."""
    shapes, shape = [], tuple(onnx_shape)
    for kind, arg in steps:                   # the shape before each step
        shapes.append(shape)
        shape = tuple(shape[p] for p in arg) if kind == "transpose" else tuple(arg)
    for (kind, arg), before in reversed(list(zip(steps, shapes))):
        logical = logical.transpose(np.argsort(arg)) if kind == "transpose" else \
            logical.reshape(before)
    return logical.reshape(onnx_shape)


def stored_values(array: np.ndarray, dtype: str) -> np.ndarray:
    """The weight as clayout stores it in ``dtype``: float64 is rounded to f32
    first (not a clayout dtype), then to ``dtype``, nearest even."""
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    return dtypes.convert(np.ascontiguousarray(array), dtype)


# -- conversion --------------------------------------------------------------------------------
# a weight's role names its layout when it fits: the first candidate of a
# placement role (conv2d_filter: filter, weight_width: fc_weight, ...)
PLACEMENT_ROLE = {catalog.candidates(role)[0][0]: role for role in catalog.ROLES}


def _choose_layout(w: Weight, max_image) -> tuple[ImageLayout | None, str, str]:
    """(layout, the role it fell back from or "", why): what
    ``placement.layout_choice`` chooses for the weight under ``max_image``;
    layout None when no candidate fits."""
    choice = placement.layout_choice(PLACEMENT_ROLE[w.role], w.dims, limits=max_image)
    if not choice.fits:
        width, height = choice.chosen.size
        return None, "", (f"{w.role} needs a {width}x{height} image, over --max-image "
                          f"{max_image[0]},{max_image[1]}, and no {choice.role} layout fits ("
                          + ", ".join(c.describe() for c in choice.rejected) + ")")
    return choice.layout, "" if choice.layout.name == w.role else w.role, choice.reason


def _unplaced_error(unplaced) -> ClayoutError:
    shown = "; ".join(f"{printable(w.name)!r} {w.onnx_shape} ({printable(w.consumer)}): {why}"
                      for w, why in unplaced[:4])
    more = f"; and {len(unplaced) - 4} more" if len(unplaced) > 4 else ""
    hint = ("raise --max-image, drop --no-tiles to split them into tiles, or pass "
            "--keep-buffers" if any(w.role != "skipped" for w, _ in unplaced) else
            "pass --keep-buffers")
    return ClayoutError(f"{len(unplaced)} weight(s) cannot go on an image: {shown}{more}; "
                        f"{hint} to store them as plain buffers")


def convert_model(model, path: str, dtype="f32", max_image=MAX_IMAGE, engine=None,
                  keep_buffers=False, progress=None, tiles=True):
    """Place every weight of ``model`` (read from ``path``) on its image.

    Returns (stored, manifest, originals): ``stored`` maps tensor names to host
    arrays (images, tiles under ``NAME.tile-R-C``, and buffers with
    ``keep_buffers``), ``manifest`` is the JSON-ready description,
    ``originals`` the ONNX arrays of what was stored (by weight name).
    ``tiles=False`` treats a weight no layout fits like one with no role
    instead of splitting it. ``progress(done, total, nbytes)`` is called
    after each weight."""
    dt = dtypes.image_dtype(dtype)
    if dt.name not in ("f32", "f16"):
        raise ClayoutError(f"model images are f32 or f16, got {dt.name}")
    constants = onnx_graph.read_constants(model, path)
    arrays = {c.name: c.array for c in constants}
    weights = plan(constants)
    if not any(w.onnx_dtype in FLOAT_DTYPES for w in weights):
        raise ClayoutError(f"{path}: no floating-point tensor among its {len(weights)} constants: "
                           "no weights to convert")
    placed, unplaced, plans = [], [], {}
    for w in weights:
        if w.role != "skipped":
            layout, fallback, why = _choose_layout(w, max_image)
            if layout is None and tiles:   # the role's own layout, cut to fit
                layout, plans[w.name] = image_layout(w.role), tile_plan(w.role, w.dims, max_image)
            if layout is None:
                unplaced.append((w, why))
            else:
                placed.append((w, layout, fallback, why))
        elif w.compute and w.onnx_dtype in FLOAT_DTYPES and w.consumer:
            unplaced.append((w, w.reason))
    if unplaced and not keep_buffers:
        raise _unplaced_error(unplaced)
    for w, *_ in placed + unplaced:
        if w.name == "__metadata__":   # safetensors' header key: the file would not load
            raise ClayoutError(f"{path}: a weight is named '__metadata__', the key safetensors "
                               "reserves for its metadata; rename it in the model")
    every_name = {w.name for w in weights}
    for name, split in plans.items():   # tile keys share the file with the weights' names
        for tile in split.tiles:
            if mf.tile_key(name, tile) in every_name:
                raise ClayoutError(
                    f"{path}: tile {printable(mf.tile_key(name, tile))!r} of the weight "
                    f"{printable(name)!r}, split for --max-image, is also the name of a tensor of "
                    "the model; tensor names must be unique: rename that tensor in the model, "
                    "or pass --no-tiles")
    stored, entries, originals, done_bytes = {}, [], {}, 0
    total = len(placed) + len(unplaced)
    for w, layout, fallback, why in placed:
        source = arrays[w.name]
        if source.dtype == np.float64:   # not a clayout dtype: to f32 first, as stored_values
            source = source.astype(np.float32)
        logical = np.ascontiguousarray(logical_weight(source, w.steps))
        split = plans.get(w.name)
        try:
            image = to_image(logical, layout, dtype=dt.name, engine=engine,
                             max_image=max_image if split is not None else None)
        except ClayoutError as exc:
            raise ClayoutError(f"tensor {printable(w.name)!r}: {exc}") from None
        originals[w.name] = arrays[w.name]
        if split is not None:
            stored.update((mf.tile_key(w.name, t), a) for t, a in zip(split.tiles, image))
            entries.append(mf.tiled_entry(w, layout, image, split, why))
            done_bytes += sum(a.nbytes for a in image)
        else:
            stored[w.name] = image
            entries.append(mf.image_entry(w, layout, image, fallback, why))
            done_bytes += image.nbytes
        if progress:
            progress(len(entries), total, done_bytes)
    for w, why in unplaced:
        if w.role == "skipped":     # no role: the ONNX tensor as stored
            w.dims, w.steps = w.onnx_shape or (1,), (("reshape", w.onnx_shape or (1,)),)
        buffer = np.ascontiguousarray(stored_values(logical_weight(arrays[w.name], w.steps),
                                                    dt.name))
        stored[w.name], originals[w.name] = buffer, arrays[w.name]
        entries.append(mf.buffer_entry(w, buffer, why))
        done_bytes += buffer.nbytes
        if progress:
            progress(len(entries), total, done_bytes)
    names = {w.name for w, *_ in placed} | {w.name for w, _ in unplaced}
    skipped = [mf.skipped_entry(w) for w in weights if w.name not in names]
    eng_name = getattr(engine, "name", engine) if engine is not None else \
        os.environ.get("CLAYOUT_ENGINE", "cpu")
    manifest = {"format": mf.FORMAT, "source": os.path.basename(path), "dtype": dt.name,
                "max_image": list(max_image), "engine": str(eng_name),
                "tensors": entries, "skipped": skipped}
    return stored, manifest, originals


def read_back(array, entry: dict, engine=None) -> np.ndarray:
    """The ONNX tensor read back from a stored image or buffer (in its dtype);
    for a tiled entry ``array`` is the tuple of its tiles
    (``manifest.stored_image(tensors, entry)`` gives either)."""
    if entry["role"] == "buffer":
        logical = array.reshape(entry["dims"])
    else:
        logical = np.asarray(from_image(array, entry["layout"], entry["dims"], engine=engine))
    return onnx_weight(logical, mf.steps_of(entry), entry["onnx_shape"])


def verify(stored: dict, manifest: dict, originals: dict, engine=None) -> list[str]:
    """Names of the stored tensors that do not read back to their ONNX weight
    bit for bit (after rounding to the manifest's dtype); [] when all do."""
    bad = []
    for entry in manifest["tensors"]:
        back = read_back(mf.stored_image(stored, entry), entry, engine=engine)
        want = stored_values(originals[entry["name"]], entry["dtype"])
        if back.shape != want.shape or not np.array_equal(mf.bits(back), mf.bits(want)):
            bad.append(entry["name"])
    return bad


def convert_file(path: str, output: str, dtype="f32", max_image=MAX_IMAGE, engine=None,
                 keep_buffers=False, verify_all=False, progress=None, tiles=True):
    """``clayout model``: convert ``path`` and write ``output`` atomically.

    With ``verify_all`` every tensor of the written bytes is read back (images
    with ``from_image``) and compared with its ONNX weight before the file is
    renamed into place. Returns (manifest, number verified or None)."""
    check_output(output, [path])   # before the work: a special file, a missing folder, the input
    model = onnx_graph.load(path)
    stored, manifest, originals = convert_model(model, path, dtype, max_image, engine,
                                                keep_buffers, progress, tiles)
    data = mf.safetensors_bytes(stored, manifest)
    verified = None
    if verify_all:
        again, again_manifest = mf.read_bytes(data)
        bad = verify(again, again_manifest, originals, engine=engine)
        if bad:
            raise ClayoutError(f"--verify: {len(bad)} of {len(manifest['tensors'])} tensors do "
                               "not read back bit for bit: "
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
