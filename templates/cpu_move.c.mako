// clayout: the cpu engine's compiled moves (runtime/cpu/native.py builds this
// file, runtime/cpu/compiled.py calls it). One function per family: a pair of
// element types, and for a copy of unchanged bits the element's size alone.
//
// A call moves one box: axes 0..nd-3 walked in order, then the plane of the
// last two axes, P and Q, in tiles of TP x TQ; where the destination's rows
// end in a block tail, its zq zeros are written with the row. Q is the axis the destination
// runs along (its stride one element where that helps), P the one the source
// runs along: where both hold, a tile moves in square blocks transposed in
// registers. Strides are in bytes; every load and store is a memcpy of one
// element (no alignment assumed). Conversions are the expressions the OpenCL
// kernels use (the dtype rules), compiled as C below the OpenCL names they need.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__AVX__)
#include <immintrin.h>
#endif

// -- the OpenCL C names the dtype rules use, in C ------------------------------------------
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef uint64_t ulong;
typedef struct { float x, y, z, w; } float4;
typedef struct { int x, y, z, w; } int4;
typedef struct { uint x, y, z, w; } uint4;
static inline float as_float(uint u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint as_uint(float f) { uint u; memcpy(&u, &f, 4); return u; }
static inline uint clz(uint x) { return x ? (uint)__builtin_clz(x) : 32u; }
// int -> float rounds to nearest even in C's default mode, as _rte asks; the
// one _rtz use converts an integer of at most 8 significant bits (exact)
static inline float convert_float_rte(int x) { return (float)x; }
static inline float convert_float_rtz(uint x) { return (float)x; }
static inline int convert_int_sat(int x) { return x; }
static inline char convert_char_sat(int x) { return (char)(x < -128 ? -128 : x > 127 ? 127 : x); }
static inline uchar convert_uchar_sat(int x) { return (uchar)(x < 0 ? 0 : x > 255 ? 255 : x); }

${helpers}

// elements of unchanged bits: a run of 3, 6, 12 or 16 bytes moves as one
typedef struct { uint8_t b[3]; } clayout_b3;
typedef struct { uint8_t b[6]; } clayout_b6;
typedef struct { uint8_t b[12]; } clayout_b12;
typedef struct { uint8_t b[16]; } clayout_b16;

// n bytes copied or zeroed; up to 16 with constant sizes, so that a short row (a
// pixel's lanes, a block tail) is a few moves and not a library call
#define CLAYOUT_SMALL(n, op) switch (n) { \
    case 1: op(1); break; case 2: op(2); break; case 3: op(3); break; case 4: op(4); break; \
    case 5: op(5); break; case 6: op(6); break; case 7: op(7); break; case 8: op(8); break; \
    case 9: op(9); break; case 10: op(10); break; case 11: op(11); break; case 12: op(12); break; \
    case 13: op(13); break; case 14: op(14); break; case 15: op(15); break; case 16: op(16); break; }
static inline void clayout_copy_bytes(char *d, const char *s, int64_t n)
{
#define CLAYOUT_COPY(k) memcpy(d, s, k)
    if (n > 16)
        memcpy(d, s, (size_t)n);
    else
        CLAYOUT_SMALL(n, CLAYOUT_COPY)
#undef CLAYOUT_COPY
}

static inline void clayout_zero_bytes(char *d, int64_t n)
{
#define CLAYOUT_ZERO(k) memset(d, 0, k)
    if (n > 16)
        memset(d, 0, (size_t)n);
    else
        CLAYOUT_SMALL(n, CLAYOUT_ZERO)
#undef CLAYOUT_ZERO
}

