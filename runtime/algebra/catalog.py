"""The named image layouts, one row each, and the roles tensors play.

Every fact about a named layout is in its row: the layout itself (tag, rows,
lanes, kind, groups), its image size and pixel formula as the docs write
them, the engine it comes from, and the roles it serves with its rank
among each role's candidates. ``clayout info`` / ``where``, placement
(runtime.placement) and the docs read it from here; the reference engine
keeps its own, independent formula per name (runtime/reference/formulas.py).

Three words, one meaning each:

* **kind**: what a layout's logical dims are (activation N,C,H,W; filter
  O,I,H,W; depthwise M,I,H,W; argument W): runtime.algebra.layout.KINDS;
* **role**: what a tensor does in a network (activation, filter,
  depthwise, argument, fc_weight), which fixes its kind and its candidate
  layouts, in tiers: ``ROLES`` here;
* **layout**: where each element goes on the image (``LAYOUTS``).

>>> image_layout("in_out_channel").tag, ROW["in_out_channel"].formula
('acBd4b', 'n=y/H, h=y%H, c=4(x/W)+k, w=x%W (5-D: y=(n*D+d)*H+h)')
>>> candidates("filter")
(('conv2d_filter',), ('weight_height', 'weight_width'), ('image_2d_weights_c4_fyx_b',), ('image_2d_weights_c1_b_fyx',))
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ClayoutError
from .layout import ImageDesc, ImageLayout
from .storage import Limits, size_text
from .tags import close_names, did_you_mean, parse_tag
from .transform import Transform


@dataclass(frozen=True)
class Role:
    """A role: the kind of its dims, and how to write them in messages."""
    name: str
    kind: str
    dims: str


ROLES = {r.name: r for r in (
    Role("activation", "activation", "N,C,H,W (or N,C)"),
    Role("filter", "filter", "O,I,H,W"),
    Role("depthwise", "depthwise", "M,I,H,W"),
    Role("argument", "argument", "W"),
    Role("fc_weight", "filter", "O,I,H,W (an O x I matrix is O,I,1,1)"),
)}


@dataclass(frozen=True)
class Row:
    """One named layout: the layout, its image size and pixel formula as the
    docs write them (pixel (x, y), lane k -> logical index), where it comes
    from, and {role: tier} of the roles it serves (tier 0 is a role's first
    choice; layouts of one tier are equally preferred)."""
    layout: ImageLayout
    size: str
    formula: str
    source: str
    roles: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.layout.name


def _row(name, tag, rows, kind, size, formula, source, roles, lanes=4, ndims=4, groups=None,
         transform=None, storage="image2d", layers=0, volume=None):
    """One row; ``volume`` = (tag, rows, layers) of the layout's 5-D form (N,C,D,H,W)."""
    five = None if volume is None else ImageLayout(name, volume[0], volume[1], lanes, "volume", 5,
                                                   storage=storage, layers=volume[2])
    return Row(ImageLayout(name, tag, rows, lanes, kind, ndims, groups, transform, storage,
                           layers, five), size, formula, source, roles)


# Winograd filter transforms: G (T rows of r numbers) on the kernel's axes
# (docs/winograd.md gives each engine's G, its source and the error bounds).
_P = 2 ** 0.5 / 2
WINOGRAD = {t.name: t for t in (
    Transform("F(2,3) MACE", ((1, 0, 0), (.5, .5, .5), (.5, -.5, .5), (0, 0, 1)), (2, 3)),
    Transform("F(4,3) MACE", ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
                              (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1)),
              (2, 3)),
    Transform("F(2,3) MNN", ((1, 0, 0), (1, 1, 1), (1, -1, 1), (0, 0, 1)), (2, 3)),
    Transform("F(2,5) MNN", ((1, 0, 0, 0, 0), (1, 1, 1, 1, 1), (1, -1, 1, -1, 1),
                             (1, 2, 4, 8, 16), (1, -2, 4, -8, 16), (0, 0, 0, 0, 1)), (2, 3)),
    Transform("F(4,3) TFLite", ((1, 0, 0), (1, _P, .5), (1, -_P, .5), (1, 2 * _P, 2),
                                (1, -2 * _P, 2), (0, 0, 1)), (2, 3), split=(1, 4)),
    Transform("F(6,3) clDNN", ((1, 0, 0), (-2 / 9, -2 / 9, -2 / 9), (-2 / 9, 2 / 9, -2 / 9),
                               (1 / 90, 2 / 90, 4 / 90), (1 / 90, -2 / 90, 4 / 90),
                               (64 / 90, 32 / 90, 16 / 90), (64 / 90, -32 / 90, 16 / 90),
                               (0, 0, 1)), (2,), square=(3,)),
)}


