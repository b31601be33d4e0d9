"""``clayout info``, and the choice of layout 'any' the conversion commands
share: a layout's tag, storage, coordinates, host array, pixel formula,
padding, bytes and device limits; for 'any', every candidate of the role
with its storage and size against that storage's limit (runtime.placement).
"""
from __future__ import annotations

import dataclasses
import importlib
import math
import os
import pkgutil
import sys

import numpy as np

from .. import cache
from .. import engine as engines, placement
from ..algebra import catalog, dtypes, peers, tiles
from ..algebra.catalog import NAMED, image_layout
from ..algebra.layout import ImageDesc
from ..algebra.storage import Limits
from ..algebra.tags import parse_tag
from ..errors import ClayoutError
from ..limits import host_limit, human
from ..cpu import geometry, native
from .args import parse_dims, parse_size
from .checks import PROG

LIMITS = ((8192, 8192), (16384, 16384))   # checked by `info`: OpenCL's minimum, common mobile GPUs


def register(command) -> None:
    """info, caches and devices: what clayout knows of layouts, its caches, the machine."""
    p = command("info", cmd_info, "describe an image layout for some dims, or list an "
                "engine's layouts (--engine NAME)")
    p.add_argument("layout", metavar="NAME", nargs="?")
    p.add_argument("--dims", type=parse_dims, metavar="D")
    p.add_argument("--engine", metavar="ENGINE", dest="peer",
                   help="an inference engine whose image layouts clayout names ("
                   + ", ".join(peers.PEERS) + "): alone, list them with its own names; "
                   "with 'any' and --role, choose among them under its own limits")
    p.add_argument("--role", choices=tuple(placement.ROLES),
                   help="with the layout 'any': choose for this role (reason on stderr)")
    p.add_argument("--max-image", type=parse_size, metavar="W,H",
                   help="a 2-D image limit for 'any' (default: the engine's device, "
                   "else none; arrays and 3-D images get OpenCL's minimums within "
                   "it); also prints the tiles of a 2-D image over it")
    command("caches", cmd_caches, "list every cache clayout keeps: entries, size, variable")
    command("devices", cmd_devices, "list OpenCL devices and their image limits")


def layout_arg(args):
    """--layout, where 'any' stands for the role's first candidate until
    ``choose`` has the dims; --role goes with 'any' only."""
    role = getattr(args, "role", None)
    if args.layout != "any":
        if role is not None:
            raise ClayoutError(f"--role {role} goes with --layout any (let clayout choose); "
                               f"got the layout {args.layout!r}")
        return image_layout(args.layout)
    if role is None:
        raise ClayoutError(f"layout 'any' needs --role R to choose for: "
                           f"{', '.join(placement.ROLES)}")
    return NAMED[placement.candidates(role)[0]]


def choose(args, dims, dtype, engine=None):
    """The layout 'any' picks for ``dims``, its reason printed on stderr; the
    tile limit (--max-image for a 2-D image, or the 2-D limit nothing
    fitted: tiles then); and the LayoutChoice."""
    choice = placement.layout_choice(args.role, dims, dtype, args.max_image, engine,
                                     getattr(args, "peer", None))
    verdict = "chose" if choice.fits else "will split"
    print(f"{PROG}: layout any {verdict} {choice.layout.name}: "
          f"{choice.explain('give --max-image W,H')}", file=sys.stderr)
    tile_limit = args.max_image if choice.fits else choice.max_image
    return choice.layout, tile_limit, choice