// -- square blocks transposed in registers: s holds B rows (Q) of B elements along P,
// d receives B rows (P) of B elements along Q
#if defined(__AVX__)
static inline void clayout_t8_4(const char *s, int64_t sQ, char *d, int64_t dP)
{
    __m256 r0 = _mm256_loadu_ps((const float *)(s)), r1 = _mm256_loadu_ps((const float *)(s + sQ)),
           r2 = _mm256_loadu_ps((const float *)(s + 2 * sQ)), r3 = _mm256_loadu_ps((const float *)(s + 3 * sQ)),
           r4 = _mm256_loadu_ps((const float *)(s + 4 * sQ)), r5 = _mm256_loadu_ps((const float *)(s + 5 * sQ)),
           r6 = _mm256_loadu_ps((const float *)(s + 6 * sQ)), r7 = _mm256_loadu_ps((const float *)(s + 7 * sQ));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
           t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
           t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps((float *)(d), _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps((float *)(d + dP), _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps((float *)(d + 2 * dP), _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps((float *)(d + 3 * dP), _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps((float *)(d + 4 * dP), _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps((float *)(d + 5 * dP), _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps((float *)(d + 6 * dP), _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps((float *)(d + 7 * dP), _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif
#if defined(__SSE2__)
static inline void clayout_t4_4(const char *s, int64_t sQ, char *d, int64_t dP)
{
    __m128 r0 = _mm_loadu_ps((const float *)(s)), r1 = _mm_loadu_ps((const float *)(s + sQ)),
           r2 = _mm_loadu_ps((const float *)(s + 2 * sQ)), r3 = _mm_loadu_ps((const float *)(s + 3 * sQ));
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps((float *)(d), r0);
    _mm_storeu_ps((float *)(d + dP), r1);
    _mm_storeu_ps((float *)(d + 2 * dP), r2);
    _mm_storeu_ps((float *)(d + 3 * dP), r3);
}

// A partial 4x4 block: np (1-4) elements of each of nq (1-4) source rows,
// transposed into np destination rows of w (nq <= w <= 4) elements, the w - nq
// after the data zero (a block tail's lanes). Loads and stores never pass the
// elements named, so a box's last rows are safe.
static inline __m128 clayout_load_part(const char *s, int64_t n)
{
    switch (n) {
    case 4: return _mm_loadu_ps((const float *)s);
    case 3: return _mm_movelh_ps(_mm_castpd_ps(_mm_load_sd((const double *)s)),
                                 _mm_load_ss((const float *)(s + 8)));
    case 2: return _mm_castpd_ps(_mm_load_sd((const double *)s));
    default: return _mm_load_ss((const float *)s);
    }
}

static inline void clayout_store_part(char *d, __m128 r, int64_t w)
{
    switch (w) {
    case 4: _mm_storeu_ps((float *)d, r); break;
    case 3: _mm_store_sd((double *)d, _mm_castps_pd(r));
            _mm_store_ss((float *)(d + 8), _mm_movehl_ps(r, r)); break;
    case 2: _mm_store_sd((double *)d, _mm_castps_pd(r)); break;
    default: _mm_store_ss((float *)d, r); break;
    }
}

static inline void clayout_t4_4_part(const char *s, int64_t sQ, int64_t np, int64_t nq,
                                     char *d, int64_t dP, int64_t w)
{
    const __m128 z = _mm_setzero_ps();
    __m128 r0 = clayout_load_part(s, np),
           r1 = nq > 1 ? clayout_load_part(s + sQ, np) : z,
           r2 = nq > 2 ? clayout_load_part(s + 2 * sQ, np) : z,
           r3 = nq > 3 ? clayout_load_part(s + 3 * sQ, np) : z;
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    clayout_store_part(d, r0, w);
    if (np > 1) clayout_store_part(d + dP, r1, w);
    if (np > 2) clayout_store_part(d + 2 * dP, r2, w);
    if (np > 3) clayout_store_part(d + 3 * dP, r3, w);
}

static inline void clayout_t8_2(const char *s, int64_t sQ, char *d, int64_t dP)
{
    __m128i r[8], a[8], b[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm_loadu_si128((const __m128i *)(s + i * sQ));
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++)          // rows 0-3, then rows 4-7
        for (int i = 0; i < 2; i++) {    // columns 0-3, then 4-7
            b[4 * h + 2 * i] = _mm_unpacklo_epi32(a[4 * h + i], a[4 * h + 2 + i]);
            b[4 * h + 2 * i + 1] = _mm_unpackhi_epi32(a[4 * h + i], a[4 * h + 2 + i]);
        }
    for (int c = 0; c < 4; c++) {        // b[c] holds columns 2c, 2c+1 of rows 0-3; b[4+c] of rows 4-7
        _mm_storeu_si128((__m128i *)(d + 2 * c * dP), _mm_unpacklo_epi64(b[c], b[4 + c]));
        _mm_storeu_si128((__m128i *)(d + (2 * c + 1) * dP), _mm_unpackhi_epi64(b[c], b[4 + c]));
    }
}

static inline void clayout_t8_1(const char *s, int64_t sQ, char *d, int64_t dP)
{
    __m128i r[8], a[4], b[4];
    for (int i = 0; i < 8; i++)
        r[i] = _mm_loadl_epi64((const __m128i *)(s + i * sQ));
    for (int i = 0; i < 4; i++)
        a[i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    b[0] = _mm_unpacklo_epi16(a[0], a[1]);   // columns 0-3 of rows 0-3
    b[1] = _mm_unpackhi_epi16(a[0], a[1]);   // columns 4-7 of rows 0-3
    b[2] = _mm_unpacklo_epi16(a[2], a[3]);   // columns 0-3 of rows 4-7
    b[3] = _mm_unpackhi_epi16(a[2], a[3]);
    for (int h = 0; h < 2; h++) {
        const __m128i lo = _mm_unpacklo_epi32(b[h], b[2 + h]), hi = _mm_unpackhi_epi32(b[h], b[2 + h]);
        _mm_storel_epi64((__m128i *)(d + (4 * h) * dP), lo);
        _mm_storel_epi64((__m128i *)(d + (4 * h + 1) * dP), _mm_unpackhi_epi64(lo, lo));
        _mm_storel_epi64((__m128i *)(d + (4 * h + 2) * dP), hi);
        _mm_storel_epi64((__m128i *)(d + (4 * h + 3) * dP), _mm_unpackhi_epi64(hi, hi));
    }
}
#endif
% for f in families:

// -- ${f.summary}
static inline void ${f.name}_one(const char *s, char *d)
{
    ${f.src_type} x;
    memcpy(&x, s, sizeof x);
    const ${f.dst_type} y = ${f.expr};
    memcpy(d, &y, sizeof y);
}

static inline void ${f.name}_zero(char *d, int64_t from, int64_t to, int64_t dQ)
{
    if (to <= from)
        return;
    if (dQ == (int64_t)sizeof(${f.dst_type})) {
        clayout_zero_bytes(d + from * dQ, (to - from) * dQ);
        return;
    }
    for (int64_t q = from; q < to; q++)
        memset(d + q * dQ, 0, sizeof(${f.dst_type}));
}

// the plane nP x nQ in tiles; after each row's nQ elements, zq zero elements
static void ${f.name}_plane(const char *s, char *d, int64_t nP, int64_t nQ, int64_t sP,
                            int64_t sQ, int64_t dP, int64_t dQ, int64_t TP, int64_t TQ,
                            int64_t zq)
{
  % if f.move:
    if (sQ == ${f.item} && dQ == ${f.item}) {       // rows contiguous on both sides
  % if f.item == 4:
#if defined(__SSE2__)
        if (nQ + zq <= 4) {        // a pixel's lanes and its tail: one partial load and store
            for (int64_t p = 0; p < nP; p++)
                clayout_store_part(d + p * dP, clayout_load_part(s + p * sP, nQ), nQ + zq);
            return;
        }
#endif
  % endif
        for (int64_t p = 0; p < nP; p++) {
            clayout_copy_bytes(d + p * dP, s + p * sP, nQ * ${f.item});
            ${f.name}_zero(d + p * dP, nQ, nQ + zq, dQ);
        }
        return;
    }
  % endif
    for (int64_t p0 = 0; p0 < nP; p0 += TP) {
        const int64_t p1 = p0 + TP < nP ? p0 + TP : nP;
        for (int64_t q0 = 0; q0 < nQ; q0 += TQ) {
            const int64_t q1 = q0 + TQ < nQ ? q0 + TQ : nQ;
            const int64_t zt = q1 == nQ ? zq : 0;   // zeros after this tile's rows
            int64_t p = p0;
  % for b, guard in f.blocks:
#if ${guard}
            if (sP == ${f.item} && dQ == ${f.item} && q1 - q0 >= ${b}) {
                for (; p + ${b} <= p1; p += ${b}) {
                    int64_t q = q0;
                    for (; q + ${b} <= q1; q += ${b})
                        clayout_t${b}_${f.item}(s + p * sP + q * sQ, sQ, d + p * dP + q * dQ, dP);
                    for (; q < q1; q++)
                        for (int64_t i = p; i < p + ${b}; i++)
                            ${f.name}_one(s + i * sP + q * sQ, d + i * dP + q * dQ);
                    for (int64_t i = p; i < p + ${b}; i++)
                        ${f.name}_zero(d + i * dP, q1, q1 + zt, dQ);
                }
            }
#endif
  % endfor
  % if f.item == 4 and f.move:
#if defined(__SSE2__)
            if (sP == 4 && dQ == 4 && q1 - q0 < 4) {   // a short row: channels, a pixel's lanes
                const int64_t nq = q1 - q0, w = nq + zt <= 4 ? nq + zt : nq;
                for (; p < p1; p += 4) {
                    const int64_t np = p1 - p < 4 ? p1 - p : 4;
                    clayout_t4_4_part(s + p * sP + q0 * sQ, sQ, np, nq, d + p * dP + q0 * dQ, dP, w);
                    for (int64_t i = p; i < p + np; i++)
                        ${f.name}_zero(d + i * dP, q0 + w, q1 + zt, dQ);
                }
                p = p1;
            }
            if (sP == 4 && dQ == 4 && p < p1 && p1 - p < 4 && q1 - q0 >= 4) {   // a short column
                const int64_t np = p1 - p;
                int64_t q = q0;
                for (; q < q1; q += 4) {
                    const int64_t nq = q1 - q < 4 ? q1 - q : 4;
                    clayout_t4_4_part(s + p * sP + q * sQ, sQ, np, nq, d + p * dP + q * dQ, dP, nq);
                }
                for (int64_t i = p; i < p1; i++)
                    ${f.name}_zero(d + i * dP, q1, q1 + zt, dQ);
                p = p1;
            }
#endif
  % endif
            for (; p < p1; p++) {
                for (int64_t q = q0; q < q1; q++)
                    ${f.name}_one(s + p * sP + q * sQ, d + p * dP + q * dQ);
                ${f.name}_zero(d + p * dP, q1, q1 + zt, dQ);
            }
        }
    }
}

// the box: nd, TP, TQ, zq, TW, then shape, source and destination strides (bytes).
// TW > 0: rows of P in groups of TW, each group walked over every outer index
// before the next (the outer axes step inside P's destination rows there, as
// the input channels of a filter image's pixels: the group's lines stay in L1)
void ${f.name}(const char *src, char *dst, const int64_t *box)
{
    const int64_t nd = box[0], TP = box[1], TQ = box[2], zq = box[3], TW = box[4];
    const int64_t *n = box + 5, *ss = box + 5 + ${max_axes}, *ds = box + 5 + 2 * ${max_axes};
    const int64_t nP = n[nd - 2], group = TW > 0 ? TW : nP;
    int64_t outer = 1;
    for (int64_t a = 0; a < nd - 2; a++)
        outer *= n[a];
    for (int64_t g0 = 0; g0 < nP; g0 += group) {
        const int64_t g1 = g0 + group < nP ? g0 + group : nP;
        for (int64_t k = 0; k < outer; k++) {
            const char *s = src + g0 * ss[nd - 2];
            char *d = dst + g0 * ds[nd - 2];
            int64_t r = k;
            for (int64_t a = nd - 3; a >= 0; a--) {
                const int64_t i = r % n[a];
                r /= n[a];
                s += i * ss[a];
                d += i * ds[a];
            }
            ${f.name}_plane(s, d, g1 - g0, n[nd - 1], ss[nd - 2], ss[nd - 1], ds[nd - 2],
                            ds[nd - 1], TP, TQ, zq);
        }
    }
}
% endfor

// what this library was built from, for clayout devices
const char *clayout_cpu_built(void)
{
    return "${built}"
#if defined(__AVX__)
        "; 8x8 blocks of 4 bytes (AVX)"
#endif
#if defined(__SSE2__)
        "; 4x4 blocks of 4 bytes, 8x8 of 2 and 1 (SSE2)"
#endif
        ;
}