LAYOUTS = (
    _row("in_out_channel", "acBd4b", 2, "activation", "⌈C/4⌉·W × N·H (5-D: N·D·H)",
         "n=y/H, h=y%H, c=4(x/W)+k, w=x%W (5-D: y=(n*D+d)*H+h)", "MACE", {"activation": 0},
         volume=("acdBe4b", 3, 0)),
    _row("in_out_height", "aCbd4c", 2, "activation", "C·W × N·⌈H/4⌉",
         "n=y/ceil(H/4), h=4(y%ceil(H/4))+k, c=x/W, w=x%W", "MACE", {"activation": 2}),
    _row("in_out_width", "acbD4d", 2, "activation", "C·⌈W/4⌉ × N·H",
         "n=y/H, h=y%H, c=x/ceil(W/4), w=4(x%ceil(W/4))+k", "MACE", {"activation": 3}),
    _row("conv2d_filter", "Acdb4a", 3, "filter", "I × ⌈O/4⌉·H·W",
         "o=4(y/HW)+k, h=(y%HW)/W, w=y%W, i=x", "MACE", {"filter": 0, "fc_weight": 3}),
    _row("dw_conv2d_filter", "Bacd4b", 1, "depthwise", "M·H·W × ⌈I/4⌉",
         "i=4y+k, m=x/HW, h=(x%HW)/W, w=x%W", "MACE", {"depthwise": 0}),
    _row("argument", "A4a", 0, "argument", "⌈W/4⌉ × 1", "w=4x+k", "MACE", {"argument": 0},
         ndims=1),
    _row("weight_height", "Acdb4a", 1, "filter", "I·H·W × ⌈O/4⌉",
         "o=4y+k, h=x/(W*I), w=(x/I)%W, i=x%I", "MACE", {"filter": 1, "fc_weight": 1}),
    _row("weight_width", "acdB4b", 1, "filter", "⌈I/4⌉·H·W × O",
         "o=y, h=x/(W*ceil(I/4)), w=(x/ceil(I/4))%W, i=4(x%ceil(I/4))+k", "MACE",
         {"filter": 1, "fc_weight": 0}),
    _row("image_2d_weights_c4_fyx_b", "aB4b", 1, "filter", "⌈I·H·W/4⌉ × O",
         "o=y, f=4x+k with f=(i*H+h)*W+w", "clDNN", {"filter": 2, "fc_weight": 2},
         groups=((0,), (1, 2, 3))),
    _row("image_2d_weights_c1_b_fyx", "bcda", 3, "filter", "O × I·H·W",
         "o=x, y=(i*H+h)*W+w (one channel)", "clDNN", {"filter": 3, "fc_weight": 4}, lanes=1),
    _row("texture_2d", "cBda4b", 2, "activation", "W·N × H·⌈C/4⌉ (5-D: W·N·D × H·⌈C/4⌉)",
         "x=w*N+n, y=h*ceil(C/4)+c/4, k=c%4 (5-D: x=(w*N+n)*D+d)", "TFLite GPU",
         {"activation": 1}, volume=("dBeac4b", 2, 0)),
    # TFLite GPU's storages (docs/storage.md): S = ceil(C/4) slices, s = c/4, k = c%4;
    # each takes N,C,H,W and, as its volume form, N,C,D,H,W
    _row("tflite_buffer", "Bcda4b", 0, "activation", "N·W·H·⌈C/4⌉ pixels",
         "x=((s*H+h)*W+w)*N+n (5-D: x=(((d*S+s)*H+h)*W+w)*N+n)", "TFLite GPU", {},
         storage="buffer", volume=("cBdea4b", 0, 0)),
    _row("tflite_image_buffer", "Bcda4b", 0, "activation", "N·W·H·⌈C/4⌉ pixels",
         "x=((s*H+h)*W+w)*N+n (5-D: x=(((d*S+s)*H+h)*W+w)*N+n)", "TFLite GPU", {},
         storage="image_buffer", volume=("cBdea4b", 0, 0)),
    _row("tflite_texture_2d", "cBda4b", 2, "activation",
         "W·N × H·⌈C/4⌉ (5-D: W·N·D × H·⌈C/4⌉)",
         "x=w*N+n, y=h*S+s (5-D: x=(w*N+n)*D+d)", "TFLite GPU", {},
         volume=("dBeac4b", 2, 0)),
    _row("tflite_single_texture_2d", "cdab", 1, "activation",
         "W·N × H, C ≤ 4 channels (5-D: W·N·D × H)",
         "x=w*N+n, y=h, k=c (5-D: x=(w*N+n)*D+d)", "TFLite GPU", {}, lanes=0,
         volume=("deacb", 1, 0)),
    _row("tflite_texture_array", "Bcda4b", 1, "activation",
         "W·N × H × ⌈C/4⌉ layers (5-D: × D·⌈C/4⌉)",
         "x=w*N+n, y=h, z=s (5-D: z=d*S+s)", "TFLite GPU", {"activation": 4},
         storage="image2d_array",
         layers=1, volume=("cBdea4b", 1, 2)),
    _row("tflite_texture_3d", "Bcda4b", 1, "activation",
         "W·N × H × ⌈C/4⌉ (5-D: × D·⌈C/4⌉)",
         "x=w*N+n, y=h, z=s (5-D: z=d*S+s)", "TFLite GPU", {"activation": 4},
         storage="image3d",
         layers=1, volume=("cBdea4b", 1, 2)),
    # Other engines' layouts (docs/engine-layouts.md): TVM's Adreno textures, tinygrad's
    # image mode, Arm Compute Library's images over NHWC buffers
    _row("tvm_texture", "aBcd4b", 3, "activation", "W × N·⌈C/4⌉·H",
         "x=w, y=(n*ceil(C/4)+c/4)*H+h, k=c%4", "TVM", {}),
    _row("tvm_texture_nhwc", "aBcd4b", 2, "activation", "H·W × N·⌈C/4⌉",
         "x=h*W+w, y=n*ceil(C/4)+c/4, k=c%4", "TVM", {}),
    _row("tvm_texture_weight", "Abcd4a", 1, "filter", "I·H·W × ⌈O/4⌉",
         "x=(i*H+h)*W+w, y=o/4, k=o%4", "TVM", {}),
    _row("tvm_texture_weight_activation", "aBcd4b", 1, "activation", "⌈C/4⌉·H·W × N",
         "x=((c/4)*H+h)*W+w, y=n, k=c%4", "TVM", {}),
    _row("tvm_texture_array", "aBcd4b", 1, "activation", "W × H × N·⌈C/4⌉ layers",
         "x=w, y=h, z=n*ceil(C/4)+c/4, k=c%4", "TVM", {}, storage="image2d_array", layers=2),
    _row("tvm_texture_nhwc_array", "aBcd4b", 1, "activation", "H·W × ⌈C/4⌉ × N layers",
         "x=h*W+w, y=c/4, z=n, k=c%4", "TVM", {}, storage="image2d_array", layers=1),
    _row("tinygrad_image", "acdB4b", 2, "activation", "⌈C/4⌉·W × N·H",
         "x=w*ceil(C/4)+c/4, y=n*H+h, k=c%4", "tinygrad", {}),
    _row("tinygrad_conv_weight", "AcBd4b4a", 1, "filter", "4·⌈I/4⌉·H·W × ⌈O/4⌉",
         "x=((h*ceil(I/4)+i/4)*W+w)*4+i%4, y=o/4, k=o%4", "tinygrad", {}),
    _row("acl_nhwc_image", "acdB4b", 3, "activation", "⌈C/4⌉ × N·H·W",
         "x=c/4, y=(n*H+h)*W+w, k=c%4", "Arm Compute Library", {}),
    _row("acl_ohwi_image", "acdB4b", 3, "filter", "⌈I/4⌉ × O·H·W",
         "x=i/4, y=(o*H+h)*W+w, k=i%4", "Arm Compute Library", {}),
    # Winograd filters: the image holds U = G·g·Gᵀ (T x T per (o, i)), not g; the
    # formula gives the placed index (o, i, u, v) of U (clDNN: (o, i, t, w); TFLite:
    # (o, q, j, u, v) with i = 4q + j).
    _row("winograd_2x3_mace", "cdaB4b", 3, "filter", "⌈I/4⌉ × 16·O",
         "o=y%O, i=4x+k, u=y/(4O), v=(y/O)%4", "MACE", {},
         transform=WINOGRAD["F(2,3) MACE"]),
    _row("winograd_4x3_mace", "cdaB4b", 3, "filter", "⌈I/4⌉ × 36·O",
         "o=y%O, i=4x+k, u=y/(6O), v=(y/O)%6", "MACE", {},
         transform=WINOGRAD["F(4,3) MACE"]),
    _row("winograd_2x3_mnn", "cdAB4b4a", 3, "filter", "4⌈I/4⌉ × 16·⌈O/4⌉",
         "o=4(y%ceil(O/4))+k, i=x, u=y/(4ceil(O/4)), v=(y/ceil(O/4))%4", "MNN", {},
         transform=WINOGRAD["F(2,3) MNN"]),
    _row("winograd_2x5_mnn", "cdAB4b4a", 3, "filter", "4⌈I/4⌉ × 36·⌈O/4⌉",
         "o=4(y%ceil(O/4))+k, i=x, u=y/(6ceil(O/4)), v=(y/ceil(O/4))%6", "MNN", {},
         transform=WINOGRAD["F(2,5) MNN"]),
    _row("winograd_4x3_tflite", "cdebA4a", 4, "filter", "⌈O/4⌉ × 4·36·⌈I/4⌉",
         "o=4x+k, j=y/(36ceil(I/4)), q=y%ceil(I/4), i=4q+j, u=(y/(6ceil(I/4)))%6, "
         "v=(y/ceil(I/4))%6", "TFLite GPU", {}, transform=WINOGRAD["F(4,3) TFLite"]),
    _row("image_2d_weights_winograd_6x3_s1_fbxyb", "bAcd16a", 1, "filter",
         "384·⌈O/16⌉ × I", "i=y, o=16(x/384)+x%16, t=(x/48)%8, w=(x/16)%3", "clDNN", {},
         lanes=1, transform=WINOGRAD["F(6,3) clDNN"]),
    _row("image_2d_weights_winograd_6x3_s1_xfbyb", "cbAd16a", 2, "filter",
         "48·⌈O/16⌉ × 8·I", "i=y%I, t=y/I, o=16(x/48)+x%16, w=(x/16)%3", "clDNN", {},
         lanes=1, transform=WINOGRAD["F(6,3) clDNN"]),
)
ROW = {row.name: row for row in LAYOUTS}
NAMED = {row.name: row.layout for row in LAYOUTS}
# other names of named layouts: the same layout object, so a tensor placed by
# either name is the same image (docs/engine-layouts.md says why each is one)
ALIASES = {"tinygrad_dw_weight": "tvm_texture_weight"}


