"""A camera frame as the source side of a conversion (docs/frames.md).

A frame is a u8 picture in one of the ``FORMATS`` (packed RGB-like, gray,
or YUV 4:2:0); ``from_frame`` turns it into a model input of logical dims
(1, C, H, W) in three stages, each held here as frozen data:

* **colour**: the frame's pixel at (x, y) as R, G, B (YUV to RGB by a
  ``YUV`` matrix of runtime/algebra/frame_formats.py, or the packed
  channels picked), each clamped to [0, 255], never rounded;
* **sample**: the output pixel's source taps (``Axis``: crop, resize, the
  letterbox's border), along x and along y;
* **normalize**: (p - mean) / std per output channel, in the output order.

``FramePlan`` is the side: the frame's shape and format plus the three
stages. It owns their index math twice over, once in numpy (``Axis.taps``)
and once in C (``Axis.c_lines``), written next to each other so they stay
one rule; every engine reads the plan, none recomputes it.

>>> p = frame_plan((720 * 3 // 2, 1280), "nv21", size=(320, 320))
>>> p.dims, p.x.describe()
((1, 3, 320, 320), 'x: 1280 -> 320 bilinear')
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cache import memoized
from ..errors import ClayoutError
from . import dtypes
from .c_index import f32_literal
from .catalog import NAMED, image_layout
from .checks import as_ints
from .desc import MemoryDesc
from .frame_formats import FORMATS, YUV, YUVS, FrameFormat, frame_format, yuv_matrix
from .tags import close_names, did_you_mean, parse_tag


# -- sample: one axis -------------------------------------------------------------------------
@dataclass(frozen=True)
class Axis:
    """The sample stage along one axis (x or y): output index o in [0, out)
    reads the frame at ``start`` + the crop's index. The crop (``length``
    pixels) is scaled to ``scaled`` pixels placed at ``pad`` (letterbox;
    outside [pad, pad + scaled) the output is the fill). ``method``:
    ``bilinear`` (OpenCV INTER_LINEAR: s = (d + 0.5)·length/scaled - 0.5,
    clamped to the edge pixels), ``nearest`` (INTER_NEAREST: min(⌊d·length/
    scaled⌋, length - 1)) or ``copy`` (scaled == length: the pixel itself,
    which both methods give).

    Bilinear in integers, exactly: s = N / D with N = (2d + 1)·length -
    scaled and D = 2·scaled, so i0 = ⌊N / D⌋ and the weight of i0 + 1 is
    (N mod D)·(1/D) in float32 (one rounding of 1/D, one of the product);
    ``taps`` and ``c_lines`` are the same rule in numpy and in C."""
    name: str
    out: int
    start: int
    length: int
    scaled: int
    pad: int
    method: str

    def describe(self) -> str:
        crop = f" from {self.start}" if self.start else ""
        pad = f" at {self.pad} of {self.out}" if self.scaled != self.out else ""
        return f"{self.name}: {self.length}{crop} -> {self.scaled}{pad} {self.method}"

    @property
    def inv(self) -> np.float32:
        """1/D rounded to float32 (bilinear)."""
        return np.float32(1.0 / (2 * self.scaled))

    def taps(self):
        """For d in [0, scaled): (i0, i1, w1) in frame coordinates, int64 and
        float32 arrays; w1 is the weight of i1 (0 where one pixel is read)."""
        d = np.arange(self.scaled, dtype=np.int64)
        last = self.length - 1
        if self.method == "copy":
            i0 = d
            w1 = np.zeros(self.scaled, np.float32)
        elif self.method == "nearest":
            i0 = np.minimum(d * self.length // self.scaled, last)
            w1 = np.zeros(self.scaled, np.float32)
        else:
            n = (2 * d + 1) * self.length - self.scaled
            den = 2 * self.scaled
            q = np.maximum(n, 0) // den
            inside = (n >= 0) & (q < last)
            i0 = np.where(inside, q, np.where(n < 0, 0, last))
            w1 = np.where(inside, (n - q * den).astype(np.float32) * self.inv,
                          np.float32(0)).astype(np.float32)
        i1 = np.minimum(i0 + 1, last) if self.method == "bilinear" else i0
        return i0 + self.start, i1 + self.start, w1

    def c_lines(self, o: str, p: str) -> list[str]:
        """C lines for output index ``o`` (an int expression) giving ``p``_in
        (inside the scaled region), ``p``0, ``p``1 (frame coordinates) and
        ``p``w (the weight of ``p``1), as ``taps`` gives them."""
        last = self.length - 1
        lines = [f"const int {p}d = (int)({o}) - {self.pad};",
                 f"const int {p}_in = {p}d >= 0 && {p}d < {self.scaled};"]
        if self.method == "copy":
            lines += [f"const int {p}0 = {p}d + {self.start};", f"const int {p}1 = {p}0;",
                      f"const float {p}w = 0.0f;"]
        elif self.method == "nearest":
            lines += [f"const int {p}0 = min({p}d * {self.length} / {self.scaled}, {last}) + "
                      f"{self.start};", f"const int {p}1 = {p}0;", f"const float {p}w = 0.0f;"]
        else:
            den = 2 * self.scaled
            lines += [
                f"const int {p}n = (2 * {p}d + 1) * {self.length} - {self.scaled};",
                f"const int {p}q = max({p}n, 0) / {den};",
                f"const int {p}ok = {p}n >= 0 && {p}q < {last};",
                f"const int {p}0 = ({p}ok ? {p}q : ({p}n < 0 ? 0 : {last})) + {self.start};",
                f"const int {p}1 = min({p}0 + 1, {last + self.start});",
                f"const float {p}w = {p}ok ? (float)({p}n - {p}q * {den}) * "
                f"{f32_literal(self.inv)} : 0.0f;"]
        return lines


# -- the side ---------------------------------------------------------------------------------
FITS = ("stretch", "letterbox")
RESIZES = ("bilinear", "nearest")
ORDERS = ("rgb", "bgr")


@dataclass(frozen=True)
class FramePlan:
    """A frame of ``format`` and (``height``, ``width``) pixels read as a
    model input of dims (1, C, H, W): the crop, the two axes of the sample
    stage, the colour matrix (YUV formats), and per output channel c its
    RGB component ``source[c]``, ``mean[c]``, ``std[c]`` and ``fill[c]``."""
    format: FrameFormat
    height: int
    width: int
    crop: tuple[int, int, int, int]
    x: Axis
    y: Axis
    fit: str
    resize: str
    yuv: YUV | None
    source: tuple[int, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    fill: tuple[float, ...]
    order: str

    is_image = False   # a source side that is neither a buffer nor an image
    is_frame = True

    @property
    def channels(self) -> int:
        return len(self.source)

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (1, self.channels, self.y.out, self.x.out)

    @property
    def shape(self) -> tuple[int, ...]:
        """The frame array's shape."""
        return self.format.shape(self.height, self.width)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape)

    @property
    def is_zero(self) -> bool:
        return math.prod(self.dims) == 0

    @property
    def plain(self) -> MemoryDesc:
        """The model input as the sample stage gives it: plain f32 NCHW."""
        return MemoryDesc(self.dims, "f32")

    @property
    def scale(self) -> tuple[np.float32, ...]:
        """1/std per output channel, rounded to float32: normalize is (p - mean)·scale."""
        return tuple(np.float32(1.0 / s) for s in self.std)

    @property
    def mean32(self) -> tuple[np.float32, ...]:
        return tuple(np.float32(m) for m in self.mean)

    def fill_values(self) -> np.ndarray:
        """The normalized fill per output channel (float32, as both fast paths give it)."""
        return np.array([(np.float32(f) - m) * s for f, m, s in
                         zip(self.fill, self.mean32, self.scale)], np.float32)

    @property
    def has_border(self) -> bool:
        return self.x.scaled != self.x.out or self.y.scaled != self.y.out

    def describe(self) -> str:
        crop = "" if self.crop == (0, 0, self.width, self.height) else \
            f" crop {self.crop[2]}x{self.crop[3]}+{self.crop[0]}+{self.crop[1]}"
        yuv = f" {self.yuv.name}" if self.yuv is not None else ""
        order = f" {self.order}" if self.channels > 1 else ""
        return (f"frame {self.format.name}{yuv} {self.width}x{self.height}{crop} -> "
                f"{self.x.out}x{self.y.out} {self.fit} {self.resize}{order}")


