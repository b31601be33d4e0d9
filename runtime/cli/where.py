"""``clayout where``: which logical element a pixel lane holds, and where an
element lives, each with the formulas that gave it, numbers substituted.

Two derivations are printed. The table formula (the layout's published
pixel formula, e.g. in_out_channel's ``c=4(x/W)+k``) with every name replaced
by its value; and the tag derivation every layout shares: the lane's offset
``(y*width + x)*lanes + lane`` in the image's dense buffer, split into one
digit per axis of the layout's tag.

>>> print("\\n".join(explain(image_layout("in_out_channel"), (1, 17, 5, 7),
...                           pixel=(30, 2, 1), formula="c=4(x/W)+k")))
layout    in_out_channel, dims 1,17,5,7: image 35x5, 4 lanes
pixel     x=30 y=2 lane=1
index     padding: c=17 is in the tail of C=17 (padded to 20)
formula   c = 4(x/W)+k = 4(30/7)+1 = 17
tag       acBd4b: offset (y*35 + x)*4 + lane = (2*35 + 30)*4 + 1 = 401 = a 0, c 2, B 4, d 2, 4b 1
"""
from __future__ import annotations

import re

from ..algebra.catalog import image_layout
from ..algebra.layout import ImageDesc, ImageLayout
from ..algebra.tags import LETTERS
from ..algebra import catalog
from ..errors import ClayoutError
from .args import parse_dims

_TOKEN = re.compile(r"ceil|[A-Z]+|[a-z]|\d+|\S")


def dim_names(layout: ImageLayout) -> list[str]:
    """Lower-case names of the placed dims: n,c,h,w / o,i,h,w / m,i,h,w / w, else a,b,...;
    a Winograd layout's o,i,u,v (runtime.algebra.layout.ImageLayout.placed_names)."""
    return list(layout.placed_names)


def _image_names(layout: ImageLayout) -> list[tuple[str, str]]:
    """(index name, size name) of each image dim: a merged group is f over I*H*W."""
    names = dim_names(layout)
    if not layout.groups:
        return [(n, n.upper()) for n in names]
    return [(names[g[0]], names[g[0]].upper()) if len(g) == 1
            else ("f", "*".join(names[d].upper() for d in g)) for g in layout.groups]


