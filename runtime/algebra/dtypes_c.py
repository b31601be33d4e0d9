"""C snippets of the dtype rules (runtime.algebra.dtypes.convert) for the kernels.

Every element travels in its *storage* type (``DType.cl_scalar``: float,
ushort bits for f16/bf16, int, char, uchar). A conversion is a C expression
from the source's storage value to the destination's storage value, built
here from the helpers of ``cl_kernels/convert.cl``; images add one step on
each side (what ``read_image*`` returns to storage, storage to what
``write_image*`` takes). The templates receive finished expressions.

Example: ``convert_expr("f32", "bf16", "x")`` is ``"clayout_f32_to_bf16(x)"``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes

@dataclass(frozen=True)
class ImageIO:
    """How a kernel reads and writes one image channel type."""
    read: str          # read_image* function
    pixel_type: str    # what it returns (float4, int4, uint4)
    lane_helper: str   # picks lane k of such a pixel (cl_kernels/convert.cl)
    write: str         # write_image* function
    write_type: str    # the scalar type of the pixel it takes


_FLOAT_IO = ImageIO("read_imagef", "float4", "clayout_lane_f", "write_imagef", "float")
_INT_IO = ImageIO("read_imagei", "int4", "clayout_lane_i", "write_imagei", "int")
_UINT_IO = ImageIO("read_imageui", "uint4", "clayout_lane_ui", "write_imageui", "uint")


@dataclass(frozen=True)
class CType:
    """What OpenCL C makes of one dtype, every fact in one row: ``to_float``
    (storage value -> its exact float, float dtypes only), ``from_float``
    (a float -> this storage, rounded by the host's rules), ``from_int`` (an
    int -> this storage), ``value`` (what an accessor load gives: scalar
    type, vector type, zero), ``image`` (how kernels read and write its
    image channel type; None: no image of it) and ``channel_type`` (the
    CL_ channel type's name)."""
    to_float: str | None
    from_float: str
    from_int: str
    value: tuple[str, str, str]
    image: ImageIO | None
    channel_type: str | None


_FLOAT_VALUE, _INT_VALUE = ("float", "float4", "0.0f"), ("int", "int4", "0")
C_TYPES = {
    "f32": CType("{}", "clayout_canon_f32({})", "convert_float_rte({})", _FLOAT_VALUE,
                 _FLOAT_IO, "FLOAT"),
    "f16": CType("clayout_f16_to_f32({})", "clayout_f32_to_f16({})",
                 "clayout_f32_to_f16(convert_float_rte({}))", _FLOAT_VALUE, _FLOAT_IO,
                 "HALF_FLOAT"),
    "bf16": CType("clayout_bf16_to_f32({})", "clayout_f32_to_bf16({})",
                  "clayout_f32_to_bf16((float)({}))", _FLOAT_VALUE, None, None),
    "s32": CType(None, "clayout_f32_to_s32({})", "convert_int_sat({})", _INT_VALUE, _INT_IO,
                 "SIGNED_INT32"),
    "s8": CType(None, "clayout_f32_to_s8({})", "convert_char_sat({})", _INT_VALUE, _INT_IO,
                "SIGNED_INT8"),
    "u8": CType(None, "clayout_f32_to_u8({})", "convert_uchar_sat({})", ("uint", "uint4", "0u"),
                _UINT_IO, "UNSIGNED_INT8"),
}


def c_type(dt) -> CType:
    """The row of ``dt`` (a DType or a name)."""
    return C_TYPES[dtypes.dtype(dt).name]


def convert_expr(src, dst, x: str) -> str:
    """C expression turning storage value ``x`` of ``src`` into ``dst``'s storage."""
    src, dst = dtypes.dtype(src), dtypes.dtype(dst)
    if src == dst:
        return x
    if src.is_float:
        return c_type(dst).from_float.format(c_type(src).to_float.format(x))
    if dst.name == "bf16" and src.name == "s32":   # one exact rounding, not two
        return f"clayout_s32_to_bf16({x})"
    return c_type(dst).from_int.format(f"(int)({x})")


def image_read_to_storage(dt, lane_value: str) -> str:
    """A lane as ``read_image*`` returns it -> the image dtype's storage value."""
    dt = dtypes.dtype(dt)
    if dt.name == "f16":       # the float holds a half exactly; keep NaN payloads
        return f"clayout_f32_to_f16_exact({lane_value})"
    if dt.name in ("s8", "u8"):
        return f"({dt.cl_scalar})({lane_value})"
    return lane_value


def storage_to_image_write(dt, x: str) -> str:
    """Storage value of the image dtype -> the lane value ``write_image*`` takes.
    Half images get the exact float of the f16 bits, so the device's own
    float->half rounding has nothing to round."""
    dt = dtypes.dtype(dt)
    if dt.name == "f16":
        return f"clayout_f16_to_f32({x})"
    return f"({c_type(dt).image.write_type})({x})"


def c_literal(dt, value) -> str:
    """A constant of ``dt``'s storage type with exactly the host's bits."""
    dt = dtypes.dtype(dt)
    arr = np.asarray([value], dtype=dt.np)
    raw = int(arr.view(dt.bits)[0])
    if dt.name == "f32":
        return f"as_float(0x{raw:08x}u)"
    if dt.name in ("f16", "bf16"):
        return f"(ushort)0x{raw:04x}u"
    return f"({dt.cl_scalar})({int(arr[0])})"


def fill_value(desc) -> np.generic:
    """The halo fill of ``desc`` in its dtype, as runtime.reference computes it."""
    return dtypes.convert(np.array([desc.fill], dtype=np.float64).astype(np.float32),
                          desc.dtype)[0]


# -- accessors: a kernel's values (float for f32/f16/bf16, int for s8/s32, uint for u8) ---------
def storage_value(dt, x: str) -> str:
    """The value of the stored element ``x`` (exact: an f16 or bf16 becomes its float)."""
    dt = dtypes.dtype(dt)
    return {"f16": f"clayout_f16_to_f32({x})", "bf16": f"clayout_bf16_to_f32({x})",
            "s8": f"(int){x}", "u8": f"(uint){x}"}.get(dt.name, x)


def storage_value4(dt, v: str) -> tuple[str, ...]:
    """C statements returning the four stored elements ``v`` (a vload4) as
    one vector value."""
    dt = dtypes.dtype(dt)
    if dt.name in ("f16", "bf16"):
        f = "clayout_f16_to_f32" if dt.name == "f16" else "clayout_bf16_to_f32"
        return (f"const ushort4 h = {v};",
                f"return (float4)({f}(h.x), {f}(h.y), {f}(h.z), {f}(h.w));")
    return (f"return {dict(s8=f'convert_int4({v})', u8=f'convert_uint4({v})').get(dt.name, v)};",)


def value_to_storage(dt, v: str) -> str:
    """A value stored in a buffer of ``dt``, rounded by the dtype rules."""
    dt = dtypes.dtype(dt)
    return {"f16": f"clayout_f32_to_f16({v})", "bf16": f"clayout_f32_to_bf16({v})",
            "s8": f"convert_char_sat({v})", "u8": f"convert_uchar_sat({v})"}.get(dt.name, v)


def value_to_image_write(dt, v: str) -> str:
    """A value as write_image* takes it for an image of ``dt``: a half image
    gets the float of the rounded half, so the device has nothing to round."""
    dt = dtypes.dtype(dt)
    if dt.name == "f16":
        return f"clayout_f16_to_f32(clayout_f32_to_f16({v}))"
    return f"({c_type(dt).image.write_type})({v})"


# -- vector loads and stores ----------------------------------------------------------------
# The widest vector passed to or returned by a builtin (vloadN/vstoreN): 32 bytes. A
# 64-byte float16 or int16 there changes the call ABI on x86 without AVX-512, and
# PoCL's compiler says so ("AVX vector argument ... changes the ABI") on every build;
# a wider move is made of 32-byte halves (the same instructions once inlined).
MAX_CALL_BYTES = 32


def split_vector(dt, n: int) -> bool:
    """Whether ``n`` elements of ``dt`` move as two vloadN/vstoreN calls of n/2
    (the forms: runtime/opencl/trace.py)."""
    return n * dtypes.dtype(dt).itemsize > MAX_CALL_BYTES
