"""``clayout demo`` (run by ``make demo``): the main job on a real sample.

Converts the weights of the bundled ONNX CNN (runtime/data/sample_cnn.onnx,
built by tools/make_sample_model.py) into image layouts with ``clayout model``,
prints the manifest, then checks every stored image: ``from_image`` of it must
give back the ONNX weight bit for bit, and the image must equal what the
reference engine (the DESIGN §2 formulas, evaluated element by element) makes.
"""
from __future__ import annotations

import os
import tempfile
from importlib import resources

import numpy as np

from . import model
from .api import to_image

SAMPLE = "data/sample_cnn.onnx"


def sample_path() -> str:
    path = resources.files("runtime").joinpath(SAMPLE)
    if not path.is_file():
        from .errors import ClayoutError
        raise ClayoutError(f"the sample model {SAMPLE} is missing from the runtime package; "
                           "rebuild it with: python tools/make_sample_model.py")
    return str(path)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def check(path: str, source_model, engine) -> list[tuple[str, bool, bool]]:
    """(name, round trip identical, equal to the reference's image) per stored image."""
    images, manifest = model.read_manifest(path)
    originals = model.initializer_arrays(source_model)
    results = []
    for entry in manifest["tensors"]:
        image = images[entry["name"]]
        back = model.round_trip(image, entry, engine=engine)
        original = originals[entry["name"]]
        same = back.shape == original.shape and np.array_equal(_bits(back), _bits(original))
        logical = model.logical_weight(original, model.weight_of(entry))
        ref = to_image(np.ascontiguousarray(logical), entry["layout"], dtype=entry["dtype"],
                       engine="reference")
        results.append((entry["name"], same, np.array_equal(_bits(ref), _bits(image))))
    return results


def run(args) -> int:
    from .cli import choose_engine, convert_file
    engine, why = choose_engine(args.engine)
    path = sample_path()
    source = model.load(path)
    ops = ", ".join(dict.fromkeys(n.op_type for n in source.graph.node))
    print("clayout demo: the weights of a small ONNX CNN placed on OpenCL image layouts\n")
    print(f"engine  {why}")
    print(f"model   {path} ({os.path.getsize(path)} bytes; {len(source.graph.node)} nodes: {ops}; "
          f"{len(source.graph.initializer)} initializers)")
    with tempfile.TemporaryDirectory(prefix="clayout-demo-") as tmp:
        out = args.output or os.path.join(tmp, "sample_cnn.safetensors")
        print(f"\n$ clayout model {os.path.basename(path)} -o {out} --engine "
              f"{getattr(engine, 'name', engine)}")
        manifest = convert_file(path, out, "f32", model.MAX_IMAGE, engine)
        print(model.manifest_table(manifest))
        total = sum(e["bytes"] for e in manifest["tensors"])
        print(f"wrote {out} ({os.path.getsize(out)} bytes: {len(manifest['tensors'])} f32 images, "
              f"{total} bytes of pixels; manifest under metadata key {model.MANIFEST_KEY!r})")
        results = check(out, source, engine)
    print("\nround trip: from_image of each stored image against the ONNX weight, bit for bit;")
    print("reference:  each image against the reference engine's (DESIGN §2 formulas)")
    for name, same, ref in results:
        print(f"  {name:<14} round trip {'ok' if same else 'DIFFERS'}   "
              f"reference {'ok' if ref else 'DIFFERS'}")
    good = sum(same and ref for _, same, ref in results)
    print(f"{good}/{len(results)} images exact; engine {getattr(engine, 'name', engine)}"
          + ("" if args.output else "; the file was written to a temporary folder and removed"))
    return 0 if good == len(results) else 1
