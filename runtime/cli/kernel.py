"""``clayout kernel`` (docs/cli.md): the OpenCL C clayout renders for one
conversion, a frame or read_output, the family and plan that chose it, and
with ``--gpu NAME --access`` what a GPU's memory system makes of it
(docs/performance.md: the access model).

The conversion is given by two of ``--src``, ``--layout``, ``--dst`` (a
reorder, to an image, from an image); a frame by ``--frame FORMAT
--frame-size WxH`` and its target (``--layout`` or ``--dst``); read_output's
kernel by ``--read-output RESULT`` and the output's side (``--layout`` or
``--src``). ``--gpu NAME`` plans for a GPU record (runtime/opencl/gpus.py)
instead of this machine's device; ``--access`` adds the model's figures,
``--json`` gives them alone, as one JSON object."""
from __future__ import annotations

import json

import numpy as np

from ..algebra.catalog import image_layout
from ..algebra.frame import frame_side, frame_target
from ..algebra.frame_formats import frame_format
from ..algebra.output import output_rule
from ..algebra.desc import MemoryDesc
from ..algebra.layout import ImageDesc
from ..engine import opencl_available
from .args import parse_dims, parse_wh
from ..errors import ClayoutError

RESULTS = ("tensor", "argmax", "softmax", "sigmoid", "threshold")


def register(command) -> None:
    """kernel and accessor: the OpenCL C clayout renders."""
    add_arguments(command("kernel", cmd_kernel, "print the OpenCL C kernel of one "
                          "conversion (--src and --dst, --src and --layout, --layout and "
                          "--dst), frame (--frame) or read_output (--read-output); with --gpu "
                          "NAME --access, what a GPU's memory system makes of it"))
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


def add_arguments(p) -> None:
    p.add_argument("--dims", type=parse_dims, metavar="D",
                   help="logical dims (not with --frame: the frame's output gives them)")
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
    p.add_argument("--family", choices=("auto", "direct", "tiled"), default="auto",
                   help="the kernel family: tiled (local-memory tiles, what a GPU runs for a "
                   "move that transposes), direct (one work item a vector or pixel), or auto: "
                   "what the default OpenCL device chooses (direct without one)")
    p.add_argument("--frame", metavar="FORMAT", help="a frame's kernel: the frame's format "
                   "(rgb, nv21, ...), with --frame-size, --size and the target")
    p.add_argument("--frame-size", type=parse_wh, metavar="WxH", help="the frame's size")
    p.add_argument("--size", type=parse_wh, metavar="WxH", help="the frame's output size")
    p.add_argument("--read-output", choices=RESULTS, metavar="RESULT",
                   help="read_output's kernel of the side --layout (or --src) and --dims: "
                   f"{', '.join(RESULTS)}")
    p.add_argument("--gpu", metavar="NAME", help="plan for a GPU record (h100, h200, gpu) "
                   "instead of this machine's device")
    p.add_argument("--access", action="store_true",
                   help="with --gpu: the access model's figures (sectors, lanes, local memory "
                   "wavefronts, occupancy, waves), from a few work-groups run here")
    p.add_argument("--json", action="store_true", help="with --access: the figures alone, as JSON")


def cmd_kernel(args) -> int:
    """Print the OpenCL C source clayout renders for one kernel (module docstring)."""
    if (args.access or args.json) and args.gpu is None:
        raise ClayoutError("--access and --json model a GPU record: give --gpu NAME "
                           "(h100, h200, gpu)")
    if args.json and not args.access:
        raise ClayoutError("--json prints the access model's figures: give --access too")
    if args.read_output:
        return _output(args)
    src, dst = _sides(args)
    if args.gpu is not None:
        return _on_gpu(args, src, dst)
    from ..opencl.plan import ByteCopy, plan   # mako (the kernel templates): this command only
    from ..opencl.device import EngineOptions
    from ..opencl.moves import bake_point
    tiled, why = _family(args.family)
    # the first call's program, by the move plan's rule, unless --bake asks for the baked one
    bake = args.bake or bake_point(src, dst, EngineOptions.read()) == 0
    kernel = plan(src, dst, staged=args.staged, bake=bake, tiled=tiled)
    if isinstance(kernel, ByteCopy):   # no program to print
        print(f"// plan: {kernel.chosen}")
        return 0
    if tiled and not kernel.tiled:
        why = (f"the move does not transpose: the destination's contiguous direction walks "
               f"the source's; {why} asked for tiled")
    _print_kernel(kernel, f"{'tiled' if kernel.tiled else 'direct'} ({why})", args.dims)
    return 0


