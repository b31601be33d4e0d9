"""The command line's argument types and shared options (argparse: a bad
value is a usage error, exit 2): logical dims, sizes, crops, numbers, and
the engine option every converting command takes."""
from __future__ import annotations

import argparse

from .. import engine as engines
from ..algebra import dtypes

ENGINE_HELP = f"engine: {', '.join(engines.NAMES)} (default: $CLAYOUT_ENGINE or cpu)"
DTYPE_HELP = f"dtype of the output: {', '.join(dtypes.NAMES)} (default: the input's)"


def add_engine(p, **kw) -> None:
    """--engine, the conversion engine (cpu, opencl, reference, auto)."""
    p.add_argument("--engine", choices=engines.NAMES, help=kw.pop("help", ENGINE_HELP), **kw)


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
    """'16384,16384' -> (16384, 16384); a width or height of 0 is refused as such."""
    try:
        size = tuple(int(p) for p in text.split(","))
    except ValueError:
        size = ()
    if len(size) != 2:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected WIDTH,HEIGHT, two integers "
                                         "such as 8192,8192")
    if min(size) < 1:
        raise argparse.ArgumentTypeError(f"size {text!r}: the width and height must be at "
                                         "least 1 pixel (WIDTH,HEIGHT such as 8192,8192)")
    return size[0], size[1]


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
