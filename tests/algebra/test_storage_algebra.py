"""Storages beyond the 2-D image in the algebra: every new layout's pixel and
index are inverse over 4-D and 5-D dims with tails, padding lanes are zero,
the host forms, custom 'TAG:ROWS[:LANES][@STORAGE[:LAYERS]]' layouts equal
to the named ones, and the refusals (each one clear line)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from runtime import ClayoutError, ImageDesc, ImageLayout, image_layout
from strategies import FEW, SETTINGS, assert_same_bits, small_dims

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/storage.py",)

STORAGE_LAYOUTS = ("tflite_buffer", "tflite_image_buffer", "tflite_texture_2d",
                   "tflite_single_texture_2d", "tflite_texture_array", "tflite_texture_3d",
                   "in_out_channel", "texture_2d")
HOST_FORM = {"image2d": ("height", "width"), "image2d_array": ("depth", "height", "width"),
             "image3d": ("depth", "height", "width"), "image_buffer": ("pixels",),
             "buffer": ("pixels",)}


@st.composite
def cases(draw):
    name = draw(st.sampled_from(STORAGE_LAYOUTS))
    dims = draw(small_dims(draw(st.sampled_from((4, 5))), max_volume=300))
    if image_layout(name).lanes == 0:
        dims = dims[:1] + (min(dims[1], 4),) + dims[2:]
    return name, dims


@SETTINGS
@given(case=cases())
def test_index_inverts_pixel_and_padding_is_zero(case):
    name, dims = case
    img = ImageDesc(image_layout(name), dims)
    assert len(img.shape) == img.storage.ndim
    assert img.array_shape[:img.storage.ndim] == tuple(reversed(img.shape))
    assert img.array_shape[img.storage.ndim:] == (img.lanes,)
    seen = set()
    for idx in np.ndindex(*dims):
        p = img.pixel(idx)
        assert len(p) == img.storage.ndim + 1
        assert img.index(*p) == idx
        seen.add(p)
    assert len(seen) == int(np.prod(dims))
    values = np.arange(1, int(np.prod(dims)) + 1, dtype=np.float32).reshape(dims)
    image = runtime.to_image(values, name, engine="cpu")
    assert image.shape == img.array_shape
    holes = [p for p in np.ndindex(*image.shape) if
             (tuple(reversed(p[:-1])) + (p[-1],)) not in seen]
    assert all(image[p] == 0 for p in holes)
    assert int((image != 0).sum()) == len(seen)


@FEW
@given(case=cases())
def test_custom_layouts_equal_named(case):
    """A custom layout written with its storage places every element as the named one."""
    name, dims = case
    named = image_layout(name).at(dims)
    spec = f"{named.tag}:{named.rows}:{named.lanes}@{named.storage}:{named.layers}"
    custom = image_layout(spec)
    assert custom.storage == named.storage and custom.layers == named.layers
    values = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    want = runtime.to_image(values, named, engine="cpu")
    got = runtime.to_image(values, custom, src="abcde"[:len(dims)], engine="cpu")
    assert_same_bits(got, want, spec)


def test_five_d_public_calls():
    x = np.arange(2 * 5 * 3 * 4 * 7, dtype=np.float32).reshape(2, 5, 3, 4, 7)
    for name in STORAGE_LAYOUTS:
        dims = x.shape if image_layout(name).lanes else (2, 3, 3, 4, 7)
        data = x if image_layout(name).lanes else x[:, :3]
        for eng in ("cpu", "reference"):
            img = runtime.to_image(data, name, engine=eng)
            assert img.shape == image_layout(name).array_shape(dims)
            assert_same_bits(runtime.from_image(img, name, dims, engine=eng), data, name)
        mem = runtime.Memory.image(name, dims, engine="cpu")
        assert mem.dims == dims
        assert_same_bits(runtime.from_image(runtime.to_image(
            runtime.Memory.from_numpy(data.ravel(), runtime.MemoryDesc(dims), engine="cpu"),
            name), name, dims).to_numpy().reshape(dims), data, name)


@pytest.mark.parametrize("make, words", [
    (lambda: ImageLayout("x", "Bcda4b", 1, storage="buffer"), ("one pixel index", "rows")),
    (lambda: ImageLayout("x", "Bcda4b", 1, storage="image2d", layers=1),
     ("layers", "image2d_array or image3d")),
    (lambda: ImageLayout("x", "Bcda4b", 1, storage="texture"), ("unknown storage", "image3d")),
    (lambda: ImageLayout("x", "Bcda4b", 1, lanes=0), ("lanes 0", "no block")),
    (lambda: ImageLayout("x", "Bcda4b", 4, storage="image3d", layers=1), ("rows must be 0..3",)),
    (lambda: image_layout("cdab:1:0@image2d").pixel((1, 5, 2, 2), (0, 0, 0, 0)),
     ("whole in one texel", "0..4", "got 5")),
    (lambda: image_layout("tflite_texture_3d").index((1, 5, 2, 2), 0, 0),
     ("needs z",)),
    (lambda: image_layout("tflite_texture_3d").index((1, 5, 2, 2), 0, 0, 9),
     ("z 9 is outside the 2x2x2 image3d", "0..1")),
    (lambda: image_layout("tflite_buffer").index((1, 5, 2, 2), 0, y=1),
     ("takes a pixel as x, lane",)),
    (lambda: runtime.to_image(np.ones((1, 5, 3, 3), np.float32), "tflite_texture_3d",
                              max_image=(2, 2)), ("image3d", "over the device limit 2x2x")),
    (lambda: runtime.from_image(np.zeros((3, 3, 4), np.float32), "tflite_texture_3d",
                                (1, 5, 3, 3)), ("(2, 3, 3, 4)", "depth, height, width")),
    (lambda: ImageDesc(image_layout("tflite_texture_3d"), (1, 5, 3)), ("N,C,H,W", "N,C,D,H,W")),
])
def test_refusals(make, words):
    with pytest.raises(ClayoutError) as info:
        make()
    msg = str(info.value)
    assert "\n" not in msg
    for word in words:
        assert word in msg, (word, msg)