def image_layout(name) -> ImageLayout:
    """A named layout, an ImageLayout, or a custom one written
    'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]' (for example 'acBd4b:2' is
    in_out_channel, 'Bcda4b:1@image3d:1' is tflite_texture_3d and
    'Bcda4b:0@buffer' tflite_buffer)."""
    if isinstance(name, ImageLayout):
        return name
    if isinstance(name, str) and name in NAMED:
        return NAMED[name]
    if isinstance(name, str) and name in ALIASES:
        return NAMED[ALIASES[name]]
    if isinstance(name, str) and ":" in name:
        placing, _, where = name.partition("@")
        tag, _, rest = placing.partition(":")
        rows, _, lanes = rest.partition(":")
        store, _, layers = where.partition(":")
        try:
            rows_i, lanes_i, layers_i = int(rows), int(lanes or 4), int(layers or 0)
        except ValueError:
            rows_i = lanes_i = None
        if rows_i is not None:
            return ImageLayout(name, tag, rows_i, lanes_i, "custom", parse_tag(tag).ndims,
                               storage=store or "image2d", layers=layers_i)
    if buffer_tag(name) is not None:   # a tensor's tag where the image's layout goes
        raise ClayoutError(f"unknown image layout {name!r}: {name!r} is a buffer tag (a "
                           "tensor's tag goes in src= / dst=, --src / --dst); an image layout "
                           "is a name such as 'in_out_channel' (activations) or "
                           "'conv2d_filter' (filters), `clayout info` lists them, or a custom "
                           f"'TAG:ROWS[:LANES]' such as '{name}:2'")
    raise ClayoutError(f"unknown image layout {name!r}{_layout_hint(name)}; named layouts: "
                       f"{', '.join(NAMED)}; "
                       "or a custom 'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]' such as 'acBd4b:2' "
                       "or 'Bcda4b:1@image3d:1'")


