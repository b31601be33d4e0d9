"""A converted model's images on an engine: ``load_images(path, engine=None)``.

``clayout model M.onnx -o w.safetensors`` writes every weight's image and a
manifest (runtime/model/manifest.py). An inference engine starts by putting
those images on its device; this is that step, in one call:

    images = runtime.load_images("w.safetensors", engine="opencl")
    images["conv1.weight"]   # <clayout Memory image conv2d_filter dims=(16, 3, 3, 3) on opencl>

Each manifest entry becomes one Memory, keyed by its ``name`` (the ONNX
tensor's), in the manifest's order: an image entry an image Memory of its
layout, dims and dtype (a tiled entry's tiles joined into the whole image,
which the engine must hold: its limits are checked as for any Memory); a
buffer entry (what no image takes) a buffer Memory of its tag; a quantized weight's
scale and zero point tensors by their own entries. The manifest itself
(roles, quantization, Winograd transform) comes from ``read_manifest``.
"""
from __future__ import annotations

from . import engine as engines
from .algebra.catalog import check_fits, image_layout
from .algebra.desc import MemoryDesc
from .algebra.layout import ImageDesc
from .algebra.tiles import plan_of
from .errors import ClayoutError
from .memory import Memory
from .model.manifest import read_manifest, stored_image
from .model.graph import printable


def load_images(path, engine=None) -> dict[str, Memory]:
    """``{name: Memory}`` of every tensor a ``clayout model`` file holds,
    on ``engine`` (a name or an engine object; None: the default engine)."""
    eng = engines.get(engine)
    tensors, manifest = read_manifest(path)
    loaded: dict[str, Memory] = {}
    try:
        for entry in manifest.get("tensors", []):
            name = entry["name"]
            try:
                loaded[name] = _memory(entry, tensors, eng)
            except ClayoutError as exc:
                raise ClayoutError(f"{path}: tensor {printable(name)!r}: {exc}") from None
    finally:   # every upload enqueued without a wait; one wait here, while tensors hold them
        for mem in loaded.values():
            if mem.event is not None:
                mem.event.wait()
    return loaded


def _memory(entry: dict, tensors: dict, eng) -> Memory:
    if entry["layout"] == "buffer":
        desc = MemoryDesc(entry["dims"], entry["dtype"], tag=entry["tag"])
        return Memory.from_numpy(tensors[entry["name"]].reshape(-1), desc, eng, wait=False)
    image = stored_image(tensors, entry)
    if isinstance(image, tuple):   # tiles: the whole image, if the engine holds it
        image = plan_of(entry["layout"], entry["dims"], image).join(image)
    layout = image_layout(entry["layout"])
    side = ImageDesc(layout, entry["dims"], entry["dtype"])
    check_fits(side, eng.limits)
    return Memory.from_numpy(image, layout, eng, dims=entry["dims"], wait=False)


__all__ = ["load_images"]
