"""Data types and the exact conversion rules (docs/dtypes.md).

Every conversion the library makes goes through :func:`convert`, so the CPU
engine, the reference and the tests share one definition of the rounding:

* same type: the bits are copied unchanged (NaN payloads included);
* float -> float: round to nearest even; overflow gives inf; subnormals are
  kept; a NaN becomes the destination's canonical quiet NaN (f32 0x7fc00000,
  f16 0x7e00, bf16 0x7fc0) so that host and device agree bit for bit;
* float -> int: round half to even, then saturate; NaN -> 0;
* int -> float: round to nearest even from the exact integer value;
* int -> int: saturate.

Host inputs outside these six types (float64, int64, Python lists) come in
through :func:`host_array` only when the caller names the dtype to produce:
they are rounded once, by the same rules, straight to that dtype. A
non-native byte order ('>f4') is converted to native first (exact).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import ClayoutError


@dataclass(frozen=True)
class DType:
    name: str            # clayout's name: f32, f16, bf16, s32, s8, u8
    np: np.dtype         # numpy dtype holding the values on the host
    bits: np.dtype       # unsigned integer dtype of the same width
    is_float: bool
    cl_scalar: str       # C type of one buffer element (bf16: ushort bits): the OpenCL
    #                      kernels' and the cpu library's (templates/cpu_common.c names them)

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    def __str__(self) -> str:
        return self.name


_TABLE = {
    "f32": DType("f32", np.dtype(np.float32), np.dtype(np.uint32), True, "float"),
    "f16": DType("f16", np.dtype(np.float16), np.dtype(np.uint16), True, "ushort"),
    "bf16": DType("bf16", np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16), True, "ushort"),
    "s32": DType("s32", np.dtype(np.int32), np.dtype(np.uint32), False, "int"),
    "s8": DType("s8", np.dtype(np.int8), np.dtype(np.uint8), False, "char"),
    "u8": DType("u8", np.dtype(np.uint8), np.dtype(np.uint8), False, "uchar"),
}
_ALIASES = {
    "float32": "f32", "float": "f32", "float16": "f16", "half": "f16", "fp32": "f32",
    "fp16": "f16", "bfp16": "bf16",
    "bfloat16": "bf16", "int32": "s32", "int8": "s8", "uint8": "u8",
}
NAMES = tuple(_TABLE)
IMAGE_NAMES = ("f32", "f16", "s32", "s8", "u8")
CANONICAL_NAN = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}


def dtype(value) -> DType:
    """Normalize a name ('f32', 'float16', ...), numpy dtype or DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        key = _ALIASES.get(value, value)
        if key in _TABLE:
            return _TABLE[key]
    else:
        try:
            npd = np.dtype(value)
        except TypeError:
            npd = None
        for entry in _TABLE.values():
            if entry.np == npd:
                return entry
    raise ClayoutError(f"unsupported dtype {value!r}; allowed: {', '.join(NAMES)}")


def of_array(array: np.ndarray) -> DType:
    """The clayout dtype of a numpy array, or a clear error."""
    try:
        return dtype(native(array).dtype)
    except ClayoutError:
        hint = ""
        if array.dtype.kind in "fiub":
            hint = ("; give the dtype to produce explicitly (dtype= in Python, --dtype on the "
                    "command line) to have it rounded by clayout's rules")
        raise ClayoutError(
            f"unsupported array dtype {array.dtype}; allowed: {', '.join(NAMES)} "
            f"(numpy float32, float16, ml_dtypes.bfloat16, int32, int8, uint8){hint}") from None


def native(array: np.ndarray) -> np.ndarray:
    """``array`` in the machine's byte order: a big-endian '>f4' array becomes
    '<f4' holding the same values (exact); anything else is returned as is."""
    if array.dtype.isnative:
        return array
    return array.astype(array.dtype.newbyteorder("="))


def host_array(data, dst=None, what: str = "input") -> np.ndarray:
    """``data`` as a numpy array of a clayout dtype, in native byte order.

    An array (or list) of another numeric type is accepted only when ``dst``,
    the dtype the caller will produce, is given: it is then rounded straight
    to ``dst`` by the conversion rules (one rounding: float64 1 + 2**-9 gives
    bf16 1.0, float64 16777217 gives s32 16777217).

    >>> host_array([1.5, 2.5], "s8")
    array([2, 2], dtype=int8)
    """
    arr = native(np.asarray(data))
    try:
        dtype(arr.dtype)
        return arr
    except ClayoutError:
        pass
    if arr.dtype.kind not in "fiu" or dst is None:
        raise ClayoutError(f"{what}: " + _unsupported(arr.dtype, dst is None))
    with np.errstate(over="ignore", invalid="ignore"):
        return _from_wide(arr, dtype(dst))


