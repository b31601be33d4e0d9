"""The differential check: random valid conversions from a seed, run on every
engine this machine has, each result bit for bit the reference engine's.

A case is plain data (``Case``): a door (``reorder``, ``to_image``,
``from_image``; ``read_output``'s cases are tests/differential_outputs.py's),
logical dims, the two sides (a buffer tag, user strides with offset0, or a halo; a named or custom image layout on any storage), their
dtypes, how the input array is held (contiguous, a 1-D step, a crop, a
reversed or transposed view, misaligned, big-endian), and whether ``out=`` is
given (filled with junk first: every element of the result must be written).
The engines (``engines()``): reference, cpu on its compiled and its numpy
path and through runtime.prepare, and per OpenCL implementation present its default engine, direct image
access, the discrete-memory path (``host_in_place=False``) and the tiled
kernel family with direct image access (``tiled=True``: what a GPU runs). An engine's
answer is its result's bits or a refusal (a ClayoutError); any other
exception, or an answer unlike the reference's, is a disagreement. Every
disagreement is a bug: there is no tolerance.

The one documented device exception is kept out of the inputs: with direct
image access a signalling f16 NaN comes back quiet (docs/engines.md), so a
case with an f16 image has its f16 inputs' signalling NaNs made quiet.

Run as a script it prints one JSON line per case (so a crash still names the
case it was in) and is what tests/cross/test_differential.py runs in a child::

    python tests/differential.py --seed 7 --count 60
    python tests/differential.py --seed 7 --case 12     # one case, to reproduce it
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import math
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import runtime  # noqa: E402
from runtime import ClayoutError, ImageDesc, MemoryDesc  # noqa: E402
from runtime.algebra.catalog import NAMED  # noqa: E402
from runtime.algebra.tags import LETTERS  # noqa: E402
from runtime.cpu.engine import CpuEngine  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
import differential_outputs  # noqa: E402
from implementations import implementations  # noqa: E402

DTYPES = ("f32", "f16", "bf16", "s32", "s8", "u8")
IMAGE_DTYPES = ("f32", "f16", "s32", "s8", "u8")
SIZES = (1, 1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 32, 33)
MAX_ELEMS = 3000
FORMS = ("contiguous", "contiguous", "step", "crop", "reversed", "transposed", "unaligned",
         "bigendian")
FAMILIES = ("plain", "blocked", "strided", "halo", "named image", "custom image",
            "from named image", "from custom image", "winograd", "output")


@dataclass(frozen=True)
class Case:
    """One conversion: ``door``, ``dims``, ``src`` / ``dst`` (a buffer:
    {"tag" | "strides", "offset0", "halo", "fill", "dtype"}; an image:
    {"layout", "dtype"}), the input's ``form``, ``out`` (given or not),
    and the ``seed`` of its values."""
    index: int
    family: str
    door: str
    dims: tuple
    src: dict
    dst: dict
    form: str
    out: bool
    seed: int

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


# -- drawing cases -------------------------------------------------------------------------
def _dims(rng: random.Random, nd: int) -> tuple[int, ...]:
    dims = [rng.choice(SIZES) for _ in range(nd)]
    if rng.random() < 0.04:
        dims[rng.randrange(nd)] = 0           # zero volume now and then
    while math.prod(max(d, 1) for d in dims) > MAX_ELEMS:
        i = max(range(nd), key=lambda k: dims[k])
        dims[i] = max(1, dims[i] // 2 + (dims[i] % 2))
    return tuple(dims)


def _plain_tag(rng: random.Random, nd: int) -> str:
    order = list(range(nd))
    rng.shuffle(order)
    return "".join(LETTERS[d] for d in order)


def _blocked_tag(rng: random.Random, nd: int) -> str:
    order = list(range(nd))
    rng.shuffle(order)
    blocked = rng.sample(range(nd), rng.randint(1, min(2, nd)))
    blocks = [(d, rng.choice((2, 4, 8, 16))) for d in blocked]
    if rng.random() < 0.3:                     # one dim blocked twice
        blocks.append((blocked[0], rng.choice((2, 4))))
    rng.shuffle(blocks)
    outer = "".join(LETTERS[d].upper() if d in blocked else LETTERS[d] for d in order)
    return outer + "".join(f"{size}{LETTERS[d]}" for d, size in blocks)


def _buffer(rng: random.Random, family: str, dims, dtype: str) -> dict:
    nd = len(dims)
    if family == "blocked" and rng.random() < 0.8:
        return {"tag": _blocked_tag(rng, nd), "dtype": dtype}
    if family == "strided":
        order = list(range(nd))
        rng.shuffle(order)
        strides, running = [0] * nd, rng.choice((1, 1, 2))
        for d in reversed(order):
            strides[d] = running
            running = running * max(dims[d], 1) + rng.choice((0, 0, 1, 5))
        return {"strides": strides, "offset0": rng.choice((0, 0, 3)), "dtype": dtype}
    if family == "halo":
        lower = [rng.choice((0, 0, 1, 2)) for _ in dims]
        upper = [rng.choice((0, 0, 1, 3)) for _ in dims]
        tag = _blocked_tag(rng, nd) if rng.random() < 0.5 else _plain_tag(rng, nd)
        return {"tag": tag, "halo": [lower, upper], "dtype": dtype,
                "fill": rng.choice((0.0, 1.0, -2.5, 255.5, float("inf")))}
    return {"tag": _plain_tag(rng, nd), "dtype": dtype}


def _custom_layout(rng: random.Random, nd: int) -> str:
    """A valid custom 'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]' over nd dims."""
    lanes = rng.choice((4, 4, 1, 0))
    storage = rng.choice(("image2d", "image2d", "image2d_array", "image3d", "image_buffer",
                          "buffer")) if lanes == 4 else \
        rng.choice(("image2d", "image2d", "image2d_array", "image3d"))
    if lanes == 4:
        order = list(range(nd))
        rng.shuffle(order)
        lane = rng.choice(order)
        tag = "".join(LETTERS[d].upper() if d == lane else LETTERS[d] for d in order) + \
            f"4{LETTERS[lane]}"
    else:
        tag = _plain_tag(rng, nd)
    if storage in ("image_buffer", "buffer"):
        return f"{tag}:0@{storage}"
    if lanes == 0 and rng.random() < 0.15:   # the texel's dim also a row: refused everywhere
        return f"{tag}:{nd}:0"
    room = nd - (lanes == 0)
    layers = rng.randint(1, max(1, room)) if storage in ("image2d_array", "image3d") else 0
    layers = min(layers, room)
    rows = rng.randint(0, room - layers)
    where = f"@{storage}:{layers}" if storage != "image2d" else ""
    return f"{tag}:{rows}:{lanes}{where}"


def _named_dims(rng: random.Random, layout) -> tuple[int, ...]:
    if layout.ndims == 1:
        return _dims(rng, 1)
    if layout.volume is not None and rng.random() < 0.2:
        return _dims(rng, 5)
    if layout.kind == "activation" and rng.random() < 0.15:
        return _dims(rng, 2)
    return _dims(rng, layout.ndims)


def draw(seed: int, index: int) -> Case:
    """Case ``index`` of the run with ``seed``: the families in turn (every
    count of at least len(FAMILIES) covers each), the rest drawn."""
    rng = random.Random(f"{seed}:{index}")
    family = FAMILIES[index % len(FAMILIES)]
    out = rng.random() < 0.3
    form = rng.choice(FORMS)
    values = rng.randrange(2 ** 31)
    if family in ("plain", "blocked", "strided", "halo"):
        dims = _dims(rng, rng.randint(1, 5))
        src = _buffer(rng, rng.choice(("plain", family)), dims, rng.choice(DTYPES))
        dst = _buffer(rng, family, dims, rng.choice(DTYPES))
        if rng.random() < 0.5:
            src, dst = dst, src
        return Case(index, family, "reorder", dims, src, dst, form, out, values)
    if family == "output":   # read_output: its own draw (tests/differential_outputs.py)
        spec = differential_outputs.draw(rng)
        return Case(index, family, "read_output", tuple(spec["dims"]), spec, {}, "contiguous",
                    out, values)
    if family == "winograd":
        name = rng.choice([n for n, lay in NAMED.items() if lay.transform is not None])
        taps = NAMED[name].transform.taps
        dims = (rng.choice((1, 3, 4, 5, 17)), rng.choice((1, 2, 3, 5)), taps, taps)
        image = {"layout": name, "dtype": rng.choice(("f32", "f16"))}
        tensor = {"tag": rng.choice(("abcd", "acdb", "cdba")), "dtype": "f32"}
        if rng.random() < 0.5:
            return Case(index, family, "to_image", dims, tensor, image, form, out, values)
        return Case(index, family, "from_image", dims, image, tensor, "contiguous", out, values)
    if family in ("named image", "from named image"):
        name = rng.choice([n for n, lay in NAMED.items() if lay.transform is None])
        dims = _named_dims(rng, NAMED[name])
        layout = name
    else:
        nd = rng.randint(1, 5)
        layout = _custom_layout(rng, nd)
        dims = list(_dims(rng, nd))
        if layout.partition("@")[0].split(":")[2:] == ["0"]:   # lanes 0: a texel of <= 4
            dims[LETTERS.index(layout.split(":")[0][-1])] = rng.choice((0, 1, 2, 3, 3, 4))
        dims = tuple(dims)
    image = {"layout": layout, "dtype": rng.choice(IMAGE_DTYPES)}
    tensor = _buffer(rng, rng.choice(("plain", "plain", "blocked")), dims, rng.choice(DTYPES))
    if family.startswith("from"):
        return Case(index, family, "from_image", dims, image, tensor,
                    rng.choice(("contiguous", "contiguous", "crop", "reversed")), out, values)
    return Case(index, family, "to_image", dims, tensor, image, form, out, values)


# -- values and the forms an input is held in ---------------------------------------------
def values(dtype: str, n: int, seed: int) -> np.ndarray:
    """``n`` values of ``dtype``: random bits (NaN payloads, subnormals),
    ties and saturating specials, small integers."""
    from strategies import fill
    return fill(dtype, n, seed, "mixed")


def quiet_f16(arr: np.ndarray) -> np.ndarray:
    """``arr`` with its signalling f16 NaNs made quiet (the documented
    exception of direct image access)."""
    if arr.dtype != np.float16:
        return arr
    b = arr.copy().view(np.uint16)
    snan = ((b & 0x7c00) == 0x7c00) & ((b & 0x3ff) != 0) & ((b & 0x200) == 0)
    b[snan] |= 0x200
    return b.view(np.float16)


def held(arr: np.ndarray, form: str, rng: random.Random) -> np.ndarray:
    """``arr`` (contiguous) as the same elements held in ``form``."""
    if form == "step":   # every other element of a bigger array: 1-D, or along the last axis
        if arr.ndim == 1 or rng.random() < 0.5:
            big = np.zeros(arr.size * 2, arr.dtype)
            big[::2] = arr.reshape(-1)
            return big[::2]
        big = np.zeros(arr.shape[:-1] + (arr.shape[-1] * 2,), arr.dtype)
        big[..., ::2] = arr
        return big[..., ::2]
    if form == "crop":   # a window of a bigger array
        pad = [(rng.randint(0, 2), rng.randint(0, 2)) for _ in arr.shape]
        big = np.pad(arr, pad)
        return big[tuple(slice(lo, lo + n) for (lo, _), n in zip(pad, arr.shape))]
    if form == "reversed":   # negative strides
        flip = (slice(None, None, -1),) * arr.ndim
        return np.ascontiguousarray(arr[flip])[flip]
    if form == "transposed" and arr.ndim >= 2:   # another memory order, same elements
        perm = list(range(arr.ndim))
        rng.shuffle(perm)
        return np.ascontiguousarray(arr.transpose(perm)).transpose(np.argsort(perm))
    if form == "unaligned" and arr.itemsize > 1:
        raw = np.zeros(arr.nbytes + 1, np.uint8)
        raw[1:] = arr.reshape(-1).view(np.uint8)
        return np.frombuffer(raw.data, arr.dtype, arr.size, 1).reshape(arr.shape)
    if form == "bigendian" and arr.itemsize > 1 and arr.dtype.kind in "fiu":
        return arr.astype(arr.dtype.newbyteorder(">"))
    return arr


# -- running a case -------------------------------------------------------------------------
def _desc(dims, spec: dict) -> MemoryDesc:
    if "strides" in spec:
        return MemoryDesc(dims, spec["dtype"], strides=spec["strides"], offset0=spec["offset0"])
    halo = spec.get("halo")
    return MemoryDesc(dims, spec["dtype"], tag=spec["tag"],
                      halo=None if halo is None else (tuple(halo[0]), tuple(halo[1])),
                      fill=spec.get("fill", 0))


def _source(case: Case) -> tuple[np.ndarray, object]:
    """(the input array, contiguous, before its form; what describes it)."""
    rng = random.Random(case.seed)
    has_f16_image = any("layout" in s and s["dtype"] == "f16" for s in (case.src, case.dst))
    if case.door == "from_image":
        from runtime.algebra.catalog import image_layout
        layout = image_layout(case.src["layout"])
        plain = MemoryDesc(case.dims, case.src["dtype"] if case.src["dtype"] != "f16" or
                           layout.transform is None else "f32")
        data = values(plain.dtype.name, plain.span, rng.randrange(2 ** 31))
        if layout.transform is not None:   # a Winograd image of finite values
            data = np.nan_to_num(data.astype(np.float32), nan=1.0, posinf=2.0, neginf=-2.0)
            data = np.clip(data, -1e4, 1e4).astype(np.float32)
        image = runtime.to_image(quiet_f16(data) if has_f16_image else data, layout,
                                 dims=case.dims, dtype=case.src["dtype"], engine="reference")
        return image, layout
    desc = _desc(case.dims, case.src)
    data = values(desc.dtype.name, desc.span, rng.randrange(2 ** 31))
    if case.family == "winograd":
        data = np.clip(np.nan_to_num(data, nan=1.0, posinf=2.0, neginf=-2.0), -1e4, 1e4)
    if has_f16_image:
        data = quiet_f16(data)
    shape = runtime.physical_shape(desc)
    return data.reshape(shape), desc


@dataclass(frozen=True)
class Prepared:
    """An engine whose conversions go through runtime.prepare: each case's
    call planned from the input's shape and dtype, then called with it."""
    engine: object


