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
from runtime.algebra.storage import Limits
from runtime.reference.formulas import FORMULAS
from conftest import to_img, from_img

from strategies import FEW, SETTINGS, assert_same_bits, fill, small_dims

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/catalog.py", "runtime/algebra/kinds.py", "runtime/algebra/pixels.py",
           "runtime/algebra/storage.py", "runtime/engine.py", "runtime/reference/formulas.py")

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
    # TFLite GPU's storages (docs/storage.md): a buffer's pixel is one index x,
    # an array's or 3-D image's (x, y, z); S = ceil(C/4) slices
    "tflite_buffer": (
        lambda N, C, H, W: (N * W * H * cdiv(C, 4),),
        lambda n, c, h, w, N, C, H, W: ((((c // 4) * H + h) * W + w) * N + n, c % 4)),
    "tflite_image_buffer": (
        lambda N, C, H, W: (N * W * H * cdiv(C, 4),),
        lambda n, c, h, w, N, C, H, W: ((((c // 4) * H + h) * W + w) * N + n, c % 4)),
    "tflite_texture_2d": (
        lambda N, C, H, W: (W * N, H * cdiv(C, 4)),
        lambda n, c, h, w, N, C, H, W: (w * N + n, h * cdiv(C, 4) + c // 4, c % 4)),
    "tflite_single_texture_2d": (
        lambda N, C, H, W: (W * N, H),
        lambda n, c, h, w, N, C, H, W: (w * N + n, h, c)),
    "tflite_texture_array": (
        lambda N, C, H, W: (W * N, H, cdiv(C, 4)),
        lambda n, c, h, w, N, C, H, W: (w * N + n, h, c // 4, c % 4)),
    "tflite_texture_3d": (
        lambda N, C, H, W: (W * N, H, cdiv(C, 4)),
        lambda n, c, h, w, N, C, H, W: (w * N + n, h, c // 4, c % 4)),
    # other engines' layouts (docs/engine-layouts.md); filters read (o, i, kh, kw) as (n, c, h, w)
    "tvm_texture": (
        lambda N, C, H, W: (W, N * cdiv(C, 4) * H),
        lambda n, c, h, w, N, C, H, W: (w, (n * cdiv(C, 4) + c // 4) * H + h, c % 4)),
    "tvm_texture_nhwc": (
        lambda N, C, H, W: (H * W, N * cdiv(C, 4)),
        lambda n, c, h, w, N, C, H, W: (h * W + w, n * cdiv(C, 4) + c // 4, c % 4)),
    "tvm_texture_weight": (
        lambda O, I, H, W: (I * H * W, cdiv(O, 4)),
        lambda o, i, h, w, O, I, H, W: ((i * H + h) * W + w, o // 4, o % 4)),
    "tvm_texture_weight_activation": (
        lambda N, C, H, W: (cdiv(C, 4) * H * W, N),
        lambda n, c, h, w, N, C, H, W: (((c // 4) * H + h) * W + w, n, c % 4)),
    "tvm_texture_array": (
        lambda N, C, H, W: (W, H, N * cdiv(C, 4)),
        lambda n, c, h, w, N, C, H, W: (w, h, n * cdiv(C, 4) + c // 4, c % 4)),
    "tvm_texture_nhwc_array": (
        lambda N, C, H, W: (H * W, cdiv(C, 4), N),
        lambda n, c, h, w, N, C, H, W: (h * W + w, c // 4, n, c % 4)),
    "tinygrad_image": (
        lambda N, C, H, W: (cdiv(C, 4) * W, N * H),
        lambda n, c, h, w, N, C, H, W: (w * cdiv(C, 4) + c // 4, n * H + h, c % 4)),
    "tinygrad_conv_weight": (
        lambda O, I, H, W: (H * cdiv(I, 4) * W * 4, cdiv(O, 4)),
        lambda o, i, h, w, O, I, H, W: (((h * cdiv(I, 4) + i // 4) * W + w) * 4 + i % 4, o // 4,
                                        o % 4)),
    "acl_nhwc_image": (
        lambda N, C, H, W: (cdiv(C, 4), N * H * W),
        lambda n, c, h, w, N, C, H, W: (c // 4, (n * H + h) * W + w, c % 4)),
    "acl_ohwi_image": (
        lambda O, I, H, W: (cdiv(I, 4), O * H * W),
        lambda o, i, h, w, O, I, H, W: (i // 4, (o * H + h) * W + w, i % 4)),
}

# the 5-D forms (dims N,C,D,H,W; index n,c,d,h,w), as docs/storage.md writes them
TABLE5 = {
    "in_out_channel": (
        lambda N, C, D, H, W: (cdiv(C, 4) * W, N * D * H),
        lambda n, c, d, h, w, N, C, D, H, W: ((c // 4) * W + w, (n * D + d) * H + h, c % 4)),
    "texture_2d": (
        lambda N, C, D, H, W: (W * N * D, H * cdiv(C, 4)),
        lambda n, c, d, h, w, N, C, D, H, W: ((w * N + n) * D + d, h * cdiv(C, 4) + c // 4,
                                              c % 4)),
    "tflite_buffer": (
        lambda N, C, D, H, W: (N * W * H * cdiv(C, 4) * D,),
        lambda n, c, d, h, w, N, C, D, H, W: (
            (((d * cdiv(C, 4) + c // 4) * H + h) * W + w) * N + n, c % 4)),
    "tflite_single_texture_2d": (
        lambda N, C, D, H, W: (W * N * D, H),
        lambda n, c, d, h, w, N, C, D, H, W: ((w * N + n) * D + d, h, c)),
    "tflite_texture_array": (
        lambda N, C, D, H, W: (W * N, H, cdiv(C, 4) * D),
        lambda n, c, d, h, w, N, C, D, H, W: (w * N + n, h, d * cdiv(C, 4) + c // 4, c % 4)),
}
TABLE5["tflite_texture_2d"] = TABLE5["texture_2d"]
TABLE5["tflite_image_buffer"] = TABLE5["tflite_buffer"]
TABLE5["tflite_texture_3d"] = TABLE5["tflite_texture_array"]


def test_table_covers_every_named_layout():
    assert set(TABLE) == set(NAMED) and set(ALL_NAMED) == set(FORMULAS)
    assert len(NAMED) == 27 and len(ALL_NAMED) == 34
    assert set(TABLE5) == {n for n, layout in NAMED.items() if layout.volume is not None}


def host_form(layout, shape, lanes):
    """The host array of an image of ``shape`` (x first): coordinates outer
    first, then the lanes (none for one channel)."""
    return tuple(reversed(shape)) + ((lanes,) if layout.lanes != 1 else ())


def layout_dims(name, ndims=4):
    if NAMED[name].ndims == 1:
        return st.sampled_from((0, 1, 2, 3, 4, 5, 17, 33)).map(lambda w: (w,))
    dims = small_dims(ndims, sizes=(0, 1, 2, 3, 4, 5, 7, 17), max_volume=500)
    if NAMED[name].lanes == 0:   # one texel holds C whole: C <= 4
        return dims.map(lambda d: d[:1] + (min(d[1], 4),) + d[2:])
    return dims


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
    assert layout.array_shape(dims) == host_form(layout, want, layout.lanes or dims[1])


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
        *coords, k = to_pixel(*idx, *dims)
        assert layout.pixel(dims, idx) == (*coords, k), (name, dims, idx)
        assert layout.index(dims, *coords, k) == idx
        at = tuple(reversed(coords)) + ((k,) if layout.lanes != 1 else ())
        expect[at] = values[idx]
    assert_same_bits(image, expect, f"{name} {dims}")


@st.composite
def volume_cases(draw):
    name = draw(st.sampled_from(sorted(TABLE5)))
    return name, draw(layout_dims(name, ndims=5))


@FEW
@given(case=volume_cases())
def test_pixel_of_every_element_5d(case):
    """The 5-D forms: image size, host form and every element's pixel as the
    5-D table says, on both engines; every other lane is zero; a 4-D tensor
    is the 5-D one with D = 1."""
    name, dims = case
    layout = NAMED[name]
    size, to_pixel = TABLE5[name]
    assert layout.image_shape(dims) == size(*dims)
    assert runtime.ImageDesc(layout, dims).layout.kind == "volume"
    n, c, d, h, w = dims
    assert layout.image_shape((n, c, 1, h, w)) == layout.image_shape((n, c, h, w))
    values = np.arange(1, int(np.prod(dims)) + 1, dtype=np.int32).reshape(dims)
    images = [runtime.to_image(values, name, engine=eng) for eng in (REF, CPU)]
    assert_same_bits(images[1], images[0], name)
    expect = np.zeros(host_form(layout, size(*dims), layout.lanes or c), np.int32)
    for idx in np.ndindex(*dims):
        *coords, k = to_pixel(*idx, *dims)
        assert layout.pixel(dims, idx) == (*coords, k), (name, dims, idx)
        expect[tuple(reversed(coords)) + (k,)] = values[idx]
    assert_same_bits(images[0], expect, f"{name} {dims}")
    for eng in (REF, CPU):
        assert_same_bits(runtime.from_image(images[0], name, dims, engine=eng), values)


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
    check_fits(ImageDesc(layout, (1, 64, 512, 512)), Limits.of((8192, 8192)))
    with pytest.raises(ClayoutError) as info:
        check_fits(ImageDesc(layout, (1, 64, 512, 512)), Limits.of((8191, 8192)))
    with pytest.raises(ClayoutError) as info:
        check_fits(ImageDesc(layout, (1, 64, 512, 1024)), Limits.of((8192, 8192)))
    msg = str(info.value)
    assert "\n" not in msg
    for word in ("'in_out_channel'", "16384x512", "8192x8192", "(1, 64, 512, 1024)",
                 "texture_2d (1024x8192)"):
        assert word in msg, (word, msg)
    assert "in_out_height" not in msg and "in_out_width" not in msg   # they do not fit
    assert "conv2d_filter" not in msg                                 # another kind


def test_nothing_fits():
    with pytest.raises(ClayoutError, match="no named layout of its kind fits these limits"):
        check_fits(ImageDesc(NAMED["in_out_channel"], (1, 4096, 64, 64)),
                   Limits((256, 256), (256, 256, 256), 256, 65536, 1 << 20))
    with pytest.raises(ClayoutError, match=r"layouts that fit: weight_height \(27x16\), "
                       r"tvm_texture_weight \(27x16\), tinygrad_conv_weight \(36x16\)$"):
        check_fits(ImageDesc(NAMED["conv2d_filter"], (64, 3, 3, 3)), Limits.of((4096, 16)))


@SETTINGS
@given(case=named_cases(), mw=st.integers(1, 40), mh=st.integers(1, 40))
def test_check_fits_property(case, mw, mh):
    """A 2-D limit bounds 2-D images; the other storages get the OpenCL
    minimums no wider or taller than it (3-D 2048, 2048 layers, 65536 pixels
    of image buffer, buffers no bound)."""
    name, dims = case
    layout = NAMED[name]
    limits = Limits.of((mw, mh))

    def fits(lay, shape):
        return all(n <= b for n, b in zip(shape, limits.bounds(lay.storage)))

    def size(lay, shape):
        text = "x".join(map(str, shape))
        return text if lay.storage.plain else f"{text} {lay.storage}"
    shape = TABLE[name][0](*dims)
    if fits(layout, shape):
        check_fits(ImageDesc(layout, dims), Limits.of((mw, mh)))
        return
    with pytest.raises(ClayoutError) as info:
        check_fits(ImageDesc(layout, dims), Limits.of((mw, mh)))
    msg = str(info.value)
    bound = "x".join(map(str, limits.bounds(layout.storage)))
    assert "x".join(map(str, shape)) in msg and bound in msg and repr(name) in msg
    for other in NAMED.values():
        if other.kind != layout.kind or other.name == name:
            continue   # (a 1-D argument has no dims[1])
        if other.lanes == 0 and dims[1] > 4:   # C does not fit one texel
            assert f"{other.name} (" not in msg
        else:
            other_shape = TABLE[other.name][0](*dims)
            assert (f"{other.name} ({size(other, other_shape)})" in msg) == \
                fits(other, other_shape), other.name


@FEW
@given(case=st.one_of(named_cases(), mirror_cases()), custom=st.booleans())
def test_c_pixel_mirrors_pixel(case, custom):
    """The C pixel expressions the kernels inline give the table's pixel."""
    name, dims = case
    layout = image_layout(MIRRORS[name]) if custom and name in MIRRORS else NAMED[name]
    names = [f"i{d}" for d in range(len(dims))]
    exprs = layout.c_pixel(dims, names)
    to_pixel = TABLE[name][1]
    for idx in np.ndindex(*dims):
        env = dict(zip(names, idx))
        got = tuple(int(eval(e.replace("/", "//"), {"__builtins__": {}}, env)) for e in exprs)
        assert got == to_pixel(*idx, *dims), (layout.name, dims, idx, exprs)
