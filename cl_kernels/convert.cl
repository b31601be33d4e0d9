// clayout: exact dtype conversions, bit for bit the rules of runtime/algebra/dtypes.py.
//
// Storage: f32 is float, f16 and bf16 are ushort bits (no cl_khr_fp16 needed),
// s32/s8/u8 are int/char/uchar. Everything here is integer arithmetic or
// exact float operations, so every conforming device gives the same bits:
// no device rounding mode, half image rounding or NaN policy is trusted.

// n / d for an index n < 2^31, as (n * m) >> s with the magic number m and
// shift s of d (runtime/algebra/c_index.py: magic): what a compiler does for a constant
// divisor, for divisors that are kernel arguments.
static inline uint clayout_div(uint n, uint m, uint s) { return (uint)(((ulong)n * m) >> s); }

// f32 NaN -> the canonical quiet NaN 0x7fc00000; everything else unchanged.
static inline float clayout_canon_f32(float x) { return isnan(x) ? as_float(0x7fc00000u) : x; }

// f16 bits -> f32, exact (subnormals kept; NaN payload kept, quiet bit set).
// Comparisons on the 15-bit magnitude, not a 5-bit exponent field: oclgrind
// 21.10 mis-executes LLVM's narrowed i5 switch for negative halves.
static inline float clayout_f16_to_f32(ushort h)
{
    uint u = (uint)h;
    uint s = (u & 0x8000u) << 16;
    uint em = u & 0x7fffu;
    if (em >= 0x7c00u)                   // inf / NaN
        return as_float(s | 0x7f800000u | ((em & 0x3ffu) << 13) | ((em & 0x3ffu) ? 0x00400000u : 0u));
    if (em < 0x0400u) {                  // zero or subnormal: em * 2^-24, exact in f32
        float v = (float)em * 0x1p-24f;
        return as_float(as_uint(v) | s);
    }
    return as_float(s | ((em << 13) + 0x38000000u));   // rebias the exponent by 112
}

// f32 -> f16 bits, round to nearest even, overflow -> inf, NaN -> 0x7e00.
// (Giesen's float_to_half_fast3_rtne; the subnormal case adds a magic
// number so that the FPU's own round-to-nearest-even does the rounding.)
static inline ushort clayout_f32_to_f16(float f)
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
static inline ushort clayout_f32_to_f16_exact(float f)
{
    uint u = as_uint(f);
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a >= 0x7f800000u)
        return (ushort)(sign | 0x7c00u | ((a >> 13) & 0x3ffu));
    return (ushort)(clayout_f32_to_f16(f));
}

// bf16 bits <-> f32.
static inline float clayout_bf16_to_f32(ushort b) { return as_float((uint)b << 16); }

static inline ushort clayout_f32_to_bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)0x7fc0u;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// s32 -> bf16, one rounding (nearest even) from the exact integer: round |i|
// to 8 significant bits with integers, then the float conversion is exact.
static inline ushort clayout_s32_to_bf16(int i)
{
    // |i| via abs() (a negate-and-select is folded into llvm.abs, which oclgrind
    // 21.10 cannot run); INT_MIN apart: PoCL 3.1's abs(INT_MIN) is not 2^31
    uint a = i == (int)0x80000000u ? 0x80000000u : abs(i);
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

// float -> int: round half to even, saturate, NaN -> 0. Written out because
// convert_*_sat_rte differs between implementations (oclgrind 21.10 gives
// INT_MIN for NaN); rint rounds to nearest even in OpenCL's default mode.
static inline int clayout_f32_to_s32(float x)
{
    if (isnan(x))
        return 0;
    if (x >= 2147483648.0f)
        return 2147483647;
    if (x <= -2147483648.0f)
        return (int)(-2147483647 - 1);
    return (int)rint(x);
}

static inline float clayout_round_clamp(float x, float lo, float hi)
{
    return isnan(x) ? 0.0f : fmin(fmax(rint(x), lo), hi);
}

static inline char clayout_f32_to_s8(float x) { return (char)(int)clayout_round_clamp(x, -128.0f, 127.0f); }
static inline uchar clayout_f32_to_u8(float x) { return (uchar)(int)clayout_round_clamp(x, 0.0f, 255.0f); }

// Lane k of an RGBA pixel, as two selects on the bits of k (a chain of
// ternaries becomes a variable-index extractelement that oclgrind 21.10
// gets wrong for int4).
static inline float clayout_lane_f(float4 p, uint k) { return (k & 2u) ? ((k & 1u) ? p.w : p.z) : ((k & 1u) ? p.y : p.x); }
static inline int clayout_lane_i(int4 p, uint k) { return (k & 2u) ? ((k & 1u) ? p.w : p.z) : ((k & 1u) ? p.y : p.x); }
static inline uint clayout_lane_ui(uint4 p, uint k) { return (k & 2u) ? ((k & 1u) ? p.w : p.z) : ((k & 1u) ? p.y : p.x); }
