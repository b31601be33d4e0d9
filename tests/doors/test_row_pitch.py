"""Row pitch: 2-D images over pitched buffers (docs/engines.md, "Row pitch").

- ``to_image(..., row_pitch=BYTES)`` gives the image with each row BYTES
  long: bit for bit the plain image in the first ``width`` columns, zeros
  after, so ``.tobytes()`` is a manual numpy padding of the plain image; on
  every engine (reference, cpu, opencl), f32 and f16, for layouts with tails
  (C = 1, 3, 5, 17; N = 2; odd H, W), at pitches of exactly one row, the
  device alignment (``image_pitch`` with an int alignment and with the real
  engine) and odd multiples of 16 bytes.
- ``from_image(..., row_pitch=BYTES)`` of the pitched form (or its 1-D
  copy) equals ``from_image`` of the plain one; the columns past the width
  are not read; ``out=`` works on both doors (to_image: the pitched shape).
- ``image_pitch``: the row's bytes rounded up to the alignment in pixels,
  converted to bytes as ``align * pixel_bytes``.
- Refusals, one ClayoutError line each: a pitch shorter than a row, not a
  whole number of pixels, not an int; a layout not on image2d storage; tiles
  (max_image); a Memory; ``Memory.from_buffer`` takes bytes and refuses alike.
- ``Memory.from_buffer`` over a cl.Buffer holding the pitched bytes (dense,
  the device's ``image_pitch``, one off most alignments) holds the bits
  ``to_image`` gives: on PoCL (no cl_khr_image2d_from_buffer) a copy, with
  the reason; on a device with it (Intel's CPU runtime) a view at a pitch on
  its alignment, a copy saying so at one off it.
"""
import warnings

import numpy as np
import pytest

import runtime
from conftest import bits, image_side
from runtime import BufferCopyWarning, ClayoutError, Memory
from runtime.algebra.checks import round_up

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/checks.py", "runtime/algebra/pitch.py")

# layout, dims: activations with channel tails, filters, a vector, a one-channel image
CASES = [("in_out_channel", (2, 1, 3, 5)), ("in_out_channel", (2, 3, 5, 7)),
         ("in_out_channel", (2, 5, 3, 3)), ("in_out_channel", (2, 17, 5, 7)),
         ("conv2d_filter", (5, 3, 3, 3)), ("conv2d_filter", (17, 5, 1, 3)),
         ("argument", (17,)), ("argument", (3,)),
         ("dw_conv2d_filter", (1, 17, 3, 3)), ("dw_conv2d_filter", (1, 5, 5, 5)),
         ("image_2d_weights_c1_b_fyx", (3, 5, 3, 3))]
ENGINES = ["reference", "cpu", "opencl"]


@pytest.fixture(params=ENGINES)
def engine(request):
    if request.param == "opencl":
        return request.getfixturevalue("cl_engine")
    return runtime.engine.get(request.param)


def one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def tensor(dims, seed=0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(dims) * 9).astype(np.float32)


def pixel_bytes(side) -> int:
    return side.lanes * side.dtype.itemsize


