// clayout: reference compute kernels, written once against accessors.
//
// No line here knows a layout. Each kernel reads its inputs with
// NAME_load / NAME_load4 and writes its output with y_store4 (or y_store
// where the output has no lane axis), from the accessors compiled in front
// of this text (runtime/opencl/accessor.py): the same text runs on any
// input, filter and output layouts. One section is compiled per program,
// chosen by a define (CLAYOUT_CONV, CLAYOUT_GEMM, CLAYOUT_POOL,
// CLAYOUT_BATCHNORM, CLAYOUT_ADD, CLAYOUT_RELU).
//
// A work item computes the outputs that share one store: four consecutive
// along y's lane axis (y_LANE_AXIS), or one. Sums are plain float
// accumulations in a fixed order (bias, then input channel, kernel row,
// kernel column): the reference of an engine's own kernels, not a fast one.
// Locals avoid one-letter names: accessors are named x, w, b, s, m, v, y.

#ifdef y_LANE_AXIS
#define CLAYOUT_VEC 4
#else
#define CLAYOUT_VEC 1
#endif

// The output index of this work item: y's dims in row-major order, the lane
// axis counted in groups of CLAYOUT_VEC. Returns 0 past the last one.
static inline int clayout_out_index(y_PARAMS, int o[4])
{
    int d[4] = {y_dim(y_ARGS, 0), y_dim(y_ARGS, 1), y_dim(y_ARGS, 2), y_dim(y_ARGS, 3)};
#ifdef y_LANE_AXIS
    d[y_LANE_AXIS] = (d[y_LANE_AXIS] + 3) / 4;
#endif
    int rest = get_global_id(0);
    for (int k = 3; k >= 0; --k) {
        o[k] = rest % d[k];
        rest /= d[k];
    }
#ifdef y_LANE_AXIS
    o[y_LANE_AXIS] *= 4;
#endif
    return rest == 0;
}

// Store v[0..CLAYOUT_VEC) at o and its next indices along the lane axis.
static inline void clayout_out_store(y_PARAMS, const int o[4], const float res[CLAYOUT_VEC])
{
#ifdef y_LANE_AXIS
    y_store4(y_ARGS, o[0], o[1], o[2], o[3], (float4)(res[0], res[1], res[2], res[3]));
#else
    y_store(y_ARGS, o[0], o[1], o[2], o[3], res[0]);
#endif
}

// The index of output j of this work item (j along the lane axis).
static inline void clayout_lane_index(const int o[4], int j, int out[4])
{
    for (int k = 0; k < 4; ++k)
        out[k] = o[k];
#ifdef y_LANE_AXIS
    out[y_LANE_AXIS] += j;
#endif
}

#ifdef CLAYOUT_CONV
// ONNX Conv: x (N, C, H, W), w (O, C/groups, kH, kW) or, with
// CLAYOUT_DEPTHWISE_FILTER, (M, C, kH, kW) for O = C * M and groups = C,
// b (O), y (N, O, OH, OW). Padding reads 0: the accessors' border.
__kernel void clayout_conv(x_PARAMS, w_PARAMS, b_PARAMS, y_PARAMS,
                           const int stride_h, const int stride_w, const int pad_h,
                           const int pad_w, const int dil_h, const int dil_w, const int groups)
{
    int o[4];
    if (!clayout_out_index(y_ARGS, o))
        return;
    const int out_ch = y_dim(y_ARGS, 1), in_ch = x_dim(x_ARGS, 1);
    const int kh_n = w_dim(w_ARGS, 2), kw_n = w_dim(w_ARGS, 3);
    const int per_in = in_ch / groups, per_out = out_ch / groups;
    float res[CLAYOUT_VEC];
    for (int j = 0; j < CLAYOUT_VEC; ++j) {
        int i[4];
        clayout_lane_index(o, j, i);
        const int n = i[0], oc = i[1], oh = i[2], ow = i[3];
        float sum = b_load(b_ARGS, oc);
        const int g = oc / per_out;
        for (int ic = 0; ic < per_in; ++ic)
            for (int kh = 0; kh < kh_n; ++kh)
                for (int kw = 0; kw < kw_n; ++kw) {
                    const int ih = oh * stride_h - pad_h + kh * dil_h;
                    const int iw = ow * stride_w - pad_w + kw * dil_w;
#ifdef CLAYOUT_DEPTHWISE_FILTER
                    const float wv = w_load(w_ARGS, oc % per_out, g, kh, kw);
#else
                    const float wv = w_load(w_ARGS, oc, ic, kh, kw);
#endif
                    sum += x_load(x_ARGS, n, g * per_in + ic, ih, iw) * wv;
                }
        res[j] = sum;
    }
    clayout_out_store(y_ARGS, o, res);
}
#endif

