// clayout: exact dtype conversions, bit for bit the rules of runtime/dtypes.py.
//
// Storage: f32 is float, f16 and bf16 are ushort bits (no cl_khr_fp16 needed),
// s32/s8/u8 are int/char/uchar. Everything here is integer arithmetic or
// exact float operations, so every conforming device gives the same bits:
// no device rounding mode, half image rounding or NaN policy is trusted.

// f32 NaN -> the canonical quiet NaN 0x7fc00000; everything else unchanged.
inline float clayout_canon_f32(float x) { return isnan(x) ? as_float(0x7fc00000u) : x; }

// f16 bits -> f32, exact (subnormals kept; NaN payload kept, quiet bit set).
inline float clayout_f16_to_f32(ushort h)
{
    uint s = (uint)(h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return as_float(s | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u));
    if (e == 0u) {                       // zero or subnormal: m * 2^-24, exact in f32
        float v = (float)m * 0x1p-24f;
        return as_float(as_uint(v) | s);
    }
    return as_float(s | ((e + 112u) << 23) | (m << 13));
}

// f32 -> f16 bits, round to nearest even, overflow -> inf, NaN -> 0x7e00.
// (Giesen's float_to_half_fast3_rtne; the subnormal case adds a magic
// number so that the FPU's own round-to-nearest-even does the rounding.)
inline ushort clayout_f32_to_f16(float f)
{
    uint u = as_uint(f);
    uint sign = u & 0x80000000u;
    u ^= sign;
    uint o;
    if (u >= 0x47800000u) {              // >= 65536, inf or NaN
        if (u > 0x7f800000u)
            return (ushort)0x7e00u;
        o = 0x7c00u;
    } else if (u < 0x38800000u) {        // below 2^-14: half subnormal or zero
        float v = as_float(u) + 0.5f;    // 0.5 = 2^-1: its ulp is 2^-24, the half subnormal ulp
        o = as_uint(v) - 0x3f000000u;
    } else {
        uint odd = (u >> 13) & 1u;
        u += 0xc8000fffu + odd;          // rebias exponent (-112 << 23), round half to even
        o = u >> 13;
    }
    return (ushort)(o | (sign >> 16));
}

// f32 that holds an f16 value exactly (an f16 image read) -> its f16 bits,
// NaN payload kept: the inverse of clayout_f16_to_f32.
inline ushort clayout_f32_to_f16_exact(float f)
{
    uint u = as_uint(f);
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a >= 0x7f800000u)
        return (ushort)(sign | 0x7c00u | ((a >> 13) & 0x3ffu));
    return (ushort)(clayout_f32_to_f16(f));
}

// bf16 bits <-> f32.
inline float clayout_bf16_to_f32(ushort b) { return as_float((uint)b << 16); }

inline ushort clayout_f32_to_bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)0x7fc0u;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// s32 -> bf16, one rounding (nearest even) from the exact integer: round |i|
// to 8 significant bits with integers, then the float conversion is exact.
inline ushort clayout_s32_to_bf16(int i)
{
    uint a = i < 0 ? (uint)(-(long)i) : (uint)i;
    uint bits = 32u - clz(a);
    if (bits > 8u) {
        uint drop = bits - 8u;
        uint tie = 1u << (drop - 1u);
        uint rem = a & ((tie << 1) - 1u);
        uint q = a >> drop;
        q += (rem > tie || (rem == tie && (q & 1u))) ? 1u : 0u;
        a = q << drop;                   // q <= 256, a <= 2^31: no overflow
    }
    float v = convert_float_rtz(a);      // exact: at most 8 significant bits
    return (ushort)((as_uint(v) >> 16) | (i < 0 ? 0x8000u : 0u));
}

// Lane k of an RGBA pixel.
inline float clayout_lane_f(float4 p, uint k) { return k == 0 ? p.x : k == 1 ? p.y : k == 2 ? p.z : p.w; }
inline int clayout_lane_i(int4 p, uint k) { return k == 0 ? p.x : k == 1 ? p.y : k == 2 ? p.z : p.w; }
inline uint clayout_lane_ui(uint4 p, uint k) { return k == 0 ? p.x : k == 1 ? p.y : k == 2 ? p.z : p.w; }
