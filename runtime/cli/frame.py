"""``clayout frame`` (docs/cli.md; the rules of the conversion: docs/frames.md):
one camera frame or picture as a model input, through ``runtime.from_frame``.

The input is a ``.npy`` u8 array of the format's shape, a raw frame file
(``.yuv``, ``.nv12``, ``.nv21``, ``.i420``, or any name with ``--frame-size``:
exactly the frame's bytes, no header) or a PNG / JPEG read with Pillow (the
optional extra ``clayout[image]``). Everything that can be checked before the
frame is read is: the output path, ``--dtype``, ``--layout``, the raw file's
size against ``--frame-size``, a picture's size (from its header, before its
pixels are decoded). Each failure is one ClayoutError naming the file or the
option as typed; the output is written whole or not at all.

A picture comes in upright: its EXIF Orientation tag (2..8) is applied as
``cv2.imread`` and Pillow's ``ImageOps.exif_transpose`` apply it, unless
``--no-exif-orientation``. Pillow's warnings never reach stderr as such: a
corrupt EXIF block is ignored (the stored pixels are used) with one
``clayout: note:`` line, a palette picture with transparency is read as RGBA,
and a picture over ``PICTURE_MAX_PIXELS`` is refused before it is decoded.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import warnings

import numpy as np

from ..algebra import dtypes
from ..algebra.frame import DTYPES, frame_target
from ..algebra.frame_formats import FORMATS, frame_format
from ..algebra.layout import ImageDesc
from ..algebra.storage import image_text
from ..doors.parse import Wording, parse_from_frame
from ..errors import ClayoutError
from ..fileio import check_output, load_npy, refuse_special, save_npy
from ..limits import check_host_bytes
from .checks import PROG, check_output_kind

RAW_SUFFIXES = {".yuv": None, ".nv12": "nv12", ".nv21": "nv21", ".i420": "i420"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
INSTALL_HINT = "reading PNG/JPEG frames needs Pillow: pip install 'clayout[image]'"
# the Pillow mode a picture is converted to for each packed format (bgr, bgra: then swapped)
PICTURE_MODES = {"rgb": "RGB", "bgr": "RGB", "rgba": "RGBA", "bgra": "RGBA", "gray": "L"}
# the format a picture gives by default, by its Pillow mode (others: rgb)
DEFAULT_FORMATS = {"RGBA": "rgba", "RGBa": "rgba", "PA": "rgba", "L": "gray", "LA": "gray",
                   "La": "gray", "1": "gray"}
# the API's argument names in its messages, said as the options that gave them
OPTION_WORDS = ("size", "crop", "fill", "mean", "std", "scale", "antialias", "yuv", "resize",
                "fit", "order")
# 'crop=', "yuv= 'bt709'", 'antialias=True' anywhere in a message
API_WORD = re.compile(r"\b(%s)=(True\b|\s?'([^']*)'|\s*)" % "|".join(OPTION_WORDS))
# the most pixels decoded from one PNG/JPEG (64 Mpixel: 8192x8192; an 8K UHD frame is 33
# Mpixel): checked from the picture's header, before its pixels are decoded
PICTURE_MAX_PIXELS = 1 << 26
# EXIF Orientation: the Pillow transpose that turns the stored pixels upright
ORIENTATION_TAG = 0x0112
ORIENTATIONS = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE",
                6: "ROTATE_270", 7: "TRANSVERSE", 8: "ROTATE_90"}


# -- argument types (argparse: a bad value is a usage error, exit 2) ----------------------------
def parse_wh(text: str) -> tuple[int, int]:
    """'320x320' or '320,320' -> (320, 320): a width, then a height, both at least 1."""
    parts = text.lower().replace("x", ",").split(",")
    try:
        size = tuple(int(p) for p in parts)
    except ValueError:
        size = ()
    if len(size) != 2 or min(size) < 1:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected WIDTHxHEIGHT or WIDTH,HEIGHT, "
                                         "two integers of at least 1 such as 320x320")
    return size[0], size[1]


def parse_crop(text: str) -> tuple[int, int, int, int]:
    """'X,Y,W,H' -> (x, y, w, h) in frame pixels."""
    try:
        crop = tuple(int(p) for p in text.split(","))
    except ValueError:
        crop = ()
    if len(crop) != 4 or min(crop) < 0:
        raise argparse.ArgumentTypeError(f"crop {text!r}: expected X,Y,W,H, four non-negative "
                                         "integers such as 0,80,1280,720")
    return crop


def parse_numbers(text: str):
    """'114' -> 114.0; '123.675,116.28,103.53' -> a tuple, one number per output channel."""
    try:
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number or comma-separated "
                                         "numbers, one per output channel, such as "
                                         "123.675,116.28,103.53") from None
    return values[0] if len(values) == 1 else values


# -- reading the frame ----------------------------------------------------------------------------
def regular_file(path: str) -> int:
    """The size of the regular file ``path``; anything else is refused unread."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ClayoutError(f"cannot read {path}: {exc.strerror}") from None
    refuse_special(path, st.st_mode, "a frame file")
    return st.st_size


