"""Device-aware placement: which image layout a tensor of some role takes.

Each role has candidate layouts in a fixed order of *tiers* (one or more
layouts of equal preference). The choice is the first tier holding a layout
whose image fits the limits of its storage; inside that tier, the fitting
layout with the fewest padding lanes (``pixels * lanes - elements``); equal
padding goes to the one listed first. Ties arise inside a tier of two:
filter's ``weight_height, weight_width`` (lanes along O or along I), tied
when both fit and conv2d_filter does not (its height ceil(O/4)*H*W is over
while O is not); activation's image array and 3-D image, tied when both fit
(the array, listed first, then wins: same pixels, same padding)::

    activation  in_out_channel | texture_2d | in_out_height | in_out_width |
                tflite_texture_array, tflite_texture_3d
    filter      conv2d_filter | weight_height, weight_width |
                image_2d_weights_c4_fyx_b | image_2d_weights_c1_b_fyx
    depthwise   dw_conv2d_filter
    argument    argument
    fc_weight   weight_width | weight_height | image_2d_weights_c4_fyx_b |
                conv2d_filter | image_2d_weights_c1_b_fyx

Limits are a ``runtime.algebra.storage.Limits`` (every storage's bounds), or
a 2-D (max width, max height), from which arrays and 3-D images get the
OpenCL 1.2 minimums (``Limits.of``): the ones given, else the engine's
device (``engine.limits``), else none (everything
fits). Each candidate is measured against its own storage's limit
(``Limits.refusal``): an activation too wide for every 2-D image goes on an
image array or a 3-D image when one fits (docs/storage.md).

>>> c = layout_choice("fc_weight", (4096, 1000, 1, 1), limits=(2048, 2048))
>>> c.layout.name, c.rejected[0].name, c.rejected[0].size
('weight_height', 'weight_width', (250, 4096))
>>> layout_choice("filter", (4, 2, 3, 3), limits=(18, 8)).layout.name  # tie: less padding
'weight_height'
>>> a = layout_choice("activation", (1, 64, 512, 512), limits=(2048, 2048))
>>> a.layout.name, a.chosen.storage.name, a.chosen.size
('tflite_texture_array', 'image2d_array', (512, 512, 16))
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import engine as engines
from .algebra import catalog, dtypes, peers
from .algebra.catalog import NAMED, ROLES
from .algebra.layout import ImageDesc, ImageLayout
from .algebra.storage import STORAGES, Limits, Storage, size_text
from .errors import ClayoutError

# what a reason says when no limits were given and the engine has none
NO_LIMITS = "chosen with no device limits given ({how}), so nothing is refused"
API_HOW = "pass engine= or limits="


@dataclass(frozen=True)
class Candidate:
    """One candidate layout measured for the tensor: its storage, its size
    (one number per coordinate of the storage: (width, height), (width,
    height, depth) or (pixels,)), padding lanes, bytes in the image dtype,
    the storage's limit it was measured against (None: no limit) and the
    device's max allocation in bytes (None: none), whether it fits, and why
    not (``Limits.refusal``'s text; None when it fits)."""
    name: str
    tier: int
    size: tuple[int, ...]
    padding: int
    nbytes: int
    fits: bool
    storage: Storage = STORAGES["image2d"]
    limit: tuple[int, ...] | None = None
    why: str | None = None
    max_alloc: int | None = None

    def describe(self) -> str:
        """'weight_width 250x4096'; another storage than a 2-D image is named:
        'tflite_texture_3d 512x512x16 image3d'."""
        return f"{self.name} {size_text(self.size, self.storage)}"

    @property
    def over_alloc(self) -> bool:
        """Rejected though its size is within its storage's bounds: then its
        bytes are over the device's max allocation (the only other reason)."""
        return not self.fits and self.limit is not None and \
            all(n <= b for n, b in zip(self.size, self.limit))

    @property
    def over(self) -> str:
        """What a rejected candidate is over: 'the image2d limit 2048x2048',
        or 'the max allocation 1048576 bytes'."""
        if self.over_alloc:
            return f"the max allocation {self.max_alloc} bytes"
        return f"the {self.storage} limit {'x'.join(map(str, self.limit or ()))}"


@dataclass(frozen=True)
class LayoutChoice:
    """What ``layout_choice`` decided and why. ``layout`` is the chosen layout;
    when nothing fits (``fits`` False) it is the role's first candidate, the one
    to split into tiles (runtime.algebra.tiles) under ``max_image``."""
    role: str
    dims: tuple[int, ...]
    dtype: str
    limits: Limits | None
    layout: ImageLayout
    fits: bool
    candidates: tuple[Candidate, ...]
    skipped: tuple[tuple[str, str], ...] = ()   # (name, why): no form for these dims

    @property
    def chosen(self) -> Candidate:
        return next(c for c in self.candidates if c.name == self.layout.name)

    @property
    def rejected(self) -> tuple[Candidate, ...]:
        """Candidates whose image does not fit the limits, in candidate order."""
        return tuple(c for c in self.candidates if not c.fits)

    @property
    def max_image(self) -> tuple[int, int] | None:
        """The 2-D image limit (width, height): the tile size when nothing fits."""
        return None if self.limits is None else self.limits.image2d

    @property
    def storages(self) -> tuple[Storage, ...]:
        """The storages of the candidates, in candidate order, each once."""
        return tuple(dict.fromkeys(c.storage for c in self.candidates))

    @property
    def limit_text(self) -> str:
        """'2048x2048' when every candidate is a 2-D image; else each
        storage's limit: 'image2d 2048x2048, image2d_array 2048x2048x2048'."""
        if self.limits is None:
            return "no limit"
        shown = [(s, self.limits.text(s)) for s in self.storages]
        if self._plain_only:
            return shown[0][1]
        return ", ".join(f"{s} {b}" for s, b in shown)

    @property
    def _plain_only(self) -> bool:
        """Every candidate is on the 2-D image (messages then name no storage)."""
        return all(s.plain for s in self.storages)

    @property
    def _two_d(self) -> bool:
        """Every candidate is a 2-D image and none is over the max allocation:
        one limit says it all."""
        return self._plain_only and not any(c.over_alloc for c in self.rejected)

    def _grouped_text(self) -> str:
        """'over the image2d limit 2048x2048: a 8192x512, b 512x8192; over the
        max allocation ...': the rejected candidates grouped by what they are over."""
        groups: dict[str, list[str]] = {}
        for r in self.rejected:
            groups.setdefault(r.over, []).append(r.describe())
        return "; ".join(f"over {over}: {', '.join(names)}" for over, names in groups.items())

    def _rejected_text(self) -> str:
        if self._two_d:
            return "rejected (over the limit): " + ", ".join(r.describe() for r in self.rejected)
        return "rejected: " + self._grouped_text()

    @property
    def reason(self) -> str:
        """One line: the choice, its size, the limit of its storage, the rule
        that decided, each rejected candidate with its size and the limit it
        is over. Without limits it says so: 'no device limits given (pass
        engine= or limits=), so nothing is refused'."""
        return self.explain()

    def explain(self, how: str = API_HOW) -> str:
        """``reason``, with ``how`` saying how to give limits when there were
        none (the command line says '--max-image W,H')."""
        dims = ",".join(map(str, self.dims))
        c = self.chosen
        if not self.fits:
            over = "; ".join(r.describe() for r in self.rejected) if self._two_d else \
                self._grouped_text()
            limit = f" {self.limit_text}" if self._two_d else ""
            return (f"no {self.role} layout fits{limit} for dims {dims}: {over}"
                    + f"; {self.layout.name} is the one to split into tiles"
                    + self._skipped_text())
        size = size_text(c.size, c.storage)
        if c.limit is None:
            return (f"{self.role} dims {dims} {self.dtype}: {c.name} ({size}, {c.padding} "
                    f"padding lanes) " + NO_LIMITS.format(how=how) + self._skipped_text())
        if self._plain_only:
            limit = "x".join(map(str, c.limit))
        else:
            limit = f"the {c.storage} limit {'x'.join(map(str, c.limit))}"
        text = (f"{self.role} dims {dims} {self.dtype}: {c.name} ({size}, "
                f"{c.padding} padding lanes) fits {limit}")
        tied = [o for o in self.candidates if o.tier == c.tier and o.fits and o is not c]
        if tied:
            text += ("; chosen over " + ", ".join(f"{o.name} ({o.padding} padding lanes)"
                                                  for o in tied)
                     + " of the same tier by least padding, then candidate order")
        if self.rejected:
            text += "; " + self._rejected_text()
        return text + self._skipped_text()

    def _skipped_text(self) -> str:
        if not self.skipped:
            return ""
        return ("; not candidates for these dims (no form for them): "
                + ", ".join(name for name, _ in self.skipped))


def resolve_limits(limits=None, engine=None) -> Limits | None:
    """The limits to measure against, as a storage.Limits: ``limits`` (a
    Limits, or a 2-D (width, height) from which the other storages get the
    OpenCL 1.2 minimums: ``Limits.of``), else the engine's device
    (``engine.limits``), else None (no limit)."""
    if limits is None:
        eng = engines.get(engine)
        return eng.limits
    if isinstance(limits, Limits):
        return limits
    return Limits.of(limits, "image limits")


def candidates(role: str) -> tuple[str, ...]:
    """The candidate layout names of ``role`` in order (tiers flattened)."""
    return tuple(name for tier in catalog.candidates(role) for name in tier)


def tiers(role: str, layouts_of: str | None = None) -> tuple[tuple[str, ...], ...]:
    """The candidates of ``role`` tier by tier: clayout's (runtime.algebra.catalog),
    or with ``layouts_of`` that engine's layouts for the role in its order,
    one per tier (runtime.algebra.peers)."""
    if layouts_of is None:
        return catalog.candidates(role)
    if role not in ROLES:
        catalog.candidates(role)            # the unknown role's error
    return tuple((name,) for name in peers.candidates(layouts_of, role))


def layout_choice(role: str, dims, dtype="f32", limits=None, engine=None,
                  layouts_of=None) -> LayoutChoice:
    """Measure every candidate of ``role`` for ``dims`` and choose (the rule
    is in this module's docstring). Never raises for a tensor too big for
    every candidate: the result says ``fits=False``. ``layouts_of`` (an
    engine of runtime.algebra.peers: tvm, tinygrad, acl, mace, ...) chooses
    among that engine's layouts instead, under the limits it checks itself
    when no ``limits`` are given (TVM's 16384 and 2048 array layers,
    tinygrad's 16384), else the device's."""
    groups = tiers(role, layouts_of)
    names = tuple(name for tier in groups for name in tier)
    dt = dtypes.image_dtype(dtype)
    first = NAMED[names[0]]
    try:
        dims = first.logical_dims(dims)
    except ClayoutError:
        shown = tuple(dims) if isinstance(dims, (list, tuple)) else dims
        raise ClayoutError(f"role {role!r} takes dims {ROLES[role].dims}; got {shown!r}") from None
    if limits is None and layouts_of is not None:
        limits = peers.peer(layouts_of).limits
    limits = resolve_limits(limits, engine)
    measured, skipped = [], []
    for tier, group in enumerate(groups):
        for name in group:
            try:
                image = ImageDesc(NAMED[name], dims, dt)
            except ClayoutError as exc:   # a layout without a form for these dims (5-D)
                skipped.append((name, str(exc)))
                continue
            why = None if limits is None else limits.refusal(image)
            lanes = image.width * image.height * image.depth * image.lanes
            measured.append(Candidate(
                name, tier, image.shape, lanes - math.prod(image.placed), image.nbytes,
                why is None, image.storage,
                None if limits is None else limits.bounds(image.storage), why,
                None if limits is None else limits.max_alloc))
    fitting = [c for c in measured if c.fits]
    if fitting:
        best_tier = fitting[0].tier
        # min() keeps the first of equal keys: candidate order breaks equal padding
        chosen = min((c for c in fitting if c.tier == best_tier), key=lambda c: c.padding)
    else:
        chosen = measured[0]
    return LayoutChoice(role, dims, dt.name, limits, NAMED[chosen.name], bool(fitting),
                        tuple(measured), tuple(skipped))


def choose_layout(role: str, dims, dtype="f32", limits=None, engine=None,
                  layouts_of=None) -> ImageLayout:
    """The image layout for a tensor of ``role`` (activation, filter,
    depthwise, argument, fc_weight) with logical ``dims``: the first candidate
    whose image fits ``limits`` (a 2-D (width, height) or a storage.Limits;
    given, else the engine's device, else none),
    least padding breaking ties inside a tier. Raises ClayoutError naming
    every candidate and its size when none fits (split into tiles then:
    ``to_image(..., max_image=...)``). ``layout_choice`` gives the reason.

    Without ``limits`` and without an ``engine`` that has a device (the
    default engine is cpu), nothing is refused: the role's first candidate
    is returned however large its image, one no GPU may hold, and the
    reason says "no device limits given (pass engine= or limits=)". Pass the
    engine that will hold the image, or the target's limits (8192x8192 is
    the least an OpenCL device with images offers).

    >>> choose_layout("activation", (1, 64, 224, 224)).name
    'in_out_channel'
    >>> choose_layout("activation", (4, 64, 224, 224), limits=(2048, 4096)).name
    'texture_2d'
    >>> choose_layout("activation", (1, 64, 224, 224), layouts_of="tvm").name
    'tvm_texture_array'
    >>> choose_layout("activation", (200, 64, 8, 8), layouts_of="tvm").name   # > 2048 layers
    'tvm_texture_nhwc_array'

    ``layouts_of`` chooses among one engine's layouts (``layout_choice``).
    """
    choice = layout_choice(role, dims, dtype, limits, engine, layouts_of)
    if not choice.fits:
        raise ClayoutError(choice.reason + " (to_image(..., max_image=...) or "
                           "`clayout to-image --max-image W,H` splits it)")
    return choice.layout