def _per_channel(value, channels: int, what: str, positive: bool = False) -> tuple[float, ...]:
    """A number, or one number per output channel, as a tuple of ``channels`` floats."""
    allowed = f"{what}= takes a number or {channels} numbers (one per output channel)"
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ClayoutError(f"{allowed}, got {value!r}") from None
    if arr.ndim > 1 or arr.size not in (1, channels):
        raise ClayoutError(f"{allowed}, got {arr.size}: {value!r}")
    if not np.isfinite(arr).all():
        raise ClayoutError(f"{what}= must be finite, got {value!r}")
    if positive and (arr == 0).any():
        raise ClayoutError(f"{what}= must not be 0 (normalize divides by it), got {value!r}")
    return tuple(float(v) for v in np.broadcast_to(arr.reshape(-1), (channels,)))


def _pair(value, what: str, example: str) -> tuple[int, ...]:
    if isinstance(value, str):
        raise ClayoutError(f"{what}= takes {example}, got {value!r}")
    return as_ints(value, what)


def frame_plan(shape, format, *, size=None, crop=None, fit="stretch", fill=0, resize="bilinear",
               mean=0.0, std=1.0, order="rgb", yuv="bt601") -> FramePlan:
    """The plan of a frame of array ``shape`` in ``format`` with the
    arguments of ``runtime.from_frame``, each checked (one ClayoutError
    naming the argument and what is allowed)."""
    fmt = frame_format(format)
    height, width = fmt.size_of(shape)
    if crop is None:
        crop = (0, 0, width, height)
    crop = _pair(crop, "crop", "(x, y, w, h) in pixels")
    if len(crop) != 4:
        raise ClayoutError(f"crop= takes (x, y, w, h) in pixels, got {len(crop)} numbers")
    cx, cy, cw, ch = crop
    if cw <= 0 or ch <= 0 or cx < 0 or cy < 0 or cx + cw > width or cy + ch > height:
        raise ClayoutError(f"crop=(x={cx}, y={cy}, w={cw}, h={ch}) is not inside the "
                           f"{width}x{height} frame: it needs w, h > 0, x, y >= 0, "
                           f"x + w <= {width} and y + h <= {height}")
    size = (cw, ch) if size is None else _pair(size, "size", "(W, H) of the output")
    if len(size) != 2 or min(size) <= 0:
        raise ClayoutError(f"size= takes (W, H) of the output, both > 0, got {size}")
    if max(size) > 1 << 15 or max(cw, ch) > 1 << 15:
        raise ClayoutError(f"size= {size} from a {cw}x{ch} crop: at most 32768 pixels along "
                           "an axis")
    if fit not in FITS:
        raise ClayoutError(f"fit= {fit!r}; allowed: {', '.join(FITS)}")
    if resize not in RESIZES:
        raise ClayoutError(f"resize= {resize!r}; allowed: {', '.join(RESIZES)}")
    if order not in ORDERS:
        raise ClayoutError(f"order= {order!r}; allowed: {', '.join(ORDERS)}")
    matrix = yuv_matrix(yuv)   # checked for every format; used by the YUV ones
    w_out, h_out = size
    if fit == "letterbox":
        r = min(w_out / cw, h_out / ch)
        sw, sh = max(1, min(w_out, round(cw * r))), max(1, min(h_out, round(ch * r)))
    else:
        sw, sh = w_out, h_out
    px, py = (w_out - sw) // 2, (h_out - sh) // 2
    x = Axis("x", w_out, cx, cw, sw, px, "copy" if sw == cw else resize)
    y = Axis("y", h_out, cy, ch, sh, py, "copy" if sh == ch else resize)
    channels = fmt.channels
    rgb = (0, 1, 2) if order == "rgb" else (2, 1, 0)
    source = (0,) if channels == 1 else rgb
    return FramePlan(fmt, height, width, (cx, cy, cw, ch), x, y, fit, resize,
                     matrix if fmt.is_yuv else None, source,
                     _per_channel(mean, channels, "mean"),
                     _per_channel(std, channels, "std", positive=True),
                     _per_channel(fill, channels, "fill"), order)


