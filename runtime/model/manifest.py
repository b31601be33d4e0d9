"""The manifest ``clayout model`` stores with the images, and how it is printed.

The safetensors file holds one tensor per converted weight, named after the
model's tensor (ONNX or TFLite: runtime.model.front_ends), and a JSON manifest in its metadata under the key ``clayout``:

* ``tensors``: one entry per stored tensor. An image entry has ``role`` (what
  the weight does: filter, depthwise, fc_weight, argument), ``layout`` (its
  role's own layout, or another after a ``--max-image`` fallback, which also
  sets ``fallback_from``), ``choice`` (why that layout: runtime.placement's reason,
  with the size of every candidate it rejected), logical ``dims``, the
  image's ``storage`` and ``size`` (one number per coordinate of that
  storage, x first: [width, height] for a 2-D image, [width, height,
  depth] for an array or a 3-D image, [pixels] for the buffer storages;
  format 6 and before wrote ``width``/``height``), ``dtype``, ``bytes``, the source tensor's
  ``source_shape``/``source_dtype`` (as the model file stores it, ONNX or
  TFLite; format 5 and before called them ``onnx_shape``/``onnx_dtype``, which
  :func:`upgrade` reads) and ``source_layout``
  when its format names one (TFLite's ``OHWI``), the ``consumer`` node, the
  ``origin`` (initializer, Constant node, folded chain) and the ``steps`` that
  turn the ONNX tensor into the logical one (``mapping`` says it in words). A
  buffer entry (what no image layout takes) has ``layout: "buffer"``, a plain ``tag``,
  ``dims``, ``reason``, and the ``role`` it would have had on an image (null for
  a weight no image layout takes). A tiled
  entry (an image over ``--max-image`` in every layout of its kind) is an image
  entry whose ``size`` is the whole image's, with ``tiles``: one
  ``{key, row, col, x0, y0, width, height}`` per tile in row-major order, each stored as its own tensor under ``key``
  (``NAME.tile-R-C``) and covering pixels x in [x0, x0 + width), y in [y0, y0
  + height) of the whole image (the rule of :mod:`runtime.algebra.tiles`).
  Quantized weights (runtime.model.integer_weights): a folded DequantizeLinear's
  entry has ``dequantized`` (its q, scale, zero point, axis and node); a kept
  integer weight's has ``quantization`` (``q``, the keys of its ``scale`` and
  ``zero_point`` tensors, ``axis``, ``logical_axis``, ``source``,
  ``scale_source``); those parameter tensors have entries of their own with
  ``param_of`` and ``source_name``. A Winograd image (``--winograd``) has
  ``transform``: the name of the G whose U = G·g·Gᵀ the image holds (its
  ``layout`` is the Winograd layout, ``dims`` the filter's logical ones).
* ``skipped``: every other constant, with ``consumer`` and ``reason`` (a
  constant stored as a weight's parameter is not listed again).
* top level: ``format`` (``clayout-model/7``), ``source``, ``source_format``
  (``onnx`` or ``tflite``), ``dtype`` (of float
  images), ``quantized`` (fold or keep), ``max_image``, ``engine`` and
  ``host_converted`` (the images over that engine's device limit, converted
  by the cpu engine), and with ``--winograd`` ``winograd`` (the engine or
  layout name given); ``inputs`` and ``outputs``: the graph's, each
  ``{name, shape, dtype}`` (runtime.model.front_ends.interface), the names an
  engine binds its input and output images to.

Example::

    >>> images, manifest = read_manifest("w.safetensors")           # doctest: +SKIP
    >>> e = manifest["tensors"][0]
    >>> runtime.from_image(stored_image(images, e), e["layout"], e["dims"])  # doctest: +SKIP
"""
from __future__ import annotations

import json
import struct
from collections.abc import Mapping

import numpy as np

from ..algebra.catalog import image_layout
from ..algebra.layout import ImageDesc
from ..algebra.tiles import plan_of
from ..errors import ClayoutError
from .graph import printable
from .accounting import FATES as ACCOUNTED
from .tensor import parse_steps

# safetensors (the optional model extra) is imported inside the two functions
# that read and write the file, so that the manifest's printing works without it.

MANIFEST_KEY = "clayout"
FORMAT = "clayout-model/7"   # 3: tiles, choice; 4: quantized, host_converted, role = the role;
#                              5: source_format (onnx, tflite), source_layout;
#                              6: source_shape, source_dtype, source_name (were onnx_*);
#                              7: storage, size (a number per coordinate; was width, height)
PLAIN = "abcdefghijkl"


