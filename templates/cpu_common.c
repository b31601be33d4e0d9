// clayout: the C that every family of the cpu engine's compiled library shares, whatever
// is rendered (runtime/cpu/native.py puts this file first, then templates/cpu_move.c.mako,
// cpu_frame.c.mako and cpu_output.c.mako, into one source): the OpenCL C names the dtype
// rules are written in, short copies and zero fills, the square blocks transposed in
// registers, and the C side of the engine's one worker pool (runtime/cpu/pool.py). Nothing
// here depends on a template's parameters.
#define _POSIX_C_SOURCE 200809L    // clock_gettime under -std=c11
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
#if defined(__AVX512F__)
// o[i]: destination row i of the 16x16 block whose source rows start at s, sQ apart
static inline void clayout_rows16(const char *s, int64_t sQ, __m512 *o)
{
    __m512 r[16], t[16], u[16], v[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps((const float *)(s + i * sQ));
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int m = 0; m < 4; m++) {
        v[m] = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
        v[4 + m] = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xdd);
        v[8 + m] = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        v[12 + m] = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xdd);
    }
    for (int m = 0; m < 4; m++) {
        o[m] = _mm512_shuffle_f32x4(v[m], v[8 + m], 0x88);
        o[4 + m] = _mm512_shuffle_f32x4(v[4 + m], v[12 + m], 0x88);
        o[8 + m] = _mm512_shuffle_f32x4(v[m], v[8 + m], 0xdd);
        o[12 + m] = _mm512_shuffle_f32x4(v[4 + m], v[12 + m], 0xdd);
    }
}

// A plane whose destination rows are k x 16 elements of 4 bytes, one row after the other (a
// 16c block, NHWC's channels), starting e elements past a cache line: the rows' vectors
// follow each other in memory, and each line is built of the end of one vector and the
// start of the next (a permute across two), so every store but the first and the last is
// one whole, aligned line (streamed past the caches where nt says).
static void clayout_lines_4(const char *s, int64_t sQ, char *d, int64_t nP, int k, int nt)
{
    const int e = (int)(((uintptr_t)d & 63) / 4);
    const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                         _mm512_set1_epi32(16 - e));
    __m512 o[16][16], prev = _mm512_setzero_ps();   // o[qb][i]: row i's qb-th vector
    char *line = d + (64 - 4 * e);             // the first whole line
    int64_t p = 0;
    for (; p + 16 <= nP; p += 16) {
        for (int qb = 0; qb < k; qb++)
            clayout_rows16(s + p * 4 + (int64_t)qb * 16 * sQ, sQ, o[qb]);
        for (int i = 0; i < 16; i++)
            for (int qb = 0; qb < k; qb++) {
                const __m512 v = o[qb][i];
                if (p == 0 && i == 0 && qb == 0)   // the head, before the first line
                    _mm512_mask_storeu_ps((float *)d, (__mmask16)((1u << (16 - e)) - 1u), v);
                else {
                    const __m512 l = _mm512_permutex2var_ps(prev, idx, v);
                    if (nt)
                        _mm512_stream_ps((float *)(line - 64), l);
                    else
                        _mm512_store_ps((float *)(line - 64), l);
                }
                prev = v;
                line += 64;
            }
    }
    if (p > 0)                                 // the tail, after the last line
        _mm512_mask_storeu_ps((float *)(line - 64), (__mmask16)((1u << e) - 1u),
                              _mm512_permutexvar_ps(idx, prev));
    for (; p < nP; p++)                        // rows left: one element at a time
        for (int64_t q = 0; q < 16 * k; q++)
            memcpy(d + p * 64 * k + q * 4, s + p * 4 + q * sQ, 4);
}

