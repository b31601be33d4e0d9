"""A camera frame as the source of a conversion kernel (docs/frames.md).

The frame's stages (runtime/algebra/frame.py: colour, sample, normalize)
become one C function, ``clayout_frame_pixel(src, taps, y, x)``: the model
input's channels at row y, column x, as a float4 (lanes past C are 0). The
conversion kernel (runtime/opencl/render.py) calls it where it would load a
source element (``loads``: one call serves every element at that pixel),
and everything after the load (the dtype rule, padding, the destination's
index, the store into any layout or storage) is the kernel of every other
conversion. One work item computes its elements from the frame bytes in
registers: no intermediate RGB, resized or normalized array.

**The taps buffer.** The sample stage's tables and the frame's numbers,
packed into one float32 buffer (runtime/algebra/frame_taps.py) that the
kernel takes after ``dst``, leased from the engine's pool for each call
(``taps``) and written there: a moving crop makes no memory object. A
*generic* frame program reads every number from it: its source depends on
the frame's format and channel order, and for resizes of at most two taps
an axis (copy, nearest, bilinear) on the taps of each, read in
straight-line code (``family``: PoCL vectorizes across work items only a
body without inner loops; with loops 1280 x 720 NV21 -> 1280 x 1280
letterbox bilinear ran 2-3x slower than baked, straight-line as fast);
wider taps loop. So a new crop, frame size, output size or normalization
builds nothing (a tracker's crop moves every frame). A frame converted
again and again gets its *baked* program (the header's numbers written in,
the taps computed inline where the method allows) when it turns hot,
built off the calling thread (runtime/opencl/moves.py, baking.py); never
at once, whatever its size: a new crop runs the generic program.

The function evaluates the same float32 operations, in the same order, as
the host evaluation (runtime/algebra/frame_sample.py), under
``FP_CONTRACT OFF`` (no fused multiply-adds), so the two give the same bits.
"""
from __future__ import annotations

import contextlib

import pyopencl as cl

from ..algebra.c_index import f32_literal
from ..algebra.frame import FramePlan
from ..algebra.frame_taps import HEADER, WORD, header, tables
from ..cache import LRU, memoized
from .trace import Accesses
from . import events

FUNCTION = "clayout_frame"
PARAM = "__global const float *restrict clayout_taps"


@contextlib.contextmanager
def taps(launcher, plan: FramePlan):
    """The taps buffer of ``plan`` for the time of a ``with`` block: leased
    from ``launcher``'s pool and written after the commands still pending on
    it (events: runtime/opencl/events.py), back to the pool at the end, its
    next lease ordered after the kernel that reads it here."""
    data = tables(plan)
    with launcher.memory.lease_buffer(data.nbytes, cl.mem_flags.READ_ONLY) as buf:
        write = cl.enqueue_copy(launcher.queue, buf, data, is_blocking=False,
                                wait_for=events.after((), (buf,)) or None)
        events.done(write, (), (buf,))
        yield buf


# taps per axis up to which a generic program is straight-line code: copy, nearest,
# bilinear and area-zoom (K <= 2 each, four taps a pixel); wider taps (area, antialiased
# bilinear: K grows with the scale) loop, so that a crop whose scale moves builds nothing
STRAIGHT_TAPS = 2


def straight(plan: FramePlan) -> bool:
    """Whether ``plan``'s generic program reads its taps in straight-line code."""
    return plan.x.taps <= STRAIGHT_TAPS and plan.y.taps <= STRAIGHT_TAPS


def family(plan: FramePlan) -> tuple:
    """What a generic frame program's source depends on: the format, which
    RGB component each output channel takes and, where its taps are
    straight-line code, how many each axis has (else: loops)."""
    taps = (plan.x.taps, plan.y.taps) if straight(plan) else "loops"
    return (plan.format.name, plan.source, taps)


