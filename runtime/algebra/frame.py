"""A camera frame as the source side of a conversion (docs/frames.md).

A frame is a u8 picture in one of the ``FORMATS`` (packed RGB-like, gray,
or YUV 4:2:0); ``from_frame`` turns it into a model input of logical dims
(1, C, H, W) in three stages, each held here as frozen data:

* **colour**: the frame's pixel at (x, y) as R, G, B (YUV to RGB by a
  ``YUV`` matrix of runtime/algebra/frame_formats.py, or the packed
  channels picked), each clamped to [0, 255], never rounded;
* **sample**: the output pixel's source taps and weights (``SampleAxis``,
  runtime/algebra/frame_axis.py: crop, resize, the letterbox's border),
  along x and along y;
* **normalize**: (p·scale - mean) / std per output channel, in the output order.

``FramePlan`` is the side: the frame's shape and format plus the three
stages. Its sample stage is one table per axis (``SampleAxis.table``) that every
fast path reads; every engine reads the plan, none recomputes it.

>>> p = frame_plan((720 * 3 // 2, 1280), "nv21", size=(320, 320))
>>> p.dims, p.x.describe()
((1, 3, 320, 320), 'x: 1280 -> 320 bilinear')
"""
from __future__ import annotations

import math
from functools import cached_property
from dataclasses import dataclass

import numpy as np

from ..cache import memoized
from ..errors import ClayoutError, FrameArgumentWarning, warn
from . import dtypes
from .catalog import NAMED, buffer_tag, image_layout
from .checks import as_ints
from .desc import MemoryDesc
from .frame_axis import SampleAxis, methods
from .frame_formats import FORMATS, YUV, YUVS, FrameFormat, frame_format, yuv_matrix
from .tags import close_names, did_you_mean, parse_tag


# -- the side ---------------------------------------------------------------------------------
FITS = ("stretch", "letterbox")
RESIZES = ("bilinear", "nearest", "area")
ORDERS = ("rgb", "bgr")


