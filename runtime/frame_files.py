"""Frame files: a camera frame or a picture read from a file as a u8 array
and the format it holds (what ``clayout frame`` reads; docs/cli.md, frame).

A ``.npy`` u8 array of the format's shape, a raw frame file (``.yuv``,
``.nv12``, ``.nv21``, ``.i420``, or any name with a frame size: exactly the
frame's bytes, no header) or a PNG / JPEG decoded by Pillow (the optional
extra ``clayout[image]``). What can be checked before the frame is read is:
the raw file's size against the frame size, a picture's size (from its
header, before its pixels are decoded). Each failure is one ClayoutError
naming the file and, in the command line's words, the option to give.

A picture comes in upright: its EXIF Orientation tag (2..8) is applied as
``cv2.imread`` and Pillow's ``ImageOps.exif_transpose`` apply it, unless
``upright=False``. Pillow's warnings go to the caller's ``note`` as lines: a
corrupt EXIF block is ignored (the stored pixels are used), a palette
picture with transparency is read as RGBA, and a picture over
``PICTURE_MAX_PIXELS`` is refused before it is decoded.
"""
from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np

from .algebra.frame_formats import FORMATS, frame_format
from .errors import ClayoutError
from .fileio import load_npy, refuse_special
from .limits import check_host_bytes

RAW_SUFFIXES = {".yuv": None, ".nv12": "nv12", ".nv21": "nv21", ".i420": "i420"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
INSTALL_HINT = "reading PNG/JPEG frames needs Pillow: pip install 'clayout[image]'"
# the Pillow mode a picture is converted to for each packed format (bgr, bgra: then swapped)
PICTURE_MODES = {"rgb": "RGB", "bgr": "RGB", "rgba": "RGBA", "bgra": "RGBA", "gray": "L"}
# the format a picture gives by default, by its Pillow mode (others: rgb)
DEFAULT_FORMATS = {"RGBA": "rgba", "RGBa": "rgba", "PA": "rgba", "L": "gray", "LA": "gray",
                   "La": "gray", "1": "gray"}
# the API's argument names in its messages, said as the options that gave them
PICTURE_MAX_PIXELS = 1 << 26
# EXIF Orientation: the Pillow transpose that turns the stored pixels upright
ORIENTATION_TAG = 0x0112
ORIENTATIONS = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE",
                6: "ROTATE_270", 7: "TRANSVERSE", 8: "ROTATE_90"}


@dataclass(frozen=True)
class FrameFile:
    """A frame file to read: its ``path``, the ``format`` given (None: by
    its name or what a picture holds), the ``frame_size`` (width, height)
    given (a raw file needs one), and whether a picture is turned
    ``upright`` by its EXIF orientation."""
    path: str
    format: str | None = None
    frame_size: tuple[int, int] | None = None
    upright: bool = True


def regular_file(path: str) -> int:
    """The size of the regular file ``path``; anything else is refused unread."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ClayoutError(f"cannot read {path}: {exc.strerror}") from None
    refuse_special(path, st.st_mode, "a frame file")
    return st.st_size


def input_kind(src: "FrameFile") -> str:
    """'npy', 'picture' or 'raw', by the input's name (any name with --frame-size is raw)."""
    ext = os.path.splitext(src.path)[1].lower()
    if ext == ".npy":
        return "npy"
    if ext in IMAGE_SUFFIXES:
        return "picture"
    if ext in RAW_SUFFIXES or src.frame_size is not None:
        return "raw"
    raise ClayoutError(f"{src.path}: not a frame file clayout knows by its name: give a .npy "
                       "array, a PNG/JPEG picture (.png, .jpg, .jpeg), or a raw frame (.yuv, "
                       ".nv12, .nv21, .i420, or any name with --frame-size WxH)")


def need_format(src: "FrameFile", what: str) -> str:
    fmt = src.format or RAW_SUFFIXES.get(os.path.splitext(src.path)[1].lower())
    if fmt is None:
        raise ClayoutError(f"{src.path}: give --format ({', '.join(FORMATS)}): {what} does not "
                           "say which format it holds")
    return fmt


