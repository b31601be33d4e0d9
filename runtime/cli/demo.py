"""``clayout demo`` (run by ``make demo``): the main job on real samples.

Converts the weights of the bundled ONNX CNN (runtime/data/sample_cnn.onnx,
built by tools/make_sample_model.py) into image layouts with ``clayout model``,
prints the manifest, then checks every stored image: ``from_image`` of it must
give back the ONNX weight bit for bit, and the image must equal what the
reference engine (the layout table's formulas, evaluated element by element)
makes. With ``--ppocr`` it then does the same for a real export, PaddleOCR's
PP-OCRv4 text detector, fetched from PyPI (the wheel of rapidocr-onnxruntime,
cached; see :func:`fetch_ppocr`) when PyPI is reachable.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from importlib import resources

import numpy as np

from .. import model
from ..algebra.tiles import plan_of
from ..api import to_image
from ..engine import choose_engine
from ..errors import ClayoutError
from ..model import manifest as mf

SAMPLE = "data/sample_cnn.onnx"
PPOCR_WHEEL = ("rapidocr-onnxruntime", "1.4.4")
PPOCR_MODELS = ("ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx")


def sample_path() -> str:
    path = resources.files("runtime").joinpath(SAMPLE)
    if not path.is_file():
        raise ClayoutError(f"the sample model {SAMPLE} is missing from the runtime package; "
                           "rebuild it with: python tools/make_sample_model.py")
    return str(path)


def cache_dir() -> str:
    """Where fetched models live: $CLAYOUT_CACHE, else ~/.cache/clayout."""
    return os.environ.get("CLAYOUT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                            "clayout")


def fetch_ppocr(cache: str, timeout: int = 60) -> dict[str, str]:
    """The PP-OCRv4 models as {file name: path}, taken from the PyPI wheel of
    rapidocr-onnxruntime 1.4.4: ``pip download --no-deps`` into ``cache`` (once),
    then only the two .onnx files are unzipped (the package is never imported
    or installed). A failed download is a ClayoutError with pip's last line."""
    name, version = PPOCR_WHEEL
    os.makedirs(cache, exist_ok=True)
    paths = {m: os.path.join(cache, m) for m in PPOCR_MODELS}
    if all(os.path.isfile(p) for p in paths.values()):
        return paths
    wheel = os.path.join(cache, f"{name.replace('-', '_')}-{version}-py3-none-any.whl")
    if not os.path.isfile(wheel):
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--disable-pip-version-check", "--timeout", str(timeout),
                               "-d", cache, f"{name}=={version}"],
                              capture_output=True, text=True)
        if done.returncode or not os.path.isfile(wheel):
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            raise ClayoutError(f"pip download {name}=={version} failed (exit "
                               f"{done.returncode}): {lines[-1] if lines else 'no output'}")
    with zipfile.ZipFile(wheel) as z:
        for m, path in paths.items():
            data = z.read(f"{name.replace('-', '_')}/models/{m}")
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
    return paths


def check(path: str, source_path: str, engine) -> list[tuple[str, bool, bool]]:
    """(name, round trip identical, equal to the reference's image) per stored image
    (a tiled one's tiles put together)."""
    images, manifest = mf.read_manifest(path)
    originals = model.weight_arrays(source_path)
    results = []
    for entry in manifest["tensors"]:
        image, original = mf.stored_image(images, entry), originals[entry["name"]]
        back = model.read_back(image, entry, engine=engine)
        if isinstance(image, tuple):
            image = plan_of(entry["layout"], entry["dims"], image).join(image)
        want = model.stored_values(original, entry["dtype"])
        same = back.shape == want.shape and np.array_equal(mf.bits(back), mf.bits(want))
        logical = model.logical_weight(original, mf.steps_of(entry))
        ref = to_image(np.ascontiguousarray(logical), entry["layout"], dtype=entry["dtype"],
                       engine="reference")
        results.append((entry["name"], same, np.array_equal(mf.bits(ref), mf.bits(image))))
    return results


