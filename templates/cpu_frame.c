// -- frames: a camera frame's colour, sample and normalize stages (docs/frames.md), for the
// cpu engine (runtime/cpu/frames.py calls clayout_frame). Plain C, put after the #defines
// cpu_frame.c.mako renders and after cpu_move.c.mako in the same library: it uses
// cpu_common.c's worker pool side (clayout_parallel) and the moves' dtype conversions.
//
// Every number comes from the taps array of runtime/algebra/frame_taps.py (the one the OpenCL
// kernel reads: a header, then per axis one row of [first source pixel as int32 bits, K
// weights] per output index) and from ``spec`` (the format, the channel order, where the
// output goes): nothing here depends on a crop or a size, the library is built once.
//
// The float32 operations are those of runtime/algebra/frame_sample.py and of the OpenCL
// kernel (runtime/opencl/frame.py), in the same order, under -ffp-contract=off, so the
// three give the same bits:
//   colour  YUV: t_y = ky * (float)max(Y - y0, 0), v = V - 128, u = U - 128,
//           R = t_y + v*rv, G = (t_y + v*gv) + u*gu, B = t_y + u*bu, each clamped to [0, 255];
//           packed: the byte as a float;
//   sample  r = 0; r += t(x_k, y) * wx[k] for k in order (the x blend of source row y);
//           p = 0; p += r(y_k) * wy[k] for k in order;
//   normalize  (p * scale - mean[c]) * inv[c].
// A source pixel's colour is the same value whichever output reads it, so each source row's
// x blend is computed once (a small cache of them per band of output rows) and the y blend
// reads the cached rows. The x blend reads the taps' bytes 8 outputs at a time with AVX2,
// converts and blends them in registers:
//   window   YUV, one tap or a bilinear pair (c, c + 1), the block's bytes within 32 of each
//            other (shrinking up to ~4x): two 16-byte loads and byte shuffles per plane;
//   gathers  32-bit words gathered (one word holds both lumas of a pair, one both chromas);
//   scalar   elsewhere, on other CPUs, and where a word or a window would reach past the
//            frame's last byte: the bytes gathered into short arrays, then converted and
//            blended in loops gcc vectorizes.
// Measured at 1280x720 NV21 -> 320x320 on one Zen 3 core: 0.48 ms a call by windows, 0.62
// by gathers, 1.0 scalar; converting each row's whole span to float RGB first and blending
// through the tables took 1.8 ms (its float gathers cost more than the pixels it converts
// once; 1.1-1.7x slower than gathers in every case tried, enlarging 8x included).
// Then the y blend, normalize, and the store in the output's dtype and strides.
// gcc vectorizes the clamps (x < 0 ? 0 : x) only without -ftrapping-math; that changes no
// value (no operation is reordered or contracted: -ffp-contract=off still holds). clang's
// default already allows it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize ("no-trapping-math")
#endif

enum { CLAYOUT_FRAME_PACKED = 0, CLAYOUT_FRAME_NV = 1, CLAYOUT_FRAME_I420 = 2 };
enum { CLAYOUT_OUT_F32 = 0, CLAYOUT_OUT_F16 = 1, CLAYOUT_OUT_BF16 = 2, CLAYOUT_OUT_U8 = 3,
       CLAYOUT_OUT_S8 = 4 };
#define CLAYOUT_FRAME_CHUNK 256          // output columns a gather works on at once
#define CLAYOUT_FRAME_CACHE_BYTES (4 << 20)   // x-blended rows kept per band, at most

typedef struct {
    const uint8_t *src;
    const float *taps;
    char *out;
    int kind, bytes, rgb[3], uoff, voff, C, ncomp, source[3], dtype, zl;
    int64_t oc, orow, ocol;              // output strides in bytes: channel, row, column
    int H, W, fw, fh;
    int xpad, sw, xlast, kx;
    int ypad, sh, ylast, ky, yat;
    int y0;
    float scale, mean[3], inv[3], fill[3], kyf, rv, gv, gu, bu;
    const int32_t *xcol;                 // kx * sw: the column tap k of output d reads
    const float *xw;                     // kx * sw: its weight
    const int32_t *xmax;                 // per block of 8 outputs, the last column a tap reads
    const uint8_t *xpair;                // per block: YUV, 2 taps, each reading c and c + 1
    const struct clayout_frame_win *xwin;   // per block: its bytes in 32-byte windows, or none
    int vector;                          // gather 8 outputs at a time (AVX2)
    int64_t nbytes;                      // the frame's bytes
    atomic_int failed;                   // a band could not allocate its buffers
} clayout_frame_job;

// A block of 8 outputs (YUV, 1 tap or a bilinear pair) whose bytes lie within 32 of each
// other in a row: 128-bit loads and byte shuffles instead of gathers. ``ml``: the shuffle of
// the luma window at ``lbase`` giving tap 0's 8 bytes, then tap 1's (16 bytes from the
// window's first half, then 16 from its second; 0x80: none); ``mu``, ``mv`` the same of the
// chroma window at ``cbase`` (I420: each plane's, with ``mu`` for both).
typedef struct clayout_frame_win {
    int32_t ok, lbase, cbase;
    uint8_t ml[32], mu[32], mv[32];
} clayout_frame_win;