def read_raw(src: "FrameFile") -> tuple[np.ndarray, str]:
    """A raw frame: exactly the bytes of a --frame-size frame of its format, no header."""
    fmt = frame_format(need_format(src, "a raw frame file"))
    if src.frame_size is None:
        raise ClayoutError(f"{src.path}: a raw frame file has no header; give its size with "
                           "--frame-size WxH (such as 1280x720)")
    width, height = src.frame_size
    if fmt.is_yuv and (width % 2 or height % 2):
        raise ClayoutError(f"--frame-size {width}x{height}: {fmt.name} needs an even width and "
                           "height (4:2:0 chroma holds one sample per 2x2 pixels)")
    shape = fmt.shape(height, width)
    need, have = math.prod(shape), regular_file(src.path)
    if need != have:
        raise ClayoutError(f"{src.path}: a {width}x{height} {fmt.name} frame is {need} bytes "
                           f"({'x'.join(map(str, shape))}), but the file holds {have} bytes; "
                           "check --frame-size and --format")
    return np.fromfile(src.path, dtype=np.uint8, count=need).reshape(shape), fmt.name


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


def read_picture(src: "FrameFile", note) -> tuple[np.ndarray, str]:
    """A PNG/JPEG decoded by Pillow: RGB, RGBA or gray by what the file holds, or
    converted to the packed --format asked for; turned upright by its EXIF
    orientation unless --no-exif-orientation. Pillow's warnings are caught:
    a corrupt EXIF is ignored with one note, any other warning is one note."""
    regular_file(src.path)
    try:   # Pillow is an optional extra: imported only here
        from PIL import Image as image_module
    except ImportError:
        raise ClayoutError(f"{src.path}: {INSTALL_HINT}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arr, fmt, exif_ignored = decode_picture(src, image_module, caught)
    if exif_ignored:
        note(f"{src.path}: its EXIF data is corrupt and was ignored: the picture is read as "
             "stored, without turning it by an orientation tag")
    seen = set()
    for warning in caught:   # any other warning of Pillow's: a note, not a raw warning
        if is_exif_warning(warning) or not worth_a_note(warning) or issubclass(
                warning.category, image_module.DecompressionBombWarning):
            continue
        text = first_line(warning.message)
        if text not in seen:
            seen.add(text)
            note(f"{src.path}: Pillow: {text}")
    if fmt in ("bgr", "bgra"):
        arr = np.concatenate([arr[..., 2::-1], arr[..., 3:]], axis=-1)
    return np.ascontiguousarray(arr), fmt


def decode_picture(src: "FrameFile", image_module, caught) -> tuple[np.ndarray, str, bool]:
    """(pixels, format, whether a corrupt EXIF was ignored), Pillow's
    warnings going to ``caught``; the size is checked before decoding."""
    path = src.path
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
            fmt = src.format or ("rgba" if transparent else DEFAULT_FORMATS.get(mode, "rgb"))
            if fmt not in PICTURE_MODES:
                raise ClayoutError(f"{path}: --format {fmt} is a raw YUV layout; a PNG/JPEG "
                                   f"decodes to one of {', '.join(PICTURE_MODES)}")
            want = PICTURE_MODES[fmt]
            check_host_bytes(width * height * len(want), f"{path}: the decoded {width}x{height} "
                             "picture", "give a smaller picture")
            picture.load()
            turn = None
            if src.upright:
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


def read_frame(src: "FrameFile", note=lambda text: None) -> tuple[np.ndarray, str]:
    """(the frame's u8 array, its format name), its shape checked against the format."""
    kind = input_kind(src)
    if kind == "raw":
        return read_raw(src)
    if kind == "picture":
        arr, fmt = read_picture(src, note)
    else:
        fmt = need_format(src, "a .npy frame")
        arr = load_npy(src.path)
    try:
        height, width = frame_format(fmt).size_of(arr.shape)
    except ClayoutError as exc:
        raise ClayoutError(f"{src.path}: {exc}") from None
    if src.frame_size is not None and src.frame_size != (width, height):
        raise ClayoutError(f"{src.path}: --frame-size {src.frame_size[0]}x"
                           f"{src.frame_size[1]}, but the frame is {width}x{height}")
    return arr, fmt


__all__ = ["FrameFile", "read_frame", "worth_a_note", "first_line", "PICTURE_MAX_PIXELS"]
