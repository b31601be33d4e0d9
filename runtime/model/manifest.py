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
  buffer entry (``--keep-buffers``) has ``layout: "buffer"``, a plain ``tag``,
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
from ..algebra.storage import size_text, storage
from ..algebra.tiles import plan_of
from ..errors import ClayoutError
from .graph import printable
from .accounting import FATES as ACCOUNTED
from .tensor import parse_steps
from .weights import COMPUTE_OPS

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


# -- printing --------------------------------------------------------------------------------
def table(manifest: dict, names_per_reason: int = 3) -> str:
    """The stored tensors as a text table; skipped tensors after it, one line
    per reason with the first few names (the manifest lists them all)."""
    head = ("name", "role", "layout", "dims", "image", "dtype", "bytes")
    rows = [head]
    for e in manifest["tensors"]:
        if e["layout"] == "buffer":
            layout, image = f"buffer {e['tag']}", "-"
        else:
            layout = e["layout"] + (f" (not {e['fallback_from']}: too big)"
                                    if "fallback_from" in e else "")
            image = size_text(e["size"], storage(e["storage"])) + (
                f" in {len(e['tiles'])} tiles" if "tiles" in e else "")
        rows.append((printable(e["name"]), e["role"] or "-", layout, ",".join(map(str, e["dims"])),
                     image, e["dtype"], str(e["bytes"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i == 6 else c.ljust(w) for i, (c, w) in
                       enumerate(zip(r, widths))).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    groups: dict[str, list[dict]] = {}
    for s in manifest["skipped"]:
        groups.setdefault(s["reason"], []).append(s)
    for reason, group in groups.items():
        shown = ", ".join(_skipped_name(s) for s in group[:names_per_reason])
        more = f", ... ({len(group)} in all)" if len(group) > names_per_reason else ""
        lines.append(f"skipped {shown}{more}: {printable(reason)}")
    return "\n".join(lines)


def _skipped_name(s: dict) -> str:
    shape = ",".join(map(str, s["source_shape"])) or "scalar"
    return (f"{printable(s['name'])} ({s['source_dtype']} [{shape}], "
            f"{printable(s['consumer']) or 'unused'})")


def by_op(manifest: dict) -> dict[str, list[int]]:
    """{op kind: [placed on images, kept as buffers, skipped]} of the constants
    each kind of op reads (by each one's ``consumer``; a quantized weight's
    parameters, folded steps and unused constants are left out). The compute
    ops (runtime.model.weights.COMPUTE_OPS) come first, then the others, each in
    order of appearance."""
    counts: dict[str, list[int]] = {}
    for column, entries in ((0, manifest["tensors"]), (2, manifest["skipped"])):
        for e in entries:
            op = (e.get("consumer") or "").split(" ")[0]
            if not op or op == "(folded)" or e.get("param_of"):
                continue
            counts.setdefault(op, [0, 0, 0])[1 if e.get("layout") == "buffer" else column] += 1
    return dict(sorted(counts.items(), key=lambda kv: kv[0] not in COMPUTE_OPS))


def summary(manifest: dict, output: str) -> str:
    """One line: what was written, and its :func:`totals`."""
    return f"wrote {printable(output)}: {totals(manifest)}"


def totals(manifest: dict) -> str:
    """What the manifest stores, counted, and per op kind what became of the
    constants it reads (placed/buffers/skipped): the summary line's words
    after 'wrote OUT:', which ``--dry-run`` prints too."""
    images = [e for e in manifest["tensors"] if e["layout"] != "buffer"]
    buffers = len(manifest["tensors"]) - len(images)
    total = sum(e["bytes"] for e in manifest["tensors"])
    kinds = ", ".join(sorted({e["dtype"] for e in manifest["tensors"]},
                             key=lambda d: (d != manifest["dtype"], d)))
    tiled = [e for e in images if "tiles" in e]
    notes = [f"{len(tiled)} in {sum(len(e['tiles']) for e in tiled)} tiles"] if tiled else []
    winograd = sum("transform" in e for e in images)
    if winograd:
        notes.append(f"{winograd} Winograd")
    split = f" ({', '.join(notes)})" if notes else ""
    ops = ", ".join(f"{op} {'/'.join(map(str, n))}"
                    for op, n in by_op(manifest).items())
    return (f"{len(images)} images{split}, {buffers} buffers "
            f"({total} bytes of {kinds or manifest['dtype']}), {len(manifest['skipped'])} "
            f"skipped; by op (placed/buffers/skipped): {ops or 'none'}; "
            f"manifest in metadata key {MANIFEST_KEY!r}; engine {manifest['engine']}")


def accounting_line(manifest: dict) -> str:
    """The accounting's line (runtime.model.accounting), from the manifest."""
    a = manifest.get("accounting")
    if not a:
        return ""
    parts = ", ".join(f"{a[fate]} {fate}" for fate in ACCOUNTED if a[fate] or fate != "empty")
    return (f"accounted for: {a['float_elements']} float elements in {a['float_constants']} "
            f"constants = {parts}")


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


def verified_line(manifest: dict, verified: int) -> str:
    """What --verify compared: the ONNX weights, for quantized ones the rule or
    q, and Winograd images within their transform's bound."""
    winograd = sum("transform" in e for e in manifest["tensors"])
    tensors = [e for e in manifest["tensors"] if "transform" not in e]
    folded, kept, params = (sum(key in e for e in tensors)
                            for key in ("dequantized", "quantization", "param_of"))
    exact = verified - winograd
    fmt = {"tflite": "TFLite"}.get(manifest.get("source_format"), "ONNX")
    dequantize = "DEQUANTIZE" if fmt == "TFLite" else "DequantizeLinear"
    parts = [(exact - folded - kept - params, f"to their {fmt} weights"),
             (folded, f"to (q - zero_point) * scale of their {dequantize}"),
             (kept, "to their integers q"),
             (params, "scales and zero points to their " + (
                 "TFLite quantization parameters" if fmt == "TFLite" else "ONNX constants"))]
    shown = ", ".join(f"{count} {what}" for count, what in parts if count)
    if winograd:   # Winograd images read back within a bound, the others bit for bit
        return (f"verified {verified} tensors: {winograd} Winograd filter image(s) read back "
                "to their weights within their transform's inverse_bound"
                + (f"; bit for bit: {shown}" if exact else ""))
    if not folded + kept + params:
        return f"verified {verified} tensors: each reads back to its {fmt} weight bit for bit"
    return f"verified {verified} tensors, bit for bit: {shown}"