typedef struct {
    float *cache;                        // R slots of ncomp * sw floats: x-blended rows
    int *tag;                            // the source row each slot holds (-1: none)
    int R;
    float *p;                            // ncomp * sw: the y blend
    float *n;                            // C * W: an output row, normalized
    int32_t *g;                          // 3 * CHUNK gathered bytes
} clayout_frame_ws;

static inline int clayout_tap_int(const float *taps, int64_t word)
{
    int v;
    memcpy(&v, taps + word, 4);
    return v;
}

static inline float clayout_clamp255(float x)
{
    x = x < 0.0f ? 0.0f : x;
    return x > 255.0f ? 255.0f : x;
}

// R, G, B of n pixels from their Y, U, V bytes (as ints), each blended into r/g/b by w
static void clayout_frame_yuv_blend(const clayout_frame_job *j, const int32_t *restrict iy,
                                    const int32_t *restrict iu, const int32_t *restrict iv,
                                    const float *restrict w, float *restrict r,
                                    float *restrict g, float *restrict b, int n)
{
    const int y0 = j->y0;
    const float ky = j->kyf, rv = j->rv, gv = j->gv, gu = j->gu, bu = j->bu;
    for (int i = 0; i < n; i++) {
        const int yy = iy[i] - y0;
        const float ty = ky * (float)(yy > 0 ? yy : 0);
        const float v = (float)(iv[i] - 128), u = (float)(iu[i] - 128);
        const float R = clayout_clamp255(ty + v * rv);
        const float G = clayout_clamp255((ty + v * gv) + u * gu);
        const float B = clayout_clamp255(ty + u * bu);
        r[i] += R * w[i];
        g[i] += G * w[i];
        b[i] += B * w[i];
    }
}

static void clayout_frame_byte_blend(const int32_t *restrict ib, const float *restrict w,
                                     float *restrict r, int n)
{
    for (int i = 0; i < n; i++)
        r[i] += (float)ib[i] * w[i];
}

// the scalar way, any machine: outputs [d0, d0 + n) (n <= CHUNK) of the x blend of source row y,
// the taps' bytes gathered into short arrays, then converted and blended in SIMD
static void clayout_frame_gather_range(const clayout_frame_job *j, clayout_frame_ws *ws, int y,
                                       float *row, int d0, int n)
{
    const int sw = j->sw, fw = j->fw;
    const uint8_t *src = j->src;
    int32_t *restrict a = ws->g, *restrict b = ws->g + CLAYOUT_FRAME_CHUNK,
            *restrict c = ws->g + 2 * CLAYOUT_FRAME_CHUNK;
    for (int ch = 0; ch < j->ncomp; ch++)
        for (int i = 0; i < n; i++)
            row[(int64_t)ch * sw + d0 + i] = 0.0f;
    for (int k = 0; k < j->kx; k++) {
        const int32_t *restrict col = j->xcol + (int64_t)k * sw + d0;
        const float *w = j->xw + (int64_t)k * sw + d0;
        if (j->kind == CLAYOUT_FRAME_PACKED) {
            const uint8_t *px = src + (int64_t)y * fw * j->bytes;
            const int bytes = j->bytes;
            for (int ch = 0; ch < j->ncomp; ch++) {
                const uint8_t *at = px + j->rgb[ch];
                for (int i = 0; i < n; i++)
                    a[i] = at[col[i] * bytes];
                clayout_frame_byte_blend(a, w, row + (int64_t)ch * sw + d0, n);
            }
            continue;
        }
        const uint8_t *luma = src + (int64_t)y * fw;
        for (int i = 0; i < n; i++)
            a[i] = luma[col[i]];
        if (j->kind == CLAYOUT_FRAME_NV) {
            const uint8_t *pairs = src + (int64_t)j->fh * fw + (int64_t)(y / 2) * fw;
            const uint8_t *pu = pairs + j->uoff, *pv = pairs + j->voff;
            for (int i = 0; i < n; i++) {
                const int at = col[i] & ~1;
                b[i] = pu[at];
                c[i] = pv[at];
            }
        } else {
            const int64_t q = (int64_t)(j->fh / 2) * (fw / 2);
            const uint8_t *pu = src + (int64_t)j->fh * fw + (int64_t)(y / 2) * (fw / 2);
            const uint8_t *pv = pu + q;
            for (int i = 0; i < n; i++) {
                b[i] = pu[col[i] >> 1];
                c[i] = pv[col[i] >> 1];
            }
        }
        clayout_frame_yuv_blend(j, a, b, c, w, row + d0, row + sw + d0, row + 2 * sw + d0, n);
    }
}

#if defined(__AVX2__)
// -- AVX2: 8 outputs at a time, their taps' bytes read by windows or gathered as 32-bit words
// (the byte wanted the low one, or the one ``shift`` bits up), converted and blended in
// registers. A word reaches 3 bytes past its pixel, a window 32 bytes past its first: a block
// that could reach past the frame's end takes the scalar path (clayout_frame_gather_row).

