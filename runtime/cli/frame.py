"""``clayout frame`` (docs/cli.md; the rules of the conversion: docs/frames.md):
one camera frame or picture (read by runtime/frame_files.py) as a model
input, through ``runtime.from_frame``. Everything that can be checked
before the frame is read is: the output path, ``--dtype``, ``--layout``;
each failure is one ClayoutError naming the file or the option as typed;
the output is written whole or not at all. Pillow's warnings and the API's
(mean and std for pixels in 0..1, ...) are ``clayout: note:`` lines in the
options' words.
"""
from __future__ import annotations

import re
import sys
import warnings

from ..algebra import dtypes
from ..algebra.frame import DTYPES, FITS, ORDERS, RESIZES, YUVS, frame_target
from ..algebra.frame_formats import FORMATS
from ..algebra.layout import ImageDesc
from ..algebra.storage import image_text
from ..doors.parse import Wording, parse_from_frame
from ..errors import ClayoutError
from ..fileio import check_output, save_npy
from ..frame_files import FrameFile, read_frame, worth_a_note
from .args import ENGINE_HELP, add_engine, parse_crop, parse_numbers, parse_wh
from .checks import PROG, check_output_kind

OPTION_WORDS = ("size", "crop", "fill", "mean", "std", "scale", "antialias", "yuv", "resize",
                "fit", "order")
# 'crop=', "yuv= 'bt709'", 'antialias=True' anywhere in a message
API_WORD = re.compile(r"\b(%s)=(True\b|\s?'([^']*)'|\s*)" % "|".join(OPTION_WORDS))
# the most pixels decoded from one PNG/JPEG (64 Mpixel: 8192x8192; an 8K UHD frame is 33
# Mpixel): checked from the picture's header, before its pixels are decoded


def note(text: str) -> None:
    """One line ``clayout: note: ...`` on stderr: the command goes on."""
    print(f"{PROG}: note: {text}", file=sys.stderr)


def register(command) -> None:
    """The frame command and its options."""
    p = command("frame", cmd_frame, "a camera frame or picture as a model input (1,C,H,W) in a "
                "layout: colour, crop, resize, normalize in one pass (docs/frames.md)")
    p.add_argument("input", metavar="IN", help="a .npy u8 frame, a raw frame (.yuv, .nv12, "
                   ".nv21, .i420, or any name with --frame-size) or a PNG/JPEG")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--format", choices=tuple(FORMATS), help="the frame's format (needed "
                   "for .npy and .yuv; a picture: what it holds, rgb, rgba or gray)")
    p.add_argument("--frame-size", type=parse_wh, metavar="WxH",
                   help="a raw frame's size (else checked)")
    p.add_argument("--no-exif-orientation", action="store_true",
                   help="a PNG/JPEG: its pixels as stored, not turned upright by its EXIF "
                   "Orientation tag (other inputs are always read as stored)")
    p.add_argument("--size", type=parse_wh, metavar="WxH", help="output size (default: the crop)")
    p.add_argument("--crop", type=parse_crop, metavar="X,Y,W,H", help="crop first (frame pixels)")
    p.add_argument("--fit", choices=FITS, default="stretch", help="stretch (default) or "
                   "letterbox: keep the aspect ratio, centred, the border --fill")
    p.add_argument("--fill", type=parse_numbers, default=0, metavar="V", help="the letterbox "
                   "border, 0..255 before normalizing: one number or one per channel (0)")
    p.add_argument("--resize", choices=RESIZES, default="bilinear",
                   help="bilinear (default: OpenCV's INTER_LINEAR), nearest, or area "
                   "(INTER_AREA, for shrinking)")
    p.add_argument("--antialias", action="store_true",
                   help="with bilinear: widen the filter when shrinking, as PIL's BILINEAR and "
                   "torchvision's antialias=True")
    p.add_argument("--scale", type=float, default=1.0, metavar="K",
                   help="pixels are multiplied by K before --mean and --std (1; 0.00392156862745 "
                   "is 1/255, for mean and std of pixels in 0..1)")
    p.add_argument("--mean", type=parse_numbers, default=0.0, metavar="M", help="subtracted per "
                   "output channel (in --order), after --scale: one number or three (0)")
    p.add_argument("--std", type=parse_numbers, default=1.0, metavar="S",
                   help="then divided by, per output channel (1)")
    p.add_argument("--order", choices=ORDERS, default="rgb", help="output channel order")
    p.add_argument("--yuv", choices=tuple(YUVS), default=None,
                   help="the YUV matrix of nv12/nv21/i420 (default bt601, limited range)")
    p.add_argument("--layout", required=True, metavar="NAME",
                   help="an activation image layout or a 4-D buffer tag such as nchw")
    p.add_argument("--dtype", default="f32", metavar="T", help=f"output dtype: "
                   f"{', '.join(DTYPES)} (default f32)")
    add_engine(p)