def _sides(args):
    dtype = args.dtype or "f32"
    image_dtype = args.image_dtype or (dtype if dtype != "bf16" else "f32")
    if args.frame is not None:
        return _frame(args, dtype)
    sides = (args.src is not None, args.layout is not None, args.dst is not None)
    if sides not in ((True, False, True), (True, True, False), (False, True, True)):
        raise ClayoutError("give two of --src, --layout, --dst: --src and --dst (a reorder), "
                           "--src and --layout (to an image), --layout and --dst (from an image)")
    if args.dims is None:
        raise ClayoutError("give --dims D, the logical dims of the conversion")
    src = MemoryDesc(args.dims, dtype, tag=args.src) if args.src else \
        ImageDesc(image_layout(args.layout), args.dims, image_dtype)
    dst = MemoryDesc(args.dims, args.dst_dtype or dtype, tag=args.dst) if args.dst else \
        ImageDesc(image_layout(args.layout), args.dims, image_dtype)
    return src, dst


def _frame(args, dtype):
    if args.frame_size is None or (args.layout is None) == (args.dst is None):
        raise ClayoutError("a frame's kernel takes --frame FORMAT, --frame-size WxH and one "
                           "target: --layout NAME (an image) or --dst TAG (a buffer)")
    w, h = args.frame_size
    frame = frame_side(frame_format(args.frame).shape(h, w), args.frame, size=args.size)
    target = frame_target(args.layout or args.dst, dtype)
    dst = MemoryDesc(frame.dims, dtype, tag=target) if isinstance(target, str) else \
        ImageDesc(image_layout(target), frame.dims, dtype)
    return frame, dst


def _on_gpu(args, src, dst) -> int:
    from ..opencl import gpus
    from ..opencl.access import model_move
    from ..opencl.moves import move_plan
    record, base = gpus.gpu(args.gpu), _base_device()
    bake = True if args.bake else None
    if not args.access:
        p = move_plan(src, dst, gpus.device(record, base))
        kernel = p.kernel
        if bake and kernel.generic:
            from ..opencl.plan import plan
            kernel = plan(src, dst, staged=p.through_buffers, bake=True, tiled=p.tiled)
        if not hasattr(kernel, "source"):
            print(f"// plan: {kernel.chosen}")
            return 0
        _print_kernel(kernel, f"{'tiled' if kernel.tiled else 'direct'} ({record.title}: "
                      f"{p.family_why})", getattr(src, "dims", None))
        return 0
    modelled = model_move(src, dst, record, base, bake=bake)
    numbers = "generic" if modelled.kernel.generic else "baked"
    return _report(args, modelled, f"{src.describe()} -> {dst.describe()} ({numbers})", record)


def _output(args) -> int:
    from ..opencl import gpus
    from ..opencl.access import model_output
    from ..opencl.output import source
    if (args.layout is None) == (args.src is None) or args.dims is None:
        raise ClayoutError("read_output's kernel takes the output's side: --layout NAME (an "
                           "image) or --src TAG (a buffer), and --dims D")
    dtype = args.image_dtype or args.dtype or "f32"
    side = ImageDesc(image_layout(args.layout), args.dims, dtype) if args.layout else \
        MemoryDesc(args.dims, dtype, tag=args.src)
    kind = args.read_output
    rule = output_rule(side.dims, side.dtype.name, argmax=kind == "argmax",
                       activation=kind if kind in ("softmax", "sigmoid") else None,
                       threshold=0.5 if kind == "threshold" else None)
    if not args.access:
        print(source(side, rule))
        return 0
    record = gpus.gpu(args.gpu)
    modelled = model_output(side, rule, record, _base_device())
    return _report(args, modelled, f"read_output {kind} of {side.describe()}", record)