// R, G, B of 8 pixels (luma, U and V bytes as ints) blended into r0, r1, r2 by w
static inline void clayout_yuv8(const clayout_frame_job *j, __m256i iy, __m256i iu, __m256i iv,
                                __m256 w, __m256 *r0, __m256 *r1, __m256 *r2)
{
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    const __m256i c128 = _mm256_set1_epi32(128);
    const __m256i yy = _mm256_max_epi32(_mm256_sub_epi32(iy, _mm256_set1_epi32(j->y0)),
                                        _mm256_setzero_si256());
    const __m256 ty = _mm256_mul_ps(_mm256_set1_ps(j->kyf), _mm256_cvtepi32_ps(yy));
    const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(iv, c128)),
                 u = _mm256_cvtepi32_ps(_mm256_sub_epi32(iu, c128));
    const __m256 R = _mm256_add_ps(ty, _mm256_mul_ps(v, _mm256_set1_ps(j->rv)));
    const __m256 G = _mm256_add_ps(_mm256_add_ps(ty, _mm256_mul_ps(v, _mm256_set1_ps(j->gv))),
                                   _mm256_mul_ps(u, _mm256_set1_ps(j->gu)));
    const __m256 B = _mm256_add_ps(ty, _mm256_mul_ps(u, _mm256_set1_ps(j->bu)));
    // max(x, 0) then min(x, 255): x > 0 ? x : 0, x < 255 ? x : 255 (x is never NaN)
    *r0 = _mm256_add_ps(*r0, _mm256_mul_ps(_mm256_min_ps(_mm256_max_ps(R, zero), top), w));
    *r1 = _mm256_add_ps(*r1, _mm256_mul_ps(_mm256_min_ps(_mm256_max_ps(G, zero), top), w));
    *r2 = _mm256_add_ps(*r2, _mm256_mul_ps(_mm256_min_ps(_mm256_max_ps(B, zero), top), w));
}

static inline __m256i clayout_low_byte(__m256i word, int shift)
{
    return _mm256_and_si256(_mm256_srl_epi32(word, _mm_cvtsi32_si128(shift)),
                            _mm256_set1_epi32(0xff));
}

static inline __m256i clayout_word_at(const uint8_t *base, __m256i off)
{
    return _mm256_i32gather_epi32((const int *)(const void *)base, off, 1);
}

// YUV, two taps reading neighbouring columns c and c + 1 (bilinear inside the crop): one
// word gathered at c holds both lumas, one at the chroma of c both chroma samples
static void clayout_frame_pair_avx2(const clayout_frame_job *j, float *row, int d0,
                                    const uint8_t *lrow, const uint8_t *urow,
                                    const uint8_t *vrow)
{
    const int sw = j->sw;
    __m256 r0 = _mm256_setzero_ps(), r1 = r0, r2 = r0;
    const __m256i col = _mm256_loadu_si256((const __m256i *)(j->xcol + d0));
    const __m256 w0 = _mm256_loadu_ps(j->xw + d0), w1 = _mm256_loadu_ps(j->xw + sw + d0);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i luma = clayout_word_at(lrow, col);
    __m256i u0, v0, u1, v1;
    if (j->kind == CLAYOUT_FRAME_NV) {
        // c odd: c + 1 starts the next pair, 2 bytes up
        const __m256i word = clayout_word_at(urow, _mm256_andnot_si256(one, col));
        const __m256i next = _mm256_srlv_epi32(word, _mm256_slli_epi32(_mm256_and_si256(col, one), 4));
        u0 = clayout_low_byte(word, 8 * j->uoff);
        v0 = clayout_low_byte(word, 8 * j->voff);
        u1 = clayout_low_byte(next, 8 * j->uoff);
        v1 = clayout_low_byte(next, 8 * j->voff);
    } else {
        // (c + 1) / 2 is c / 2 or the sample after it, 1 byte up
        const __m256i half = _mm256_srli_epi32(col, 1), odd = _mm256_slli_epi32(_mm256_and_si256(col, one), 3);
        const __m256i uw = clayout_word_at(urow, half), vw = clayout_word_at(vrow, half);
        u0 = clayout_low_byte(uw, 0);
        v0 = clayout_low_byte(vw, 0);
        u1 = clayout_low_byte(_mm256_srlv_epi32(uw, odd), 0);
        v1 = clayout_low_byte(_mm256_srlv_epi32(vw, odd), 0);
    }
    clayout_yuv8(j, clayout_low_byte(luma, 0), u0, v0, w0, &r0, &r1, &r2);
    clayout_yuv8(j, clayout_low_byte(luma, 8), u1, v1, w1, &r0, &r1, &r2);
    _mm256_storeu_ps(row + d0, r0);
    _mm256_storeu_ps(row + sw + d0, r1);
    _mm256_storeu_ps(row + 2 * (int64_t)sw + d0, r2);
}