def _layout_hint(name) -> str:
    """" (did you mean 'in_out_channel'? names are exact: lower case, with _)"
    for a name that is one in another case or with '-' ('In_Out_Channel',
    'in-out-channel'), " (did you mean 'in_out_channel'?)" for a near miss
    ('in_out_chanel'); '' otherwise. Names are not folded: each layout has
    one spelling, in code, files and manifests (docs/layouts.md)."""
    if not isinstance(name, str) or not name:
        return ""
    key = name.lower().replace("-", "_").replace(" ", "_")
    if key in NAMED:
        return f" ({did_you_mean([key])} names are exact: lower case, with _)"
    if name.lower() != name and buffer_tag(name.lower()) is not None:
        return (f" ({name!r} reads as the buffer tag {name.lower()!r}: a tensor's tag is "
                f"src=/dst= (--src/--dst), the image layout is a name such as "
                f"'in_out_channel')")
    near = close_names(key, NAMED)
    return f" ({did_you_mean(near)})" if near else ""


def buffer_tag(layout):
    """The parsed tag where ``layout``, given where an image layout or a buffer
    tag is taken, is a tag: a string that is no named layout and no custom
    'TAG:ROWS[...]' and parses as a tag (aliases included); else None."""
    if not isinstance(layout, str) or layout in NAMED or ":" in layout:
        return None
    try:
        return parse_tag(layout)
    except ClayoutError:
        return None


