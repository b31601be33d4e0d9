"""``clayout demo`` (run by ``make demo``): the main job on real samples.

Converts the weights of the bundled ONNX CNN (runtime/data/sample_cnn.onnx,
built by tools/make_sample_model.py) into image layouts with ``clayout model``,
prints the manifest, then checks every stored image: ``from_image`` of it must
give back the ONNX weight bit for bit, and the image must equal what the
reference engine (the layout table's formulas, evaluated element by element)
makes. On an OpenCL device it then runs the sample end to end through the
accessor kernels against onnxruntime, twice: on a random input placed by
``to_image``, and from a camera frame: :func:`sample_frame` (a 640x480 NV21
frame of a made-up outdoor scene) turned on the device by ``from_frame``
into the model's input image (resized to the input's W x H declared in the
ONNX file, normalized with the ImageNet mean and std, RGB order: the usual
preprocessing of CNNs trained on ImageNet), while onnxruntime gets the
reference engine's ``from_frame`` of the same frame. With ``--ppocr`` it then does the same for a real export, PaddleOCR's
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
from .args import add_engine
from .checks import check_output_kind
from ..model import manifest as mf, report

SAMPLE = "data/sample_cnn.onnx"
PPOCR_WHEEL = ("rapidocr-onnxruntime", "1.4.4")
PPOCR_MODELS = ("ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx")
FRAME_SIZE = (640, 480)                      # (W, H) of the demo's camera frame
IMAGENET_MEAN = (123.675, 116.28, 103.53)   # per RGB channel, in pixel units (0..255)
IMAGENET_STD = (58.395, 57.12, 57.375)


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
    rapidocr-onnxruntime 1.4.4 (:func:`fetch_from_wheel`)."""
    name, version = PPOCR_WHEEL
    folder = name.replace("-", "_")
    return fetch_from_wheel(cache, name, version, {m: f"{folder}/models/{m}" for m in PPOCR_MODELS},
                            timeout)


def fetch_from_wheel(cache: str, name: str, version: str, members: dict[str, str],
                     timeout: int = 60) -> dict[str, str]:
    """Files of the PyPI wheel ``name==version`` as {file name: path}: the
    wheel is fetched with ``pip download --no-deps`` into ``cache`` (once, the
    wheel pip picks for this Python and platform), then only ``members``
    ({file name: path inside the wheel}) are unzipped beside it; the package is
    never imported or installed. A failed download is a ClayoutError with
    pip's last line."""
    os.makedirs(cache, exist_ok=True)
    paths = {m: os.path.join(cache, m) for m in members}
    if all(os.path.isfile(p) for p in paths.values()):
        return paths
    prefix = f"{name.replace('-', '_')}-{version}-"
    wheels = [f for f in os.listdir(cache) if f.startswith(prefix) and f.endswith(".whl")]
    if not wheels:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--disable-pip-version-check", "--timeout", str(timeout),
                               "-d", cache, f"{name}=={version}"],
                              capture_output=True, text=True)
        wheels = [f for f in os.listdir(cache) if f.startswith(prefix) and f.endswith(".whl")]
        if done.returncode or not wheels:
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            raise ClayoutError(f"pip download {name}=={version} failed (exit "
                               f"{done.returncode}): {lines[-1] if lines else 'no output'}")
    with zipfile.ZipFile(os.path.join(cache, sorted(wheels)[0])) as z:
        for m, path in paths.items():
            data = z.read(members[m])
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
        if entry["layout"] == "buffer":   # its values as stored, the checks' subject is images
            continue
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
          f"{engine.name} --verify")
    manifest, verified = model.convert_file(path, out, "f32", model.MAX_IMAGE, engine,
                                            verify_all=True)
    lines = report.table(manifest).splitlines()
    if show_rows is not None and len(lines) > show_rows + 4:
        lines = lines[:show_rows] + [f"... ({len(manifest['tensors'])} images in all)"] + \
            [ln for ln in lines if ln.startswith("skipped ")]
    print("\n".join(lines))
    print(report.accounting_line(manifest))
    print(report.summary(manifest, out))
    print(report.verified_line(manifest, verified))
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
        ok = _frame_end_to_end(path, out, engine) and ok
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


def _frame_end_to_end(path: str, weights: str, engine) -> bool:
    """The sample run from a camera frame (from_frame on the device) against onnxruntime."""
    if engine.domain == "host":
        print("end to end from a frame: needs an OpenCL device (from_frame's kernel and the "
              f"compute kernels run on it); the {engine.name} engine was used, so it was not run")
        return True
    from ..compute.network import compare_frame_with_onnxruntime   # pyopencl: a device is here
    line, same = compare_frame_with_onnxruntime(path, weights, engine, sample_frame(),
                                                format="nv21", mean=IMAGENET_MEAN,
                                                std=IMAGENET_STD)
    print(line)
    return same


# -- the demo's camera frame ------------------------------------------------------------------
def _paint(img: np.ndarray, alpha: np.ndarray, colour) -> None:
    img += alpha[..., None] * (np.asarray(colour, np.float64) - img)