static void clayout_frame_gather_avx2(const clayout_frame_job *j, float *row, int d0,
                                      const uint8_t *lrow, const uint8_t *urow,
                                      const uint8_t *vrow)
{
    const int sw = j->sw;
    __m256 r0 = _mm256_setzero_ps(), r1 = r0, r2 = r0;
    for (int k = 0; k < j->kx; k++) {
        const __m256i col = _mm256_loadu_si256((const __m256i *)(j->xcol + (int64_t)k * sw + d0));
        const __m256 w = _mm256_loadu_ps(j->xw + (int64_t)k * sw + d0);
        if (j->kind == CLAYOUT_FRAME_PACKED) {
            const __m256i off = j->bytes == 1 ? col : _mm256_mullo_epi32(col, _mm256_set1_epi32(j->bytes));
            const __m256i word = clayout_word_at(lrow, off);
            r0 = _mm256_add_ps(r0, _mm256_mul_ps(_mm256_cvtepi32_ps(clayout_low_byte(word, 8 * j->rgb[0])), w));
            if (j->ncomp == 3) {
                r1 = _mm256_add_ps(r1, _mm256_mul_ps(_mm256_cvtepi32_ps(clayout_low_byte(word, 8 * j->rgb[1])), w));
                r2 = _mm256_add_ps(r2, _mm256_mul_ps(_mm256_cvtepi32_ps(clayout_low_byte(word, 8 * j->rgb[2])), w));
            }
            continue;
        }
        __m256i iu, iv;
        if (j->kind == CLAYOUT_FRAME_NV) {
            const __m256i word = clayout_word_at(urow, _mm256_and_si256(col, _mm256_set1_epi32(~1)));
            iu = clayout_low_byte(word, 8 * j->uoff);
            iv = clayout_low_byte(word, 8 * j->voff);
        } else {
            const __m256i half = _mm256_srli_epi32(col, 1);
            iu = clayout_low_byte(clayout_word_at(urow, half), 0);
            iv = clayout_low_byte(clayout_word_at(vrow, half), 0);
        }
        clayout_yuv8(j, clayout_low_byte(clayout_word_at(lrow, col), 0), iu, iv, w, &r0, &r1, &r2);
    }
    _mm256_storeu_ps(row + d0, r0);
    if (j->ncomp == 3) {
        _mm256_storeu_ps(row + sw + d0, r1);
        _mm256_storeu_ps(row + 2 * (int64_t)sw + d0, r2);
    }
}

// 16 bytes of a 32-byte window at p: shuffled from its first half, or'ed with its second's
static inline __m128i clayout_window16(const uint8_t *p, const uint8_t *mask)
{
    return _mm_or_si128(
        _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)p),
                         _mm_loadu_si128((const __m128i *)(const void *)mask)),
        _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)),
                         _mm_loadu_si128((const __m128i *)(const void *)(mask + 16))));
}

// YUV, a block with windows (clayout_frame_win): tap 0's bytes, then tap 1's, by shuffles
static void clayout_frame_window_avx2(const clayout_frame_job *j, float *row, int d0,
                                      const clayout_frame_win *w, const uint8_t *lrow,
                                      const uint8_t *urow, const uint8_t *vrow)
{
    const int sw = j->sw;
    __m256 r0 = _mm256_setzero_ps(), r1 = r0, r2 = r0;
    const __m128i l16 = clayout_window16(lrow + w->lbase, w->ml);
    __m128i u16, v16;
    if (j->kind == CLAYOUT_FRAME_NV) {
        u16 = clayout_window16(urow + w->cbase, w->mu);
        v16 = clayout_window16(urow + w->cbase, w->mv);
    } else {
        u16 = clayout_window16(urow + w->cbase, w->mu);
        v16 = clayout_window16(vrow + w->cbase, w->mu);
    }
    clayout_yuv8(j, _mm256_cvtepu8_epi32(l16), _mm256_cvtepu8_epi32(u16),
                 _mm256_cvtepu8_epi32(v16), _mm256_loadu_ps(j->xw + d0), &r0, &r1, &r2);
    if (j->kx == 2)
        clayout_yuv8(j, _mm256_cvtepu8_epi32(_mm_srli_si128(l16, 8)),
                     _mm256_cvtepu8_epi32(_mm_srli_si128(u16, 8)),
                     _mm256_cvtepu8_epi32(_mm_srli_si128(v16, 8)),
                     _mm256_loadu_ps(j->xw + sw + d0), &r0, &r1, &r2);
    _mm256_storeu_ps(row + d0, r0);
    _mm256_storeu_ps(row + sw + d0, r1);
    _mm256_storeu_ps(row + 2 * (int64_t)sw + d0, r2);
}
#endif