static inline void clayout_t16_4(const char *s, int64_t sQ, char *d, int64_t dP, int nt)
{
    __m512 o[16];
    clayout_rows16(s, sQ, o);
    if (nt && (((uintptr_t)d | (uintptr_t)dP) & 63) == 0) {   // whole lines, past the caches
        for (int i = 0; i < 16; i++)
            _mm512_stream_ps((float *)(d + i * dP), o[i]);
        return;
    }
    for (int i = 0; i < 16; i++)
        _mm512_storeu_ps((float *)(d + i * dP), o[i]);
}
#endif
#if defined(__AVX__)
static inline void clayout_t8_4(const char *s, int64_t sQ, char *d, int64_t dP, int nt)
{
    (void)nt;
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
static inline void clayout_t4_4(const char *s, int64_t sQ, char *d, int64_t dP, int nt)
{
    (void)nt;
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
    double two;      // memcpy: no alignment beyond the element's is assumed
    float one;
    switch (n) {
    case 4: return _mm_loadu_ps((const float *)s);
    case 3: memcpy(&two, s, 8);
            memcpy(&one, s + 8, 4);
            return _mm_movelh_ps(_mm_castpd_ps(_mm_set_sd(two)), _mm_set_ss(one));
    case 2: memcpy(&two, s, 8);
            return _mm_castpd_ps(_mm_set_sd(two));
    default: memcpy(&one, s, 4);
            return _mm_set_ss(one);
    }
}

static inline void clayout_store_part(char *d, __m128 r, int64_t w)
{
    const double two = _mm_cvtsd_f64(_mm_castps_pd(r));
    const float one = _mm_cvtss_f32(r), third = _mm_cvtss_f32(_mm_movehl_ps(r, r));
    switch (w) {
    case 4: _mm_storeu_ps((float *)d, r); break;
    case 3: memcpy(d, &two, 8);
            memcpy(d + 8, &third, 4); break;
    case 2: memcpy(d, &two, 8); break;
    default: memcpy(d, &one, 4); break;
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

static inline void clayout_t8_2(const char *s, int64_t sQ, char *d, int64_t dP, int nt)
{
    (void)nt;
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

static inline void clayout_t8_1(const char *s, int64_t sQ, char *d, int64_t dP, int nt)
{
    (void)nt;
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

// -- the worker pool's C side (runtime/cpu/pool.py). The pool's threads are Python's; a
// compiled job (a move's parts, a frame's bands, read_output's rows: parts of one signature)
// is posted to one slot here and its parts claimed, under a lock, by the caller and by pool
// threads that serve the slot (clayout_serve), all in C with the GIL released. A thread that
// has served spins for the next job before it goes back to Python to sleep: a sleeping
// thread took 50-90 us to wake on a 2-vCPU VM, a tenth of a 224x224x64 transpose, and a
// thread that must take the GIL to start a part is woken again. One job uses the slot at a
// time; a caller that finds it busy runs its parts alone.
typedef void (*clayout_part_fn)(const char *, char *, const int64_t *);

static pthread_mutex_t clayout_busy = PTHREAD_MUTEX_INITIALIZER;   // one job at a time
static pthread_mutex_t clayout_lock = PTHREAD_MUTEX_INITIALIZER;   // the slot
static struct {
    clayout_part_fn fn;
    const char *src;
    char *dst;
    const int64_t *parts;      // per part: source offset, destination offset, its words
    int64_t stride, n, next;   // int64 words per part, parts, the next to claim
    long long gen;             // which job this is
} clayout_slot;
static atomic_llong clayout_gen;        // the slot's job, for the serving threads
static atomic_llong clayout_done;       // parts of it finished
atomic_llong clayout_serving;           // pool threads in clayout_serve now (Python reads it)

static int64_t clayout_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void clayout_relax(void)
{
#if defined(__SSE2__)
    _mm_pause();
#endif
}

// the next part of job ``gen`` (its index in *i, the job in the locals), or 0
static int clayout_claim(long long gen, int64_t *i, clayout_part_fn *fn, const char **src,
                         char **dst, const int64_t **part)
{
    pthread_mutex_lock(&clayout_lock);
    const int ok = clayout_slot.gen == gen && clayout_slot.next < clayout_slot.n;
    if (ok) {
        *i = clayout_slot.next++;
        *fn = clayout_slot.fn;
        *src = clayout_slot.src;
        *dst = clayout_slot.dst;
        *part = clayout_slot.parts + *i * clayout_slot.stride;
    }
    pthread_mutex_unlock(&clayout_lock);
    return ok;
}

static void clayout_take(long long gen)
{
    int64_t i;
    clayout_part_fn fn;
    const char *src;
    char *dst;
    const int64_t *part;
    while (clayout_claim(gen, &i, &fn, &src, &dst, &part)) {
        fn(src + part[0], dst + part[1], part + 2);
        atomic_fetch_add_explicit(&clayout_done, 1, memory_order_release);
    }
}

// A pool thread: serve the slot's jobs until none has come for ``spin_ns``, or the word at
// ``posted`` changes (a job of Python calls for the pool, which the thread returns to run).
void clayout_serve(const int64_t *posted, int64_t spin_ns)
{
    const int64_t python = atomic_load_explicit((const _Atomic int64_t *)posted,
                                                memory_order_acquire);
    long long seen = -1;
    int64_t until = clayout_now_ns() + spin_ns;
    atomic_fetch_add(&clayout_serving, 1);
    for (;;) {
        const long long gen = atomic_load_explicit(&clayout_gen, memory_order_acquire);
        if (gen != seen) {     // the job now in the slot (parts left to claim, or none)
            clayout_take(gen);
            seen = gen;
            until = clayout_now_ns() + spin_ns;
        }
        if (atomic_load_explicit((const _Atomic int64_t *)posted, memory_order_acquire) !=
                python || clayout_now_ns() >= until)
            break;
        for (int k = 0; k < 16; k++)
            clayout_relax();
    }
    atomic_fetch_sub(&clayout_serving, 1);
}

static void clayout_after_fork(void)   // a child has none of the parent's threads
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    clayout_busy = m;
    clayout_lock = m;
    clayout_slot.n = clayout_slot.next = 0;     // the parent's job, if any, is not the child's
    atomic_store(&clayout_serving, 0);
}

// Run the ``n`` parts of one job (``parts``: ``stride`` int64 words each: the source and the
// destination offset, then the part's own words for ``fn``) on the caller's thread and the
// pool threads serving the slot (or coming to it while parts are left); return when all are
// done. ``threads`` 1: the caller's alone.
void clayout_parallel(clayout_part_fn fn, const char *src, char *dst, const int64_t *parts,
                      int64_t stride, int64_t n, int64_t threads)
{
    static atomic_int forks_handled;
    if (!atomic_exchange(&forks_handled, 1))
        pthread_atfork(NULL, NULL, clayout_after_fork);
    if (threads <= 1 || n <= 1 || pthread_mutex_trylock(&clayout_busy) != 0) {
        for (int64_t i = 0; i < n; i++)
            fn(src + parts[i * stride], dst + parts[i * stride + 1], parts + i * stride + 2);
        return;
    }
    pthread_mutex_lock(&clayout_lock);
    clayout_slot.fn = fn;
    clayout_slot.src = src;
    clayout_slot.dst = dst;
    clayout_slot.parts = parts;
    clayout_slot.stride = stride;
    clayout_slot.n = n;
    clayout_slot.next = 0;
    const long long gen = ++clayout_slot.gen;
    atomic_store(&clayout_done, 0);
    atomic_store_explicit(&clayout_gen, gen, memory_order_release);
    pthread_mutex_unlock(&clayout_lock);
    clayout_take(gen);
    while (atomic_load_explicit(&clayout_done, memory_order_acquire) < n)
        clayout_relax();
    pthread_mutex_unlock(&clayout_busy);
}