@dataclass(frozen=True)
class FramePlan:
    """A frame of ``format`` and (``height``, ``width``) pixels read as a
    model input of dims (1, C, H, W): the crop, the two axes of the sample
    stage, the colour matrix (YUV formats), the pixel ``scale``, and per
    output channel c its RGB component ``source[c]``, ``mean[c]``,
    ``std[c]`` and ``fill[c]``."""
    format: FrameFormat
    height: int
    width: int
    crop: tuple[int, int, int, int]
    x: SampleAxis
    y: SampleAxis
    fit: str
    resize: str
    yuv: YUV | None
    source: tuple[int, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    fill: tuple[float, ...]
    order: str
    antialias: bool = False
    scale: float = 1.0

    is_image = False   # a source side that is neither a buffer nor an image
    is_frame = True
    # dims, shape, plain and the float32 numbers are made once per plan (a camera's
    # frames share one plan): cached_property writes the instance's own dict

    @property
    def channels(self) -> int:
        return len(self.source)

    @cached_property
    def dims(self) -> tuple[int, int, int, int]:
        return (1, self.channels, self.y.out, self.x.out)

    @cached_property
    def shape(self) -> tuple[int, ...]:
        """The frame array's shape."""
        return self.format.shape(self.height, self.width)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> dtypes.DType:
        """What the frame holds: bytes (u8), 8 bits a channel."""
        return dtypes.dtype("u8")

    @property
    def is_zero(self) -> bool:
        return math.prod(self.dims) == 0

    @cached_property
    def plain(self) -> MemoryDesc:
        """The model input as the sample stage gives it: plain f32 NCHW."""
        return MemoryDesc(self.dims, "f32")

    @cached_property
    def inv_std(self) -> tuple[np.float32, ...]:
        """1/std per output channel, rounded to float32: normalize is
        (p·scale - mean)·inv_std."""
        return tuple(np.float32(1.0 / s) for s in self.std)

    @cached_property
    def mean32(self) -> tuple[np.float32, ...]:
        return tuple(np.float32(m) for m in self.mean)

    @cached_property
    def scale32(self) -> np.float32:
        return np.float32(self.scale)

    def fill_values(self) -> np.ndarray:
        """The normalized fill per output channel (float32, as both fast paths give it)."""
        return np.array([(np.float32(f) * self.scale32 - m) * s for f, m, s in
                         zip(self.fill, self.mean32, self.inv_std)], np.float32)

    @property
    def has_border(self) -> bool:
        return self.x.scaled != self.x.out or self.y.scaled != self.y.out

    def describe(self) -> str:
        crop = "" if self.crop == (0, 0, self.width, self.height) else \
            f" crop {self.crop[2]}x{self.crop[3]}+{self.crop[0]}+{self.crop[1]}"
        yuv = f" {self.yuv.name}" if self.yuv is not None else ""
        order = f" {self.order}" if self.channels > 1 else ""
        resize = f"{self.resize}{' antialias' if self.antialias else ''}"
        scale = f" scale {self.scale:g}" if self.scale != 1 else ""
        return (f"frame {self.format.name}{yuv} {self.width}x{self.height}{crop} -> "
                f"{self.x.out}x{self.y.out} {self.fit} {resize}{order}{scale}")


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


def _name(value, what: str, allowed) -> str:
    """A setting given by name: a str in ``allowed``, else one ClayoutError."""
    if not isinstance(value, str) or value not in allowed:
        raise ClayoutError(f"{what}= {value!r}; allowed: {', '.join(allowed)}")
    return value


F32_MAX = float(np.finfo(np.float32).max)


def _normalize(channels: int, mean, std, fill, scale) -> tuple:
    """mean, std, fill (tuples of ``channels`` floats) and scale, checked:
    each finite in float32, fill a pixel value (0..255), and every output
    (p·scale - mean)/std of a pixel p in 0..255 finite in float32."""
    mean = _per_channel(mean, channels, "mean")
    std = _per_channel(std, channels, "std", positive=True)
    fill = _per_channel(fill, channels, "fill")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not np.isfinite(scale) or scale == 0:
        raise ClayoutError(f"scale= takes a finite number other than 0 (pixels are multiplied "
                           f"by it before mean and std: 1/255 for pixels in 0..1), got {scale!r}")
    scale = float(scale)
    for what, values in (("mean", mean), ("std", std), ("scale", (scale,))):
        if max(abs(v) for v in values) > F32_MAX:
            raise ClayoutError(f"{what}= {values if len(values) > 1 else values[0]!r} is not "
                               "finite in float32, the precision frames are computed in")
    if any(not 0 <= f <= 255 for f in fill):
        raise ClayoutError(f"fill= is a pixel value before scale and normalization, 0..255; "
                           f"got {fill if len(set(fill)) > 1 else fill[0]!r}")
    for m, s in zip(mean, std):
        inv = abs(1.0 / s)
        if inv > F32_MAX or (255 * abs(scale) + abs(m)) * inv > F32_MAX:
            raise ClayoutError(f"std= {s!r} with mean= {m!r} and scale= {scale!r}: "
                               "(pixel·scale - mean)/std overflows float32, the precision "
                               "frames are computed in")
    if scale == 1 and all(0 < m < 1 for m in mean) and all(0 < v < 1 for v in std):
        warn(f"from_frame: mean={mean} and std={std} are all between 0 and 1, the convention "
             "for pixels in 0..1 (torchvision's), but frame pixels are 0..255: pass "
             "scale=1/255 as well, or mean and std in pixel units (e.g. 123.675 and 58.395)",
             FrameArgumentWarning)
    return mean, std, fill, scale


def frame_plan(shape, format, *, size=None, crop=None, fit="stretch", fill=0, resize="bilinear",
               mean=0.0, std=1.0, order="rgb", yuv=None, antialias=False,
               scale=1.0) -> FramePlan:
    """The plan of a frame of array ``shape`` in ``format`` with the
    arguments of ``runtime.from_frame``, each checked (one ClayoutError
    naming the argument and what is allowed)."""
    if not isinstance(format, (str, FrameFormat)):
        raise ClayoutError(f"format= {format!r}; formats: {', '.join(FORMATS)}")
    fmt = frame_format(format)
    height, width = fmt.size_of(shape)
    if height == 0 or width == 0:
        raise ClayoutError(f"a frame of shape {tuple(shape)} has no pixels ({width}x{height}); "
                           "a frame needs at least one row and one column")
    whole = crop is None
    if whole:
        crop = (0, 0, width, height)
    crop = _pair(crop, "crop", "(x, y, w, h) in pixels")
    if len(crop) != 4:
        raise ClayoutError(f"crop= takes (x, y, w, h) in pixels, got {len(crop)} numbers")
    cx, cy, cw, ch = crop
    if cw <= 0 or ch <= 0 or cx < 0 or cy < 0 or cx + cw > width or cy + ch > height:
        raise ClayoutError(f"crop=(x={cx}, y={cy}, w={cw}, h={ch}) is not inside the "
                           f"{width}x{height} frame: it needs w, h > 0, x, y >= 0, "
                           f"x + w <= {width} and y + h <= {height}")
    if max(cw, ch) > 1 << 15:
        what = f"the {width}x{height} frame" if whole else f"crop= {cw}x{ch}"
        raise ClayoutError(f"{what}: at most 32768 pixels along an axis are read"
                           f"{'; crop= a part of it' if whole else ''}")
    given = size is not None
    size = (cw, ch) if size is None else _pair(size, "size", "(W, H) of the output")
    if len(size) != 2 or min(size) <= 0:
        raise ClayoutError(f"size= takes (W, H) of the output, both > 0, got {size}")
    if max(size) > 1 << 15:
        raise ClayoutError(f"size= {size}: at most 32768 pixels along an axis"
                           if given else f"the output is the crop's size {size}: at most "
                           "32768 pixels along an axis; give size=")
    _name(fit, "fit", FITS)
    _name(resize, "resize", RESIZES)
    _name(order, "order", ORDERS)
    if not isinstance(antialias, (bool, np.bool_)):
        raise ClayoutError(f"antialias= takes True or False, got {antialias!r}")
    if antialias and resize != "bilinear":
        raise ClayoutError(f"antialias=True goes with resize='bilinear' (PIL's and "
                           f"torchvision's antialiased bilinear); resize={resize!r} "
                           f"{'averages areas already' if resize == 'area' else 'takes one pixel'}")
    if yuv is not None and not fmt.is_yuv:
        raise ClayoutError(f"yuv= {yuv!r} chooses the matrix of the YUV formats (nv12, nv21, "
                           f"i420); a {fmt.name} frame has none: leave yuv= out")
    matrix = yuv_matrix("bt601" if yuv is None else yuv) if fmt.is_yuv else None
    channels = fmt.channels
    mean, std, fill, scale = _normalize(channels, mean, std, fill, scale)
    w_out, h_out = size
    if fit == "letterbox":
        r = min(w_out / cw, h_out / ch)
        sw, sh = max(1, min(w_out, round(cw * r))), max(1, min(h_out, round(ch * r)))
    else:
        sw, sh = w_out, h_out
    px, py = (w_out - sw) // 2, (h_out - sh) // 2
    mx, my = methods(resize, antialias, (cw, ch), (sw, sh))
    x = SampleAxis("x", w_out, cx, cw, sw, px, mx)
    y = SampleAxis("y", h_out, cy, ch, sh, py, my)
    rgb = (0, 1, 2) if order == "rgb" else (2, 1, 0)
    source = (0,) if channels == 1 else rgb
    return FramePlan(fmt, height, width, (cx, cy, cw, ch), x, y, fit, resize, matrix, source,
                     mean, std, fill, order, bool(antialias), scale)


def _frozen(value):
    """``value`` as a hashable key part: a list or array as a tuple of its items."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(np.asarray(value, dtype=object).reshape(-1).tolist())
    return value


@memoized("frame plans", "CLAYOUT_FRAME_CACHE", 64)
def _cached_plan(shape, format, items):
    return frame_plan(shape, format, **{k: v for k, _, v in items})


def frame_side(shape, format, **kwargs) -> FramePlan:
    """``frame_plan(shape, format, **kwargs)``, the same object for the same
    arguments: a camera's frames come call after call with the same
    settings (23 of a call's 45 us at 1280x720 went to making the plan)."""
    # numbers given as lists or arrays are keyed as tuples; a name must be
    # hashable as given; each value's type is part of the key (True is not 1)
    items = tuple((k, type(v).__name__, _frozen(v) if k in _NUMBERS else v)
                  for k, v in kwargs.items())
    try:
        hash((format, items))
    except TypeError:   # an argument of a kind no key holds: made afresh (and refused)
        return frame_plan(shape, format, **kwargs)
    return _cached_plan(tuple(int(s) for s in shape), format, items)


_NUMBERS = ("size", "crop", "mean", "std", "fill")


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
    tag = buffer_tag(layout)   # a buffer tag: taken without asking the layouts (their did-you-mean)
    if tag is not None and tag.ndims == 4:
        return layout
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
        lower = str(layout).lower()
        if lower != str(layout):
            try:
                if parse_tag(lower).ndims == 4:
                    hint = f"did you mean {lower!r}? (tags and layout names are lower case)"
            except ClayoutError:
                pass
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


__all__ = ["FrameFormat", "FORMATS", "frame_format", "YUV", "YUVS", "SampleAxis", "FramePlan",
           "frame_plan", "frame_side", "frame_target", "FITS", "RESIZES", "ORDERS", "DTYPES"]