def describe(plan: FramePlan, bake: bool) -> str:
    """The kernel's summary of the frame: the whole plan when baked, its
    family when generic (so the source does not vary by crop)."""
    if bake:
        return plan.describe()
    order = f" {plan.order}" if plan.channels > 1 else ""
    return f"frame {plan.format.name}{order} (generic: sizes, crop, taps in clayout_taps)"


def _numbers(plan: FramePlan, bake: bool, acc: Accesses):
    """``n(name)``: a header value as C, a literal when baked, else read
    from the taps buffer (an int through as_int; each read written by ``acc``)."""
    values = header(plan) if bake else None

    def n(name: str) -> str:
        integer = HEADER[WORD[name]][1]
        if bake:
            return str(int(values[name])) if integer else f32_literal(values[name])
        word = acc.load("clayout_taps", str(WORD[name]), "f32")
        return f"as_int({word})" if integer else word
    return n


def _colour(plan: FramePlan, n, wanted, acc: Accesses, x: str = "x", y: str = "y",
            t: str = "t") -> list[str]:
    """C lines giving ``{t}_k``, RGB component k of the frame pixel (x, y),
    clamped to [0, 255], for each k in ``wanted``: the float32 operations
    of runtime.algebra.frame_sample.rgb_at, in its order."""
    fmt, w, h = plan.format, n("fw"), n("fh")
    if not fmt.is_yuv:
        at = f"({y} * {w} + {x}) * {fmt.bytes}"
        return [f"const float {t}_{k} = (float){acc.load('src', f'{at} + {fmt.rgb[k]}', 'u8')};"
                for k in wanted]
    luma_at = f"{y} * {w} + {x}"
    if fmt.chroma == "planes":
        half = f"({w} / 2)"
        u_at = f"{h} * {w} + ({y} / 2) * {half} + {x} / 2"
        v_at = f"{h} * {w} + ({h} / 2) * {half} + ({y} / 2) * {half} + {x} / 2"
    else:
        pair = f"{h} * {w} + ({y} / 2) * {w} + ({x} / 2) * 2"
        u_at, v_at = (pair, f"{pair} + 1") if fmt.chroma == "uv" else (f"{pair} + 1", pair)
    lines = [f"const float {t}_y = {n('ky')} * (float)max((int)"
             f"{acc.load('src', luma_at, 'u8')} - {n('y0')}, 0);",
             f"const float {t}_v = (float)((int){acc.load('src', v_at, 'u8')} - 128);",
             f"const float {t}_u = (float)((int){acc.load('src', u_at, 'u8')} - 128);"]
    value = {0: f"{t}_y + {t}_v * {n('rv')}",
             1: f"({t}_y + {t}_v * {n('gv')}) + {t}_u * {n('gu')}",
             2: f"{t}_y + {t}_u * {n('bu')}"}
    return lines + [f"const float {t}_{k} = clamp({value[k]}, 0.0f, 255.0f);" for k in wanted]


# methods whose taps a baked program computes inline from the integer rule
# (no table reads: PoCL ran 1280x720 NV21 -> 320x320 40 % slower reading them)
INLINE = ("copy", "nearest", "bilinear")


