"""``clayout output`` (docs/cli.md; the rules: docs/outputs.md): a network's
output saved as .npy (an image array in its layout, or a buffer) read back
through ``runtime.read_output`` as the result a user wants.

What it writes follows the output's name: ``.npy`` the tensor or the argmax
indices; ``.csv`` a threshold's elements (one row each: the logical
indices, then the value); ``.png`` with ``--argmax`` a class mask, one
colour per class, with a legend strip (needs Pillow). Every option is
checked before the input is read, and the output is written whole or not
at all."""
from __future__ import annotations

import importlib.util
import io
import os

import numpy as np

from ..errors import ClayoutError
from ..fileio import atomic_write, check_output, load_npy, save_npy
from ..doors.read_output import read_output
from .args import add_engine, parse_dims
from .checks import PROG

KINDS = {".npy": "a .npy array (the tensor, or the argmax indices)",
         ".csv": "a CSV of a threshold's elements", ".png": "an argmax class mask"}


def register(command) -> None:
    add_arguments(command("output", cmd_output, "a network's output read back as its tensor, "
                          "argmax or the values above a threshold, in one pass "
                          "(docs/outputs.md)"))


def add_arguments(p) -> None:
    p.add_argument("input", metavar="IN.npy", help="the output: an image array in its layout "
                   "(as to-image writes it) or a buffer in its tag")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="OUT.npy (the tensor or argmax), OUT.csv (--threshold), OUT.png "
                   "(--argmax: a class mask)")
    p.add_argument("--layout", required=True, metavar="NAME", help="its image layout or tag")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D", help="its logical dims")
    p.add_argument("--dequantize", metavar="S,Z", help="scale and zero point of an integer "
                   "output (one each for the tensor)")
    p.add_argument("--activation", metavar="A", help="sigmoid or softmax (over axis 1)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--argmax", action="store_true", help="the index of the largest channel")
    what.add_argument("--threshold", type=float, metavar="T", help="the values above T")
    p.add_argument("--top-k", type=int, metavar="K", help="with --threshold: the K largest")
    p.add_argument("--dst", metavar="TAG", help="the tensor's tag (default: plain, nchw at 4-D)")
    p.add_argument("--dtype", default="f32", metavar="T", help="the tensor's dtype: f32, f16")
    add_engine(p)
    p.add_argument("--no-check-padding", dest="check_padding", action="store_false",
                   help="read an image whose padding lanes are not zero (another engine's "
                   "garbage); by default a non-zero padding lane is refused as wrong --dims")


def _dequantize(text):
    if text is None:
        return None
    try:
        scale, zero = text.split(",")
        return float(scale), int(zero)
    except ValueError:
        raise ClayoutError(f"--dequantize {text!r}: give SCALE,ZERO_POINT (e.g. 0.0039,-128)") \
            from None


def cmd_output(args) -> int:
    ext = os.path.splitext(args.output)[1].lower()
    if ext not in KINDS:
        raise ClayoutError(f"cannot write {args.output}: {PROG} output writes "
                           + "; ".join(f"{e} ({w})" for e, w in KINDS.items()))
    if ext == ".csv" and args.threshold is None:
        raise ClayoutError(f"{args.output}: a .csv holds a threshold's elements; give --threshold")
    if ext == ".npy" and args.threshold is not None:
        raise ClayoutError(f"{args.output}: a threshold's result is indices and values; write "
                           "it as .csv")
    if ext == ".png" and not args.argmax:
        raise ClayoutError(f"{args.output}: a .png is an argmax class mask; give --argmax")
    if ext == ".png":
        _pillow()
    check_output(args.output, [args.input])
    dq = _dequantize(args.dequantize)
    arr = load_npy(args.input)
    try:
        result = read_output(arr, args.layout, args.dims, dequantize=dq,
                             activation=args.activation, argmax=args.argmax,
                             threshold=args.threshold, top_k=args.top_k, dst=args.dst,
                             dtype=args.dtype, engine=args.engine,
                             check_padding=args.check_padding)
    except ClayoutError as exc:
        text = str(exc).replace("read_output: ", "").replace("top_k", "--top-k")
        text = text.replace("check_padding=False", "--no-check-padding")
        for word in ("dequantize", "activation", "threshold", "dst", "dtype"):
            text = text.replace(f"{word}= ", f"--{word} ").replace(f"{word}=", f"--{word} ")
            text = text.replace(f" {word} '", f" --{word} '").replace(f"^{word} '", "")
            if text.startswith(f"{word} '"):
                text = "--" + text
        raise ClayoutError(text) from None
    if ext == ".npy":
        save_npy(args.output, result, [args.input])
        print(f"wrote {args.output}: {result.dtype} array {result.shape}")
    elif ext == ".csv":
        idx, val = result
        head = ",".join(f"i{k}" for k in range(idx.shape[1])) + ",value\n"
        rows = "".join(",".join(map(str, i)) + f",{v!r}\n" for i, v in zip(idx.tolist(),
                                                                           val.tolist()))
        atomic_write(args.output, _text_writer(head + rows), [args.input])
        which = f"the {len(val)} largest" if args.top_k else f"{len(val)} elements"
        print(f"wrote {args.output}: {which} above {args.threshold}")
    else:
        png = mask_png(result, args.dims[1])
        atomic_write(args.output, _bytes_writer(png), [args.input])
        h, w = (result.shape[-2], result.shape[-1]) if result.ndim >= 3 else (1, result.size)
        scale = enlargement(h, w)
        print(f"wrote {args.output}: a mask of {args.dims[1]} classes, {w}x{h}"
              + (f" (drawn {scale}x larger)" if scale > 1 else ""))
    return 0


