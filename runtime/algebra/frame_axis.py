"""The sample stage of a frame along one axis (docs/frames.md, "Sample"):
which source pixels each output pixel reads, and with which weights.

An ``SampleAxis`` is frozen data: the crop along the axis (``start``,
``length`` L pixels), the size it is scaled to (``scaled`` S pixels,
placed at ``pad`` of ``out``: the letterbox) and the method. Its one rule
is ``table()``: for each output index d in [0, S), the first source pixel
``first[d]`` and K weights, tap k reading pixel min(first[d] + k, L - 1)
(crop coordinates; the start is added). Every engine's fast path reads this
table (numpy gathers it, the OpenCL kernel reads it from a buffer), so they
agree bit for bit; the reference (runtime/reference/frame.py) evaluates the
same rules from their formulas in float64.

The methods, with exact integer numerators (no drift on long axes):

* ``copy`` (S = L): the pixel itself.
* ``nearest`` (OpenCV's INTER_NEAREST): min(⌊d·L/S⌋, L − 1).
* ``bilinear`` (INTER_LINEAR): s = N/D, N = (2d + 1)·L − S, D = 2S; the
  column ⌊s⌋ and the next with weights 1 − f and f, f = (N mod D)·(1/D)
  in float32 (one rounding of 1/D, one of the product); s < 0 or s ≥ L − 1
  reads the edge pixel alone.
* ``area`` shrinking (INTER_AREA, L ≥ S on both axes): output d averages
  the source span [d·L/S, (d + 1)·L/S); pixel i weighs its overlap with it
  over L/S: overlap/L in units of 1/S, an exact integer ratio (the
  quotient in float64, then rounded to float32, as every ratio below).
* ``area-zoom`` (INTER_AREA where an axis enlarges: OpenCV then uses it on
  both axes): sx = ⌊d·L/S⌋, f = frac(((d + 1)·L − (sx + 1)·S)/L) where that
  is positive, else 0; the columns sx and sx + 1 with weights 1 − f and f,
  f as a ratio, 1 − f in float32.
* ``bilinear-aa`` (antialiased bilinear shrinking, as PIL's BILINEAR and
  torchvision's ``antialias=True``): the triangle filter widened to L/S
  source pixels: pixel i weighs max(0, 2L − |(2i + 1)·S − (2d + 1)·L|),
  normalized by the sum over the pixels inside the crop (a ratio).
  Enlarging, it is ``bilinear``.

>>> SampleAxis("x", 2, 0, 6, 2, 0, "area").table()[1]
array([[0.33333334, 0.33333334, 0.33333334, 0.        ],
       [0.33333334, 0.33333334, 0.33333334, 0.        ]], dtype=float32)
"""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

METHODS = ("copy", "nearest", "bilinear", "area", "area-zoom", "bilinear-aa")


@dataclass(frozen=True)
class SampleAxis:
    """The sample stage along one axis (x or y): output index o in [0,
    ``out``) reads the frame at ``start`` + a crop index. The crop
    (``length`` pixels) is scaled to ``scaled`` pixels placed at ``pad``
    (letterbox; outside [pad, pad + scaled) the output is the fill), by
    ``method`` (the module docstring)."""
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

    @property
    def taps(self) -> int:
        """K: the weights of each output index (the most source pixels one reads)."""
        length, scaled = self.length, self.scaled
        if self.method in ("copy", "nearest"):
            return 1
        if self.method == "area":        # a span of L/S pixels touches at most ⌈L/S⌉ + 1
            return -(-length // scaled) + 1
        if self.method == "bilinear-aa":  # the triangle's support: 2·L/S pixels
            return -(-2 * length // scaled) + 1
        return 2

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """(first, weights): for d in [0, scaled), the first crop pixel
        (int64, the start not added) and K float32 weights; tap k reads
        crop pixel min(first + k, length - 1) (a weight past the crop is 0)."""
        d = np.arange(self.scaled, dtype=np.int64)
        length, scaled, last = self.length, self.scaled, self.length - 1
        if self.method == "copy":
            return d, np.ones((scaled, 1), np.float32)
        if self.method == "nearest":
            return np.minimum(d * length // scaled, last), np.ones((scaled, 1), np.float32)
        if self.method == "bilinear":
            n = (2 * d + 1) * length - scaled
            den = 2 * scaled
            q = np.maximum(n, 0) // den
            inside = (n >= 0) & (q < last)
            first = np.where(inside, q, np.where(n < 0, 0, last))
            w1 = np.where(inside, (n - q * den).astype(np.float32) * self.inv,
                          np.float32(0)).astype(np.float32)
            return first, np.stack([np.float32(1) - w1, w1], axis=1)
        if self.method == "area-zoom":
            sx = d * length // scaled
            n = (d + 1) * length - (sx + 1) * scaled
            f = np.where(n > 0, (n % length) / length, 0.0).astype(np.float32)
            edge = sx >= last
            f = np.where(edge, np.float32(0), f).astype(np.float32)
            return np.minimum(sx, last), np.stack([np.float32(1) - f, f], axis=1)
        return self._spread(d)

    def _spread(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``area`` and ``bilinear-aa``: integer weights per tap, each
        divided by its row's total."""
        length, scaled, k = self.length, self.scaled, self.taps
        if self.method == "area":
            first = d * length // scaled
            i = first[:, None] + np.arange(k)[None, :]
            lo = np.maximum(d[:, None] * length, i * scaled)
            hi = np.minimum((d[:, None] + 1) * length, (i + 1) * scaled)
            ints = np.maximum(hi - lo, 0)
        else:
            # the pixels whose triangle weight can be positive start here
            first = np.maximum(((2 * d + 1) * length - 2 * length - scaled) // (2 * scaled), 0)
            i = first[:, None] + np.arange(k)[None, :]
            ints = np.maximum(2 * length - np.abs((2 * i + 1) * scaled
                                                  - (2 * d[:, None] + 1) * length), 0)
        ints = np.where(i < length, ints, 0)
        total = ints.sum(axis=1, keepdims=True)
        return first, (ints / total).astype(np.float32)


def methods(resize: str, antialias: bool, lengths, sizes) -> tuple[str, str]:
    """The method of the x and y axes for ``resize`` (bilinear, nearest,
    area) and ``antialias``, the crop's (w, h) ``lengths`` scaled to
    ``sizes``: an axis of equal sizes is a copy; ``area`` boxes where
    neither axis enlarges, else OpenCV's zoom rule on both;
    antialiased bilinear only where an axis shrinks."""
    shrink = all(n >= s for n, s in zip(lengths, sizes))
    out = []
    for n, s in zip(lengths, sizes):
        if n == s:
            out.append("copy")
        elif resize == "area":
            out.append("area" if shrink else "area-zoom")
        elif resize == "bilinear" and antialias and n > s:
            out.append("bilinear-aa")
        else:
            out.append(resize)
    return out[0], out[1]


__all__ = ["SampleAxis", "METHODS", "methods"]