// the x blend of source row y from the taps' bytes: by windows, gathers or the scalar way
static void clayout_frame_gather_row(const clayout_frame_job *j, clayout_frame_ws *ws, int y,
                                     float *row)
{
    const int sw = j->sw;
    int d = 0;
#if defined(__AVX2__)
    if (j->vector) {
        const int64_t fw = j->fw, end = j->nbytes - 4;   // a word read at offset o needs o <= end
        const uint8_t *src = j->src, *lrow, *urow = NULL, *vrow = NULL;
        int64_t limit;
        if (j->kind == CLAYOUT_FRAME_PACKED) {
            lrow = src + (int64_t)y * fw * j->bytes;
            limit = (end - (lrow - src)) / j->bytes;
        } else {
            lrow = src + (int64_t)y * fw;
            limit = end - (lrow - src);
            if (j->kind == CLAYOUT_FRAME_NV) {
                urow = src + (int64_t)j->fh * fw + (int64_t)(y / 2) * fw;
                const int64_t l = end - (urow - src);
                limit = l < limit ? l : limit;
            } else {
                urow = src + (int64_t)j->fh * fw + (int64_t)(y / 2) * (fw / 2);
                vrow = urow + (int64_t)(j->fh / 2) * (fw / 2);
                const int64_t l = 2 * (end - (vrow - src));   // col / 2 <= end - vrow
                limit = l < limit ? l : limit;
            }
        }
        // a 32-byte window at offset o of a row needs o + 32 <= the bytes from the row on
        const int64_t lavail = j->nbytes - (lrow - src) - 32,
                      cavail = urow == NULL ? 0 : j->nbytes - ((vrow ? vrow : urow) - src) - 32;
        for (; d + 8 <= sw; d += 8) {
            const clayout_frame_win *w = j->xwin + d / 8;
            if (w->ok && w->lbase <= lavail && w->cbase <= cavail) {
                clayout_frame_window_avx2(j, row, d, w, lrow, urow, vrow);
                continue;
            }
            if (j->xmax[d / 8] <= limit) {
                if (j->xpair[d / 8])
                    clayout_frame_pair_avx2(j, row, d, lrow, urow, vrow);
                else
                    clayout_frame_gather_avx2(j, row, d, lrow, urow, vrow);
                continue;
            }
            clayout_frame_gather_range(j, ws, y, row, d, 8);
        }
    }
#endif
    for (; d < sw; d += CLAYOUT_FRAME_CHUNK)
        clayout_frame_gather_range(j, ws, y, row, d,
                                   sw - d < CLAYOUT_FRAME_CHUNK ? sw - d : CLAYOUT_FRAME_CHUNK);
}

// the x-blended row of source row y: from the cache, else computed into it
static const float *clayout_frame_xrow(const clayout_frame_job *j, clayout_frame_ws *ws, int y)
{
    const int slot = y % ws->R;
    float *row = ws->cache + (int64_t)slot * j->ncomp * j->sw;
    if (ws->tag[slot] == y)
        return row;
    clayout_frame_gather_row(j, ws, y, row);
    ws->tag[slot] = y;
    return row;
}

// one output row (j->C rows of W floats in n) stored in the output's dtype and strides
static void clayout_frame_emit(const clayout_frame_job *j, const float *n, int oy)
{
    const int W = j->W, C = j->C;
    char *base = j->out + (int64_t)oy * j->orow;
    const int64_t oc = j->oc, ocol = j->ocol;
    if (j->dtype == CLAYOUT_OUT_F32 && ocol == 4) {
        for (int c = 0; c < C; c++)
            memcpy(base + c * oc, n + (int64_t)c * W, (size_t)W * 4);
        return;
    }
    int x = 0;
#if defined(__F16C__) && defined(__AVX__)
    if (j->dtype == CLAYOUT_OUT_F16 && C == 3 && j->zl == 1 && oc == 2 && ocol == 8) {
        const __m128i z = _mm_setzero_si128();
        for (; x + 8 <= W; x += 8) {
            const __m128i h0 = _mm256_cvtps_ph(_mm256_loadu_ps(n + x), _MM_FROUND_TO_NEAREST_INT),
                          h1 = _mm256_cvtps_ph(_mm256_loadu_ps(n + W + x), _MM_FROUND_TO_NEAREST_INT),
                          h2 = _mm256_cvtps_ph(_mm256_loadu_ps(n + 2 * W + x), _MM_FROUND_TO_NEAREST_INT);
            const __m128i a0 = _mm_unpacklo_epi16(h0, h1), a1 = _mm_unpackhi_epi16(h0, h1),
                          b0 = _mm_unpacklo_epi16(h2, z), b1 = _mm_unpackhi_epi16(h2, z);
            char *d = base + (int64_t)x * 8;
            _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi32(a0, b0));
            _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi32(a0, b0));
            _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi32(a1, b1));
            _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi32(a1, b1));
        }
    }
#endif
    const int item = j->dtype == CLAYOUT_OUT_F32 ? 4 : j->dtype <= CLAYOUT_OUT_BF16 ? 2 : 1;