def _report(args, modelled, name: str, record) -> int:
    summary = modelled.summary(name)
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    if modelled.kernel is not None:
        _print_kernel(modelled.kernel, f"{modelled.family} ({record.title}: {modelled.why})",
                      getattr(args, "dims", None))
    print(f"// access model on {record.title}:")
    for line in model_lines(modelled.figures):
        print(f"//   {line}")
    return 0


def model_lines(f) -> list[str]:
    """The model's figures in words, one line each (the CLI's and the bench's)."""
    def n(x, digits=2):
        return "-" if x is None else f"{x:.{digits}f}"
    lines = [f"{f.groups} work-groups of {'x'.join(map(str, f.local_size))}; traced: the first, "
             f"a middle and the last{'' if f.complete else ' (some records not kept)'}"]
    for what, t in (("loads", f.loads), ("stores", f.stores)):
        if t.efficiency is not None:
            lines.append(f"{what}: efficiency {n(t.efficiency)} as written, "
                         f"{n(t.efficiency_as_emitted)} as emitted; "
                         f"{n(t.sectors_per_request, 1)} sectors a request")
    lines.append(f"active lanes {n(f.active_lanes)}; local memory "
                 f"{n(f.local_wavefronts_per_request)} wavefronts a request; occupancy "
                 f"{n(f.occupancy)}; waves {n(f.waves)}")
    if f.image_rows_per_warp is not None:
        lines.append(f"image writes: {n(f.image_rows_per_warp, 1)} rows, "
                     f"{n(f.image_pixels_per_warp, 1)} pixels a warp")
    for s in f.sites:
        site = s.site
        what = (f"eff {n(s.efficiency)} / {n(s.efficiency_as_emitted)} emitted"
                if s.efficiency is not None else
                f"{n(s.wavefronts_per_request)} wavefronts" if s.wavefronts_per_request
                is not None else f"{n(s.rows_per_request, 1)} rows, "
                f"{n(s.pixels_per_request, 1)} pixels")
        lines.append(f"site {site.id}: {site.kind} {site.space} {site.form} {site.bytes} B "
                     f"(aligned {site.align}): lanes {n(s.active_lanes)}, {what}")
    return lines


def _print_kernel(kernel, family: str, dims) -> None:
    print(kernel.source)
    print(f"// family: {family}")
    if kernel.generic:   # the numbers this shape passes to the family's program
        names = [f"n{i}={int(v) if np.issubdtype(type(v), np.integer) else v!r}"
                 for i, v in enumerate(kernel.args)]
        shown = f" for dims {','.join(map(str, dims))}" if dims else ""
        print(f"// arguments{shown}: {' '.join(names)}")
    print(f"// plan: {kernel.chosen}")


def _base_device():
    """The device of this machine that GPU records plan on and the model runs
    traced kernels on (PoCL, or oclgrind)."""
    if not opencl_available():
        raise ClayoutError("--gpu plans with and runs the access model on an OpenCL device of "
                           "this machine (PoCL, oclgrind); none here")
    from ..opencl.engine import default
    return default().device


def _family(chosen: str) -> tuple[bool, str]:
    """(tiled, why) of ``clayout kernel --family``: as given, or (auto) the
    default OpenCL device's choice (runtime/opencl/moves.py), direct
    without a device."""
    if chosen != "auto":
        return chosen == "tiled", f"--family {chosen}"
    if not opencl_available():
        return False, "no OpenCL device here: direct"
    from ..opencl.engine import default
    from ..opencl.moves import family_of
    device = default().device
    tiled, why = family_of(device)
    return tiled, f"{device.name}: {why}"


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