def input_kind(args) -> str:
    """'npy', 'picture' or 'raw', by the input's name (any name with --frame-size is raw)."""
    ext = os.path.splitext(args.input)[1].lower()
    if ext == ".npy":
        return "npy"
    if ext in IMAGE_SUFFIXES:
        return "picture"
    if ext in RAW_SUFFIXES or args.frame_size is not None:
        return "raw"
    raise ClayoutError(f"{args.input}: not a frame file clayout knows by its name: give a .npy "
                       "array, a PNG/JPEG picture (.png, .jpg, .jpeg), or a raw frame (.yuv, "
                       ".nv12, .nv21, .i420, or any name with --frame-size WxH)")


def need_format(args, what: str) -> str:
    fmt = args.format or RAW_SUFFIXES.get(os.path.splitext(args.input)[1].lower())
    if fmt is None:
        raise ClayoutError(f"{args.input}: give --format ({', '.join(FORMATS)}): {what} does not "
                           "say which format it holds")
    return fmt


def read_raw(args) -> tuple[np.ndarray, str]:
    """A raw frame: exactly the bytes of a --frame-size frame of its format, no header."""
    fmt = frame_format(need_format(args, "a raw frame file"))
    if args.frame_size is None:
        raise ClayoutError(f"{args.input}: a raw frame file has no header; give its size with "
                           "--frame-size WxH (such as 1280x720)")
    width, height = args.frame_size
    if fmt.is_yuv and (width % 2 or height % 2):
        raise ClayoutError(f"--frame-size {width}x{height}: {fmt.name} needs an even width and "
                           "height (4:2:0 chroma holds one sample per 2x2 pixels)")
    shape = fmt.shape(height, width)
    need, have = math.prod(shape), regular_file(args.input)
    if need != have:
        raise ClayoutError(f"{args.input}: a {width}x{height} {fmt.name} frame is {need} bytes "
                           f"({'x'.join(map(str, shape))}), but the file holds {have} bytes; "
                           "check --frame-size and --format")
    return np.fromfile(args.input, dtype=np.uint8, count=need).reshape(shape), fmt.name


def note(text: str) -> None:
    """One line ``clayout: note: ...`` on stderr: the command goes on."""
    print(f"{PROG}: note: {text}", file=sys.stderr)


def first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__


def picture_too_big(path: str, size: str) -> ClayoutError:
    return ClayoutError(f"{path}: a picture of {size}; clayout frame decodes PNG/JPEG pictures "
                        f"of at most {PICTURE_MAX_PIXELS} pixels (64 Mpixel, such as 8192x8192): "
                        "give a smaller picture, or the frame as a .npy array or raw file")


def worth_a_note(caught) -> bool:
    """A warning meant for the user (not one about a library's own API)."""
    return not issubclass(caught.category, (DeprecationWarning, PendingDeprecationWarning,
                                            ImportWarning, ResourceWarning))


def is_exif_warning(caught) -> bool:
    """A warning of Pillow's EXIF reader (a TIFF directory inside the picture)."""
    return (os.path.basename(caught.filename) == "TiffImagePlugin.py"
            or "exif" in str(caught.message).lower())