def _frozen(value):
    """``value`` as a hashable key part: a list or array as a tuple of its items."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(np.asarray(value, dtype=object).reshape(-1).tolist())
    return value


@memoized("frame plans", "CLAYOUT_FRAME_CACHE", 64)
def _cached_plan(shape, format, items):
    return frame_plan(shape, format, **dict(items))


def frame_side(shape, format, **kwargs) -> FramePlan:
    """``frame_plan(shape, format, **kwargs)``, the same object for the same
    arguments: a camera's frames come call after call with the same
    settings (23 of a call's 45 us at 1280x720 went to making the plan)."""
    items = tuple((k, _frozen(v)) for k, v in kwargs.items())
    try:
        hash(items)
    except TypeError:   # an argument of a kind no key holds: made afresh
        return frame_plan(shape, format, **kwargs)
    return _cached_plan(tuple(int(s) for s in shape), format, items)


DTYPES = ("f32", "f16", "bf16", "u8", "s8")


def frame_target(layout, dtype):
    """What a frame converts into, checked: an activation ImageLayout (a
    name, a custom 'TAG:ROWS...' or an ImageLayout), or a buffer tag (the
    string, for a MemoryDesc of the frame's dims); ``dtype`` one of ``DTYPES``."""
    try:
        name = dtypes.dtype(dtype).name
    except ClayoutError:
        name = str(dtype)
    if name not in DTYPES:
        raise ClayoutError(f"from_frame: dtype {name}; allowed: {', '.join(DTYPES)}")
    try:
        image = image_layout(layout)
    except ClayoutError as not_layout:
        try:
            if isinstance(layout, str) and parse_tag(layout).ndims == 4:
                return layout
        except ClayoutError:
            pass
        activations = [n for n, lay in NAMED.items() if lay.kind == "activation"]
        hint = did_you_mean(close_names(str(layout), activations))
        raise ClayoutError(f"from_frame: {layout!r} is neither an activation image layout nor a "
                           f"4-D buffer tag; layouts: {', '.join(activations)} (or a custom "
                           "'TAG:ROWS'); tags such as nchw, nhwc, nChw16c"
                           f"{'; ' + hint if hint else ''}") from not_layout
    if image.transform is not None or image.kind not in ("activation", "custom") or \
            image.ndims != 4:
        raise ClayoutError(f"from_frame writes a model input (N,C,H,W): {image.name!r} is a "
                           f"{image.kind} layout; use an activation layout such as "
                           "in_out_channel, or a buffer tag")
    return image


__all__ = ["FrameFormat", "FORMATS", "frame_format", "YUV", "YUVS", "Axis", "FramePlan",
           "frame_plan", "frame_side", "frame_target", "FITS", "RESIZES", "ORDERS", "DTYPES"]
