"""``clayout model`` (docs/model.md, docs/cli.md): every weight of an ONNX
or TensorFlow Lite model into image layouts, in one safetensors file, or
with ``--dry-run`` the plan alone (runtime/model: the front ends, the plan,
the streaming writer)."""
from __future__ import annotations

import sys

from .. import engine as engines
from .. import model
from ..errors import ClayoutError
from ..fileio import check_output
from ..model.graph import printable
from ..model.left_out import LeftOut
from ..model.report import accounting_line, memory_line, summary, table, totals, verified_line
from .args import ENGINE_HELP, add_engine, parse_size
from .checks import PROG, check_output_kind
from .progress import BAR_BYTES, Progress


def register(command) -> None:
    """The model command and its options."""
    p = command("model", cmd_model, "convert every weight of an ONNX or TensorFlow Lite model "
                "into image layouts, in one safetensors file")
    p.add_argument("input", metavar="MODEL", help="an ONNX model (.onnx) or a TensorFlow Lite "
                   "flatbuffer (.tflite, told by its TFL3 identifier)")
    p.add_argument("-o", "--output", metavar="OUT.safetensors",
                   help="the safetensors file to write (needed unless --dry-run)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (each tensor's role, layout, dims, dtype, image size and "
                   "bytes, or why it is a buffer or skipped) and the totals the conversion would "
                   "print, without converting or writing anything")
    p.add_argument("--dtype", metavar="T", help="image dtype of float weights: f32 or f16 "
                   "(default: the weights' own float type: f16 when every float weight is "
                   "float16, else f32)")
    p.add_argument("--quantized", choices=model.QUANTIZED_FORMS, default="fold",
                   help="a quantized weight (an ONNX DequantizeLinear, a TFLite integer tensor "
                   "with a scale): 'fold' stores (q - zero_point) * scale "
                   "in f32 (default); 'keep' stores q on an s8/u8/s32 image and its scale and "
                   "zero point as NAME.scale, NAME.zero_point (ONNX integer operators' weights "
                   "are always kept)")
    p.add_argument("--max-image", type=parse_size, default=model.MAX_IMAGE, metavar="W,H",
                   help="largest image allowed (default 8192,8192, the OpenCL minimum); a weight "
                   "over it goes to the next candidate layout of its role that fits, else its "
                   "role's layout is split into tiles of at most W x H, stored as NAME.tile-R-C "
                   "(row R, column C) and listed in the manifest with their pixel ranges")
    p.add_argument("--winograd", metavar="ENGINE",
                   help="put each float Conv filter with a square kernel the engine takes, "
                   "strides 1, dilations 1 and group 1 in that engine's Winograd layout "
                   "(U = G·g·Gᵀ): mace, mnn, tflite, cldnn, or one Winograd layout's name "
                   "(docs/winograd.md); f32 or f16 images only")
    add_engine(p)
    stored = p.add_mutually_exclusive_group()
    stored.add_argument("--keep-buffers", action="store_true",
                        help="the default, accepted for older scripts: a constant the model "
                        "needs that no image takes (a scalar of an Add, a Clip bound, a Resize's "
                        "scales, an LSTM's W, R, B, or with --no-tiles a weight no layout fits) "
                        "is stored as a plain buffer (layout 'buffer')")
    stored.add_argument("--images-only", action="store_true",
                        help="write images only: a model that needs a constant no image takes "
                        "exits 1 naming every such constant, one per line, and writes nothing")
    p.add_argument("--no-tiles", action="store_true",
                   help="never split a weight into tiles (for engines that cannot read them): "
                   "one that no layout fits within --max-image is stored as a plain buffer, "
                   "or with --images-only fails the command")
    p.add_argument("--verify", action="store_true",
                   help="read every stored tensor back and compare it with the model's weight, "
                   "bit for bit, before writing; exit 1 on any difference")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing but errors (no progress bar, table or summary)")


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