#define CLAYOUT_EMIT(one) \
    for (; x < W; x++) { \
        char *d = base + (int64_t)x * ocol; \
        for (int c = 0; c < C; c++) \
            one((const char *)(n + (int64_t)c * W + x), d + c * oc); \
        if (j->zl) \
            memset(d + C * oc, 0, (size_t)(j->zl * item)); \
    }
    switch (j->dtype) {
    case CLAYOUT_OUT_F32: CLAYOUT_EMIT(clayout_move_4_one) break;
    case CLAYOUT_OUT_F16: CLAYOUT_EMIT(clayout_convert_f32_f16_one) break;
    case CLAYOUT_OUT_BF16: CLAYOUT_EMIT(clayout_convert_f32_bf16_one) break;
    case CLAYOUT_OUT_U8: CLAYOUT_EMIT(clayout_convert_f32_u8_one) break;
    default: CLAYOUT_EMIT(clayout_convert_f32_s8_one) break;
    }
#undef CLAYOUT_EMIT
}

// the fill of columns [from, to) of an output row (rows[c]: channel c's floats)
static void clayout_frame_fill_row(const clayout_frame_job *j, float *const *rows, int from,
                                   int to)
{
    for (int c = 0; c < j->C; c++) {
        const float f = j->fill[c];
        float *restrict o = rows[c];
        for (int x = from; x < to; x++)
            o[x] = f;
    }
}

// where output row oy's floats go: straight into the output (f32 along W, ``direct``), else
// into ws->n for clayout_frame_emit
static int clayout_frame_rows(const clayout_frame_job *j, float *n, int oy, float **rows)
{
    const int direct = j->dtype == CLAYOUT_OUT_F32 && j->ocol == 4;
    for (int c = 0; c < j->C; c++)
        rows[c] = direct ? (float *)(void *)(j->out + (int64_t)oy * j->orow + c * j->oc)
                         : n + (int64_t)c * j->W;
    return direct;
}

// output row oy of the scaled region's row yd: the y blend, then normalize
static void clayout_frame_scaled_row(const clayout_frame_job *j, clayout_frame_ws *ws, int yd)
{
    const int sw = j->sw, W = j->W, nc = j->ncomp;
    const int yr = j->yat + yd * (j->ky + 1);
    const int yf = clayout_tap_int(j->taps, yr);
    float *restrict p = ws->p;
    for (int i = 0; i < nc * sw; i++)
        p[i] = 0.0f;
    for (int k = 0; k < j->ky; k++) {
        const int y = yf + k < j->ylast ? yf + k : j->ylast;
        const float wy = j->taps[yr + 1 + k];
        const float *restrict r = clayout_frame_xrow(j, ws, y);
        for (int i = 0; i < nc * sw; i++)
            p[i] += r[i] * wy;
    }
    float *rows[3];
    const int direct = clayout_frame_rows(j, ws->n, j->ypad + yd, rows);
    clayout_frame_fill_row(j, rows, 0, j->xpad);
    clayout_frame_fill_row(j, rows, j->xpad + sw, W);
    const float scale = j->scale;
    for (int c = 0; c < j->C; c++) {
        const float *restrict pc = p + (int64_t)j->source[c] * sw;
        float *restrict o = rows[c] + j->xpad;
        const float mean = j->mean[c], inv = j->inv[c];
        for (int d = 0; d < sw; d++)
            o[d] = (pc[d] * scale - mean) * inv;
    }
    if (!direct)
        clayout_frame_emit(j, ws->n, j->ypad + yd);
}

static void clayout_frame_free(clayout_frame_ws *ws)
{
    free(ws->cache);
    free(ws->tag);
    free(ws->p);
    free(ws->n);
    free(ws->g);
}

// a band: scaled rows [s0, s1) and border rows [b0, b1) (the top border's, then the bottom's)
static void clayout_frame_part(const char *src, char *dst, const int64_t *part)
{
    (void)src;
    (void)dst;
    clayout_frame_job *j = (clayout_frame_job *)(intptr_t)part[0];
    const int s0 = (int)part[1], s1 = (int)part[2], b0 = (int)part[3], b1 = (int)part[4];
    clayout_frame_ws ws = {0};
    const int64_t row = (int64_t)j->ncomp * j->sw;
    int ok = (ws.n = malloc(sizeof(float) * (size_t)j->C * (size_t)j->W)) != NULL;
    for (int b = b0; ok && b < b1; b++) {
        float *rows[3];
        const int oy = b < j->ypad ? b : b + j->sh;
        if (clayout_frame_rows(j, ws.n, oy, rows))
            clayout_frame_fill_row(j, rows, 0, j->W);
        else {
            if (b == b0)
                clayout_frame_fill_row(j, rows, 0, j->W);
            clayout_frame_emit(j, ws.n, oy);
        }
    }
    if (ok && s0 < s1) {
        int R = j->ky + 1;
        const int64_t fit = CLAYOUT_FRAME_CACHE_BYTES / (row * 4);
        if (R > fit)
            R = fit > 2 ? (int)fit : 2;
        ws.R = R;
        ws.cache = malloc(sizeof(float) * (size_t)(row * R));
        ws.tag = malloc(sizeof(int) * (size_t)R);
        ws.p = malloc(sizeof(float) * (size_t)row);
        ws.g = malloc(sizeof(int32_t) * 3 * CLAYOUT_FRAME_CHUNK);
        ok = ws.cache && ws.tag && ws.p && ws.g;
        if (ok)
            for (int i = 0; i < R; i++)
                ws.tag[i] = -1;
        for (int yd = s0; ok && yd < s1; yd++)
            clayout_frame_scaled_row(j, &ws, yd);
    }
    if (!ok)
        atomic_store(&j->failed, 1);
    clayout_frame_free(&ws);
}

