"""The manifest ``clayout model`` stores with the images, and how it is printed.

The safetensors file holds one tensor per converted weight, named after the ONNX
tensor, and a JSON manifest in its metadata under the key ``clayout``:

* ``tensors``: one entry per stored tensor. An image entry has ``role``,
  ``layout`` (they differ after a ``--max-image`` fallback, which also sets
  ``fallback_from``), logical ``dims``, image ``width``/``height``, ``dtype``,
  ``bytes``, the ONNX ``onnx_shape``/``onnx_dtype``, the ``consumer`` node, the
  ``origin`` (initializer, Constant node, folded chain) and the ``steps`` that
  turn the ONNX tensor into the logical one (``mapping`` says it in words). A
  buffer entry (``--keep-buffers``) has ``role: "buffer"``, a plain ``tag`` and
  ``dims`` instead of a layout, plus ``image_role`` and ``reason``.
* ``skipped``: every other constant, with ``consumer`` and ``reason``.

Example::

    >>> images, manifest = read_manifest("w.safetensors")           # doctest: +SKIP
    >>> e = manifest["tensors"][0]
    >>> runtime.from_image(images[e["name"]], e["layout"], e["dims"])  # doctest: +SKIP
"""
from __future__ import annotations

import json
import struct

import numpy as np

from . import dtypes
from .errors import ClayoutError
from .onnx_graph import printable

# safetensors (the optional model extra) is imported inside the two functions
# that read and write the file, so that the manifest's printing works without it.

MANIFEST_KEY = "clayout"
FORMAT = "clayout-model/2"
PLAIN = "abcdefghijkl"


def bits(a: np.ndarray) -> np.ndarray:
    """Raw bits of an array (NaN == NaN, -0.0 != 0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _common(w) -> dict:
    return {"onnx_shape": list(w.onnx_shape), "onnx_dtype": w.onnx_dtype,
            "consumer": w.consumer, "origin": w.origin, "mapping": w.mapping,
            "steps": [[kind, list(arg)] for kind, arg in w.steps],
            "transposed": any(kind == "transpose" for kind, _ in w.steps)}


def image_entry(w, layout, image: np.ndarray, fallback_from: str = "") -> dict:
    width, height = layout.image_shape(w.dims)
    entry = {"name": w.name, "role": w.role, "layout": layout.name, "dims": list(w.dims),
             "width": width, "height": height, "dtype": dtypes.of_array(image).name,
             "bytes": int(image.nbytes), **_common(w)}
    if fallback_from:
        entry["fallback_from"] = fallback_from
    return entry


def buffer_entry(w, buffer: np.ndarray, reason: str) -> dict:
    return {"name": w.name, "role": "buffer", "tag": PLAIN[:len(w.dims)], "dims": list(w.dims),
            "dtype": dtypes.of_array(buffer).name, "bytes": int(buffer.nbytes),
            "image_role": None if w.role == "skipped" else w.role, "reason": reason,
            **_common(w)}


def skipped_entry(w) -> dict:
    entry = {"name": w.name, "role": "skipped", "onnx_shape": list(w.onnx_shape),
             "onnx_dtype": w.onnx_dtype, "consumer": w.consumer, "origin": w.origin,
             "reason": w.reason}
    if w.folded_into:
        entry["folded_into"] = w.folded_into
    return entry


def steps_of(entry: dict) -> tuple:
    """The steps of a manifest entry as (kind, tuple) pairs."""
    return tuple((kind, tuple(arg)) for kind, arg in entry["steps"])


# -- printing --------------------------------------------------------------------------------
def table(manifest: dict, names_per_reason: int = 3) -> str:
    """The stored tensors as a text table; skipped tensors after it, one line
    per reason with the first few names (the manifest lists them all)."""
    head = ("name", "role", "layout", "dims", "image", "dtype", "bytes")
    rows = [head]
    for e in manifest["tensors"]:
        if e["role"] == "buffer":
            layout, image = f"buffer {e['tag']}", "-"
        else:
            layout = e["layout"] + (f" (not {e['fallback_from']}: too big)"
                                    if "fallback_from" in e else "")
            image = f"{e['width']}x{e['height']}"
        rows.append((printable(e["name"]), e["role"], layout, ",".join(map(str, e["dims"])),
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
    shape = ",".join(map(str, s["onnx_shape"])) or "scalar"
    return (f"{printable(s['name'])} ({s['onnx_dtype']} [{shape}], "
            f"{printable(s['consumer']) or 'unused'})")


def summary(manifest: dict, output: str) -> str:
    """One line: what was written, counted."""
    images = [e for e in manifest["tensors"] if e["role"] != "buffer"]
    buffers = len(manifest["tensors"]) - len(images)
    total = sum(e["bytes"] for e in manifest["tensors"])
    return (f"wrote {printable(output)}: {len(images)} images, {buffers} buffers ({total} bytes "
            f"of {manifest['dtype']}), {len(manifest['skipped'])} skipped; manifest in metadata "
            f"key {MANIFEST_KEY!r}; engine {manifest['engine']}")


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
        manifest = json.loads(meta[MANIFEST_KEY])
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