def convert(case: Case, engine, arr: np.ndarray, what) -> np.ndarray:
    """The case's conversion of ``arr`` on ``engine``."""
    if isinstance(engine, Prepared):
        return _prepared(case, engine.engine, arr, what)
    if case.door == "reorder":
        dst = _desc(case.dims, case.dst)
        out = _junk((dst.span,), dst.dtype.np) if case.out else None
        return runtime.reorder(arr, what, dst, engine=engine, out=out)
    if case.door == "to_image":
        src = what
        tag = case.src.get("tag")
        layout = case.dst["layout"]
        if tag is None or src.inner_blks or src.has_halo or "strides" in case.src:
            flat = np.ascontiguousarray(arr).reshape(-1)   # a 1-D physical input
            arr = runtime.reorder(flat, src, MemoryDesc(case.dims, src.dtype), engine="reference")
            tag = None
        out = None
        if case.out:
            from runtime.algebra.catalog import image_layout
            side = ImageDesc(image_layout(layout), case.dims, case.dst["dtype"])
            out = _junk(side.array_shape, side.dtype.np)
        return runtime.to_image(arr, layout, src=tag, dims=case.dims, dtype=case.dst["dtype"],
                                engine=engine, out=out)
    dst = _desc(case.dims, case.dst)
    tag = case.dst.get("tag") if not dst.has_halo and "strides" not in case.dst else None
    shape = runtime.physical_shape(MemoryDesc(case.dims, dst.dtype, tag=tag or None)) \
        if tag else None
    out = _junk(shape, dst.dtype.np) if case.out and shape is not None else None
    return runtime.from_image(arr, what, case.dims, dst=tag, dtype=case.dst["dtype"],
                              engine=engine, out=out)