static void clayout_window_mask(uint8_t *m, int at, int index)
{
    m[at] = index < 16 ? (uint8_t)index : 0x80;
    m[16 + at] = index >= 16 ? (uint8_t)(index - 16) : 0x80;
}

// the windows of the block of 8 outputs from d0 (w->ok 0 where they do not fit)
static void clayout_frame_window(const clayout_frame_job *j, const int32_t *xcol, int pair,
                                 clayout_frame_win *w, int d0)
{
    int c0[8], c1[8], p0[8], p1[8];
    w->ok = 0;
    if (j->kind == CLAYOUT_FRAME_PACKED || !(j->kx == 1 || (j->kx == 2 && pair)))
        return;
    int lo = INT32_MAX, hi = 0, clo = INT32_MAX, chi = 0;
    for (int i = 0; i < 8; i++) {
        c0[i] = xcol[d0 + i];
        c1[i] = j->kx == 2 ? c0[i] + 1 : c0[i];
        p0[i] = j->kind == CLAYOUT_FRAME_NV ? c0[i] & ~1 : c0[i] >> 1;
        p1[i] = j->kind == CLAYOUT_FRAME_NV ? c1[i] & ~1 : c1[i] >> 1;
        lo = c0[i] < lo ? c0[i] : lo;
        hi = c1[i] > hi ? c1[i] : hi;
        clo = p0[i] < clo ? p0[i] : clo;
        chi = p1[i] + 1 > chi ? p1[i] + 1 : chi;   // NV: the pair's second byte
    }
    if (hi - lo >= 32 || chi - clo >= 32)
        return;
    w->lbase = lo;
    w->cbase = clo;
    for (int i = 0; i < 8; i++) {
        clayout_window_mask(w->ml, i, c0[i] - lo);
        clayout_window_mask(w->ml, 8 + i, c1[i] - lo);
        const int u = j->kind == CLAYOUT_FRAME_NV ? j->uoff : 0, v = j->kind == CLAYOUT_FRAME_NV ? j->voff : 0;
        clayout_window_mask(w->mu, i, p0[i] - clo + u);
        clayout_window_mask(w->mu, 8 + i, p1[i] - clo + u);
        clayout_window_mask(w->mv, i, p0[i] - clo + v);
        clayout_window_mask(w->mv, 8 + i, p1[i] - clo + v);
    }
    w->ok = 1;
}