def read_picture(args) -> tuple[np.ndarray, str]:
    """A PNG/JPEG decoded by Pillow: RGB, RGBA or gray by what the file holds, or
    converted to the packed --format asked for; turned upright by its EXIF
    orientation unless --no-exif-orientation. Pillow's warnings are caught:
    a corrupt EXIF is ignored with one note, any other warning is one note."""
    regular_file(args.input)
    try:   # Pillow is an optional extra: imported only here
        from PIL import Image as image_module
    except ImportError:
        raise ClayoutError(f"{args.input}: {INSTALL_HINT}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arr, fmt, exif_ignored = decode_picture(args, image_module, caught)
    if exif_ignored:
        note(f"{args.input}: its EXIF data is corrupt and was ignored: the picture is read as "
             "stored, without turning it by an orientation tag")
    seen = set()
    for warning in caught:   # any other warning of Pillow's: a note, not a raw warning
        if is_exif_warning(warning) or not worth_a_note(warning) or issubclass(
                warning.category, image_module.DecompressionBombWarning):
            continue
        text = first_line(warning.message)
        if text not in seen:
            seen.add(text)
            note(f"{args.input}: Pillow: {text}")
    if fmt in ("bgr", "bgra"):
        arr = np.concatenate([arr[..., 2::-1], arr[..., 3:]], axis=-1)
    return np.ascontiguousarray(arr), fmt


def decode_picture(args, image_module, caught) -> tuple[np.ndarray, str, bool]:
    """(pixels, format, whether a corrupt EXIF was ignored), Pillow's
    warnings going to ``caught``; the size is checked before decoding."""
    path = args.input
    exif_ignored = False
    try:
        with image_module.open(path) as picture:
            width, height = picture.size   # from the header: nothing decoded yet
            if width * height > PICTURE_MAX_PIXELS:
                raise picture_too_big(path, f"{width}x{height} ({width * height} pixels)")
            mode = picture.mode
            if mode.startswith("I") or mode == "F":
                raise ClayoutError(f"{path}: a picture of Pillow mode {mode!r} (16 or 32 "
                                   "bits a pixel); a frame is 8 bits a channel")
            # a palette with transparency: RGBA (Pillow's palette-to-RGB would warn)
            transparent = mode == "P" and "transparency" in picture.info
            fmt = args.format or ("rgba" if transparent else DEFAULT_FORMATS.get(mode, "rgb"))
            if fmt not in PICTURE_MODES:
                raise ClayoutError(f"{path}: --format {fmt} is a raw YUV layout; a PNG/JPEG "
                                   f"decodes to one of {', '.join(PICTURE_MODES)}")
            want = PICTURE_MODES[fmt]
            check_host_bytes(width * height * len(want), f"{path}: the decoded {width}x{height} "
                             "picture", "give a smaller picture")
            picture.load()
            turn = None
            if not getattr(args, "no_exif_orientation", False):
                turn, exif_ignored = orientation(picture, image_module, caught)
            if transparent:
                picture = picture.convert("RGBA")
            if picture.mode != want:
                picture = picture.convert(want)
            if turn is not None:
                picture = picture.transpose(getattr(image_module.Transpose, turn))
            arr = np.asarray(picture, dtype=np.uint8)
    except ClayoutError:   # a ValueError too: already one line of its own
        raise
    except image_module.DecompressionBombError as exc:   # over twice Pillow's own limit
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        raise picture_too_big(path, f"{pixels[1]} pixels" if pixels else
                              "more pixels than Pillow opens") from None
    except (OSError, ValueError, SyntaxError, EOFError, IndexError) as exc:
        raise ClayoutError(f"{path}: not a readable PNG/JPEG picture ({first_line(exc)})") \
            from None
    return arr, fmt, exif_ignored


def orientation(picture, image_module, caught) -> tuple[str | None, bool]:
    """(the Pillow transpose its EXIF Orientation asks for, or None; whether
    the EXIF was corrupt, then ignored: no turn). Orientation 1, none, or a
    value outside 1..8: the stored pixels. The EXIF block is parsed afresh:
    Pillow's JPEG reader may have met (and hidden) its corruption already."""
    try:
        raw = picture.info.get("exif")
        if isinstance(raw, bytes):
            image_module.Exif().load(raw)   # raises or warns when corrupt
        value = picture.getexif().get(ORIENTATION_TAG, 1)
    except (OSError, ValueError, SyntaxError, EOFError, IndexError, KeyError, TypeError,
            ArithmeticError):
        return None, True
    if any(is_exif_warning(w) for w in caught):
        return None, True
    return ORIENTATIONS.get(value) if isinstance(value, int) else None, False


def read_frame(args) -> tuple[np.ndarray, str]:
    """(the frame's u8 array, its format name), its shape checked against the format."""
    kind = input_kind(args)
    if kind == "raw":
        return read_raw(args)
    if kind == "picture":
        arr, fmt = read_picture(args)
    else:
        fmt = need_format(args, "a .npy frame")
        arr = load_npy(args.input)
    try:
        height, width = frame_format(fmt).size_of(arr.shape)
    except ClayoutError as exc:
        raise ClayoutError(f"{args.input}: {exc}") from None
    if args.frame_size is not None and args.frame_size != (width, height):
        raise ClayoutError(f"{args.input}: --frame-size {args.frame_size[0]}x"
                           f"{args.frame_size[1]}, but the frame is {width}x{height}")
    return arr, fmt


# -- the command ----------------------------------------------------------------------------------
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
    arr, fmt = read_frame(args)
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


__all__ = ["cmd_frame", "parse_wh", "parse_crop", "parse_numbers", "read_frame"]
