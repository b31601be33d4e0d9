"""Image layouts (docs/layouts.md): shapes and pixels against the table, written out
here a second time (logical index -> pixel, the direction the table reads),
values placed where the table says, custom 'TAG:ROWS[:LANES]' layouts equal to
the named ones they mirror, and device limits."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from runtime import ClayoutError, ImageLayout, engine, image_layout
from runtime import ImageDesc
from runtime.algebra.catalog import NAMED as ALL_NAMED, check_fits
from runtime.reference.formulas import FORMULAS
from conftest import to_img, from_img

from strategies import FEW, SETTINGS, assert_same_bits, fill, small_dims

CPU, REF = engine.get("cpu"), engine.get("reference")
# the layouts that place the tensor itself; the Winograd ones (a transform
# stage before the placement) have their own table in test_winograd.py
NAMED = {n: layout for n, layout in ALL_NAMED.items() if layout.transform is None}


def cdiv(a, b):
    return -(-a // b)


# name -> (dims -> (width, height), (idx, dims) -> (x, y, k)); the table of docs/layouts.md
TABLE = {
    "in_out_channel": (
        lambda N, C, H, W: (cdiv(C, 4) * W, N * H),
        lambda n, c, h, w, N, C, H, W: ((c // 4) * W + w, n * H + h, c % 4)),
    "in_out_height": (
        lambda N, C, H, W: (C * W, N * cdiv(H, 4)),
        lambda n, c, h, w, N, C, H, W: (c * W + w, n * cdiv(H, 4) + h // 4, h % 4)),
    "in_out_width": (
        lambda N, C, H, W: (C * cdiv(W, 4), N * H),
        lambda n, c, h, w, N, C, H, W: (c * cdiv(W, 4) + w // 4, n * H + h, w % 4)),
    "conv2d_filter": (
        lambda O, I, H, W: (I, cdiv(O, 4) * H * W),
        lambda o, i, h, w, O, I, H, W: (i, (o // 4) * H * W + h * W + w, o % 4)),
    "dw_conv2d_filter": (
        lambda M, I, H, W: (M * H * W, cdiv(I, 4)),
        lambda m, i, h, w, M, I, H, W: (m * H * W + h * W + w, i // 4, i % 4)),
    "argument": (
        lambda W: (cdiv(W, 4), 1),
        lambda w, W: (w // 4, 0, w % 4)),
    "weight_height": (
        lambda O, I, H, W: (I * H * W, cdiv(O, 4)),
        lambda o, i, h, w, O, I, H, W: (h * W * I + w * I + i, o // 4, o % 4)),
    "weight_width": (
        lambda O, I, H, W: (cdiv(I, 4) * H * W, O),
        lambda o, i, h, w, O, I, H, W: (h * W * cdiv(I, 4) + w * cdiv(I, 4) + i // 4, o, i % 4)),
    "image_2d_weights_c4_fyx_b": (
        lambda O, I, H, W: (cdiv(I * H * W, 4), O),
        lambda o, i, h, w, O, I, H, W: (((i * H + h) * W + w) // 4, o, ((i * H + h) * W + w) % 4)),
    "image_2d_weights_c1_b_fyx": (
        lambda O, I, H, W: (O, I * H * W),
        lambda o, i, h, w, O, I, H, W: (o, (i * H + h) * W + w, 0)),
    "texture_2d": (
        lambda N, C, H, W: (W * N, H * cdiv(C, 4)),
        lambda n, c, h, w, N, C, H, W: (w * N + n, h * cdiv(C, 4) + c // 4, c % 4)),
}


def test_table_covers_every_named_layout():
    assert set(TABLE) == set(NAMED) and set(ALL_NAMED) == set(FORMULAS)
    assert len(NAMED) == 11 and len(ALL_NAMED) == 18


def layout_dims(name):
    if NAMED[name].ndims == 1:
        return st.sampled_from((0, 1, 2, 3, 4, 5, 17, 33)).map(lambda w: (w,))
    return small_dims(4, sizes=(0, 1, 2, 3, 4, 5, 7, 17), max_volume=500)


@st.composite
def named_cases(draw):
    name = draw(st.sampled_from(sorted(NAMED)))
    return name, draw(layout_dims(name))


@SETTINGS
@given(case=named_cases())
def test_image_shape_matches_table(case):
    name, dims = case
    layout = NAMED[name]
    want = TABLE[name][0](*dims)
    assert layout.image_shape(dims) == want
    assert FORMULAS[name][1](dims) == want
    w, h = want
    assert layout.array_shape(dims) == ((h, w, 4) if layout.lanes == 4 else (h, w))


@FEW
@given(case=named_cases())
def test_pixel_of_every_element(case):
    """layout.pixel and both engines' images put each element where the table
    says; every other lane is zero."""
    name, dims = case
    layout = NAMED[name]
    to_pixel = TABLE[name][1]
    n = int(np.prod(dims))
    values = np.arange(1, n + 1, dtype=np.int32).reshape(dims)
    src = runtime.MemoryDesc(dims, "s32")
    images = [to_img(eng, values.ravel(), layout, src, "s32") for eng in (REF, CPU)]
    assert_same_bits(images[1], images[0], name)
    image = images[0]
    expect = np.zeros_like(image)
    for idx in np.ndindex(*dims):
        x, y, k = to_pixel(*idx, *dims)
        assert layout.pixel(dims, idx) == (x, y, k), (name, dims, idx)
        if layout.lanes == 4:
            expect[y, x, k] = values[idx]
        else:
            expect[y, x] = values[idx]
    assert_same_bits(image, expect, f"{name} {dims}")


@pytest.mark.parametrize("name, dims", [
    ("in_out_channel", (2, 5, 3, 3)), ("texture_2d", (2, 5, 3, 3)),
    ("in_out_height", (1, 3, 5, 2)), ("in_out_width", (1, 3, 2, 5)),
])
def test_two_d_activations_are_nc11(name, dims):
    n, c = dims[:2]
    layout = NAMED[name]
    assert layout.image_shape((n, c)) == layout.image_shape((n, c, 1, 1))
    x = np.arange(n * c, dtype=np.float32).reshape(n, c)
    for eng in ("cpu", "reference"):
        img = runtime.to_image(x, name, engine=eng)
        assert_same_bits(img, runtime.to_image(x.reshape(n, c, 1, 1), name, engine=eng))
        back = runtime.from_image(img, name, (n, c), engine=eng)
        assert back.shape == (n, c)
        assert_same_bits(back, x)


# -- custom layouts ---------------------------------------------------------------------
MIRRORS = {
    "in_out_channel": "acBd4b:2", "in_out_height": "aCbd4c:2", "in_out_width": "acbD4d:2",
    "conv2d_filter": "Acdb4a:3", "dw_conv2d_filter": "Bacd4b:1", "argument": "A4a:0",
    "weight_height": "Acdb4a:1", "weight_width": "acdB4b:1:4",
    "image_2d_weights_c1_b_fyx": "bcda:3:1", "texture_2d": "cBda4b:2",
}


@st.composite
def mirror_cases(draw):
    name = draw(st.sampled_from(sorted(MIRRORS)))
    return name, draw(layout_dims(name))


@SETTINGS
@given(case=mirror_cases(), dt=st.sampled_from(("f32", "f16", "s8", "u8", "s32")),
       seed=st.integers(0, 2 ** 32 - 1))
def test_custom_layout_equals_named(case, dt, seed):
    """The reference evaluates named layouts with the §2 formulas and custom ones
    with the buffer walk: the two must give the same image."""
    name, dims = case
    named, custom = NAMED[name], image_layout(MIRRORS[name])
    assert custom.image_shape(dims) == named.image_shape(dims)
    src = runtime.MemoryDesc(dims, dt)
    x = fill(dt, src.span, seed)
    want = to_img(REF, x, named, src, dt)
    for eng in (REF, CPU):
        assert_same_bits(to_img(eng, x, custom, src, dt), want, f"{eng.name} {MIRRORS[name]}")
    image = fill(dt, want.size, seed + 1).reshape(want.shape)
    back = from_img(REF, image, named, src)
    for eng in (REF, CPU):
        assert_same_bits(from_img(eng, image, custom, src), back, f"{eng.name} from")


def test_c4_fyx_b_is_custom_over_o_by_ihw():
    dims = (5, 3, 2, 3)
    x = fill("f32", int(np.prod(dims)), 3)
    named = runtime.to_image(x.reshape(dims), "image_2d_weights_c4_fyx_b", engine="reference")
    custom = runtime.to_image(x.reshape(5, 18), "aB4b:1", src="ab", engine="reference")
    assert_same_bits(named, custom)
    assert_same_bits(runtime.to_image(x.reshape(dims), "image_2d_weights_c4_fyx_b"), named)


@pytest.mark.parametrize("spec, words", [
    ("nope", "unknown image layout 'nope'"),
    ("acBd4b", "unknown image layout"),
    ("acBd4b:x", "unknown image layout"),
    ("acBd8b:2", "block of 4"),
    ("abcd:2", "block of 4"),
    ("acBd4b:5", "rows must be 0..4"),
    ("acBd4b:2:3", "lanes must be 4"),
    ("aBcd:2", "no inner block"),
])
def test_bad_layout_specs(spec, words):
    with pytest.raises(ClayoutError, match=words) as info:
        image_layout(spec)
    if "unknown" in words:
        assert "in_out_channel" in str(info.value) and "TAG:ROWS" in str(info.value)


def test_layout_rank_checked():
    with pytest.raises(ClayoutError, match="N,C,H,W"):
        NAMED["in_out_channel"].image_shape((1, 2, 3))
    with pytest.raises(ClayoutError, match="takes dims W"):
        NAMED["argument"].image_shape((1, 2))
    with pytest.raises(ClayoutError, match="has 3 dims but the layout places 4"):
        ImageLayout("x", "aBc4b", 1)


# -- device limits ------------------------------------------------------------------------
def test_8192_edge():
    layout = NAMED["in_out_channel"]
    assert layout.image_shape((1, 64, 512, 512)) == (8192, 512)
    check_fits(ImageDesc(layout, (1, 64, 512, 512)), (8192, 8192))
    with pytest.raises(ClayoutError) as info:
        check_fits(ImageDesc(layout, (1, 64, 512, 512)), (8191, 8192))
    with pytest.raises(ClayoutError) as info:
        check_fits(ImageDesc(layout, (1, 64, 512, 1024)), (8192, 8192))
    msg = str(info.value)
    assert "\n" not in msg
    for word in ("'in_out_channel'", "16384x512", "8192x8192", "(1, 64, 512, 1024)",
                 "texture_2d (1024x8192)"):
        assert word in msg, (word, msg)
    assert "in_out_height" not in msg and "in_out_width" not in msg   # they do not fit
    assert "conv2d_filter" not in msg                                 # another kind


def test_nothing_fits():
    with pytest.raises(ClayoutError, match="no named image layout fits; keep this tensor in"):
        check_fits(ImageDesc(NAMED["in_out_channel"], (1, 4096, 64, 64)), (256, 256))
    with pytest.raises(ClayoutError, match=r"layouts that fit: weight_height \(27x16\)$"):
        check_fits(ImageDesc(NAMED["conv2d_filter"], (64, 3, 3, 3)), (4096, 16))


@SETTINGS
@given(case=named_cases(), mw=st.integers(1, 40), mh=st.integers(1, 40))
def test_check_fits_property(case, mw, mh):
    name, dims = case
    layout = NAMED[name]
    w, h = TABLE[name][0](*dims)
    if w <= mw and h <= mh:
        check_fits(ImageDesc(layout, dims), (mw, mh))
        return
    with pytest.raises(ClayoutError) as info:
        check_fits(ImageDesc(layout, dims), (mw, mh))
    msg = str(info.value)
    assert f"{w}x{h}" in msg and f"{mw}x{mh}" in msg and repr(name) in msg
    for other in NAMED.values():
        if other.kind == layout.kind and other.name != name:
            ow, oh = TABLE[other.name][0](*dims)
            assert (f"{other.name} ({ow}x{oh})" in msg) == (ow <= mw and oh <= mh), other.name


@FEW
@given(case=st.one_of(named_cases(), mirror_cases()), custom=st.booleans())
def test_c_pixel_mirrors_pixel(case, custom):
    """The C pixel expressions the kernels inline give the table's pixel."""
    name, dims = case
    layout = image_layout(MIRRORS[name]) if custom and name in MIRRORS else NAMED[name]
    names = [f"i{d}" for d in range(len(dims))]
    x, y, k = layout.c_pixel(dims, names)
    to_pixel = TABLE[name][1]
    for idx in np.ndindex(*dims):
        env = dict(zip(names, idx))
        got = tuple(int(eval(e.replace("/", "//"), {"__builtins__": {}}, env)) for e in (x, y, k))
        assert got == to_pixel(*idx, *dims), (layout.name, dims, idx, (x, y, k))