def _convert_and_check(path: str, out: str, engine, show_rows: int | None) -> bool:
    print(f"\n$ clayout model {os.path.basename(path)} -o {out} --engine "
          f"{engine.name}")
    manifest, _ = model.convert_file(path, out, "f32", model.MAX_IMAGE, engine)
    lines = mf.table(manifest).splitlines()
    if show_rows is not None and len(lines) > show_rows + 4:
        lines = lines[:show_rows] + [f"... ({len(manifest['tensors'])} images in all)"] + \
            [ln for ln in lines if ln.startswith("skipped ")]
    print("\n".join(lines))
    print(mf.summary(manifest, out))
    results = check(out, path, engine)
    bad = [(n, same, ref) for n, same, ref in results if not (same and ref)]
    if show_rows is None:
        print("round trip: from_image of each stored image against the ONNX weight, bit for bit;")
        print("reference:  each image against the reference engine's (the layout formulas)")
        for name, same, ref in results:
            print(f"  {name:<14} round trip {'ok' if same else 'DIFFERS'}   "
                  f"reference {'ok' if ref else 'DIFFERS'}")
    for name, same, ref in bad if show_rows is not None else ():
        print(f"  {name}: round trip {'ok' if same else 'DIFFERS'}, "
              f"reference {'ok' if ref else 'DIFFERS'}")
    print(f"{len(results) - len(bad)}/{len(results)} images exact (round trip and reference); "
          f"engine {engine.name}")
    return not bad


def run(args) -> int:
    engine, why = choose_engine(args.engine)
    path = sample_path()
    source = model.load(path)
    ops = ", ".join(dict.fromkeys(n.op_type for n in source.graph.node))
    print("clayout demo: the weights of ONNX CNNs placed on OpenCL image layouts\n")
    print(f"engine  {why}")
    print(f"model   {path} ({os.path.getsize(path)} bytes; {len(source.graph.node)} nodes: {ops}; "
          f"{len(source.graph.initializer)} initializers, "
          f"{sum(n.op_type == 'Constant' for n in source.graph.node)} Constant nodes)")
    with tempfile.TemporaryDirectory(prefix="clayout-demo-") as tmp:
        out = args.output or os.path.join(tmp, "sample_cnn.safetensors")
        ok = _convert_and_check(path, out, engine, None)
        ok = _end_to_end(path, out, engine) and ok
        if getattr(args, "ppocr", False):
            ok = _ppocr(tmp, engine) and ok
    if not args.output:
        print("the files were written to a temporary folder and removed")
    return 0 if ok else 1


def _end_to_end(path: str, weights: str, engine) -> bool:
    """The sample run through the accessor kernels against onnxruntime, on a device."""
    if engine.domain == "host":
        print("end to end: needs an OpenCL device (the compute kernels run through accessors "
              "on it); the cpu engine was used, so it was not run")
        return True
    from ..compute.network import compare_with_onnxruntime   # pyopencl, mako: a device is here
    line, same = compare_with_onnxruntime(path, weights, engine)
    print(line)
    return same


def _ppocr(tmp: str, engine) -> bool:
    cache = cache_dir()
    print(f"\nreal export: PaddleOCR PP-OCRv4 text detector from PyPI's "
          f"{'=='.join(PPOCR_WHEEL)} wheel (cached in {cache})")
    cached = os.path.isfile(os.path.join(cache, PPOCR_MODELS[0]))
    try:
        paths = fetch_ppocr(cache, timeout=15)
    except (ClayoutError, OSError, KeyError, zipfile.BadZipFile) as exc:
        print(f"PyPI not reachable or the wheel unusable ({exc}); "
              "the bundled sample above is the offline demo")
        return True
    det = paths[PPOCR_MODELS[0]]
    print(f"{'found in the cache' if cached else 'PyPI reachable, fetched'}: converting {det} "
          f"({os.path.getsize(det)} bytes; every weight in a Constant node, 0 initializers)")
    return _convert_and_check(det, os.path.join(tmp, "ppocr_det.safetensors"), engine, 12)
