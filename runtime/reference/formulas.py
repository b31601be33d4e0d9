"""The reference's own pixel formula of every named layout: pixel (x, y),
lane k -> logical index, and the image size, written out one by one from
the table in docs/layouts.md. Nothing here is derived from a layout's tag:
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
}
