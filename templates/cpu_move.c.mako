// clayout: the cpu engine's compiled moves (runtime/cpu/native.py renders this file after
// templates/cpu_common.c, runtime/cpu/compiled.py calls it). One function per family: a pair
// of element types, and for a copy of unchanged bits the element's size alone.
//
// A call moves one box: axes 0..nd-3 walked in order, then the plane of the
// last two axes, P and Q, in tiles of TP x TQ; where the destination's rows
// end in a block tail, its zq zeros are written with the row. Q is the axis the destination
// runs along (its stride one element where that helps), P the one the source
// runs along: where both hold, a tile moves in square blocks transposed in
// registers (cpu_common.c). Strides are in bytes; every load and store is a memcpy of one
// element (no alignment assumed). Conversions are the expressions the OpenCL
// kernels use (the dtype rules), compiled as C below the OpenCL names they need
// (cpu_common.c). A copy's parts are separate calls, which the engine's worker pool
// (runtime/cpu/pool.py) runs on its threads.

// -- the box a move reads: its fields stated once, in runtime/cpu/native.py ---------------
${box}

${helpers}
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
                            int64_t zq, int nt)
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
    const int64_t line = 64, mis = (int64_t)((uintptr_t)d & (line - 1));
    const int64_t qa = dQ == ${f.item} && dP % line == 0 && nQ >= 2 * line / dQ && mis % dQ == 0
        ? ((line - mis) & (line - 1)) / dQ : 0;
  % if f.item == 4 and f.move:
#if defined(__AVX512F__)
    if (nQ % 16 == 0 && nQ <= 256 && sP == 4 && dQ == 4 && dP == 4 * nQ && zq == 0
            && mis % 4 == 0 && mis != 0 && nP >= 16) {
        clayout_lines_4(s, sQ, d, nP, (int)(nQ / 16), nt);
        return;
    }
#endif
  % endif
    for (int64_t p0 = 0; p0 < nP; p0 += TP) {
        const int64_t p1 = p0 + TP < nP ? p0 + TP : nP;
        for (int64_t q0 = 0, q1; q0 < nQ; q0 = q1) {
            // the first tile ends where the destination's rows reach a cache line, so that
            // the square blocks after it store whole lines (numpy's arrays start 16 bytes in)
            q1 = q0 + TQ < nQ ? q0 + TQ : nQ;
            if (q0 == 0 && qa > 0 && qa < q1)
                q1 = qa;
            const int64_t zt = q1 == nQ ? zq : 0;   // zeros after this tile's rows
            int64_t p = p0;
  % for b, guard in f.blocks:
#if ${guard}
            if (sP == ${f.item} && dQ == ${f.item} && q1 - q0 >= ${b}) {
                for (; p + ${b} <= p1; p += ${b}) {
                    int64_t q = q0;
                    for (; q + ${b} <= q1; q += ${b})
                        clayout_t${b}_${f.item}(s + p * sP + q * sQ, sQ, d + p * dP + q * dQ, dP, nt);
    % if f.item == 4 and b >= 4:
                    for (; q + 4 <= q1; q += 4)    // the columns left: blocks of 4 rows,
                        for (int64_t i = p; i < p + ${b}; i += 4)
                            clayout_t4_4(s + i * sP + q * sQ, sQ, d + i * dP + q * dQ, dP, nt);
                    if (q < q1)                    // then a partial one
                        for (int64_t i = p; i < p + ${b}; i += 4)
                            clayout_t4_4_part(s + i * sP + q * sQ, sQ, 4, q1 - q,
                                              d + i * dP + q * dQ, dP, q1 - q);
    % else:
                    for (; q < q1; q++)
                        for (int64_t i = p; i < p + ${b}; i++)
                            ${f.name}_one(s + i * sP + q * sQ, d + i * dP + q * dQ);
    % endif
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
                const char *sq = s + q0 * sQ;
                char *dq = d + q0 * dQ;
                if (w == 4)    // whole pixels: full loads along P, full stores
                    for (; p + 4 <= p1; p += 4) {
                        const __m128 z = _mm_setzero_ps();
                        __m128 r0 = _mm_loadu_ps((const float *)(sq + p * 4)),
                               r1 = nq > 1 ? _mm_loadu_ps((const float *)(sq + sQ + p * 4)) : z,
                               r2 = nq > 2 ? _mm_loadu_ps((const float *)(sq + 2 * sQ + p * 4)) : z,
                               r3 = z;
                        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                        _mm_storeu_ps((float *)(dq + p * dP), r0);
                        _mm_storeu_ps((float *)(dq + (p + 1) * dP), r1);
                        _mm_storeu_ps((float *)(dq + (p + 2) * dP), r2);
                        _mm_storeu_ps((float *)(dq + (p + 3) * dP), r3);
                    }
                for (; p < p1; p += 4) {
                    const int64_t np = p1 - p < 4 ? p1 - p : 4;
                    clayout_t4_4_part(sq + p * sP, sQ, np, nq, dq + p * dP, dP, w);
                    for (int64_t i = p; i < p + np; i++)
                        ${f.name}_zero(d + i * dP, q0 + w, q1 + zt, dQ);
                }
                p = p1;
            }
            if (dQ == 4 && q1 - q0 <= 3 && q1 - q0 + zt <= 4 && zt > 0) {   // a pixel gathered, tail and all
                const int64_t nq = q1 - q0;
                for (; p < p1; p++) {
                    const char *sp = s + p * sP + q0 * sQ;
                    float v[3] = {0.0f, 0.0f, 0.0f};
                    memcpy(&v[0], sp, 4);
                    if (nq > 1) memcpy(&v[1], sp + sQ, 4);
                    if (nq > 2) memcpy(&v[2], sp + 2 * sQ, 4);
                    clayout_store_part(d + p * dP + q0 * dQ, _mm_setr_ps(v[0], v[1], v[2], 0.0f),
                                       nq + zt);
                }
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

// the box (runtime/cpu/native.py BOX_FIELDS, declared above as clayout_box): nd, TP, TQ,
// zq, TW, NT, then shape, source and destination strides (bytes).
// NT: whole destination lines of square blocks are stored past the caches (a
// destination too big to stay in them: no line is read before it is written).
// TW > 0: rows of P in groups of TW, each group walked over every outer index
// before the next (the outer axes step inside P's destination rows there, as
// the input channels of a filter image's pixels: the group's lines stay in L1)
void ${f.name}(const char *src, char *dst, const int64_t *words)
{
    const clayout_box *box = (const clayout_box *)words;
    const int64_t nd = box->nd, TP = box->tp, TQ = box->tq, zq = box->zq, TW = box->tw;
    const int nt = (int)box->nt;
    const int64_t *n = box->shape, *ss = box->ss, *ds = box->ds;
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
                            ds[nd - 1], TP, TQ, zq, nt);
        }
    }
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
% endfor

// what this library was built from, for clayout devices
const char *clayout_cpu_built(void)
{
    return "${built}"
#if defined(__AVX512F__)
        "; 16x16 blocks of 4 bytes (AVX-512)"
#endif
#if defined(__AVX__)
        "; 8x8 blocks of 4 bytes (AVX)"
#endif
#if defined(__SSE2__)
        "; 4x4 blocks of 4 bytes, 8x8 of 2 and 1 (SSE2)"
#endif
        ;
}