def cmd_info(args) -> int:
    if args.peer is not None and args.layout is None:
        if args.dims is not None or args.role is not None or args.max_image is not None:
            raise ClayoutError("--engine alone lists an engine's layouts; to choose among "
                               "them give: any --role R --dims D --engine NAME")
        return peer_listing(args.peer)
    if args.layout is None and args.dims is None and args.role is None and \
            args.max_image is None:
        return layout_listing()
    if args.layout is None or args.dims is None:
        raise ClayoutError("give a layout and --dims D (clayout info conv2d_filter --dims "
                           "64,3,3,3), or --engine NAME to list an engine's layouts")
    if args.peer is not None and args.layout != "any":
        raise ClayoutError(f"--engine {args.peer} with the layout {args.layout!r}: --engine "
                           "goes alone (list its layouts) or with 'any' --role R (choose "
                           "among them)")
    layout = layout_arg(args)
    choice = None
    if args.layout == "any":
        layout, _, choice = choose(args, args.dims, "f32")
    image = ImageDesc(layout, args.dims)
    layout, dims, store = image.layout, image.dims, image.storage   # the 5-D form for 5-D dims
    # planned before the first line is printed: a failure prints only its error
    plan = None
    if args.max_image is not None and store.tiles:
        plan = tiles.tile_plan(image, args.max_image)
    slots = math.prod(image.shape) * image.lanes
    count = int(np.prod(image.placed))   # a Winograd image holds U's elements
    print(f"layout    {layout.name} ({layout.kind}: {layout.dims_text})")
    if args.layout in catalog.ALIASES:
        print(f"alias     {args.layout} is another name of {layout.name} (the same layout)")
    print(f"tag       {_tag_text(layout)}")
    print(f"storage   {store.name} ({store.c_type}): pixel ({', '.join(store.coords)}); "
          f"reads as zero (TFLite GPU's kernels): {store.border}")
    print(f"lanes     {_lanes_text(image)}")
    print(f"dims      {','.join(map(str, dims))}")
    print(f"image     {_size_text(image)}")
    print(f"array     {image.array_shape} (host array: "
          f"{', '.join(reversed(store.coords))}{', lane' if image.layout.lanes != 1 else ''})")
    if layout.transform is not None:
        print(f"values    U = G·g·Gᵀ of {layout.transform.name} (docs/winograd.md): placed dims "
              f"{','.join(layout.placed_names)} = {','.join(map(str, image.placed))}")
    formula = catalog.formula(layout) or catalog.formula(image_layout(args.layout)
                                                         if args.layout != "any" else layout)
    print(f"pixel     {formula or 'custom layout: from the tag (no table formula)'}")
    what = "placed" if layout.transform else "logical"
    print(f"elements  {count} {what}, {slots} image lanes ({slots - count} padding)")
    held = [n for n in dtypes.IMAGE_NAMES if layout.transform is None or dtypes.dtype(n).is_float]
    sizes = ", ".join(f"{n} {slots * dtypes.dtype(n).itemsize}" for n in held)
    print(f"bytes     {sizes}")
    for limit in LIMITS:
        bounds, text = info_limits(limit, store)
        if bounds.refusal(image) is None:
            verdict = "fits"
        else:
            others = [o.name for o in catalog.fitting(layout.kind, dims, bounds,
                                                      layout.transform)]
            verdict = "too big" + (f"; fit: {', '.join(others)}" if others else
                                   "; no named layout of this kind fits")
        within = "" if store.plain else f" ({store.name} {text})"
        print(f"limit     {limit[0]}x{limit[1]}{within}: {verdict}")
    if plan is not None:
        limit = f"{plan.max_image[0]}x{plan.max_image[1]}"
        print(f"tiles     {limit}: " + ("fits, one image" if not plan.split else
              f"{len(plan.tiles)} tiles, {plan.rows} row(s) x {plan.cols} column(s): "
              + ", ".join(f"({t.row},{t.col}) {t.region}" for t in plan.tiles)))
    elif args.max_image is not None:
        bounds, text = info_limits(args.max_image, store)
        why = bounds.refusal(image)
        print(f"tiles     {args.max_image[0]}x{args.max_image[1]}: only 2-D images are split; "
              f"this {store.name} " + (
                  f"{'is over' if why else 'fits'} its limit ({text})" if store.on_buffer else
                  f"fits its limit {text}" if why is None else why))
    if choice is not None:
        for line in candidate_lines(choice):
            print(line)
    return 0


def layout_listing() -> int:
    """`clayout info` alone: every named layout, its kind, image size and source."""
    rows = [(r.name, r.layout.kind, r.size, r.source) for r in catalog.LAYOUTS]
    head = ("layout", "kind", "image (width x height)", "from")
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head[:3])]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3])
    print("custom    'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]', e.g. 'acBd4b:2' (in_out_channel); "
          f"`{PROG} info NAME --dims D` describes one")
    return 0


def peer_listing(name: str) -> int:
    """`clayout info --engine NAME`: the engine's layouts by its own names,
    clayout's name and image size of each, its limits and roles."""
    p = peers.peer(name)
    print(f"engine    {p.name}: {p.title} (read from {p.source})")
    layouts = [image_layout(n.layout) for n in p.names]   # an alias gives its target's row
    rows = [(n.theirs, n.layout, layout.kind, catalog.ROW[layout.name].size, n.note)
            for n, layout in zip(p.names, layouts)]
    head = ("its name", "clayout layout", "kind", "image")
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
    if rows:
        print("  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  note")
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + (r[4] or "-"))
    limit = "the device's" if p.limit is None else ("under " if p.strict else "") + \
        f"{p.limit[0]}x{p.limit[1]}" + (f", {p.layers} array layers" if p.layers else "")
    print(f"limits    {limit}")
    for role, names in p.roles.items():
        if names:
            print(f"role      {role}: {', '.join(names)}")
    if p.notes:
        print(f"note      {p.notes}")
    return 0


