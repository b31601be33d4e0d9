"""The commands of the ``clayout`` command line (docs/cli.md): runtime.cli
parses the arguments and calls one ``cmd_*`` function with them, which
returns the exit status. The helpers before them read the inputs and write
the outputs (runtime.fileio: a failure never leaves a half-written file).
"""
from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import numpy as np

from .. import model
from .. import engine as engines
from ..algebra import catalog, dtypes, hostarray, tiles
from ..algebra.catalog import image_layout
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageDesc
from ..algebra.storage import image_text
from ..doors.parse import Wording, image_side, parse_from_image, parse_reorder, parse_to_image
from ..doors.calls import ToTilesCall
from ..cpu import geometry, native
from ..errors import ClayoutError
from ..fileio import atomic_write, atomic_write_all, check_output, load_npy, npy_writer, save_npy
from ..model.left_out import LeftOut
from ..model.report import (accounting_line, memory_line, summary, table, totals,
                            verified_line)
from ..model.graph import printable
from . import figure
from .checks import PROG, check_output_kind
from .demo import run as run_demo
from .info import choose, layout_arg
from .progress import BAR_BYTES, Progress
from .where import explain

# -- files: runtime.fileio -----------------------------------------------------------


def numeric_input(path: str, dtype) -> np.ndarray:
    """The array of ``path``; one of another numeric type (float64, int64) is
    rounded once to ``dtype`` (--dtype), and refused with that hint without it."""
    arr = load_npy(path)
    return dtypes.host_array(arr, dtype, path)


def _dims_text(dims) -> str:
    return "x".join(map(str, dims))


# -- conversion commands ------------------------------------------------------------
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
    check_output_kind(args)
    chosen = (lambda dims, dtype: choose(args, dims, dtype, args.engine)[:2]) \
        if args.layout == "any" else None
    call = parse_to_image(numeric_input(args.input, args.dtype), layout_arg(args), src=args.src,
                          dtype=args.dtype, engine=args.engine, dims=args.dims,
                          max_image=args.max_image, wording=cli_wording(args.input), choose=chosen)
    if isinstance(call, ToTilesCall):   # the tile files are outputs too: checked before the work
        for tile in call.tiles.tiles:
            check_output(tile_path(args.output, tile), [args.input])
    image = call.apply()
    src, img = call.src, call.dst
    if isinstance(call, ToTilesCall):
        plan = call.tiles
        paths = save_tiles(args.output, image, plan, [args.input])
        print(f"wrote {len(paths)} tiles of the {img.layout.name} image {plan.image[0]}x"
              f"{plan.image[1]} ({plan.rows} row(s) x {plan.cols} column(s), at most "
              f"{plan.max_image[0]}x{plan.max_image[1]} each; row-major):")
        for tile, path in zip(plan.tiles, paths):
            print(f"  {path}: {tile.region}")
        return 0
    save_npy(args.output, image, [args.input])
    print(f"wrote {args.output}: {img.layout.name} {image_text(img)} {img.dtype.name}, array "
          f"{image.shape} (from {args.src or img.layout.default_tag(len(src.dims))} "
          f"{_dims_text(src.dims)} {src.dtype.name})")
    return 0


def cli_wording(path: str) -> Wording:
    """The command line's wording: its input file, --dims, no empty images."""
    return Wording(path, "--dims", empty_images=False, no_padding_check="--no-check-padding")


def cmd_from_image(args) -> int:
    check_output(args.output, [args.input])
    check_output_kind(args)
    layout = image_layout(args.layout)
    plan = None   # how to-image --max-image cut the image (a 2-D one only)
    if args.max_image is not None:
        side = image_side(layout, args.dims)
        if side.storage.tiles:
            plan = tiles.tile_plan(side, args.max_image)
    split = plan is not None and plan.split
    image = load_tiles(args, plan) if split else numeric_input(args.input, args.dtype)
    call = parse_from_image(image, layout, args.dims, dst=args.dst, dtype=args.dtype,
                            engine=args.engine, check_padding=args.check_padding,
                            wording=cli_wording(args.input), tiles=plan if split else None)
    if plan is None and args.max_image is not None:   # not cut: it must fit the limits
        catalog.check_fits(call.src, tiles.as_limits(args.max_image))
    out = call.apply()
    save_npy(args.output, out, [args.input])
    dst = args.dst or layout.default_tag(len(call.dst.dims))   # the tag as the user gave it
    print(f"wrote {args.output}: {dst} {_dims_text(call.dst.dims)} "
          f"{dtypes.of_array(out).name}, array {out.shape} (from {layout.name} image)")
    return 0