def _edge(distance: np.ndarray, soft: float) -> np.ndarray:
    """Coverage of a shape from its signed distance in pixels (negative
    inside): a ramp ``soft`` pixels wide, as a lens blurs an edge."""
    return np.clip(0.5 - distance / soft, 0.0, 1.0)


def sample_rgb(width: int = FRAME_SIZE[0], height: int = FRAME_SIZE[1],
               seed: int = 0) -> np.ndarray:
    """A photo-like (height, width, 3) u8 RGB picture, the same for the same
    arguments: a sky and a field in smooth gradients under a wavy horizon, a
    sun with a glow, a house with a window and a door, a tree; soft edges, a
    vignette and mild sensor noise (sigma 2 levels)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / width, y / height
    img = np.empty((height, width, 3))
    t = np.clip(v / 0.6, 0, 1)[..., None]
    img[:] = (1 - t) * (60, 115, 190) + t * (195, 215, 232)                  # sky
    horizon = (0.58 + 0.025 * np.sin(2 * np.pi * (1.3 * u + 0.2))) * height
    g = np.clip((v - 0.55) / 0.45, 0, 1)[..., None]
    field = (1 - g) * (112, 140, 70) + g * (58, 84, 38) + \
        (12 * np.sin(2 * np.pi * (3 * u + 9 * v)))[..., None]
    img += _edge(horizon - y, 3.0)[..., None] * (field - img)
    sun = np.hypot(x - 0.8 * width, y - 0.18 * height)
    _paint(img, 0.35 * np.exp(-(sun / (0.12 * height)) ** 2), (255, 236, 190))   # glow
    _paint(img, _edge(sun - 0.06 * height, 4.0), (255, 246, 215))
    box = lambda x0, y0, x1, y1: np.maximum(np.maximum(x0 * width - x, x - x1 * width),   # noqa
                                            np.maximum(y0 * height - y, y - y1 * height))
    _paint(img, _edge(box(0.12, 0.40, 0.36, 0.74), 1.5), (168, 70, 52))          # house
    roof = np.maximum(y - 0.41 * height, np.abs(x - 0.24 * width) * 0.55 -
                      (y - 0.27 * height))
    _paint(img, _edge(roof, 1.5), (92, 48, 40))
    _paint(img, _edge(box(0.16, 0.48, 0.22, 0.57), 1.2), (236, 224, 150))         # window
    _paint(img, _edge(box(0.27, 0.56, 0.32, 0.74), 1.2), (70, 42, 30))            # door
    _paint(img, _edge(box(0.585, 0.52, 0.605, 0.78), 1.5), (84, 60, 38))          # trunk
    crown = (np.hypot((x - 0.595 * width) / (0.09 * width), (y - 0.45 * height) /
                      (0.13 * height)) - 1) * 0.09 * width
    _paint(img, _edge(crown, 5.0), (46, 102, 48))
    img *= (1 - 0.28 * ((u - 0.5) ** 2 + (v - 0.5) ** 2) * 2)[..., None]          # vignette
    img += np.random.default_rng(seed).normal(0.0, 2.0, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def rgb_to_nv21(rgb: np.ndarray) -> np.ndarray:
    """An (h, w, 3) u8 RGB picture (h, w even) as an NV21 frame, (h*3/2, w)
    u8: the BT.601 limited-range forward formulas (Y in 16..235, Cb and Cr
    in 16..240, from R, G, B in 0..255), Cb and Cr averaged over each 2x2
    block, then the Y plane followed by V, U interleaved at half resolution."""
    h, w, _ = rgb.shape
    if h % 2 or w % 2:
        raise ClayoutError(f"NV21 takes an even width and height, got {w}x{h}")
    r, g, b = np.moveaxis(rgb.astype(np.float64), -1, 0)
    luma = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    cb = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    cr = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    half = lambda p: p.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))   # noqa: E731
    vu = np.stack([half(cr), half(cb)], axis=-1).reshape(h // 2, w)
    return np.clip(np.rint(np.concatenate([luma, vu])), 0, 255).astype(np.uint8)


def sample_frame(width: int = FRAME_SIZE[0], height: int = FRAME_SIZE[1],
                 seed: int = 0) -> np.ndarray:
    """The demo's camera frame: :func:`sample_rgb` as NV21, (height*3/2, width) u8."""
    return rgb_to_nv21(sample_rgb(width, height, seed))


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


# -- the command ---------------------------------------------------------------------------
def register(command) -> None:
    p = command("demo", cmd_demo, "convert the bundled sample CNN and check the round trip")
    add_engine(p, default="auto",
                   help="engine (default auto: OpenCL when a device exists, else cpu)")
    p.add_argument("-o", "--output", metavar="OUT.safetensors",
                   help="keep the converted file here (default: a temporary folder)")
    p.add_argument("--ppocr", action="store_true",
                   help="also fetch PaddleOCR's PP-OCRv4 detector from PyPI (cached in "
                   "$CLAYOUT_CACHE or ~/.cache/clayout) and convert it, when PyPI is reachable")


def cmd_demo(args) -> int:
    if args.output:
        check_output_kind(args)
    return run(args)