def _prepared(case: Case, engine, arr: np.ndarray, what) -> np.ndarray:
    """``convert`` through runtime.prepare (the same arguments, planned first)."""
    native = arr.dtype.newbyteorder("=") if arr.dtype.kind in "fiu" else arr.dtype
    if case.door == "reorder":
        dst = _desc(case.dims, case.dst)
        out = _junk((dst.span,), dst.dtype.np) if case.out else None
        shape = arr.shape if arr.ndim == 1 or "tag" in case.src else (arr.size,)
        conv = runtime.prepare.reorder(what, dst, engine=engine)
        return conv(arr.reshape(shape) if shape != arr.shape else arr, out=out)
    if case.door == "to_image":
        src, tag, layout = what, case.src.get("tag"), case.dst["layout"]
        if tag is None or src.inner_blks or src.has_halo or "strides" in case.src:
            flat = np.ascontiguousarray(arr).reshape(-1)
            arr = runtime.reorder(flat, src, MemoryDesc(case.dims, src.dtype), engine="reference")
            tag, native = None, arr.dtype
        out = None
        if case.out:
            from runtime.algebra.catalog import image_layout
            side = ImageDesc(image_layout(layout), case.dims, case.dst["dtype"])
            out = _junk(side.array_shape, side.dtype.np)
        conv = runtime.prepare.to_image(arr.shape, native, layout, src=tag, dims=case.dims,
                                        dtype=case.dst["dtype"], engine=engine)
        return conv(arr, out=out)
    dst = _desc(case.dims, case.dst)
    tag = case.dst.get("tag") if not dst.has_halo and "strides" not in case.dst else None
    shape = runtime.physical_shape(MemoryDesc(case.dims, dst.dtype, tag=tag or None)) \
        if tag else None
    out = _junk(shape, dst.dtype.np) if case.out and shape is not None else None
    conv = runtime.prepare.from_image(arr.shape, native, what, case.dims, dst=tag,
                                      dtype=case.dst["dtype"], engine=engine)
    return conv(arr, out=out)


