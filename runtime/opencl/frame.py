"""A camera frame as the source of a conversion kernel (docs/frames.md).

The frame's stages (runtime/algebra/frame.py: colour, sample, normalize)
become one C function, ``clayout_frame_pixel(src, y, x)``: the model
input's channels at row y, column x, as a float4 (lanes past C are 0). The
conversion kernel (runtime/opencl/render.py) calls it where it would load a
source element (``loads``: one call serves every element at that pixel),
and everything after the load (the dtype rule, padding, the destination's
index, the store into any layout or storage) is the kernel of every other
conversion. One work item computes its elements from the frame bytes in
registers: no intermediate RGB, resized or normalized array.

The function evaluates the same float32 operations, in the same order, as
the host evaluation (runtime/algebra/frame_sample.py), under
``FP_CONTRACT OFF`` (no fused multiply-adds), so the two give the same bits.
Every number of the plan is baked in: a camera's frames share one plan, so
one program serves them all.
"""
from __future__ import annotations

from ..algebra.c_index import f32_literal
from ..algebra.frame import FramePlan
from ..cache import memoized

FUNCTION = "clayout_frame"


def _taps(plan: FramePlan) -> list[tuple[str, str, str]]:
    """(name, X, Y) of each tap the sample stage reads."""
    xs = ["x0", "x1"] if plan.x.method == "bilinear" else ["x0"]
    ys = ["y0", "y1"] if plan.y.method == "bilinear" else ["y0"]
    return [(f"t{x[1]}{y[1]}", x, y) for y in ys for x in xs]


def _colour(plan: FramePlan, tap: str, x: str, y: str, wanted) -> list[str]:
    """C lines giving ``tap``_k, RGB component k of the frame pixel (x, y),
    clamped to [0, 255], for each k in ``wanted``: the float32 operations
    of runtime.algebra.frame_sample.rgb_at, in its order."""
    fmt, w, h = plan.format, plan.width, plan.height
    if not fmt.is_yuv:
        at = f"({y} * {w} + {x}) * {fmt.bytes}"
        return [f"const float {tap}_{k} = (float)src[{at} + {fmt.rgb[k]}];" for k in wanted]
    m = plan.yuv
    c = {name: f32_literal(v) for name, v in m.f32().items()}
    if fmt.chroma == "planes":
        q = (h // 2) * (w // 2)
        u_at = f"{h * w} + ({y} / 2) * {w // 2} + {x} / 2"
        v_at = f"{h * w + q} + ({y} / 2) * {w // 2} + {x} / 2"
    else:
        pair = f"{h * w} + ({y} / 2) * {w} + ({x} / 2) * 2"
        u_at, v_at = (pair, f"{pair} + 1") if fmt.chroma == "uv" else (f"{pair} + 1", pair)
    luma = f"(float)max((int)src[{y} * {w} + {x}] - {m.y0}, 0)"
    lines = [f"const float {tap}_y = {c['ky']} * {luma};",   # YUV: C = 3, all three wanted
             f"const float {tap}_v = (float)((int)src[{v_at}] - 128);",
             f"const float {tap}_u = (float)((int)src[{u_at}] - 128);"]
    value = {0: f"{tap}_y + {tap}_v * {c['rv']}",
             1: f"({tap}_y + {tap}_v * {c['gv']}) + {tap}_u * {c['gu']}",
             2: f"{tap}_y + {tap}_u * {c['bu']}"}
    return lines + [f"const float {tap}_{k} = clamp({value[k]}, 0.0f, 255.0f);" for k in wanted]


@memoized("OpenCL frame functions", "CLAYOUT_FRAME_CACHE", 64)
def function(plan: FramePlan) -> str:
    """The C of ``clayout_frame_pixel(src, y, x)`` for ``plan``: the model
    input's channels at (y, x) as a float4 (lanes past C are 0), in
    straight-line code (no branch: the letterbox border is a select)."""
    bx, by = plan.x.method == "bilinear", plan.y.method == "bilinear"
    wanted = sorted(set(plan.source))
    taps = _taps(plan)

    def along_x(y: str, k: int) -> str:
        return f"t0{y}_{k} * x0w + t1{y}_{k} * xw" if bx else f"t0{y}_{k}"

    body = plan.x.c_lines("ox", "x") + plan.y.c_lines("oy", "y")
    body += ["const float x0w = 1.0f - xw, y0w = 1.0f - yw;"]
    for tap, x, y in taps:
        body += _colour(plan, tap, x, y, wanted)
    outs, fills = [], []
    for c, k in enumerate(plan.source):
        p = f"({along_x('0', k)}) * y0w + ({along_x('1', k)}) * yw" if by else along_x("0", k)
        body.append(f"const float p{c} = {p};")
        outs.append(f"(p{c} - {f32_literal(plan.mean32[c])}) * {f32_literal(plan.scale[c])}")
        fills.append(f32_literal(plan.fill_values()[c]))
    outs += ["0.0f"] * (4 - len(outs))
    fills += ["0.0f"] * (4 - len(fills))
    if plan.has_border:
        body.append(f"return (x_in && y_in) ? (float4)({', '.join(outs)}) :")
        body.append(f"                        (float4)({', '.join(fills)});")
    else:
        body.append(f"return (float4)({', '.join(outs)});")
    lines = [f"// {plan.describe()}",
             "#pragma OPENCL FP_CONTRACT OFF",
             "// always inlined: PoCL left it a call in the work-group loop, paid per",
             "// work item (0.93 -> 0.71 ms at 1280x720 NV21 -> 320x320)",
             f"inline __attribute__((always_inline)) float4 {FUNCTION}_pixel(",
             "    __global const uchar *restrict src, const int oy, const int ox)",
             "{"]
    return "\n".join(lines + [f"    {line}" for line in body] + ["}", ""])


def pixel(names) -> str:
    """The C expression of the input's channels at the logical index
    ``names`` (n, c, h, w): a float4."""
    _, _, h, w = names
    return f"{FUNCTION}_pixel(src, (int)({h}), (int)({w}))"


def lane(pixel_name: str, c: str) -> str:
    """Channel ``c`` of a float4 from ``pixel``."""
    return f"clayout_lane_f({pixel_name}, (uint)({c}))"


def loads(load, vector: int, src_names, conv, valid, pad) -> tuple:
    """The loads (records of ``load``, runtime/opencl/render.py's Load) of
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
        out.append(load(None, f"const float4 f = {pixel(names[first])};", tuple(fast), ()))
    return tuple(out)