def as_options(exc, what: str | None = None) -> ClayoutError:
    """The API's words said as the CLI's: 'mean= ...' as '--mean ...',
    "yuv= 'bt709'" as '--yuv bt709', 'antialias=True' as '--antialias',
    wherever they stand; a message that does not begin with an option is
    about the frame and gets the input's name ``what`` in front."""
    text = str(exc)

    def option(match) -> str:
        name, value, quoted = match.groups()
        if value == "True":
            return f"--{name}"
        return f"--{name} {quoted}" if quoted is not None else f"--{name} "

    text = re.sub(r" {2,}", " ", API_WORD.sub(option, text)).replace(" ;", ";").rstrip()
    text = text.replace("; --crop a part of it", "; give --crop X,Y,W,H to read a part of it")
    text = text.replace("--scale 1/255", "--scale 0.00392156862745 (1/255)")
    if text.startswith("from_frame: "):
        text = text[len("from_frame: "):]
    if what and not text.startswith(("--", f"{what}:")):
        text = f"{what}: {text}"
    return ClayoutError(text)


def check_target(args) -> None:
    """--dtype and --layout, before any file is read."""
    try:
        name = dtypes.dtype(args.dtype).name
    except ClayoutError:
        name = None
    if name not in DTYPES:
        raise ClayoutError(f"--dtype {args.dtype}: clayout frame writes {', '.join(DTYPES)}")
    try:
        frame_target(args.layout, name)
    except ClayoutError as exc:
        text = str(exc).replace("from_frame: ", "--layout ", 1)
        raise ClayoutError(text.replace("from_frame writes", "clayout frame writes", 1)) from None


def cmd_frame(args) -> int:
    check_output_kind(args)
    check_output(args.output, [args.input])
    check_target(args)
    arr, fmt = read_frame(FrameFile(args.input, args.format, args.frame_size,
                                    not args.no_exif_orientation), note)
    try:   # the API's warnings (mean and std for pixels in 0..1, ...): notes in options' words
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call = parse_from_frame(arr, args.layout, format=fmt, size=args.size, crop=args.crop,
                                    fit=args.fit, fill=args.fill, resize=args.resize,
                                    mean=args.mean, std=args.std, order=args.order, yuv=args.yuv,
                                    dtype=args.dtype, antialias=args.antialias,
                                    scale=args.scale, engine=args.engine,
                                    wording=Wording(args.input))
    except ClayoutError as exc:
        raise as_options(exc, args.input) from None
    for text in dict.fromkeys(str(as_options(w.message)) for w in caught if worth_a_note(w)):
        note(text)
    out = call.apply()
    save_npy(args.output, out, [args.input])
    plan, dst = call.src, call.dst
    dims = "x".join(map(str, plan.dims))
    side = f"{dst.layout.name} {image_text(dst)} {dst.dtype.name}" \
        if isinstance(dst, ImageDesc) else f"{args.layout} {dst.dtype.name}"
    print(f"wrote {args.output}: {side} of dims {dims}, array {out.shape} "
          f"(from {args.input}: {plan.describe()})")
    return 0


__all__ = ["cmd_frame", "register", "as_options"]
