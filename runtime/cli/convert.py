"""``clayout to-image``, ``from-image`` and ``reorder`` (docs/cli.md): a
``.npy`` tensor through the doors (runtime/doors/parse.py builds each call
once, with the command line's wording), tiles one ``.npy`` each
(runtime/fileio.py)."""
from __future__ import annotations

import numpy as np

from .. import placement
from ..algebra import catalog, dtypes, hostarray, tiles
from ..algebra.catalog import image_layout
from ..algebra.desc import MemoryDesc
from ..algebra.storage import Limits, image_text
from ..doors.calls import ToTilesCall
from ..doors.parse import Wording, image_side, parse_from_image, parse_reorder, parse_to_image
from ..fileio import check_output, load_npy, load_tiles, save_npy, save_tiles, tile_path
from .args import DTYPE_HELP, add_engine, parse_dims, parse_size
from .checks import check_output_kind
from .info import choose, layout_arg


def register(command) -> None:
    """The three conversion commands and their options."""
    p = command("to-image", cmd_to_image, "place a .npy tensor onto an image layout")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--layout", required=True, metavar="NAME",
                   help="a named layout (see `clayout info`) or a custom "
                   "'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]'")
    p.add_argument("--src", metavar="TAG", help="tag of the input (default nchw/oihw/mihw/x)")
    p.add_argument("--dims", type=parse_dims, metavar="D", help="logical dims (needed when blocked)")
    p.add_argument("--dtype", metavar="T", help="image dtype: f32, f16, s32, s8, u8")
    add_engine(p)
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
    p.add_argument("--dtype", metavar="T", help=DTYPE_HELP)
    add_engine(p)
    p.add_argument("--max-image", type=parse_size, metavar="W,H", help="the limit to-image "
                   "split by: read its tiles IN.tile-R-C.npy (or IN.npy when it fit)")
    p.add_argument("--no-check-padding", dest="check_padding", action="store_false",
                   help="read an image whose padding lanes are not zero (another engine's "
                   "garbage); by default a non-zero padding lane is refused as wrong --dims")

    p = command("reorder", cmd_reorder, "reorder a .npy tensor between two tags")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--src", required=True, metavar="TAG")
    p.add_argument("--dst", required=True, metavar="TAG")
    p.add_argument("--dims", type=parse_dims, metavar="D")
    p.add_argument("--dtype", metavar="T", help=DTYPE_HELP)
    add_engine(p)


def numeric_input(path: str, dtype) -> np.ndarray:
    """The array of ``path``; one of another numeric type (float64, int64) is
    rounded once to ``dtype`` (--dtype), and refused with that hint without it."""
    arr = load_npy(path)
    return dtypes.host_array(arr, dtype, path)


def _dims_text(dims) -> str:
    return "x".join(map(str, dims))


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
    image = load_tiles(args.input, plan) if split else numeric_input(args.input, args.dtype)
    call = parse_from_image(image, layout, args.dims, dst=args.dst, dtype=args.dtype,
                            engine=args.engine, check_padding=args.check_padding,
                            wording=cli_wording(args.input), tiles=plan if split else None)
    if plan is None and args.max_image is not None:   # not cut: it must fit the limits
        catalog.check_fits(call.src, Limits.of(args.max_image))
    out = call.apply()
    save_npy(args.output, out, [args.input])
    dst = args.dst or layout.default_tag(len(call.dst.dims))   # the tag as the user gave it
    print(f"wrote {args.output}: {dst} {_dims_text(call.dst.dims)} "
          f"{dtypes.of_array(out).name}, array {out.shape} (from {layout.name} image)")
    return 0


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