def load_tiles(args, plan):
    """The tuple of tiles to-image --max-image wrote for IN.npy under ``plan``."""
    paths = [tile_path(args.input, t) for t in plan.tiles]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise ClayoutError(f"the {plan.layout.name} image {plan.image[0]}x{plan.image[1]} over "
                           f"--max-image {plan.max_image[0]},{plan.max_image[1]} comes as "
                           f"{len(paths)} tiles {paths[0]} .. {paths[-1]}; missing: "
                           + ", ".join(missing))
    return tuple(load_npy(p) for p in paths)


def cmd_reorder(args) -> int:
    check_output(args.output, [args.input])
    check_output_kind(args)
    arr = numeric_input(args.input, args.dtype)
    dims = args.dims if args.dims is not None else \
        hostarray.dims_from_shape(arr.shape, args.src, hint="--dims")
    src = MemoryDesc(dims, dtypes.of_array(arr), tag=args.src)
    dst = MemoryDesc(src.dims, args.dtype or src.dtype, tag=args.dst)
    out = parse_reorder(arr, src, dst, engine=args.engine, wording=cli_wording(args.input)).apply()
    out = out.reshape(hostarray.physical_shape(dst))
    save_npy(args.output, out, [args.input])
    print(f"wrote {args.output}: {args.dst} {dst.dtype.name} of dims {_dims_text(dst.dims)} "
          f"(from {args.src} {src.dtype.name}), array {out.shape}")
    return 0


# -- model -----------------------------------------------------------------------------
def cmd_model(args) -> int:
    """Plan, then convert and write; ``--dry-run`` prints the plan and its
    totals (the real run's summary, counted from the plan) and writes nothing."""
    if args.output is None and not args.dry_run:
        raise ClayoutError(f"clayout model {args.input}: give -o OUT.safetensors to write the "
                           "converted weights, or --dry-run to print the plan and write nothing")
    if args.dry_run and args.verify:
        raise ClayoutError("--verify reads back what the conversion writes, and --dry-run "
                           "converts and writes nothing; pass one of them")
    if args.output is not None:   # with --dry-run too: it says whether the real run could write
        check_output(args.output, [args.input])
        check_output_kind(args)
    engine = engines.get(args.engine)  # resolved here so the manifest names the real engine
    options = model.Options(args.dtype, args.max_image, engine, not args.images_only,
                            not args.no_tiles, args.quantized, args.winograd)
    try:
        plan, sources = model.plan_file(args.input, options)
    except LeftOut as exc:   # every constant named, one per line, then the one error line
        for line in exc.lines:
            print(f"{PROG}: left out: {line}", file=sys.stderr)
        raise ClayoutError(exc.short()) from None
    if args.dry_run:
        if not args.quiet:
            manifest = plan.manifest()
            print(model.plan_table(plan))
            print(accounting_line(manifest))
            print(memory_line(model.peak_estimate(plan, sources), here=sys.stdout.isatty()))
            print((f"would write {printable(args.output)}" if args.output is not None else
                   "dry run, nothing written") + f": {totals(manifest)}")
            _model_notes(plan, manifest, engine, done=False)
        return 0
    big = sum(p.bytes for p in plan.stored) >= BAR_BYTES   # a bar only where it helps
    bar = Progress("clayout model") if big and not args.quiet else None
    try:
        manifest, verified = model.write_plan(plan, sources, args.output, args.verify, bar,
                                              inputs=[args.input])
    finally:
        if bar:
            bar.close()
    if not args.quiet:
        print(table(manifest))
        print(accounting_line(manifest))
        print(summary(manifest, args.output))
        _model_notes(plan, manifest, engine)
        if verified is not None:
            print(verified_line(manifest, verified))
    return 0


def _model_notes(plan, manifest, engine, done=True) -> None:
    """The notes after the summary: images the cpu engine converts, and a
    --winograd that took no filter."""
    on_host = manifest["host_converted"]
    if on_host:
        limits = "x".join(map(str, engine.limits.image2d)) if engine.limits else "?x?"
        print(f"note: {len(on_host)} image(s) over the {manifest['engine']} device's "
              f"{limits} limit (--max-image {manifest['max_image'][0]},"
              f"{manifest['max_image'][1]} is the target's) "
              + ("were converted" if done else "would be converted") + " on the host by "
              "the cpu engine, with the same bits: "
              + ", ".join(repr(printable(n)) for n in on_host))
    if plan.winograd_note:
        print(f"note: {plan.winograd_note}")