def _unsupported(npd: np.dtype, numeric_hint: bool) -> str:
    text = f"unsupported array dtype {npd}; allowed: {', '.join(NAMES)}"
    if numeric_hint and npd.kind in "fiu":
        text += (" (or give the dtype to produce explicitly, dtype= in Python or --dtype on "
                 "the command line, to have it rounded by clayout's rules)")
    return text


def _from_wide(x: np.ndarray, dst: DType) -> np.ndarray:
    """float64 / int64 / other numeric host values -> ``dst``, rounded once."""
    if x.dtype.kind in "iu":
        if not dst.is_float:
            info = np.iinfo(dst.np)
            return np.clip(x, info.min, info.max).astype(dst.np)
        # integers are exact in float64 up to 2**53, beyond which they are rounded to f64 first
        x = x.astype(np.float64)
    x = x.astype(np.float64)
    nan = np.isnan(x)
    if not dst.is_float:
        info = np.iinfo(dst.np)
        return np.clip(np.nan_to_num(np.rint(x), nan=0.0), info.min, info.max).astype(dst.np)
    if dst.name == "bf16":
        out = _f32_to_bf16(_f64_to_f32_odd(x)).reshape(x.shape)
    else:
        out = x.astype(dst.np)   # numpy rounds float64 -> f32 / f16 once, to nearest even
    return _canonical_nan(out, dst, nan)


def _f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: exact values stay, inexact ones take
    the neighbour whose last bit is 1. Rounding that to bf16 (nearest even)
    then equals one rounding of the float64 value (f32 keeps 16 more bits)."""
    t = x.astype(np.float32)
    back = t.astype(np.float64)
    fix = (back != x) & ~np.isnan(x) & ((t.view(np.uint32) & np.uint32(1)) == 0)
    toward = np.where(back > x, -np.inf, np.inf).astype(np.float32)
    return np.where(fix, np.nextafter(t, toward), t)


def image_dtype(value) -> DType:
    """A dtype an RGBA image channel can hold (bf16 has no OpenCL channel type)."""
    dt = dtype(value)
    if dt.name not in IMAGE_NAMES:
        raise ClayoutError(f"images cannot hold {dt.name}: OpenCL has no {dt.name} channel type; "
                           f"allowed image dtypes: {', '.join(IMAGE_NAMES)}")
    return dt


def _canonical_nan(values: np.ndarray, dst: DType, nan_mask: np.ndarray) -> np.ndarray:
    if nan_mask.any():
        values.view(dst.bits)[nan_mask] = CANONICAL_NAN[dst.name]
    return values


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round f32 to bf16, nearest even, with integer arithmetic (as the kernels do)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return r.view(ml_dtypes.bfloat16)


def _f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round exactly-held values (f64) to bf16 in one step, nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    shift = np.uint64(52 - 7)
    rounded = (u + np.uint64((1 << 44) - 1) + ((u >> shift) & np.uint64(1))) >> shift << shift
    # rounded has 8 significant bits: exact in f32, then truncation to bf16 is exact
    return (rounded.view(np.float64).astype(np.float32).view(np.uint32) >> np.uint32(16)
            ).astype(np.uint16).view(ml_dtypes.bfloat16)


def convert(x: np.ndarray, dst) -> np.ndarray:
    """Convert ``x`` to ``dst`` with clayout's exact rules; returns a new array
    (or ``x`` itself when the dtype already matches)."""
    # overflow to inf and NaN handling are part of the rules, not accidents
    with np.errstate(over="ignore", invalid="ignore"):
        return _convert(np.asarray(x), dtype(dst))


def _convert(x: np.ndarray, dst: DType) -> np.ndarray:
    src = of_array(x)
    if src == dst:
        return x
    if src.is_float and dst.is_float:
        nan = np.isnan(x)
        if dst.name == "bf16":
            wide = x if src.name == "f32" else x.astype(np.float32)  # f16 -> f32 is exact
            out = _f32_to_bf16(wide).reshape(x.shape)
        else:
            # f16/bf16 -> f32 exact; f32/bf16 -> f16 through numpy's RNE (bf16 via exact f32)
            wide = x.astype(np.float32) if src.name == "bf16" else x
            out = wide.astype(dst.np)
        return _canonical_nan(out, dst, nan)
    if src.is_float:  # float -> int
        v = np.rint(x.astype(np.float64))
        info = np.iinfo(dst.np)
        v = np.clip(np.nan_to_num(v, nan=0.0), info.min, info.max)
        return v.astype(dst.np)
    if dst.is_float:  # int -> float
        exact = x.astype(np.float64)
        if dst.name == "bf16":
            return _f64_to_bf16(exact).reshape(x.shape)
        return exact.astype(dst.np)  # numpy rounds f64 -> f32 / f16 to nearest even
    info = np.iinfo(dst.np)  # int -> int
    return np.clip(x.astype(np.int64), info.min, info.max).astype(dst.np)