def _junk(shape, dtype) -> np.ndarray:
    """An array of ``shape`` whose bytes are all 0xA5: a result that leaves
    any element unwritten shows it."""
    return np.frombuffer(b"\xa5" * (math.prod(shape) * np.dtype(dtype).itemsize),
                         dtype).reshape(shape).copy()


def answer(case: Case, engine) -> str:
    """What ``engine`` gives for ``case``: 'bits <hex digest>' of the result,
    'refused' for a ClayoutError, or 'crash <type>: <message>' for anything else."""
    import hashlib
    if case.door == "read_output":
        return differential_outputs.answer(case.src, case.seed, engine, case.out)
    try:
        base, what = _source(case)
    except ClayoutError:
        return "refused"
    arr = held(base, case.form, random.Random(case.seed + 1))
    try:
        result = convert(case, engine, arr, what)
    except ClayoutError:
        return "refused"
    except Exception as exc:  # noqa: BLE001 - every other exception is the bug reported
        return f"crash {type(exc).__name__}: {str(exc)[:200]}"
    result = np.ascontiguousarray(result)
    digest = hashlib.sha1(result.view(np.uint8).tobytes()).hexdigest()[:16]
    return f"bits {result.dtype.str} {result.shape} {digest}"


# -- the engines --------------------------------------------------------------------------
def engines() -> list[tuple[str, object]]:
    """(name, engine) of every engine here."""
    compiled = CpuEngine("compiled")
    out = [("reference", "reference"), ("cpu-compiled", compiled),
           ("cpu-numpy", CpuEngine("numpy")), ("cpu-compiled-prepared", Prepared(compiled))]
    for short, device in implementations():
        from runtime.opencl.engine import OpenCLEngine
        base = OpenCLEngine(device=device)
        out += [(f"opencl-{short}", base),
                (f"opencl-{short}-direct", OpenCLEngine(queue=base.queue, image_access="direct")),
                (f"opencl-{short}-discrete", OpenCLEngine(queue=base.queue, host_in_place=False)),
                (f"opencl-{short}-tiled", OpenCLEngine(queue=base.queue, tiled=True,
                                                       image_access="direct")),
                (f"opencl-{short}-prepared", Prepared(base))]
    return out