def _digits(image: ImageDesc, offset: int):
    """[(axis label, digit)] of a lane offset over the tag's axes, and the
    index over the image dims those digits make (past a dim's size: padding)."""
    desc = image.desc
    idx = [0] * desc.ndims
    labels = []
    for a in desc.axes:
        digit = (offset // a.stride) % a.size
        idx[a.dim] += digit * a.div
        letter = LETTERS[a.dim]
        label = (letter.upper() if desc.blocks_of(a.dim) > 1 else letter) if a.outer \
            else f"{a.size}{letter}"
        labels.append((label, digit))
    return labels, idx


def _substitute(formula: str, env: dict[str, int]) -> list[str]:
    """Each clause ``lhs=rhs`` of a table formula as 'lhs = rhs = numbers =
    value' where every name in rhs is known; a clause naming an unknown value
    stays as written. Names: one lower-case letter (an index or x, y, k), a
    run of capitals a product of dims (HW = H*W); ``a/b`` divides down."""
    formula = re.sub(r"\s*\([a-z ]+\)$", "", formula)   # "(one channel)"
    out = []
    for clause in re.split(r",\s*|\s+with\s+", formula):
        lhs, _, rhs = clause.partition("=")
        shown, code, prev = [], [], ""
        try:
            for tok in _TOKEN.findall(rhs):
                if tok.isalpha() and tok != "ceil":
                    value = 1
                    for name in tok:
                        value *= env[name]
                    text = str(value)
                else:
                    text = tok
                if (prev and prev != "ceil" and (prev[-1].isalnum() or prev == ")")
                        and (text[0].isalnum() or text in ("(",))):
                    code.append("*")  # 4(x/W) and 4x are products
                    if text[0].isdigit():
                        shown.append("*")  # 4x with x=10 reads 4*10, not 410
                shown.append(text)
                code.append("//" if tok == "/" else text)
                prev = text
            expr = re.sub(r"ceil\(([^()]+)//([^()]+)\)", r"(-(-(\1)//(\2)))", "".join(code))
            value = eval(expr, {"__builtins__": {}})  # digits and operators only
        except (KeyError, NameError, SyntaxError, ZeroDivisionError):
            out.append(clause.strip())
            continue
        env.setdefault(lhs.strip(), value)
        steps = [lhs.strip(), rhs.strip()] + ([] if len(shown) == 1 else ["".join(shown)])
        out.append(" = ".join(steps + [str(value)]))
    return out


def _ints(values, what: str, count: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if len(values) != count:
        raise ClayoutError(f"{what} takes {count} numbers, got {len(values)}")
    return values


def _formula_part(formula: str, five: bool) -> str:
    """The clauses of a table formula for these dims: the 4-D ones without
    the '(5-D: ...)' note, or for 5-D dims that note's clauses."""
    match = re.search(r"\s*\(5-D: (.*)\)$", formula)
    if match is None:
        return "" if five else formula
    return match.group(1) if five else formula[:match.start()]


def _pixel_expr(coords, shape) -> str:
    """'y*35 + x', '(z*3 + y)*5 + x', 'x': the pixel number, outer coordinate first."""
    expr = coords[-1]
    for name, size in zip(reversed(coords[:-1]), reversed(shape[:-1])):
        expr = f"({expr})" if "+" in expr else expr
        expr = f"{expr}*{size} + {name}"
    return expr


def explain(layout, dims, pixel=None, index=None, formula=None) -> list[str]:
    """Lines for ``clayout where``: give ``pixel`` (its coordinates, x, y on a
    2-D image, x, y, z on an array or a 3-D image, x on a buffer, then
    optionally the lane) to find the logical index there, or ``index`` to
    find its pixel and lane. ``formula`` is the layout's table formula,
    substituted when given (for 5-D dims, its '(5-D: ...)' clauses)."""
    layout = image_layout(layout)
    user_dims = tuple(int(d) for d in dims)
    image = ImageDesc(layout, user_dims)
    layout = image.layout          # the volume form for 5-D dims
    dims, shape, lanes = image.placed, image.shape, image.lanes
    store = image.storage
    coords = store.coords
    names = dim_names(layout)
    channels = "" if layout.lanes != 0 else f" ({image.channels}, the innermost dim whole)"
    lines = [f"layout    {layout.name}, dims {','.join(map(str, user_dims))}: {store.noun} "
             f"{'x'.join(map(str, shape))}, {lanes} lane{'s' if lanes > 1 else ''}{channels}"]
    if (pixel is None) == (index is None):
        raise ClayoutError(f"give either a pixel ({', '.join(coords)}[, lane]) or a logical index")
    if pixel is not None:
        pixel = tuple(int(v) for v in pixel)
        if len(pixel) not in (len(coords), len(coords) + 1):
            upper = ",".join(c.upper() for c in coords)
            raise ClayoutError(f"a pixel is {upper} or {upper},LANE (layout {layout.name!r}, "
                               f"storage {store.name}); got {len(pixel)} numbers")
        place = pixel + (0,) * (len(coords) + 1 - len(pixel))
        found = image.index(*place)
    else:
        found = tuple(int(v) for v in index)
        if len(found) == len(user_dims) < len(dims):     # (N, C) of a 2-D activation
            found += (0,) * (len(dims) - len(found))
        found = _ints(found, f"an index of layout {layout.name!r}", len(dims))
        if any(not 0 <= i < d for i, d in zip(found, dims)):
            raise ClayoutError(f"index {found} is outside dims {dims} ({','.join(names)}); "
                               "each entry must be 0 <= i < its dim")
        place = image.pixel(found)
    at, lane = dict(zip(coords, place)), place[-1]
    pix = 0
    for name, size in reversed(list(zip(coords, shape))):
        pix = pix * size + at[name]
    offset = pix * lanes + lane
    digits, image_idx = _digits(image, offset)
    lines.append("pixel     " + " ".join(f"{c}={v}" for c, v in at.items()) + f" lane={lane}")
    if found is None:
        tails = [f"{n}={i} is in the tail of {size}={d} (padded to "
                 f"{image.desc.padded_dims[pos]})"
                 for pos, ((n, size), i, d) in enumerate(zip(_image_names(layout), image_idx,
                                                             image.desc.dims)) if i >= d]
        lines.append("index     padding: " + "; ".join(tails))
    else:
        lines.append("index     " + " ".join(f"{n}={i}" for n, i in zip(names, found))
                     + f"  ({','.join(map(str, found))})")
    part = _formula_part(formula, layout.kind == "volume") if formula else ""
    if part:
        env = dict(at, k=lane)
        env.update({n: d for n, d in zip(layout.dim_names, image.dims)})   # logical O, I, ...
        env.update({n.upper(): d for n, d in zip(names, dims)})
        if found is not None:
            env.update(zip(names, found))
        else:  # the padded index the digits make, e.g. c=7 past C=5
            env.update((n, i) for (n, _), i in zip(_image_names(layout), image_idx))
        if layout.kind in ("activation", "volume") and "c" in env:   # TFLite's slices
            env.setdefault("S", -(-env["C"] // 4))
            env.setdefault("s", env["c"] // 4)
        label = "formula   " + ("(5-D) " if layout.kind == "volume" else "")
        lines.append(label + ", ".join(_substitute(part, env)))
    where = _pixel_expr(coords, shape)
    numbers = _pixel_expr([str(at[c]) for c in coords], shape)
    if lanes > 1:
        wrap = (lambda e: f"({e})") if "+" in where else (lambda e: e)
        how = f"{wrap(where)}*{lanes} + lane = {wrap(numbers)}*{lanes} + {lane}"
    else:
        how = f"{where} = {numbers}"
    lines.append(f"tag       {layout.tag}: offset {how} = {offset} = "
                 + ", ".join(f"{label} {digit}" for label, digit in digits))
    return lines


# -- the command ---------------------------------------------------------------------------
def register(command) -> None:
    p = command("where", cmd_where, "which logical index a pixel lane holds (--pixel), or "
                "where an index lives (--index), with the formulas")
    p.add_argument("layout", metavar="NAME")
    p.add_argument("--dims", type=parse_dims, required=True, metavar="D")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--pixel", type=parse_dims, metavar="X,Y[,LANE]",
                       help="the pixel's coordinates, then the lane: X,Y on a 2-D image, "
                       "X,Y,Z on an array or a 3-D image, X on a buffer")
    group.add_argument("--index", type=parse_dims, metavar="I,J,K,L")


def cmd_where(args) -> int:
    layout = image_layout(args.layout)
    formula = catalog.formula(layout)
    for line in explain(layout, args.dims, pixel=args.pixel, index=args.index, formula=formula):
        print(line)
    return 0