def _axis(axis, n, bake: bool, acc: Accesses):
    """(C lines giving ``{p}d`` (the output offset), ``{p}_in`` and ``{p}f``
    (the first tap's frame pixel); ``weight(k)``: the weight of tap k (a C
    expression or a number) as C) for the axis ``axis`` (p = x or y): read
    from its table, or computed inline as the table was
    (runtime/algebra/frame_axis.py)."""
    p = axis.name
    o, scaled = f"o{p}", n(f"{p}_scaled")
    lines = [f"const int {p}d = {o} - {n(f'{p}_pad')};",
             f"const int {p}_in = {p}d >= 0 && {p}d < {scaled};",
             f"const int {p}c = clamp({p}d, 0, {scaled} - 1);"]
    if not (bake and axis.method in INLINE):
        lines += [f"const int {p}r = {n(f'{p}_at')} + {p}c * ({n(f'{p}_k')} + 1);",
                  f"const int {p}f = as_int({acc.load('clayout_taps', f'{p}r', 'f32')});"]
        return lines, lambda k: acc.load("clayout_taps", f"{p}r + 1 + {k}", "f32")
    length, last, start = axis.length, axis.length - 1, axis.start
    if axis.method == "copy":
        return lines + [f"const int {p}f = {p}c + {start};"], lambda k: "1.0f"
    if axis.method == "nearest":
        return lines + [f"const int {p}f = min({p}c * {length} / {axis.scaled}, {last}) + "
                        f"{start};"], lambda k: "1.0f"
    den = 2 * axis.scaled
    lines += [f"const int {p}n = (2 * {p}c + 1) * {length} - {axis.scaled};",
              f"const int {p}q = max({p}n, 0) / {den};",
              f"const int {p}ok = {p}n >= 0 && {p}q < {last};",
              f"const int {p}f = ({p}ok ? {p}q : ({p}n < 0 ? 0 : {last})) + {start};",
              f"const float {p}w1 = {p}ok ? (float)({p}n - {p}q * {den}) * "
              f"{f32_literal(axis.inv)} : 0.0f;",
              f"const float {p}w0 = 1.0f - {p}w1;"]
    return lines, lambda k: f"{p}w{k}" if isinstance(k, int) else f"({k} ? {p}w1 : {p}w0)"


def _sample_unrolled(plan: FramePlan, n, wanted, x_weight, y_weight,
                     acc: Accesses) -> list[str]:
    """The taps, straight-line (PoCL vectorizes across work items only a
    body without inner loops): each tap's colour, then per row of taps the
    x blend, then the y blend, in the host's order (the first term the
    first product, as on the host)."""
    kx, ky = plan.x.taps, plan.y.taps
    lines = [f"const int x{i} = min(xf + {i}, {n('x_last')});" for i in range(kx)]
    lines += [f"const int y{j} = min(yf + {j}, {n('y_last')});" for j in range(ky)]
    for j in range(ky):
        for i in range(kx):
            lines += _colour(plan, n, wanted, acc, f"x{i}", f"y{j}", f"t{i}_{j}")
    for k in wanted:
        rows = [" + ".join(f"t{i}_{j}_{k} * {x_weight(i)}" for i in range(kx))
                for j in range(ky)]
        lines.append(f"const float p{k} = " +
                     " + ".join(f"({r}) * {y_weight(j)}" for j, r in enumerate(rows)) + ";")
    return lines


def _sample_loops(n, plan: FramePlan, wanted, x_weight, y_weight,
                  acc: Accesses) -> list[str]:
    """The taps of a generic program: loops of K taps read from the buffer,
    the sums starting at -0.0f (-0.0f + x is x for every x, so the first
    term is the first product, as on the host)."""
    sums = ", ".join(f"p{k} = -0.0f" for k in wanted)
    row = ", ".join(f"r{k} = -0.0f" for k in wanted)
    body = [f"float {sums};",
            f"for (int ky = 0; ky < {n('y_k')}; ky++) {{",
            f"    const int y = min(yf + ky, {n('y_last')});",
            f"    const float wy = {y_weight('ky')};",
            f"    float {row};",
            f"    for (int kx = 0; kx < {n('x_k')}; kx++) {{",
            f"        const int x = min(xf + kx, {n('x_last')});",
            f"        const float wx = {x_weight('kx')};"]
    body += [f"        {line}" for line in _colour(plan, n, wanted, acc)]
    body += [f"        r{k} += t_{k} * wx;" for k in wanted]
    return body + ["    }"] + [f"    p{k} += r{k} * wy;" for k in wanted] + ["}"]


