// read_output's rows on the cpu engine (runtime/cpu/outputs.py): a network output held
// channels last (row r: the C values of one (n, position)), each row's x computed as
// runtime/algebra/output.py states it (a stored value converted once, or
// float32(q - zero) * scale), then its argmax over the row, or its activated values.
// Rendered into the compiled moves' library after the frames: it uses cpu_common.c's worker
// pool side (clayout_parallel) and the shared dtype conversions.

typedef struct {
    const char *src;          // the rows, channels last, of ``dtype``
    int dtype;                // ${", ".join(f"{k} {v}" for k, v in dtypes.items())}
    int act;                  // 0 none, 1 sigmoid, 2 softmax
    int64_t C;
    const float *scale;       // per channel, or NULL: no dequantize
    const int32_t *zero;
    int32_t *arg;             // argmax per row, or NULL
    float *values;            // activated values per element (channels last), or NULL
    atomic_int failed;        // a band could not allocate its scratch row
} clayout_output_job;

// the row's C stored values as float32 x in ``x`` (dequantized where asked)
static inline void clayout_output_row(const clayout_output_job *j, int64_t r, float *x)
{
    const int64_t C = j->C;
    const char *p = j->src;
    switch (j->dtype) {
    case ${dtypes["f32"]}:
        memcpy(x, p + 4 * r * C, 4 * (size_t)C);
        return;
    case ${dtypes["f16"]}: {
        const ushort *h = (const ushort *)(p + 2 * r * C);
        int64_t c = 0;
#if defined(__F16C__)
        for (; c + 8 <= C; c += 8)
            _mm256_storeu_ps(x + c, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + c))));
        if (c < C) {   // the tail through a zeroed block of 8
            ushort tail[8] = {0};
            float wide[8];
            memcpy(tail, h + c, 2 * (size_t)(C - c));
            _mm256_storeu_ps(wide, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tail)));
            memcpy(x + c, wide, 4 * (size_t)(C - c));
            return;
        }
#endif
        for (; c < C; c++)
            x[c] = clayout_f16_to_f32(h[c]);
        return;
    }
    case ${dtypes["bf16"]}: {
        const ushort *h = (const ushort *)(p + 2 * r * C);
        for (int64_t c = 0; c < C; c++)
            x[c] = clayout_bf16_to_f32(h[c]);
        return;
    }
    default:
        break;
    }
    for (int64_t c = 0; c < C; c++) {
        int64_t q;
        if (j->dtype == ${dtypes["s32"]}) {
            int32_t v;
            memcpy(&v, p + 4 * (r * C + c), 4);
            q = v;
        } else if (j->dtype == ${dtypes["s8"]}) {
            q = (signed char)p[r * C + c];
        } else {
            q = (unsigned char)p[r * C + c];
        }
        x[c] = j->scale == NULL ? (float)q : (float)(q - (int64_t)j->zero[c]) * j->scale[c];
    }
}

static void clayout_output_part(const char *src, char *dst, const int64_t *part)
{
    (void)src;
    (void)dst;
    clayout_output_job *j = (clayout_output_job *)(intptr_t)part[0];
    const int64_t C = j->C;
    float *scratch = j->values == NULL ? malloc(sizeof(float) * (size_t)C) : NULL;
    if (j->values == NULL && scratch == NULL) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t r = part[1]; r < part[2]; r++) {
        float *v = j->values != NULL ? j->values + r * C : scratch;
        clayout_output_row(j, r, v);
        if (j->arg != NULL) {          // the first of the largest; the first NaN wins
            float best = v[0];
            int32_t at = 0, nan = 0;
            for (int64_t c = 1; c < C; c++)
                if (v[c] > best) {
                    best = v[c];
                    at = (int32_t)c;
                }
            for (int64_t c = 0; c < C; c++)
                nan |= v[c] != v[c];
            if (nan) {   // a NaN in the row: the first one
                for (int64_t c = 0; c < C; c++)
                    if (isnan(v[c])) {
                        at = (int32_t)c;
                        break;
                    }
            }
            j->arg[r] = at;
        } else if (j->act == 1) {
            for (int64_t c = 0; c < C; c++)
                v[c] = 1.0f / (1.0f + expf(-v[c]));
        } else if (j->act == 2) {
            float m = v[0];
            for (int64_t c = 1; c < C; c++)
                if (!isnan(m) && (isnan(v[c]) || v[c] > m))
                    m = v[c];
            float sum = 0.0f;
            for (int64_t c = 0; c < C; c++) {
                v[c] = expf(v[c] - m);
                sum += v[c];
            }
            for (int64_t c = 0; c < C; c++)
                v[c] = v[c] / sum;
        }
    }
    free(scratch);
}

// ``rows`` rows of ``C`` values at ``src`` into ``arg`` (argmax) or ``values``, in
// ``nparts`` bands on up to ``threads`` threads; 0, or -1 where memory could not be had.
int clayout_output(const char *src, int64_t dtype, int64_t act, int64_t rows, int64_t C,
                    const float *scale, const int32_t *zero, int32_t *arg, float *values,
                    int64_t nparts, int64_t threads)
{
    clayout_output_job j = {src, (int)dtype, (int)act, C, scale, zero, arg, values, 0};
    int64_t parts[5 * 64];   // per band: src and dst offsets (0: the part reads the job), job, rows
    nparts = nparts < 1 ? 1 : nparts > 64 ? 64 : nparts;
    for (int64_t k = 0; k < nparts; k++) {
        parts[5 * k] = parts[5 * k + 1] = 0;
        parts[5 * k + 2] = (int64_t)(intptr_t)&j;
        parts[5 * k + 3] = rows * k / nparts;
        parts[5 * k + 4] = rows * (k + 1) / nparts;
    }
    clayout_parallel(clayout_output_part, src, (char *)&j, parts, 5, nparts, threads);
    return atomic_load(&j.failed) ? -1 : 0;
}
