"""Device-aware placement: which image layout a tensor of some role takes.

Each role has candidate layouts in a fixed order of *tiers* (one or more
layouts of equal preference). The choice is the first tier holding a layout
whose image fits the limits; inside that tier, the fitting layout with the
fewest padding lanes (``width * height * lanes - elements``); equal padding
goes to the one listed first. Ties can only arise inside a tier, and one
tier has two layouts: filter's ``weight_height, weight_width`` (lanes along O
or along I), tied when both fit and conv2d_filter does not (its height
ceil(O/4)*H*W is over while O is not)::

    activation  in_out_channel | texture_2d | in_out_height | in_out_width
    filter      conv2d_filter | weight_height, weight_width |
                image_2d_weights_c4_fyx_b | image_2d_weights_c1_b_fyx
    depthwise   dw_conv2d_filter
    argument    argument
    fc_weight   weight_width | weight_height | image_2d_weights_c4_fyx_b |
                conv2d_filter | image_2d_weights_c1_b_fyx

Limits are (max width, max height) in pixels: the ones given, else the
engine's device (``image_limits``), else none (everything fits).

>>> c = layout_choice("fc_weight", (4096, 1000, 1, 1), limits=(2048, 2048))
>>> c.layout.name, c.rejected[0].name, c.rejected[0].size
('weight_height', 'weight_width', (250, 4096))
>>> layout_choice("filter", (4, 2, 3, 3), limits=(18, 8)).layout.name  # tie: less padding
'weight_height'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import engine as engines
from .algebra import catalog, dtypes
from .algebra.catalog import NAMED, ROLES
from .algebra.layout import ImageDesc, ImageLayout
from .algebra.tiles import image_limit
from .errors import ClayoutError

@dataclass(frozen=True)
class Candidate:
    """One candidate layout measured for the tensor: its image (width, height),
    padding lanes, bytes in the image dtype, and whether it fits the limits."""
    name: str
    tier: int
    size: tuple[int, int]
    padding: int
    nbytes: int
    fits: bool

    def describe(self) -> str:
        return f"{self.name} {self.size[0]}x{self.size[1]}"


@dataclass(frozen=True)
class LayoutChoice:
    """What ``layout_choice`` decided and why. ``layout`` is the chosen layout;
    when nothing fits (``fits`` False) it is the role's first candidate, the one
    to split into tiles (runtime.algebra.tiles)."""
    role: str
    dims: tuple[int, ...]
    dtype: str
    limits: tuple[int, int] | None
    layout: ImageLayout
    fits: bool
    candidates: tuple[Candidate, ...]

    @property
    def chosen(self) -> Candidate:
        return next(c for c in self.candidates if c.name == self.layout.name)

    @property
    def rejected(self) -> tuple[Candidate, ...]:
        """Candidates whose image does not fit the limits, in candidate order."""
        return tuple(c for c in self.candidates if not c.fits)

    @property
    def reason(self) -> str:
        """One line: the choice, its size, the rule that decided, each rejected
        candidate with its size."""
        limit = f"{self.limits[0]}x{self.limits[1]}" if self.limits else "no limit"
        dims = ",".join(map(str, self.dims))
        c = self.chosen
        if not self.fits:
            return (f"no {self.role} layout fits {limit} for dims {dims}: "
                    + "; ".join(r.describe() for r in self.rejected)
                    + f"; {self.layout.name} is the one to split into tiles")
        text = (f"{self.role} dims {dims} {self.dtype}: {c.name} ({c.size[0]}x{c.size[1]}, "
                f"{c.padding} padding lanes) fits {limit}")
        tied = [o for o in self.candidates if o.tier == c.tier and o.fits and o is not c]
        if tied:
            text += ("; chosen over " + ", ".join(f"{o.name} ({o.padding} padding lanes)"
                                                  for o in tied)
                     + " of the same tier by least padding, then candidate order")
        if self.rejected:
            text += "; rejected (over the limit): " + ", ".join(r.describe()
                                                               for r in self.rejected)
        return text


def resolve_limits(limits=None, engine=None) -> tuple[int, int] | None:
    """``limits`` as (width, height), else the engine's device limits (None
    for an engine without a limit)."""
    if limits is None:
        return engines.get(engine).image_limits
    return image_limit(limits, "image limits")


def candidates(role: str) -> tuple[str, ...]:
    """The candidate layout names of ``role`` in order (tiers flattened)."""
    return tuple(name for tier in catalog.candidates(role) for name in tier)


def layout_choice(role: str, dims, dtype="f32", limits=None, engine=None) -> LayoutChoice:
    """Measure every candidate of ``role`` for ``dims`` and choose (the rule
    is in this module's docstring). Never raises for a tensor too big for
    every candidate: the result says ``fits=False``."""
    names = candidates(role)
    dt = dtypes.image_dtype(dtype)
    first = NAMED[names[0]]
    try:
        dims = first.logical_dims(dims)
    except ClayoutError:
        shown = tuple(dims) if isinstance(dims, (list, tuple)) else dims
        raise ClayoutError(f"role {role!r} takes dims {ROLES[role].dims}; got {shown!r}") from None
    limits = resolve_limits(limits, engine)
    measured = []
    for tier, group in enumerate(catalog.candidates(role)):
        for name in group:
            image = ImageDesc(NAMED[name], dims)
            width, height = image.width, image.height
            lanes = width * height * image.lanes
            fits = limits is None or (width <= limits[0] and height <= limits[1])
            measured.append(Candidate(name, tier, (width, height), lanes - math.prod(dims),
                                      lanes * dt.itemsize, fits))
    fitting = [c for c in measured if c.fits]
    if fitting:
        best_tier = fitting[0].tier
        # min() keeps the first of equal keys: candidate order breaks equal padding
        chosen = min((c for c in fitting if c.tier == best_tier), key=lambda c: c.padding)
    else:
        chosen = measured[0]
    return LayoutChoice(role, dims, dt.name, limits, NAMED[chosen.name], bool(fitting),
                        tuple(measured))


def choose_layout(role: str, dims, dtype="f32", limits=None, engine=None) -> ImageLayout:
    """The image layout for a tensor of ``role`` (activation, filter,
    depthwise, argument, fc_weight) with logical ``dims``: the first candidate
    whose image fits ``limits`` (given, else the engine's device, else none),
    least padding breaking ties inside a tier. Raises ClayoutError naming
    every candidate and its size when none fits (split into tiles then:
    ``to_image(..., max_image=...)``). ``layout_choice`` gives the reason.

    >>> choose_layout("activation", (1, 64, 224, 224)).name
    'in_out_channel'
    >>> choose_layout("activation", (4, 64, 224, 224), limits=(2048, 4096)).name
    'texture_2d'
    """
    choice = layout_choice(role, dims, dtype, limits, engine)
    if not choice.fits:
        raise ClayoutError(choice.reason + " (to_image(..., max_image=...) or "
                           "`clayout to-image --max-image W,H` splits it)")
    return choice.layout