# -- layouts ---------------------------------------------------------------------------
def cmd_where(args) -> int:
    layout = image_layout(args.layout)
    formula = catalog.formula(layout)
    for line in explain(layout, args.dims, pixel=args.pixel, index=args.index, formula=formula):
        print(line)
    return 0


def cmd_show(args) -> int:
    """Draw the layout as a labelled PNG (needs the optional matplotlib extra)."""
    figure.require_matplotlib()   # before any work: without it, one line and nothing written
    check_output(args.output)
    check_output_kind(args)
    layout = image_layout(args.layout)
    image = ImageDesc(layout, args.dims)
    fig = figure.figure(layout, image.dims, formula=catalog.formula(layout))
    atomic_write(args.output, lambda f: figure.save_png(fig, f))
    px_w, px_h = (round(v) for v in fig.get_size_inches() * fig.dpi)
    print(f"wrote {args.output}: {px_w}x{px_h} PNG of the {'x'.join(map(str, image.shape))} "
          f"{image.layout.name} {image.storage.noun} (dims {','.join(map(str, image.dims))})")
    return 0


# -- devices, bench ----------------------------------------------------------------------
def cpu_lines() -> list[str]:
    """What the cpu engine runs on and with: the machine's caches and cores
    as read from the OS, and its path (compiled moves or numpy) and why."""
    return [f"cpu: {geometry.MACHINE.describe()}; {geometry.THREADS} worker thread(s)",
            f"cpu engine: {native.status()}"]


def cmd_devices(args) -> int:
    for line in cpu_lines():
        print(line)
    try:
        from ..opencl.device import device_list   # pyopencl: only when it is installed
        found, reason = device_list()
    except Exception as exc:  # import errors, a missing ICD loader
        found, reason = None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    if not found:
        print(f"no OpenCL device found ({reason}); clayout uses the cpu engine")
        return 0
    for plat, dev, info in found:
        image = f"images up to {info['image2d'][0]}x{info['image2d'][1]}" \
            if info["image_support"] else "no image support"
        print(f"{info['ctx']}  {plat.strip()}: {dev.strip()} [{info['type']}, "
              f"{info['version'].strip()}] {image}, max alloc {info['max_alloc'] >> 20} MiB, "
              f"fp16 {'yes' if info['fp16'] else 'no'}, images over buffers "
              f"{'yes' if info['from_buffer'] else 'no'}")
    if len(found) > 1:
        print("choose one with PYOPENCL_CTX=P:D (the number before it); by default the "
              "first with image support")
    try:
        print("engine auto: " + engines.choose_engine("auto")[1])
    except ClayoutError as exc:
        print(f"engine auto: unavailable ({exc})")
    return 0


def bench_script() -> Path | None:
    """tools/bench.py of the source checkout this package runs from, or None
    (an installed wheel carries no tools/)."""
    script = Path(__file__).resolve().parents[2] / "tools" / "bench.py"
    return script if script.is_file() else None


def cmd_bench(args) -> int:
    """A thin door to tools/bench.py: the benchmarks live with the project's
    tools, not in the package."""
    script = bench_script()
    if script is None:
        raise ClayoutError("clayout bench runs tools/bench.py of a source checkout of clayout; "
                           "this installed build has none (clone the repository and run "
                           "`python tools/bench.py`)")
    sys.path.insert(0, str(script.parent))
    try:
        saved, sys.argv = sys.argv, [str(script), *args.rest]
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            sys.argv = saved
    finally:
        sys.path.remove(str(script.parent))
    return 0


def cmd_accessor(args) -> int:
    """Print the accessor of an image layout (LAYOUT) or a buffer (--tag)."""
    from ..opencl.accessor import accessor   # pyopencl and mako: this command only
    if (args.layout is None) == (args.tag is None):
        raise ClayoutError("give an image layout (LAYOUT) or a buffer layout (--tag TAG), "
                           "not both and not neither")
    side = MemoryDesc(args.dims, args.dtype, tag=args.tag) if args.tag else \
        ImageDesc(image_layout(args.layout), args.dims, args.dtype)
    acc = accessor(side, name=args.name, access="write" if args.write else "read",
                   generic=args.generic)
    print(acc.source, end="")
    if acc.values:   # the numbers this shape passes after the storage
        print(f"// arguments for dims {','.join(map(str, args.dims))}: "
              + " ".join(f"{args.name}_n{i}={int(v)}" for i, v in enumerate(acc.values)))
    return 0


def cmd_demo(args) -> int:
    if args.output:
        check_output_kind(args)
    return run_demo(args)