#ifdef CLAYOUT_GEMM
// A fully connected layer (ONNX Gemm with transB = 1): x (N, I, 1, 1),
// w (O, I, 1, 1), b (O), y (N, O, 1, 1): y = x w^T + b.
__kernel void clayout_gemm(x_PARAMS, w_PARAMS, b_PARAMS, y_PARAMS)
{
    int o[4];
    if (!clayout_out_index(y_ARGS, o))
        return;
    const int in_ch = x_dim(x_ARGS, 1);
    float res[CLAYOUT_VEC];
    for (int j = 0; j < CLAYOUT_VEC; ++j) {
        int i[4];
        clayout_lane_index(o, j, i);
        float sum = b_load(b_ARGS, i[1]);
        for (int k = 0; k < in_ch; ++k)
            sum += x_load(x_ARGS, i[0], k, 0, 0) * w_load(w_ARGS, i[1], k, 0, 0);
        res[j] = sum;
    }
    clayout_out_store(y_ARGS, o, res);
}
#endif

#ifdef CLAYOUT_POOL
// MaxPool (is_max) or AveragePool over kH x kW windows; an average counts
// the padding or not (count_pad), a max never sees it.
__kernel void clayout_pool(x_PARAMS, y_PARAMS, const int k_h, const int k_w,
                           const int stride_h, const int stride_w, const int pad_h,
                           const int pad_w, const int is_max, const int count_pad)
{
    int o[4];
    if (!clayout_out_index(y_ARGS, o))
        return;
    const int in_h = x_dim(x_ARGS, 2), in_w = x_dim(x_ARGS, 3);
    float res[CLAYOUT_VEC];
    for (int j = 0; j < CLAYOUT_VEC; ++j) {
        int i[4];
        clayout_lane_index(o, j, i);
        float acc = is_max ? -INFINITY : 0.0f;
        int count = 0;
        for (int kh = 0; kh < k_h; ++kh)
            for (int kw = 0; kw < k_w; ++kw) {
                const int ih = i[2] * stride_h - pad_h + kh, iw = i[3] * stride_w - pad_w + kw;
                const int inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
                if (!inside && !(count_pad && !is_max))
                    continue;
                const float xv = x_load(x_ARGS, i[0], i[1], ih, iw);
                acc = is_max ? fmax(acc, xv) : acc + xv;
                ++count;
            }
        res[j] = is_max ? acc : acc / (float)count;
    }
    clayout_out_store(y_ARGS, o, res);
}
#endif

#ifdef CLAYOUT_BATCHNORM
// ONNX BatchNormalization (inference): y = (x - mean) / sqrt(var + eps) * scale + bias,
// the four per-channel vectors read through their own accessors.
__kernel void clayout_batchnorm(x_PARAMS, s_PARAMS, b_PARAMS, m_PARAMS, v_PARAMS, y_PARAMS,
                                const float eps)
{
    int o[4];
    if (!clayout_out_index(y_ARGS, o))
        return;
    float res[CLAYOUT_VEC];
    for (int j = 0; j < CLAYOUT_VEC; ++j) {
        int i[4];
        clayout_lane_index(o, j, i);
        const int c = i[1];
        const float xv = x_load(x_ARGS, i[0], c, i[2], i[3]);
        res[j] = (xv - m_load(m_ARGS, c)) / sqrt(v_load(v_ARGS, c) + eps) * s_load(s_ARGS, c)
               + b_load(b_ARGS, c);
    }
    clayout_out_store(y_ARGS, o, res);
}
#endif

#ifdef CLAYOUT_ADD
// y = x + b, b either of x's dims or a per-channel argument (per_channel).
__kernel void clayout_add(x_PARAMS, b_PARAMS, y_PARAMS)
{
    int o[4];
    if (!clayout_out_index(y_ARGS, o))
        return;
    float res[CLAYOUT_VEC];
    for (int j = 0; j < CLAYOUT_VEC; ++j) {
        int i[4];
        clayout_lane_index(o, j, i);
#if b_RANK == 1
        const float bv = b_load(b_ARGS, i[1]);
#else
        const float bv = b_load(b_ARGS, i[0], i[1], i[2], i[3]);
#endif
        res[j] = x_load(x_ARGS, i[0], i[1], i[2], i[3]) + bv;
    }
    clayout_out_store(y_ARGS, o, res);
}
#endif

#ifdef CLAYOUT_RELU
__kernel void clayout_relu(x_PARAMS, y_PARAMS)
{
    int o[4];
    if (!clayout_out_index(y_ARGS, o))
        return;
    float res[CLAYOUT_VEC];
    for (int j = 0; j < CLAYOUT_VEC; ++j) {
        int i[4];
        clayout_lane_index(o, j, i);
        res[j] = fmax(x_load(x_ARGS, i[0], i[1], i[2], i[3]), 0.0f);
    }
    clayout_out_store(y_ARGS, o, res);
}
#endif