def pitches(side, device_engine=None) -> list[int]:
    """Exactly one row; the device alignment (an int of 16 pixels and, with
    an engine, the engine's own); multiples of 16 bytes past the row,
    an odd multiple among them."""
    row = side.width * pixel_bytes(side)
    dims, name = side.dims, side.layout.name
    found = [row, round_up(row, 16) + 16, round_up(row, 16) + 48,
             runtime.image_pitch(name, dims, side.dtype.name, device=16),
             16 * (round_up(row // 16 + 1, 2) + 1)]            # an odd number of 16 bytes
    if device_engine is not None:
        found.append(runtime.image_pitch(name, dims, side.dtype.name, device=device_engine))
    return sorted(set(found))


def padded(plain: np.ndarray, pitch_px: int) -> np.ndarray:
    """The plain image with zero pixels appended to each row, by hand."""
    pad = [(0, 0), (0, pitch_px - plain.shape[1])] + [(0, 0)] * (plain.ndim - 2)
    return np.pad(plain, pad)


# -- round trips -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("layout,dims", CASES)
def test_pitched_images_round_trip(engine, layout, dims, dtype):
    x = tensor(dims)
    side = image_side(layout, dims, dtype)
    plain = runtime.to_image(x, layout, dtype=dtype, engine=engine)
    assert np.array_equal(bits(plain), bits(runtime.to_image(x, layout, dtype=dtype,
                                                             engine="reference")))
    back = runtime.from_image(plain, layout, dims, engine=engine)
    for pitch in pitches(side, engine if engine.domain != "host" else None):
        px = pitch // pixel_bytes(side)
        img = runtime.to_image(x, layout, dtype=dtype, engine=engine, row_pitch=pitch)
        assert img.shape == (side.height, px) + plain.shape[2:] and img.dtype == plain.dtype
        assert img.tobytes() == padded(plain, px).tobytes()
        assert len(img.tobytes()) == side.height * pitch
        assert np.array_equal(bits(img[:, :side.width]), bits(plain))
        assert not bits(img[:, side.width:]).any()
        for given in (img, img.reshape(-1)):
            got = runtime.from_image(given, layout, dims, engine=engine, row_pitch=pitch)
            assert np.array_equal(bits(got), bits(back))
        if px > side.width:   # what lies past the width is not read
            dirty = img.copy()
            dirty[:, side.width:] = 7
            got = runtime.from_image(dirty, layout, dims, engine=engine, row_pitch=pitch)
            assert np.array_equal(bits(got), bits(back))


def test_out_on_both_doors(engine):
    layout, dims = "in_out_channel", (2, 5, 3, 3)
    x = tensor(dims, 1)
    plain = runtime.to_image(x, layout, engine=engine)
    pitch = 16 * 9                                     # 9 pixels a row for a width of 6
    out = np.full((plain.shape[0], 9, 4), np.nan, np.float32)   # garbage before
    assert runtime.to_image(x, layout, engine=engine, row_pitch=pitch, out=out) is out
    assert out.tobytes() == padded(plain, 9).tobytes()
    with pytest.raises(ClayoutError) as exc:
        runtime.to_image(x, layout, engine=engine, row_pitch=pitch, out=np.empty_like(plain))
    assert "out= must be" in one_line(exc) and "(6, 9, 4)" in str(exc.value)
    dst = np.empty(dims, np.float32)
    assert runtime.from_image(out, layout, dims, engine=engine, row_pitch=pitch, out=dst) is dst
    assert np.array_equal(dst, x)


def test_padding_lanes_are_still_checked_under_a_pitch():
    dims = (1, 5, 3, 3)
    img = runtime.to_image(tensor(dims), "in_out_channel", row_pitch=16 * 8)
    img[0, 3, 1] = 1.0                           # channel 5: a padding lane of C = 5
    with pytest.raises(ClayoutError, match="padding lane"):
        runtime.from_image(img, "in_out_channel", dims, row_pitch=16 * 8)
    assert runtime.from_image(img, "in_out_channel", dims, row_pitch=16 * 8,
                              check_padding=False).shape == dims


# -- image_pitch -------------------------------------------------------------------------------
def test_image_pitch_converts_the_alignment_from_pixels_to_bytes(default_cl_engine):
    dims = (1, 17, 5, 7)                          # 35 x 5 pixels
    assert runtime.image_pitch("in_out_channel", dims, device=0) == 35 * 16
    assert runtime.image_pitch("in_out_channel", dims, device=1) == 35 * 16
    assert runtime.image_pitch("in_out_channel", dims, device=16) == 48 * 16
    assert runtime.image_pitch("in_out_channel", dims, "f16", device=16) == 48 * 8
    assert runtime.image_pitch("in_out_channel", dims, "f16", device=np.int64(64)) == 64 * 8
    assert runtime.image_pitch("image_2d_weights_c1_b_fyx", (3, 5, 3, 3), "f16",
                               device=32) == 32 * 2
    assert runtime.image_pitch("in_out_channel", dims, device="cpu") == 35 * 16  # no device
    align = default_cl_engine.pitch_alignment()                # PoCL: 0, it has no image over a buffer
    want = round_up(35, max(1, align)) * 16
    assert runtime.image_pitch("in_out_channel", dims, device=default_cl_engine) == want
    assert runtime.image_pitch("in_out_channel", dims, device=default_cl_engine.device.cl_device) == want
    assert runtime.image_pitch("in_out_channel", dims) == want   # the default opencl engine


@pytest.mark.parametrize("device", [-16, 2.5, "16", object()])
def test_image_pitch_refuses_a_device_it_cannot_read(device):
    with pytest.raises(ClayoutError) as exc:
        runtime.image_pitch("in_out_channel", (1, 3, 2, 2), device=device)
    assert "image_pitch: device=" in one_line(exc)


# -- refusals ----------------------------------------------------------------------------------
DIMS = (1, 17, 5, 7)    # 35 x 5 RGBA f32: a row of 560 bytes, pixels of 16
X = tensor(DIMS, 2)
PLAIN = runtime.to_image(X, "in_out_channel")


@pytest.mark.parametrize("pitch,says", [
    (559, "row_pitch 559 bytes is shorter than a row of in_out_channel 1x17x5x7 f32 (image "
          "35x5 RGBA): 560 bytes (35 pixels of 16 bytes); allowed: a multiple of 16 bytes "
          ">= 560"),
    (544, "row_pitch 544 bytes is shorter than a row"),
    (-16, "row_pitch -16 bytes is shorter than a row"),
    (568, "row_pitch 568 bytes is not a whole number of pixels of 16 bytes (4 x f32; a row of "
          "in_out_channel 1x17x5x7 f32 (image 35x5 RGBA) is 560 bytes); allowed: a multiple "
          "of 16 bytes >= 560, e.g. 576"),
    (576.0, "row_pitch=576.0 is not a whole number of bytes; a row of in_out_channel 1x17x5x7 "
            "f32 (image 35x5 RGBA) is 560 bytes (35 pixels of 16 bytes); allowed: a multiple "
            "of 16 bytes >= 560"),
    ("576", "row_pitch='576' is not a whole number of bytes"),
    (True, "row_pitch=True is not a whole number of bytes"),
])
def test_bad_pitches_are_refused_by_every_door(pitch, says, cl_engine):
    for call in (lambda: runtime.to_image(X, "in_out_channel", row_pitch=pitch),
                 lambda: runtime.from_image(np.zeros((5, 36, 4), np.float32), "in_out_channel",
                                            DIMS, row_pitch=pitch)):
        with pytest.raises(ClayoutError) as exc:
            call()
        assert says in one_line(exc)
    buf = cl_engine.memory.buffer(4 * PLAIN.nbytes)
    with pytest.raises(ClayoutError) as exc:
        Memory.from_buffer(buf, "in_out_channel", DIMS, engine=cl_engine, row_pitch=pitch)
    assert one_line(exc).startswith("Memory.from_buffer: ") and says in str(exc.value)


@pytest.mark.parametrize("layout", ["tflite_buffer", "tflite_image_buffer",
                                    "tflite_texture_array", "tflite_texture_3d"])
def test_layouts_not_on_image2d_storage_are_refused(layout):
    side = image_side(layout, DIMS)
    storage = side.storage.name
    with pytest.raises(ClayoutError) as exc:
        runtime.to_image(X, layout, row_pitch=1024)
    assert one_line(exc) == (f"to_image: row_pitch=1024, but row_pitch applies to layouts on "
                             f"image2d storage (a 2-D image over a pitched buffer); layout "
                             f"'{layout}' is on {storage} storage: leave row_pitch out")
    with pytest.raises(ClayoutError) as exc:
        runtime.from_image(np.zeros(side.array_shape, np.float32), layout, DIMS, row_pitch=1024)
    assert f"'{layout}' is on {storage} storage" in one_line(exc)
    with pytest.raises(ClayoutError) as exc:
        runtime.image_pitch(layout, DIMS, device=0)
    assert f"'{layout}' is on {storage} storage" in one_line(exc)


def test_tiles_memory_and_wrong_shapes_are_refused():
    calls = {
        "do not go together": lambda: runtime.to_image(X, "in_out_channel", row_pitch=576,
                                                       max_image=(16, 16)),
        "not a tuple of tiles": lambda: runtime.from_image(
            runtime.to_image(X, "in_out_channel", max_image=(16, 16)), "in_out_channel", DIMS,
            row_pitch=576),
        "to_image of a Memory: row_pitch= goes with a host array": lambda: runtime.to_image(
            Memory.from_numpy(X, runtime.MemoryDesc(DIMS)), "in_out_channel", row_pitch=576),
        "a Memory is read as the image it holds": lambda: runtime.from_image(
            Memory.from_numpy(PLAIN, "in_out_channel", dims=DIMS), "in_out_channel", DIMS,
            row_pitch=576),
        "expected (5, 36, 4)": lambda: runtime.from_image(PLAIN, "in_out_channel", DIMS,
                                                          row_pitch=576),
        "or 1-D of 720 elements": lambda: runtime.from_image(np.zeros(721, np.float32),
                                                             "in_out_channel", DIMS,
                                                             row_pitch=576),
    }
    for says, call in calls.items():
        with pytest.raises(ClayoutError) as exc:
            call()
        assert says in one_line(exc), says


# -- a cl.Buffer holding the pitched bytes -----------------------------------------------------
@pytest.mark.parametrize("layout,dims,dtype", [("in_out_channel", (2, 5, 3, 7), "f32"),
                                               ("conv2d_filter", (17, 3, 3, 3), "f16"),
                                               ("image_2d_weights_c1_b_fyx", (3, 5, 3, 3),
                                                "f16")])
def test_from_buffer_over_the_pitched_bytes(cl_engine, layout, dims, dtype):
    import pyopencl as cl
    x = tensor(dims, 3)
    side = image_side(layout, dims, dtype)
    plain = runtime.to_image(x, layout, dtype=dtype)
    why, align = cl_engine.memory.image_from_buffer(), max(1, cl_engine.pitch_alignment())
    row = side.width * pixel_bytes(side)
    found = {runtime.image_pitch(layout, dims, dtype, device=cl_engine), row,   # aligned, dense
             round_up(row, 16) + 48}                                     # off most alignments
    for pitch in sorted(found):
        pitched = runtime.to_image(x, layout, dtype=dtype, row_pitch=pitch)
        buf = cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=np.frombuffer(pitched.tobytes(), np.uint8))
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", BufferCopyWarning)
            mem = Memory.from_buffer(buf, layout, dims, dtype, engine=cl_engine, row_pitch=pitch)
        if why is None and pitch // pixel_bytes(side) % align == 0:   # the device views it
            assert mem.zero_copy is True and mem.copy_reason is None
        elif why is None:  # it views buffers, but not at this pitch: copied, and it says why
            assert mem.zero_copy is False
            assert "CL_DEVICE_IMAGE_PITCH_ALIGNMENT" in mem.copy_reason
        else:              # PoCL: copied, and it says why
            assert mem.zero_copy is False and "cl_khr_image2d_from_buffer" in why
            assert mem.copy_reason == f"{why}: the buffer's bytes were copied into a new image"
        assert mem.row_pitch == pitch and mem.side == side
        assert np.array_equal(bits(mem.to_numpy()), bits(plain))
        back = runtime.from_image(mem, layout, dims).to_numpy()
        want = runtime.from_image(plain, layout, dims, dtype=dtype)
        assert np.array_equal(bits(back), bits(want.reshape(-1)))