// The frame ``src`` (its bytes) converted by ``taps`` and ``spec`` into ``out``: every output
// row, in ``parts`` bands on up to ``threads`` threads (clayout_parallel). 0 when done, -1
// where memory could not be had (nothing is then promised of ``out``).
int clayout_frame(const uint8_t *src, const float *taps, char *out, const int64_t *spec,
                  int64_t threads)
{
    clayout_frame_job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return -1;
    j->src = src;
    j->taps = taps;
    j->out = out;
    j->kind = (int)spec[CLAYOUT_SPEC_KIND];
    j->bytes = (int)spec[CLAYOUT_SPEC_BYTES];
    for (int c = 0; c < 3; c++) {
        j->rgb[c] = (int)spec[CLAYOUT_SPEC_RGB0 + c];
        j->source[c] = (int)spec[CLAYOUT_SPEC_SOURCE0 + c];
    }
    j->uoff = (int)spec[CLAYOUT_SPEC_UOFF];
    j->voff = (int)spec[CLAYOUT_SPEC_VOFF];
    j->C = (int)spec[CLAYOUT_SPEC_CHANNELS];
    j->ncomp = j->C == 1 ? 1 : 3;
    j->dtype = (int)spec[CLAYOUT_SPEC_DTYPE];
    j->oc = spec[CLAYOUT_SPEC_OC];
    j->orow = spec[CLAYOUT_SPEC_OROW];
    j->ocol = spec[CLAYOUT_SPEC_OCOL];
    j->zl = (int)spec[CLAYOUT_SPEC_ZEROS];
    j->H = (int)spec[CLAYOUT_SPEC_H];
    j->W = (int)spec[CLAYOUT_SPEC_W];
    j->fw = clayout_tap_int(taps, CLAYOUT_TAP_FW);
    j->fh = clayout_tap_int(taps, CLAYOUT_TAP_FH);
    j->xpad = clayout_tap_int(taps, CLAYOUT_TAP_X_PAD);
    j->sw = clayout_tap_int(taps, CLAYOUT_TAP_X_SCALED);
    j->xlast = clayout_tap_int(taps, CLAYOUT_TAP_X_LAST);
    j->kx = clayout_tap_int(taps, CLAYOUT_TAP_X_K);
    const int xat = clayout_tap_int(taps, CLAYOUT_TAP_X_AT);
    j->ypad = clayout_tap_int(taps, CLAYOUT_TAP_Y_PAD);
    j->sh = clayout_tap_int(taps, CLAYOUT_TAP_Y_SCALED);
    j->ylast = clayout_tap_int(taps, CLAYOUT_TAP_Y_LAST);
    j->ky = clayout_tap_int(taps, CLAYOUT_TAP_Y_K);
    j->yat = clayout_tap_int(taps, CLAYOUT_TAP_Y_AT);
    j->y0 = clayout_tap_int(taps, CLAYOUT_TAP_Y0);
    j->scale = taps[CLAYOUT_TAP_SCALE];
    for (int c = 0; c < 3; c++) {
        j->mean[c] = taps[CLAYOUT_TAP_MEAN0 + c];
        j->inv[c] = taps[CLAYOUT_TAP_INV0 + c];
        j->fill[c] = taps[CLAYOUT_TAP_FILL0 + c];
    }
    j->kyf = taps[CLAYOUT_TAP_KY];
    j->rv = taps[CLAYOUT_TAP_RV];
    j->gv = taps[CLAYOUT_TAP_GV];
    j->gu = taps[CLAYOUT_TAP_GU];
    j->bu = taps[CLAYOUT_TAP_BU];
    atomic_init(&j->failed, 0);

    // the x table as one array per tap (tap k of output d reads min(first + k, last))
    const int64_t nx = (int64_t)j->kx * j->sw;
    int32_t *xcol = malloc(sizeof(int32_t) * (size_t)(nx > 0 ? nx : 1));
    float *xw = malloc(sizeof(float) * (size_t)(nx > 0 ? nx : 1));
    int32_t *xmax = malloc(sizeof(int32_t) * (size_t)(j->sw / 8 + 1));
    uint8_t *xpair = malloc((size_t)(j->sw / 8 + 1));
    clayout_frame_win *xwin = calloc((size_t)(j->sw / 8 + 1), sizeof *xwin);
    int64_t nparts = spec[CLAYOUT_SPEC_PARTS];
    if (nparts < 1)
        nparts = 1;
    int64_t *parts = malloc(sizeof(int64_t) * 7 * (size_t)nparts);
    if (xcol == NULL || xw == NULL || xmax == NULL || xpair == NULL || xwin == NULL ||
            parts == NULL) {
        free(xcol);
        free(xw);
        free(xmax);
        free(xpair);
        free(xwin);
        free(parts);
        free(j);
        return -1;
    }
    for (int d = 0; d < j->sw; d++) {
        const int at = xat + d * (j->kx + 1);
        const int first = clayout_tap_int(taps, at);
        for (int k = 0; k < j->kx; k++) {
            const int col = first + k < j->xlast ? first + k : j->xlast;
            xcol[(int64_t)k * j->sw + d] = col;
            xw[(int64_t)k * j->sw + d] = taps[at + 1 + k];
            if (d % 8 == 0 && k == 0)
                xmax[d / 8] = col;
            xmax[d / 8] = col > xmax[d / 8] ? col : xmax[d / 8];
        }
        const int pair = j->kind != CLAYOUT_FRAME_PACKED && j->kx == 2 &&
                         xcol[j->sw + d] == xcol[d] + 1;
        xpair[d / 8] = (uint8_t)(d % 8 == 0 ? pair : xpair[d / 8] && pair);
    }
    j->xcol = xcol;
    j->xw = xw;
    j->xmax = xmax;
    j->xpair = xpair;
    for (int b = 0; spec[CLAYOUT_SPEC_XMODE] == 0 && b < j->sw / 8; b++)
        clayout_frame_window(j, xcol, xpair[b], xwin + b, 8 * b);
    j->xwin = xwin;
    j->nbytes = (int64_t)j->fw * j->fh * (j->kind == CLAYOUT_FRAME_PACKED ? j->bytes : 1);
    if (j->kind != CLAYOUT_FRAME_PACKED)
        j->nbytes += 2 * (int64_t)(j->fh / 2) * (j->fw / 2);
    // xmode 1: the scalar gather alone, 2: no windows (the tests compare the three ways)
    j->vector = spec[CLAYOUT_SPEC_XMODE] != 1;

    // bands: the scaled rows and the border rows each cut evenly
    const int border = j->H - j->sh;
    for (int64_t i = 0; i < nparts; i++) {
        int64_t *p = parts + 7 * i;
        p[0] = 0;
        p[1] = 0;
        p[2] = (int64_t)(intptr_t)j;
        p[3] = (int64_t)j->sh * i / nparts;
        p[4] = (int64_t)j->sh * (i + 1) / nparts;
        p[5] = (int64_t)border * i / nparts;
        p[6] = (int64_t)border * (i + 1) / nparts;
    }
    clayout_parallel(clayout_frame_part, (const char *)src, out, parts, 7, nparts, threads);
    const int failed = atomic_load(&j->failed);
    free(parts);
    free(xcol);
    free(xw);
    free(xmax);
    free(xpair);
    free(xwin);
    free(j);
    return failed ? -1 : 0;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