def info_limits(limit, store) -> tuple[Limits, str]:
    """The limits `info` measures a ``store`` against for a 2-D ``limit``
    (width, height), and how its line writes them: what the 2-D limit
    implies (Limits.of); a buffer or an image buffer is also one allocation,
    whose bound (a device's max allocation) `info` has no device to ask, so
    it is checked against the host memory limit, and the line says so."""
    bounds = Limits.of(limit)
    if not store.on_buffer:
        return bounds, bounds.text(store)
    host = host_limit()
    pixels = f"{bounds.image_buffer} pixels, " if store.image_object else ""
    return dataclasses.replace(bounds, max_alloc=host), \
        f"{pixels}max allocation: the host memory limit {human(host)}, no device given"


def _tag_text(layout) -> str:
    """'Acdb4a, rows 3: y = A,c,d; x = b; lane = 4a', with z (layers) on
    arrays and 3-D images and one index x on buffers."""
    outer, inner = parse_tag(layout.tag).tokens()
    lane = inner.pop() if layout.lanes == 4 else outer.pop() if layout.lanes == 0 else None
    axes = outer + inner
    z_axes = axes[:layout.layers]
    y_axes = axes[layout.layers:layout.layers + layout.rows]
    x_axes = axes[layout.layers + layout.rows:]
    if layout.storage.on_buffer:
        text = f"{layout.tag}: x = {','.join(x_axes)}"
    else:
        text = (f"{layout.tag}, rows {layout.rows}: "
                + (f"z = {','.join(z_axes)}; " if layout.layers else "")
                + f"y = {','.join(y_axes) or '(none: one row)'}; "
                f"x = {','.join(x_axes) or '(none: one column)'}")
    if lane and layout.lanes == 0:
        return text + f"; texel = {lane} whole"
    return text + (f"; lane = {lane}" if lane else "")


def _lanes_text(image) -> str:
    if image.layout.lanes == 4:
        return "4 (RGBA, CL_RGBA)"
    if image.layout.lanes == 1:
        return "1 (CL_R)"
    text = (f"{image.lanes} ({image.channels}, CL_{image.channels}): lanes 0, the innermost dim "
            "whole in one texel")
    if image.lanes == 3:
        text += "; OpenCL defines no 3-channel float format: the device must offer one"
    return text


def _size_text(image) -> str:
    """'35 x 5 pixels (width x height)', '5 x 3 x 2 pixels (width x height x
    depth)', '30 pixels (one index x)'."""
    store = image.storage
    names = " x ".join(store.extent_names) if store.ndim > 1 else "one index x"
    return f"{' x '.join(map(str, image.shape))} pixels ({names})"


def candidate_lines(choice) -> list[str]:
    """`info any`: one line per candidate, its storage, its size, the limit
    of its storage and the verdict."""
    rows = [(c.name, c.storage.name, "x".join(map(str, c.size)),
             "no limit" if c.limit is None else "limit " + "x".join(map(str, c.limit)),
             ("fits" + (" (chosen)" if c.name == choice.layout.name and choice.fits else ""))
             if c.fits else ("over" + (" (split into tiles)" if c.name == choice.layout.name
                                       else "")))
            for c in choice.candidates]
    rows += [(name, "-", "-", "-", "no form for these dims") for name, _ in choice.skipped]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["candidate " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[4]
            for r in rows]


def cmd_caches(args) -> int:
    """Every cache clayout keeps (runtime.cache.REGISTRY), after importing
    every module of the package so that each has registered its own: name,
    entries held in this process, size, and the variable that sets it."""
    skipped = load_every_module()
    rows = [(lru.name, str(len(lru)), str(lru.size), lru.env)
            for lru in sorted(cache.REGISTRY.values(), key=lambda c: c.name)]
    head = ("cache", "entries", "size", "set with")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    for row in [head, tuple("-" * w for w in widths)] + rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    print(f"{len(rows)} caches; runtime.cache.clear_all() empties them, a cache's .size "
          "changes its bound at run time")
    for line in engines.device_memory_lines():
        print(line)
    for name, why in skipped:
        print(f"not loaded: {name} ({why}): its caches are not listed", file=sys.stderr)
    return 0


def load_every_module() -> list[tuple[str, str]]:
    """Import every module of the runtime package (its caches register when
    it is imported); (module, why) for those an optional package is missing for."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # runtime/
    skipped = []
    for mod in pkgutil.walk_packages([package], "runtime."):
        if mod.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(mod.name)
        except ImportError as exc:
            skipped.append((mod.name, str(exc)))
    return skipped


# -- devices -----------------------------------------------------------------------------
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