def bits(a: np.ndarray) -> np.ndarray:
    """Raw bits of an array (NaN == NaN, -0.0 != 0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _common(p) -> dict:
    """What every stored tensor's entry says of the source tensor (``p``: a
    runtime.model.plan.Placement, which holds it by reference)."""
    t = p.tensor
    entry = {"source_shape": list(t.shape), "source_dtype": t.dtype,
             "consumer": t.consumer, "origin": t.origin, "mapping": p.mapping,
             "steps": [step.json() for step in p.steps],
             "transposed": any(step.kind == "transpose" for step in p.steps)}
    for key, value in (("param_of", p.weight.param_of), ("source_name", p.weight.source_name),
                       ("source_layout", t.layout), ("quantization", p.weight.quantization),
                       ("dequantized", t.dequantized)):
        if value:
            entry[key] = dict(value) if isinstance(value, Mapping) else value
    return entry


def tensor_entry(p) -> dict:
    """The entry of a stored tensor (an image, its tiles, or a buffer)."""
    return buffer_entry(p) if p.layout == "buffer" else image_entry(p)


def image_entry(p) -> dict:
    """The entry of a weight on one image, or on the tiles of one; ``choice``
    says why that layout (runtime.placement's reason), ``fallback_from`` the
    role's own layout when another was chosen; ``width``/``height`` are the
    whole image's, ``bytes`` the tiles' together."""
    store = image_layout(p.layout).at(p.dims).storage
    entry = {"name": p.name, "role": p.role, "layout": p.layout, "dims": list(p.dims),
             "storage": store.name, "size": list(p.size), "dtype": p.dtype, "bytes": p.bytes,
             **_common(p)}
    if p.fallback_from:
        entry["fallback_from"] = p.fallback_from
    if p.reason:
        entry["choice"] = p.reason
    if p.tiles:
        entry["tiles"] = [{"key": tile_key(p.name, t), "row": t.row, "col": t.col, "x0": t.x0,
                           "y0": t.y0, "width": t.width, "height": t.height} for t in p.tiles]
    if p.transform:
        entry["transform"] = p.transform
    return entry


def tile_key(name: str, tile) -> str:
    """The tensor key of ``tile`` (row R, column C) of the weight ``name``:
    ``NAME.tile-R-C``, as ``clayout to-image --max-image`` names its files."""
    return f"{name}.tile-{tile.row}-{tile.col}"


def keys_of(p) -> list[str]:
    """The file's keys of a stored tensor (a runtime.model.plan.Placement):
    its name, or its tiles' keys in row-major order."""
    return [tile_key(p.name, t) for t in p.tiles] if p.tiles else [p.name]


def array_shapes(p) -> list[tuple[int, ...]]:
    """The host array shape of each key of ``keys_of(p)``, from the plan
    alone: an image's (ImageDesc.array_shape), each tile's (height, width
    and the lanes), a buffer's logical dims."""
    if p.kind == "buffer":
        return [tuple(p.dims)]
    image = ImageDesc(image_layout(p.layout), p.dims, p.dtype)
    if not p.tiles:
        return [image.array_shape]
    lanes = (image.lanes,) if image.layout.lanes != 1 else ()
    return [(t.height, t.width) + lanes for t in p.tiles]


def stored_image(tensors: dict, entry: dict):
    """What an image entry reads back from: its array, or for a tiled entry
    the tuple of its tiles in row-major order (``from_image`` takes either),
    each tile checked against the pixel range the manifest gives it."""
    if "tiles" not in entry:
        return tensors[entry["name"]]
    name = printable(entry["name"])
    missing = [t["key"] for t in entry["tiles"] if t["key"] not in tensors]
    if missing:
        raise ClayoutError(f"tensor {name!r}: tile {printable(missing[0])!r} listed in the "
                           "manifest is not in the file")
    arrays = tuple(tensors[t["key"]] for t in entry["tiles"])
    try:
        plan = plan_of(entry["layout"], entry["dims"], arrays)
    except ClayoutError as exc:
        raise ClayoutError(f"tensor {name!r}: {exc}") from None
    ranges = [[t.row, t.col, t.x0, t.y0, t.width, t.height] for t in plan.tiles]
    listed = [[t[k] for k in ("row", "col", "x0", "y0", "width", "height")]
              for t in entry["tiles"]]
    if listed != ranges or list(plan.image) != entry["size"]:
        raise ClayoutError(f"tensor {name!r}: the manifest's tiles do not match the tile plan "
                           f"of its {len(arrays)} stored tiles (runtime.algebra.tiles)")
    return arrays


def buffer_entry(p) -> dict:
    return {"name": p.name, "role": p.role, "layout": "buffer", "tag": PLAIN[:len(p.dims)],
            "dims": list(p.dims), "dtype": p.dtype, "bytes": p.bytes, "reason": p.reason,
            **_common(p)}


def skipped_entry(p) -> dict:
    t = p.tensor
    entry = {"name": p.name, "source_shape": list(t.shape), "source_dtype": t.dtype,
             "consumer": t.consumer, "origin": t.origin, "reason": p.reason}
    if p.weight.folded_into:
        entry["folded_into"] = list(p.weight.folded_into)
    return entry


def steps_of(entry: dict) -> tuple:
    """The steps of a manifest entry, as records (runtime.model.tensor)."""
    return parse_steps(entry["steps"])


OLD_KEYS = {"onnx_shape": "source_shape", "onnx_dtype": "source_dtype",
            "onnx_name": "source_name"}   # clayout-model/5 and before


def upgrade(manifest: dict) -> dict:
    """A manifest of an earlier format with today's keys: an entry's
    ``onnx_shape`` / ``onnx_dtype`` / ``onnx_name`` (format 5 and before,
    filled for TFLite models too) read as ``source_shape`` /
    ``source_dtype`` / ``source_name``; an image entry's ``width`` /
    ``height`` (format 6 and before, 2-D images only) as ``storage``
    image2d and ``size`` [width, height]."""
    for entry in list(manifest.get("tensors", ())) + list(manifest.get("skipped", ())):
        for old, new in OLD_KEYS.items():
            if old in entry and new not in entry:
                entry[new] = entry.pop(old)
        if "width" in entry and "size" not in entry:
            entry["storage"] = "image2d"
            entry["size"] = [entry.pop("width"), entry.pop("height")]
    return manifest


def accounting_problems(manifest: dict) -> list[str]:
    """What is wrong with a manifest's accounting (``--verify``): its totals
    must add up to the graph's float elements, each constant's fate must be
    one of the five, a placed or kept one stored, a folded one's tensors
    listed in the file."""
    a = manifest.get("accounting")
    if not a:
        return ["the manifest has no accounting"]
    problems = []
    listed = a.get("constants", [])
    if sum(a[f] for f in ACCOUNTED) != a["float_elements"] or \
            sum(c["elements"] for c in listed) != a["float_elements"] or \
            len(listed) != a["float_constants"]:
        problems.append("the accounting's totals do not add up to the graph's float elements")
    stored = {e["name"] for e in manifest["tensors"]} | \
        {e["source_name"] for e in manifest["tensors"] if "source_name" in e}
    named = stored | {e["name"] for e in manifest["skipped"]}
    for c in listed:
        if c["fate"] not in ACCOUNTED:
            problems.append(f"{printable(c['name'])!r}: fate {c['fate']!r}")
        elif c["fate"] in ("placed", "kept") and c["name"] not in stored:
            problems.append(f"{printable(c['name'])!r} is {c['fate']} but not stored")
        elif c["fate"] == "folded" and not set(c.get("into", ())) <= named:
            problems.append(f"{printable(c['name'])!r} is folded into tensors the manifest "
                            "does not list")
    for fate in ACCOUNTED:
        if a[fate] != sum(c["elements"] for c in listed if c["fate"] == fate):
            problems.append(f"the {fate} total is not the sum of its constants")
    return problems


# -- the file ---------------------------------------------------------------------------------
def safetensors_bytes(stored: dict, manifest: dict) -> bytes:
    """The safetensors file: the tensors plus the manifest under metadata key ``clayout``."""
    from safetensors.numpy import save
    return save(stored, metadata={MANIFEST_KEY: json.dumps(manifest)})


def read_bytes(data: bytes) -> tuple[dict, dict]:
    """(tensors, manifest) of the bytes of a file written by ``clayout model``."""
    from safetensors.numpy import load
    try:
        (size,) = struct.unpack("<Q", data[:8])
        meta = json.loads(data[8:8 + size]).get("__metadata__") or {}
        manifest = upgrade(json.loads(meta[MANIFEST_KEY]))
    except (struct.error, ValueError, KeyError, TypeError, AttributeError):
        raise ClayoutError("no clayout manifest in the safetensors metadata") from None
    return load(data), manifest


def read_manifest(path) -> tuple[dict, dict]:
    """(tensors, manifest) of a file written by ``clayout model``."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return read_bytes(data)
    except ClayoutError as exc:
        raise ClayoutError(f"{path}: {exc}") from None