def formula(layout: ImageLayout) -> str | None:
    """The table formula of a named layout (None for a custom one, or one
    that only shares a name with a named layout)."""
    row = ROW.get(layout.name)
    return row.formula if row is not None and row.layout == layout else None


def candidates(role: str) -> tuple[tuple[str, ...], ...]:
    """The candidate layouts of ``role``, tier by tier (catalog order inside a tier)."""
    if role not in ROLES:
        raise ClayoutError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    tiers: dict[int, list[str]] = {}
    for row in LAYOUTS:
        if role in row.roles:
            tiers.setdefault(row.roles[role], []).append(row.name)
    return tuple(tuple(tiers[t]) for t in sorted(tiers))


def own_layout(role: str) -> str:
    """The layout a tensor of ``role`` goes on when it fits: the role's first
    candidate (filter: conv2d_filter, fc_weight: weight_width, ...)."""
    return candidates(role)[0][0]


def fitting(kind: str, dims, limits, transform=None) -> list[ImageLayout]:
    """Named layouts of ``kind`` whose image for ``dims`` fits ``limits`` (a
    storage.Limits, or None: no limit), in catalog order: those that place
    the tensor itself, or (``transform``) those holding the same transformed
    values."""
    _limits_arg(limits)
    fits = []
    for row in LAYOUTS:
        if row.layout.kind == kind and row.layout.transform == transform:
            try:
                img = ImageDesc(row.layout, dims)
            except ClayoutError:
                continue
            if limits.refusal(img) is None:
                fits.append(row.layout)
    return fits


def check_fits(image: ImageDesc, limits) -> None:
    """Refuse an image larger than ``limits`` (a storage.Limits for every
    storage, as a door converted it; None: no limit), naming the storage, its
    size, the limit, and the layouts of the same kind that would fit."""
    _limits_arg(limits)
    why = None if limits is None else limits.refusal(image)
    if why is None:
        return
    layout = image.layout
    fits = [f"{o.name} ({_size(ImageDesc(o, image.dims))})"
            for o in fitting(layout.kind, image.dims, limits, layout.transform)
            if o.name != layout.name]
    hint = ("layouts that fit: " + ", ".join(fits)) if fits else \
        "no named layout of its kind fits these limits"
    raise ClayoutError(f"layout {layout.name!r} for dims {image.dims} {why}; {hint}")


def _limits_arg(limits) -> None:
    """Below the doors a limit is a Limits (runtime.algebra.storage.Limits.of
    converts a (width, height) once, where it is given)."""
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits {limits!r}: a storage.Limits or None (a door converts a "
                        "(width, height) with Limits.of)")


def _size(image: ImageDesc) -> str:
    """'35x5' for a 2-D image, '14x3x2 image3d' for another storage."""
    return size_text(image.shape, image.storage)