def run_case(case: Case, engines_here) -> dict:
    """{engine name: answer} of one case."""
    return {name: answer(case, engine) for name, engine in engines_here}


def disagreements(answers: dict) -> list[str]:
    """The engines whose answer is not the reference's, or that crashed."""
    want = answers["reference"]
    bad = [f"reference {want}"] if want.startswith("crash") else []
    return bad + [f"{name}: {got} (reference: {want})" for name, got in answers.items()
                  if name != "reference" and not same(got, want)]


def same(got, want) -> bool:
    """One answer: the same bits or refusal; an output's values within their bound."""
    if isinstance(want, differential_outputs.Answer):
        return differential_outputs.agrees(got, want)
    return got == want


def main(argv=None) -> int:
    faulthandler.enable()
    sys.path.insert(0, str(ROOT / "tests"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--case", type=int, help="run this case alone")
    args = parser.parse_args(argv)
    here = engines()
    print(json.dumps({"engines": [name for name, _ in here]}), flush=True)
    indices = [args.case] if args.case is not None else range(args.count)
    for index in indices:
        case = draw(args.seed, index)
        print(json.dumps({"start": index, "case": case.text()}), flush=True)
        answers = run_case(case, here)
        print(json.dumps({"index": index, "answers": answers,
                          "bad": disagreements(answers)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
