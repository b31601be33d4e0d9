"""The reference's own pixel formula of every named layout: pixel (x, y),
lane k -> logical index, and the image size, written out one by one from
the tables in docs/layouts.md and docs/storage.md (a 3-D storage's pixel is
(x, y, z), a buffer's one index x; ``VOLUME`` holds the 5-D forms, logical
index (n, c, d, h, w)). Nothing here is derived from a layout's tag:
the reference checks the tags (and the kernels made from them) against
these formulas. A new named layout adds its formula here.
"""
from __future__ import annotations


def _cdiv(a, b):
    return -(-a // b)


def _in_out_channel(x, y, k, d):
    N, C, H, W = d
    return y // H, 4 * (x // W) + k, y % H, x % W


def _in_out_height(x, y, k, d):
    N, C, H, W = d
    HB = _cdiv(H, 4)
    return y // HB, x // W, 4 * (y % HB) + k, x % W


def _in_out_width(x, y, k, d):
    N, C, H, W = d
    WB = _cdiv(W, 4)
    return y // H, x // WB, y % H, 4 * (x % WB) + k


def _conv2d_filter(x, y, k, d):
    O, I, H, W = d
    return 4 * (y // (H * W)) + k, x, (y % (H * W)) // W, y % W


def _dw_conv2d_filter(x, y, k, d):
    M, I, H, W = d
    return x // (H * W), 4 * y + k, (x % (H * W)) // W, x % W


def _argument(x, y, k, d):
    return (4 * x + k,)


def _weight_height(x, y, k, d):
    O, I, H, W = d
    return 4 * y + k, x % I, x // (W * I), (x // I) % W


def _weight_width(x, y, k, d):
    O, I, H, W = d
    IB = _cdiv(I, 4)
    return y, 4 * (x % IB) + k, x // (W * IB), (x // IB) % W


def _c4_fyx_b(x, y, k, d):
    O, I, H, W = d
    f = 4 * x + k
    return y, f // (H * W), (f // W) % H, f % W


def _c1_b_fyx(x, y, k, d):
    O, I, H, W = d
    return x, y // (H * W), (y // W) % H, y % W


def _texture_2d(x, y, k, d):
    N, C, H, W = d
    S = _cdiv(C, 4)
    return x % N, 4 * (y % S) + k, y // S, x // N


# Winograd filters: pixel -> the placed index of U (the transform's output dims d)
def _winograd_mace(x, y, k, d):
    O, I, T, _ = d
    return y % O, 4 * x + k, y // (T * O), (y // O) % T


def _winograd_mnn(x, y, k, d):
    O, I, T, _ = d
    OB = _cdiv(O, 4)
    return 4 * (y % OB) + k, x, y // (T * OB), (y // OB) % T


def _winograd_tflite(x, y, k, d):
    O, IB, J, T, _ = d            # (O, ceil(I/4), 4, 6, 6): image j holds input lane j
    per_image = T * T * IB
    return 4 * x + k, y % IB, y // per_image, (y % per_image) // (T * IB), (y // IB) % T


def _winograd_fbxyb(x, y, k, d):
    return 16 * (x // 384) + x % 16, y, (x // 48) % 8, (x // 16) % 3


def _winograd_xfbyb(x, y, k, d):
    O, I, T, R = d
    return 16 * (x // 48) + x % 16, y % I, y // I, (x // 16) % 3


FORMULAS = {  # name -> (pixel -> logical, dims -> (width, height))
    "in_out_channel": (_in_out_channel, lambda d: (_cdiv(d[1], 4) * d[3], d[0] * d[2])),
    "in_out_height": (_in_out_height, lambda d: (d[1] * d[3], d[0] * _cdiv(d[2], 4))),
    "in_out_width": (_in_out_width, lambda d: (d[1] * _cdiv(d[3], 4), d[0] * d[2])),
    "conv2d_filter": (_conv2d_filter, lambda d: (d[1], _cdiv(d[0], 4) * d[2] * d[3])),
    "dw_conv2d_filter": (_dw_conv2d_filter, lambda d: (d[0] * d[2] * d[3], _cdiv(d[1], 4))),
    "argument": (_argument, lambda d: (_cdiv(d[0], 4), 1)),
    "weight_height": (_weight_height, lambda d: (d[1] * d[2] * d[3], _cdiv(d[0], 4))),
    "weight_width": (_weight_width, lambda d: (_cdiv(d[1], 4) * d[2] * d[3], d[0])),
    "image_2d_weights_c4_fyx_b": (_c4_fyx_b, lambda d: (_cdiv(d[1] * d[2] * d[3], 4), d[0])),
    "image_2d_weights_c1_b_fyx": (_c1_b_fyx, lambda d: (d[0], d[1] * d[2] * d[3])),
    "texture_2d": (_texture_2d, lambda d: (d[3] * d[0], d[2] * _cdiv(d[1], 4))),
    "winograd_2x3_mace": (_winograd_mace, lambda d: (_cdiv(d[1], 4), 16 * d[0])),
    "winograd_4x3_mace": (_winograd_mace, lambda d: (_cdiv(d[1], 4), 36 * d[0])),
    "winograd_2x3_mnn": (_winograd_mnn, lambda d: (4 * _cdiv(d[1], 4), 16 * _cdiv(d[0], 4))),
    "winograd_2x5_mnn": (_winograd_mnn, lambda d: (4 * _cdiv(d[1], 4), 36 * _cdiv(d[0], 4))),
    "winograd_4x3_tflite": (_winograd_tflite, lambda d: (_cdiv(d[0], 4), 4 * 36 * d[1])),
    "image_2d_weights_winograd_6x3_s1_fbxyb": (_winograd_fbxyb,
                                               lambda d: (384 * _cdiv(d[0], 16), d[1])),
    "image_2d_weights_winograd_6x3_s1_xfbyb": (_winograd_xfbyb,
                                               lambda d: (48 * _cdiv(d[0], 16), 8 * d[1])),
}


# Other engines' layouts (Cb = ceil(C/4), Ib = ceil(I/4), Ob = ceil(O/4))
def _tvm_texture(x, y, k, d):
    N, C, H, W = d
    Cb = _cdiv(C, 4)
    return y // (Cb * H), 4 * ((y // H) % Cb) + k, y % H, x


def _tvm_texture_nhwc(x, y, k, d):
    N, C, H, W = d
    Cb = _cdiv(C, 4)
    return y // Cb, 4 * (y % Cb) + k, x // W, x % W


def _tvm_texture_weight(x, y, k, d):
    O, I, H, W = d
    return 4 * y + k, x // (H * W), (x // W) % H, x % W


def _tvm_texture_weight_activation(x, y, k, d):
    N, C, H, W = d
    return y, 4 * (x // (H * W)) + k, (x // W) % H, x % W


def _tvm_texture_array(x, y, z, k, d):
    N, C, H, W = d
    Cb = _cdiv(C, 4)
    return z // Cb, 4 * (z % Cb) + k, y, x


def _tvm_texture_nhwc_array(x, y, z, k, d):
    N, C, H, W = d
    return z, 4 * y + k, x // W, x % W


def _tinygrad_image(x, y, k, d):
    N, C, H, W = d
    Cb = _cdiv(C, 4)
    return y // H, 4 * (x % Cb) + k, y % H, x // Cb


def _tinygrad_conv_weight(x, y, k, d):
    O, I, H, W = d
    Ib = _cdiv(I, 4)
    column = x // 4               # (h*Ib + i/4)*W + w
    return 4 * y + k, 4 * ((column // W) % Ib) + x % 4, column // (W * Ib), column % W


def _acl_nhwc(x, y, k, d):
    N, C, H, W = d
    return y // (H * W), 4 * x + k, (y // W) % H, y % W


FORMULAS.update({
    "tvm_texture": (_tvm_texture, lambda d: (d[3], d[0] * _cdiv(d[1], 4) * d[2])),
    "tvm_texture_nhwc": (_tvm_texture_nhwc, lambda d: (d[2] * d[3], d[0] * _cdiv(d[1], 4))),
    "tvm_texture_weight": (_tvm_texture_weight, lambda d: (d[1] * d[2] * d[3], _cdiv(d[0], 4))),
    "tvm_texture_weight_activation": (_tvm_texture_weight_activation,
                                      lambda d: (_cdiv(d[1], 4) * d[2] * d[3], d[0])),
    "tvm_texture_array": (_tvm_texture_array, lambda d: (d[3], d[2], d[0] * _cdiv(d[1], 4))),
    "tvm_texture_nhwc_array": (_tvm_texture_nhwc_array,
                               lambda d: (d[2] * d[3], _cdiv(d[1], 4), d[0])),
    "tinygrad_image": (_tinygrad_image, lambda d: (_cdiv(d[1], 4) * d[3], d[0] * d[2])),
    "tinygrad_conv_weight": (_tinygrad_conv_weight,
                             lambda d: (4 * _cdiv(d[1], 4) * d[2] * d[3], _cdiv(d[0], 4))),
    "acl_nhwc_image": (_acl_nhwc, lambda d: (_cdiv(d[1], 4), d[0] * d[2] * d[3])),
    "acl_ohwi_image": (_acl_nhwc, lambda d: (_cdiv(d[1], 4), d[0] * d[2] * d[3])),
})


# TFLite's storages (S = ceil(C/4) slices; c = 4s + k)
def _tflite_buffer(x, k, d):
    N, C, H, W = d
    return x % N, 4 * (x // (N * W * H)) + k, (x // (N * W)) % H, (x // N) % W


def _tflite_single(x, y, k, d):
    N, C, H, W = d
    return x % N, k, y, x // N


def _tflite_layers(x, y, z, k, d):
    N, C, H, W = d
    return x % N, 4 * z + k, y, x // N


FORMULAS.update({
    "tflite_buffer": (_tflite_buffer, lambda d: (d[0] * d[3] * d[2] * _cdiv(d[1], 4),)),
    "tflite_image_buffer": (_tflite_buffer, lambda d: (d[0] * d[3] * d[2] * _cdiv(d[1], 4),)),
    "tflite_texture_2d": (_texture_2d, lambda d: (d[3] * d[0], d[2] * _cdiv(d[1], 4))),
    "tflite_single_texture_2d": (_tflite_single, lambda d: (d[3] * d[0], d[2])),
    "tflite_texture_array": (_tflite_layers, lambda d: (d[3] * d[0], d[2], _cdiv(d[1], 4))),
    "tflite_texture_3d": (_tflite_layers, lambda d: (d[3] * d[0], d[2], _cdiv(d[1], 4))),
})


# 5-D forms: dims (N, C, D, H, W), index (n, c, d, h, w)
def _in_out_channel_5d(x, y, k, d):
    N, C, D, H, W = d
    return y // (H * D), 4 * (x // W) + k, (y // H) % D, y % H, x % W


def _texture_2d_5d(x, y, k, d):
    N, C, D, H, W = d
    S = _cdiv(C, 4)
    return (x // D) % N, 4 * (y % S) + k, x % D, y // S, x // (D * N)


def _tflite_buffer_5d(x, k, d):
    N, C, D, H, W = d
    S = _cdiv(C, 4)
    return (x % N, 4 * ((x // (N * W * H)) % S) + k, x // (N * W * H * S), (x // (N * W)) % H,
            (x // N) % W)


def _tflite_single_5d(x, y, k, d):
    N, C, D, H, W = d
    return (x // D) % N, k, x % D, y, x // (D * N)


def _tflite_layers_5d(x, y, z, k, d):
    N, C, D, H, W = d
    S = _cdiv(C, 4)
    return x % N, 4 * (z % S) + k, z // S, y, x // N


def _slices(d):
    return _cdiv(d[1], 4)


VOLUME = {  # name -> (pixel -> logical, dims -> size) for dims N,C,D,H,W
    "in_out_channel": (_in_out_channel_5d, lambda d: (_slices(d) * d[4], d[0] * d[2] * d[3])),
    "texture_2d": (_texture_2d_5d, lambda d: (d[4] * d[0] * d[2], d[3] * _slices(d))),
    "tflite_texture_2d": (_texture_2d_5d, lambda d: (d[4] * d[0] * d[2], d[3] * _slices(d))),
    "tflite_buffer": (_tflite_buffer_5d, lambda d: (d[0] * d[4] * d[3] * _slices(d) * d[2],)),
    "tflite_image_buffer": (_tflite_buffer_5d,
                            lambda d: (d[0] * d[4] * d[3] * _slices(d) * d[2],)),
    "tflite_single_texture_2d": (_tflite_single_5d, lambda d: (d[4] * d[0] * d[2], d[3])),
    "tflite_texture_array": (_tflite_layers_5d,
                             lambda d: (d[4] * d[0], d[3], _slices(d) * d[2])),
    "tflite_texture_3d": (_tflite_layers_5d, lambda d: (d[4] * d[0], d[3], _slices(d) * d[2])),
}