def _function(plan: FramePlan, bake: bool, acc: Accesses) -> str:
    n = _numbers(plan, bake, acc)
    wanted = sorted(set(plan.source))
    x_lines, x_weight = _axis(plan.x, n, bake, acc)
    y_lines, y_weight = _axis(plan.y, n, bake, acc)
    body = x_lines + y_lines
    body += _sample_unrolled(plan, n, wanted, x_weight, y_weight, acc) \
        if bake or straight(plan) else _sample_loops(n, plan, wanted, x_weight, y_weight, acc)
    outs = [f"(p{k} * {n('scale')} - {n(f'mean{c}')}) * {n(f'inv{c}')}"
            for c, k in enumerate(plan.source)]
    fills = [n(f"fill{c}") for c in range(plan.channels)]
    outs += ["0.0f"] * (4 - len(outs))
    fills += ["0.0f"] * (4 - len(fills))
    body.append(f"return (x_in && y_in) ? (float4)({', '.join(outs)}) :")
    body.append(f"                        (float4)({', '.join(fills)});")
    lines = [f"// {describe(plan, bake)}",
             "#pragma OPENCL FP_CONTRACT OFF",
             "// always inlined: PoCL left it a call in the work-group loop, paid per",
             "// work item (0.93 -> 0.71 ms at 1280x720 NV21 -> 320x320)",
             "// (no restrict on its pointers: oclgrind 21.10 cannot run the noalias",
             "// scopes an inlined restrict parameter leaves; the kernel's have it)",
             f"inline __attribute__((always_inline)) float4 {FUNCTION}_pixel(",
             "    __global const uchar *src, __global const float *clayout_taps,",
             f"    const int oy, const int ox{acc.param})",
             "{"]
    return "\n".join(lines + [f"    {line}" for line in body] + ["}", ""])


@memoized("OpenCL frame functions", "CLAYOUT_FRAME_CACHE", 64)
def _baked(plan: FramePlan) -> str:
    return _function(plan, True, Accesses())


GENERIC = LRU("OpenCL generic frame functions", "CLAYOUT_FRAME_CACHE", 64)


def function(plan: FramePlan, bake: bool = True, acc: Accesses | None = None) -> str:
    """The C of ``clayout_frame_pixel(src, clayout_taps, y, x)`` for
    ``plan``: the model input's channels at (y, x) as a float4 (lanes past
    C are 0); baked (the plan's numbers written in) or generic (one source
    per ``family``, every number read from the taps buffer). ``acc``: the
    kernel's access emitter where it traces (runtime/opencl/trace.py; the
    function then takes the log too, and is not cached)."""
    if acc is not None and acc.trace:
        return _function(plan, bake, acc)
    if bake:
        return _baked(plan)
    return GENERIC.get(family(plan), lambda: _function(plan, False, Accesses()))


def pixel(names, acc: Accesses) -> str:
    """The C expression of the input's channels at the logical index
    ``names`` (n, c, h, w): a float4."""
    _, _, h, w = names
    return f"{FUNCTION}_pixel(src, clayout_taps, (int)({h}), (int)({w}){acc.arg})"


def lane(pixel_name: str, c: str) -> str:
    """Channel ``c`` of a float4 from ``pixel``."""
    return f"clayout_lane_f({pixel_name}, (uint)({c}))"


def loads(load, vector: int, src_names, conv, valid, pad, acc: Accesses) -> tuple:
    """The loads (records of ``load``, runtime/opencl/cell.py's Load) of
    a work item's ``vector`` elements from the frame: one ``clayout_frame_pixel`` call
    serves every element at its (n, h, w) (a vector along C: one call), each
    element picking its channel, converted by ``conv``; an element outside
    the logical dims (``valid`` false) takes ``pad``."""
    names = [src_names(j) for j in range(vector)]
    where = [(n[0], n[2], n[3]) for n in names]
    out = []
    for first, at in enumerate(where):
        if where.index(at) != first:
            continue
        fast = []
        for j in (j for j in range(vector) if where[j] == at):
            value = conv(lane("f", names[j][1]))
            fast.append((j, value if valid[j] is None else f"({valid[j]}) ? {value} : {pad[j]}"))
        out.append(load(None, f"const float4 f = {pixel(names[first], acc)};", tuple(fast), ()))
    return tuple(out)
