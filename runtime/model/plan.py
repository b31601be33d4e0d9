"""The plan of ``clayout model``: what becomes of every constant of a model,
settled before a single weight is converted.

:func:`plan_model` reads the graph's constants (runtime.model.front_ends: the
ONNX or TFLite reader), gives each its role (runtime.model.weights,
runtime.model.integer_weights) and,
from the :class:`Options` alone, makes one frozen :class:`Placement` per
tensor: an image in a layout (maybe cut into tiles, maybe a Winograd layout,
maybe converted on the host), a plain buffer, or skipped with the reason. Its
dims, dtype, image size and bytes come from the layout
(runtime.algebra.layout.ImageDesc), never from a converted array, and the
manifest is the plan's (:meth:`ModelPlan.manifest`): runtime.model.apply only
turns the plan into arrays and checks each against it, so ``clayout model
--dry-run`` prints what the real run writes, to the byte.

The rules (roles, layouts, tiles, buffers, Winograd filters, host conversion)
are in runtime.model.apply's docstring.

Example::

    >>> plan, sources = plan_model(front_ends.load("m.onnx"), "m.onnx")   # doctest: +SKIP
    >>> [(p.name, p.layout, p.size, p.bytes) for p in plan.stored][:1]    # doctest: +SKIP
    [('conv1.weight', 'conv2d_filter', (3, 18), 864)]
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from . import front_ends, manifest as mf, report
from .. import engine as engines
from .. import placement
from ..algebra import catalog, dtypes
from ..algebra.catalog import image_layout
from ..algebra.layout import ImageDesc
from ..algebra.storage import Limits
from ..algebra.tiles import Tile, tile_plan
from ..errors import ClayoutError
from .accounting import Accounting, account
from .integer_weights import attach_parameters
from .left_out import LeftOut
from .graph import printable
from .weights import FLOAT_DTYPES, Weight, float_dtype, roles
from .winograd_weights import fits, winograd_layout, winograd_layouts, winograd_note

MAX_IMAGE = (8192, 8192)   # the OpenCL 1.2 minimum of IMAGE2D_MAX_WIDTH/HEIGHT: fits every device
QUANTIZED_FORMS = ("fold", "keep")


def check_dtype(dtype) -> str | None:
    """``--dtype`` of ``clayout model``: f32, f16, or None (the weights' own float type)."""
    if dtype is None or dtype in ("f32", "f16"):
        return dtype
    raise ClayoutError(f"--dtype {dtype!r}: model images are f32 or f16 (default: the weights' "
                       "own float type)")


@dataclass(frozen=True)
class Options:
    """The choices a plan follows, named as ``clayout model``'s options; each
    is checked when the Options are made, before any file is read."""
    dtype: str | None = None             # --dtype f32 / f16; None: the weights' own float type
    max_image: tuple[int, int] = MAX_IMAGE
    engine: object = None                # --engine: a name or an engine object
    keep_buffers: bool = True            # False: --images-only (fails naming what needs a buffer)
    tiles: bool = True                   # False: --no-tiles
    quantized: str = "fold"
    winograd: str | None = None          # --winograd: an engine or one Winograd layout's name

    def __post_init__(self):
        winograd_layouts(self.winograd, self.dtype)
        check_dtype(self.dtype)
        if self.quantized not in QUANTIZED_FORMS:
            raise ClayoutError(f"--quantized {self.quantized!r}; allowed: "
                               f"{', '.join(QUANTIZED_FORMS)}")
        object.__setattr__(self, "max_image", tuple(self.max_image))
        object.__setattr__(self, "limits", Limits.of(self.max_image, "--max-image"))

    limits = None   # the target's Limits from max_image (set once, in __post_init__)


@dataclass(frozen=True)
class Placement:
    """What ``clayout model`` does with one tensor: an image (``layout``: an
    image layout's name), a plain buffer (``layout`` "buffer") or nothing
    (``layout`` None: skipped), and the :class:`~runtime.model.weights.Weight`
    it places, held by reference (its source tensor, role, dims, steps). It
    holds no array: the values a stored tensor holds come apart, in
    :func:`plan_model`'s sources."""
    weight: Weight
    layout: str | None              # an image layout's name, "buffer", or None (skipped)
    dtype: str                      # the stored dtype: f32, f16, s8, u8, s32; "" when skipped
    size: tuple[int, ...]           # the whole image's pixels per storage coordinate; () if none
    bytes: int                      # bytes stored (every tile together); 0 when skipped
    reason: str                     # image: why this layout; buffer: why not an image;
    #                                 skipped: why not stored
    fallback_from: str = ""         # the role's own layout, when too big for it
    transform: str = ""             # a Winograd image: the name of its G
    tiles: tuple[Tile, ...] = ()    # an image over --max-image: its tiles, row-major
    on_host: bool = False           # over the engine's device limit: converted by the cpu engine

    # the weight's, by reference
    name = property(lambda self: self.weight.name)
    tensor = property(lambda self: self.weight.tensor)
    role = property(lambda self: self.weight.role)
    dims = property(lambda self: tuple(self.weight.dims))
    steps = property(lambda self: self.weight.steps)
    mapping = property(lambda self: self.weight.mapping)

    @property
    def kind(self) -> str:
        """"image", "buffer" or "skipped"."""
        if self.layout is None:
            return "skipped"
        return "buffer" if self.layout == "buffer" else "image"


@dataclass(frozen=True)
class ModelPlan:
    """Every tensor of one model with its Placement, and what the manifest
    says of the whole."""
    source: str                         # the model file's name
    options: Options
    engine: str                         # the name of the engine that converts
    dtype: str                          # the dtype of float images
    placements: tuple[Placement, ...]   # stored, in the file's order (images, then buffers);
    #                                     then the skipped ones, in graph order
    winograd_note: str = ""             # --winograd took no filter: why (the manifest has no room)
    source_format: str = "onnx"         # the front end that read the model: onnx or tflite
    interface: Mapping | None = None    # the graph's inputs and outputs (front_ends.interface)
    accounting: Accounting | None = None   # what became of every float constant

    @property
    def stored(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.layout is not None)

    @property
    def skipped(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.layout is None)

    def manifest(self) -> dict:
        """The JSON-ready manifest of runtime.model.manifest."""
        o = self.options
        manifest = {"format": mf.FORMAT, "source": self.source,
                    "source_format": self.source_format, "dtype": self.dtype,
                    "quantized": o.quantized, "max_image": list(o.max_image),
                    "engine": self.engine,
                    "host_converted": [p.name for p in self.stored if p.on_host]}
        if o.winograd is not None:
            manifest["winograd"] = o.winograd
        if self.interface is not None:
            manifest.update(inputs=[dict(v) for v in self.interface["inputs"]],
                            outputs=[dict(v) for v in self.interface["outputs"]])
        manifest.update(tensors=[mf.tensor_entry(p) for p in self.stored],
                        skipped=[mf.skipped_entry(p) for p in self.skipped])
        if self.accounting is not None:
            manifest["accounting"] = self.accounting.manifest()
        return manifest


# -- planning ---------------------------------------------------------------------------------
def plan_model(model, path: str, options: Options = Options()) -> tuple[ModelPlan, dict]:
    """The plan of ``model`` (read from ``path``) under ``options``, and its
    sources: {stored tensor's name: the array it holds} (the ONNX weight as
    read, a folded DequantizeLinear's float value, kept integers, a
    parameter), for runtime.model.apply.convert_plan and ``--verify``.
    Whatever the conversion would refuse (with --images-only, constants
    the model needs that no image takes; clashing names) is refused here."""
    layouts = winograd_layouts(options.winograd, options.dtype)
    eng = engines.get(options.engine)
    constants = front_ends.read_constants(model, path)
    weights, values = attach_parameters(roles(constants), constants, options.quantized)
    if not any(w.tensor.dtype in FLOAT_DTYPES or w.compute for w in weights):
        raise ClayoutError(f"{path}: no floating-point tensor among its {len(weights)} constants "
                           "and no integer operator's weight: no weights to convert")
    dt = dtypes.dtype(options.dtype or float_dtype(weights))
    uses = {c.name: c.uses for c in constants}
    by_name = {c.name: c for c in constants}
    max_image, limits, winograd = options.max_image, options.limits, options.winograd
    images, buffers, splits, qualified = [], [], {}, 0
    for w in weights:
        wino = winograd_layout(w, uses.get(w.name, ()), layouts)
        if wino is not None:
            qualified += 1
            within, size = fits(wino, w.dims, limits)
            if within:
                why = (f"--winograd {winograd}: a {w.dims[2]}x{w.dims[3]} Conv filter with "
                       f"strides 1, dilations 1 and group 1 goes in {wino.name} (U = G·g·Gᵀ "
                       f"of {wino.transform.name})")
                images.append((w, wino, "", why))
                continue
        if w.role is not None:
            layout, fallback, why = _choose_layout(w, limits, max_image)
            if wino is not None:   # the Winograd image is too large: the usual choice, said so
                why = (f"--winograd {winograd}: {wino.name} needs a {size} image, over "
                       f"--max-image {max_image[0]},{max_image[1]}; so as without --winograd: "
                       + why)
            if layout is None and options.tiles:   # the role's own layout, cut to fit
                own = catalog.own_layout(w.role)
                layout = image_layout(own)
                splits[w.name] = tile_plan(ImageDesc(layout, w.dims), limits)
            if layout is None:
                buffers.append((w, why))
            else:
                images.append((w, layout, fallback, why))
        elif (w.compute and w.tensor.consumer) or _needed_elsewhere(w, by_name):
            buffers.append((w, w.reason))
    if buffers and not options.keep_buffers:   # --images-only: each one named
        raise LeftOut(buffers)
    _check_keys(path, [w for w, *_ in images + buffers], splits, constants)
    placements = [_image(w, layout, fallback, why, splits.get(w.name), dt, eng.limits)
                  for w, layout, fallback, why in images]
    placements += [_buffer(w, why, dt) for w, why in buffers]
    names = {p.name for p in placements}
    placements += [_skipped(w) for w in weights if w.name not in names and not w.claimed]
    arrays = {c.name: c.array for c in constants}
    sources = {w.name: values[w.name] if w.name in values else arrays[w.name]
               for w, *_ in images + buffers}
    note = winograd_note(weights, uses, winograd, layouts) if layouts and not qualified else ""
    stored = {p.weight.source_name or p.name: p.kind for p in placements if p.kind != "skipped"}
    accounted = account(constants, stored, {w.name: w.reason for w in weights})
    return ModelPlan(os.path.basename(path), options, eng.name, dt.name, tuple(placements),
                     note, front_ends.source_format(model),
                     MappingProxyType(front_ends.interface(model)), accounted), sources


def _needed_elsewhere(w: Weight, by_name: dict) -> bool:
    """A float constant with no image role that a live operator reads: a
    plain buffer unless --images-only (its value is the model's, whatever its shape:
    a scalar, a (1, 4, 4) attention constant), never dropped without saying so."""
    c = by_name.get(w.name)
    return (c is not None and c.live and bool(c.uses) and w.role is None and not w.claimed
            and not w.param_of and w.tensor.dtype in FLOAT_DTYPES and c.array is not None
            and c.array.size > 0)


def _choose_layout(w: Weight, limits, max_image) -> tuple:
    """(layout, the role it fell back from or "", why): what
    ``placement.layout_choice`` chooses for the weight under ``limits`` (the
    Limits of ``max_image``, --max-image as given); layout None when no
    candidate fits."""
    choice = placement.layout_choice(w.role, w.dims, limits=limits)
    own = catalog.own_layout(w.role)
    if not choice.fits:
        width, height = choice.chosen.size
        return None, "", (f"{own} needs a {width}x{height} image, over --max-image "
                          f"{max_image[0]},{max_image[1]}, and no {choice.role} layout fits ("
                          + ", ".join(c.describe() for c in choice.rejected) + ")")
    return choice.layout, "" if choice.layout.name == own else own, choice.reason


def _image(w: Weight, layout, fallback: str, why: str, split, dt, limits) -> Placement:
    """An image; its bytes are those of the ImageDesc (of every tile of
    ``split``), the array the engine returns holds exactly these."""
    image = ImageDesc(layout, w.dims, w.store_dtype or dt.name)
    size = layout.image_shape(w.dims)
    if split is not None:   # its tiles: each no larger than the cut's limit
        nbytes = sum(math.prod(split.shape(t)) for t in split.tiles) * image.dtype.itemsize
        on_host = limits is not None and not limits.holds_2d(split.limits)
    else:
        nbytes = image.nbytes
        on_host = limits is not None and limits.refusal(image) is not None
    return Placement(w, layout.name, image.dtype.name, tuple(size), nbytes, why,
                     fallback_from=fallback,
                     transform=layout.transform.name if layout.transform and split is None
                     else "", tiles=split.tiles if split is not None else (), on_host=on_host)


def _buffer(w: Weight, why: str, dt) -> Placement:
    """A plain buffer: the logical tensor of its role, or with none the
    source tensor as stored (a scalar as one element)."""
    kind = w.store_dtype or (dt.name if w.tensor.dtype in FLOAT_DTYPES else "")
    if not kind:
        raise ClayoutError(f"tensor {printable(w.name)!r} ({w.tensor.dtype}) cannot be stored, "
                           f"not even as a buffer: {why}")
    w = w.as_buffer()
    stored = dtypes.dtype(kind)
    return Placement(w, "buffer", stored.name, (), math.prod(w.dims) * stored.itemsize, why)


def _skipped(w: Weight) -> Placement:
    return Placement(w, None, "", (), 0, w.reason)


def _check_keys(path: str, weights, splits, constants) -> None:
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
    for name, split in splits.items():   # tile keys share the file with the weights' names
        for tile in split.tiles:
            if mf.tile_key(name, tile) in every_name:
                raise ClayoutError(
                    f"{path}: tile {printable(mf.tile_key(name, tile))!r} of the weight "
                    f"{printable(name)!r}, split for --max-image, is also the name of a tensor of "
                    "the model; tensor names must be unique: rename that tensor in the model, "
                    "or pass --no-tiles")


# -- printing ---------------------------------------------------------------------------------
def plan_table(plan: ModelPlan) -> str:
    """The plan as a text table (``clayout model --dry-run``): one row per
    tensor, the stored ones in the file's order, then the skipped ones; the
    last column says why a tensor is a buffer or skipped, and which images
    the cpu engine would convert (over the engine's device limit)."""
    head = ("name", "role", "layout", "dims", "image", "dtype", "bytes", "reason")
    rows = [head]
    for p in plan.placements:
        if p.kind == "skipped":
            shape = ",".join(map(str, p.tensor.shape)) or "scalar"
            rows.append((printable(p.name), "-", "skipped", "-", "-", "-", "-",
                         f"{p.tensor.dtype} [{shape}], {printable(p.tensor.consumer) or 'unused'}: "
                         + printable(p.reason)))
            continue
        if p.kind == "buffer":
            layout, image, why = f"buffer {mf.PLAIN[:len(p.dims)]}", "-", printable(p.reason)
        else:
            layout = p.layout + (f" (not {p.fallback_from}: too big)" if p.fallback_from else "")
            image = "x".join(map(str, p.size)) + (f" in {len(p.tiles)} tiles" if p.tiles else "")
            why = f"over the {plan.engine} device's limit: converted on the host" \
                if p.on_host else ""
        rows.append((printable(p.name), p.role or "-", layout, ",".join(map(str, p.dims)), image,
                     p.dtype, str(p.bytes), why))
    # the reasons are sentences, not a column to line up: underline the header only
    return "\n".join(report.aligned(rows, free_last=True))