def _text_writer(text: str):
    return lambda f: f.write(text.encode())


def _bytes_writer(data: bytes):
    return lambda f: f.write(data)


def _pillow():
    if importlib.util.find_spec("PIL") is None:
        raise ClayoutError("writing a .png mask needs Pillow: pip install 'clayout[image]'")


LEVELS = np.array([0, 51, 102, 153, 204, 255])   # 6 levels a channel: 216 colours 51 apart
LEGEND = 200   # pixels: the legend's width, and the width a small mask is enlarged to


def palette(n: int) -> np.ndarray:
    """n colours (u8 RGB), class 0 black: each next colour the one of the
    6x6x6 grid farthest from every colour before it and from white (the
    legend's background), so the first 215 are pairwise at least 51 units
    apart in RGB (39 classes: at least 72); past 215 they repeat."""
    grid = np.stack(np.meshgrid(LEVELS, LEVELS, LEVELS, indexing="ij"), -1).reshape(-1, 3)
    order = [0]                                  # black: the background class
    # white is the legend's background: never a class, kept away from like one
    nearest = np.minimum(np.linalg.norm(grid - grid[0], axis=1),
                         np.linalg.norm(grid - grid[-1], axis=1))
    for _ in range(min(n, len(grid) - 1) - 1):
        k = int(np.argmax(nearest))               # ties: the first in grid order
        order.append(k)
        nearest = np.minimum(nearest, np.linalg.norm(grid - grid[k], axis=1))
    colours = grid[order].astype(np.uint8)
    return np.resize(colours, (n, 3)) if n > len(colours) else colours


def enlargement(h: int, w: int) -> int:
    """The whole factor a mask of h x w pixels is drawn at: the largest that
    keeps it within the legend's width (a 7x5 output: 28x) and under 1024
    pixels along either axis; 1 for a mask over half the legend's width."""
    return max(1, min(LEGEND // max(w, 1), 1024 // max(h, w, 1)))


def mask_png(indices: np.ndarray, classes: int) -> bytes:
    """The first batch item's argmax as a coloured PNG with a legend strip
    below it (each class's colour and number); a mask narrower than the
    legend is enlarged by a whole factor (each class pixel a square)."""
    from PIL import Image, ImageDraw
    arg = indices.reshape((indices.shape[0], -1) + indices.shape[-1:])[0] \
        if indices.ndim >= 2 else indices.reshape(1, -1)
    if arg.ndim == 1:
        arg = arg[None]
    colours = palette(max(1, classes))
    scale = enlargement(*arg.shape)
    arg = arg.repeat(scale, 0).repeat(scale, 1)
    h, w = arg.shape
    cell = 14
    per_row = max(1, max(w, LEGEND) // 40)
    strip = cell * (-(-classes // per_row)) + 4
    canvas = Image.new("RGB", (max(w, LEGEND), h + strip), (255, 255, 255))
    canvas.paste(Image.fromarray(colours[arg]), (0, 0))
    draw = ImageDraw.Draw(canvas)
    for c in range(classes):
        x, y = (c % per_row) * 40 + 2, h + 2 + (c // per_row) * cell
        draw.rectangle([x, y, x + 10, y + 10], fill=tuple(int(v) for v in colours[c]))
        draw.text((x + 13, y), str(c), fill=(0, 0, 0))
    buf = io.BytesIO()
    canvas.save(buf, format="PNG")
    return buf.getvalue()


__all__ = ["register", "cmd_output", "mask_png", "palette"]
