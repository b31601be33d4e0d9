"""from_frame: a camera frame to a model input in one conversion.

Checked three ways on every format x fit x resize x layout kind x dtype
(the covering set in every tier, the full grid in the thorough tier): the
cpu engine (numpy, float32) and the OpenCL kernel give the same bits, and
each is within the documented tolerance of the reference engine (the
formulas in float64, rounded once): 1e-3 pixel units in f32, one unit in the
last place in f16 and bf16, one step in u8 and s8. The OpenCL kernel's
placement equals to_image of the plain result; a frame already on the
device converts there; many threads on one engine give the single-threaded
bits; every mistake is one ClayoutError naming the argument.
(tests/doors/test_frame_reference.py holds the reference itself against OpenCV.)
"""
from __future__ import annotations

import itertools
import os
import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import runtime
from conftest import ROOT, bits, child_result, in_threads, needs, start_child, tiered
from runtime import ClayoutError

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/engine.py", "runtime/opencl/frame.py", "runtime/cpu/frames.py")

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
PACKED = {"rgb": 3, "bgr": 3, "rgba": 4, "bgra": 4, "gray": 1}
YUV = ("nv12", "nv21", "i420")
FORMATS = tuple(PACKED) + YUV
FITS = ("stretch", "letterbox")
RESIZES = ("bilinear", "nearest", "area")
LAYOUTS = ("in_out_channel", "in_out_height", "in_out_width", "texture_2d",
           "tflite_texture_array", "tflite_buffer", "acBd4b:2", "nchw", "nhwc", "nChw16c")
DTYPES = ("f32", "f16", "bf16", "u8", "s8")


def frame(fmt: str, w: int | None = None, h: int | None = None, seed: int = 0) -> np.ndarray:
    """A smooth frame with noise (values over the whole u8 range) of ``fmt``;
    by default 97x65 packed, 98x66 for 4:2:0 (its sides are even)."""
    w, h = w or (98 if fmt in YUV else 97), h or (66 if fmt in YUV else 65)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    planes = [127 + 120 * np.sin(xx / (5 + 3 * k) + yy / (7 + k) + k) for k in range(4)]
    img = np.stack(planes, -1) + rng.normal(0, 12, (h, w, 4))
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if fmt in PACKED:
        return np.ascontiguousarray(img[..., :PACKED[fmt]] if fmt != "gray" else img[..., 0])
    chroma = img[::2, ::2, 1:3]
    if fmt == "i420":
        tail = np.concatenate([chroma[..., 0].reshape(-1), chroma[..., 1].reshape(-1)])
    else:
        tail = (chroma if fmt == "nv12" else chroma[..., ::-1]).reshape(-1)
    return np.concatenate([img[..., 0].reshape(-1), tail]).reshape(h * 3 // 2, w)


def args(fmt: str, fit: str, resize: str, **kw) -> dict:
    gray = fmt == "gray"
    out = dict(format=fmt, fit=fit, resize=resize, crop=(3, 5, 61, 41), size=(33, 17),
               mean=120.0 if gray else MEAN, std=57.0 if gray else STD, fill=114)
    out.update(kw)
    return out


def ulp(values: np.ndarray, dtype: str) -> np.ndarray:
    """One unit in the last place of ``dtype`` at each value (integers: 1)."""
    if dtype in ("u8", "s8"):
        return np.ones_like(values)
    mant = {"f32": 23, "f16": 10, "bf16": 7}[dtype]
    tiny = {"f32": 2.0 ** -126, "f16": 2.0 ** -14, "bf16": 2.0 ** -126}[dtype]
    mag = np.maximum(np.abs(values), tiny)
    return 2.0 ** (np.floor(np.log2(mag)) - mant)


def within_reference(got, want, dtype: str, std) -> None:
    """``got`` is within the documented tolerance of the reference's ``want``
    (same layout): f32 1e-3 pixel units (value units times the largest std),
    otherwise one unit in the last place of the output dtype."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape
    bound = 1e-3 / max(np.atleast_1d(std)) if dtype == "f32" else ulp(w, dtype)
    worst = np.abs(g - w) - bound
    assert worst.max(initial=-1) <= 0, f"off the reference by {np.abs(g - w).max()}"


def grid():
    cases = list(itertools.product(FORMATS, FITS, RESIZES, LAYOUTS, DTYPES))
    cases = [c for c in cases if not (c[4] == "bf16" and ":" in c[3] or c[4] == "bf16" and
                                      c[3] in ("in_out_channel", "in_out_height", "in_out_width",
                                               "texture_2d", "tflite_texture_array",
                                               "tflite_buffer"))]

    def covered(case):   # every value of every parameter, and each format's main use
        fmt, fit, resize, layout, dtype = case
        main = layout == "in_out_channel" and dtype == "f16" and resize == "bilinear" and \
            fit == ("letterbox" if fmt in YUV else "stretch")
        return main or cases.index(case) % 37 == 0
    return tiered(cases, covered, ids=lambda c: "-".join(c))


@pytest.mark.parametrize("fmt,fit,resize,layout,dtype", grid())
def test_engines_agree_with_each_other_and_the_reference(fmt, fit, resize, layout, dtype,
                                                         cl_engine):
    f = frame(fmt)
    kw = args(fmt, fit, resize)
    cpu = runtime.from_frame(f, layout, dtype=dtype, engine="cpu", **kw)
    dev = runtime.from_frame(f, layout, dtype=dtype, engine=cl_engine, **kw)
    ref = runtime.from_frame(f, layout, dtype=dtype, engine="reference", **kw)
    assert cpu.shape == dev.shape == ref.shape and cpu.dtype == dev.dtype
    assert np.array_equal(bits(cpu), bits(dev)), "cpu and opencl differ"
    within_reference(cpu, ref, dtype, kw["std"])


def test_the_kernel_places_values_as_to_image_does(cl_engine):
    """The frame kernel writes each layout where to_image would put the same
    values (its placement is the conversion kernel's, not a copy of it)."""
    f = frame("nv21")
    kw = args("nv21", "letterbox", "bilinear")
    plain = runtime.from_frame(f, "nchw", engine=cl_engine, **kw)
    for layout in ("in_out_channel", "in_out_width", "tflite_texture_3d", "aBcd4b:3"):
        got = runtime.from_frame(f, layout, dtype="f16", engine=cl_engine, **kw)
        want = runtime.to_image(plain, layout, dtype="f16", engine="reference")
        assert np.array_equal(bits(got), bits(want)), layout


@pytest.mark.parametrize("layout", ["in_out_channel", "tflite_texture_array", "tflite_texture_3d",
                                    "tflite_single_texture_2d"])
def test_both_ways_of_reaching_images(layout, cl_image_engine):
    """write_imagef into the image object (what GPUs use) and the staged
    buffer plus copy (what CPU devices use) give the cpu engine's bits."""
    for fmt, dt in (("nv21", "f16"), ("rgba", "u8"), ("gray", "f32")):
        f, kw = frame(fmt), args(fmt, "letterbox", "bilinear")
        want = runtime.from_frame(f, layout, dtype=dt, engine="cpu", **kw)
        got = runtime.from_frame(f, layout, dtype=dt, engine=cl_image_engine, **kw)
        assert np.array_equal(bits(got), bits(want)), (fmt, dt)
        if layout == "tflite_single_texture_2d":   # 3 lanes: no device image holds it
            continue
        mem = runtime.Memory(runtime.MemoryDesc(f.shape, "u8"), engine=cl_image_engine, data=f)
        img = runtime.from_frame(mem, layout, dtype=dt, **kw)
        assert np.array_equal(bits(img.to_numpy()), bits(want)), (fmt, dt, "Memory")


@pytest.mark.parametrize("yuv", ["bt601", "bt601-full", "bt709"])
def test_yuv_matrices(yuv, cl_engine):
    f = frame("nv12", seed=3)
    kw = args("nv12", "stretch", "bilinear", yuv=yuv)
    cpu = runtime.from_frame(f, "nchw", engine="cpu", **kw)
    dev = runtime.from_frame(f, "nchw", engine=cl_engine, **kw)
    ref = runtime.from_frame(f, "nchw", engine="reference", **kw)
    assert np.array_equal(cpu, dev)
    within_reference(cpu, ref, "f32", STD)


def test_a_camera_frame_at_full_size(cl_engine):
    """1280x720 NV21 -> 320x320, the bench's case: long axes, where float32
    source coordinates would drift (clayout computes them in integers)."""
    f = frame("nv21", 1280, 720, seed=5)
    kw = dict(format="nv21", size=(320, 320), mean=MEAN, std=STD)
    cpu = runtime.from_frame(f, "in_out_channel", engine="cpu", **kw)
    dev = runtime.from_frame(f, "in_out_channel", engine=cl_engine, **kw)
    ref = runtime.from_frame(f, "in_out_channel", engine="reference", **kw)
    assert np.array_equal(cpu, dev)
    within_reference(cpu[..., :3], ref[..., :3], "f32", STD)
    assert not cpu[..., 3].any()


def test_opencv_chain_within_two_pixel_units():
    """The one call against the chain users write with OpenCV (u8 between
    steps, so it is within 2 pixel units, not exact)."""
    cv2 = needs("cv2")
    f = frame("nv21", 160, 120, seed=2)
    rgb = cv2.cvtColor(f, cv2.COLOR_YUV2RGB_NV21)
    want = cv2.resize(rgb, (64, 48), interpolation=cv2.INTER_LINEAR).astype(np.float64)
    got = runtime.from_frame(f, "nhwc", format="nv21", size=(64, 48), engine="cpu")
    assert np.abs(got[0] - want).max() <= 2


def test_memory_frames_stay_on_their_engine(cl_engine):
    f = frame("i420")
    kw = args("i420", "letterbox", "bilinear")
    want = runtime.from_frame(f, "in_out_channel", dtype="f16", engine="cpu", **kw)
    for eng in ("cpu", cl_engine):
        mem = runtime.Memory(runtime.MemoryDesc(f.shape, "u8"), engine=eng, data=f)
        img = runtime.from_frame(mem, "in_out_channel", dtype="f16", **kw)
        assert isinstance(img, runtime.Memory) and img.engine is mem.engine
        assert np.array_equal(bits(img.to_numpy()), bits(want))
        again = runtime.from_frame(mem, "in_out_channel", dtype="f16", out=img, **kw)
        assert again is img
        buf = runtime.from_frame(mem, "nChw16c", **kw)
        assert np.array_equal(buf.to_numpy(), runtime.from_frame(f, "nChw16c", engine="cpu",
                                                                 **kw))
        with pytest.raises(ClayoutError, match="out= holds"):
            runtime.from_frame(mem, "in_out_channel", dtype="f32", out=img, **kw)


def test_out_is_written_and_returned():
    f = frame("rgb", 97, 65)
    out = np.full((17, 33, 4), 7, np.float32)
    got = runtime.from_frame(f, "in_out_channel", engine="cpu", out=out, **args("rgb", *FITS[:1],
                                                                             "bilinear"))
    assert got is out and not out[..., 3].any()
    with pytest.raises(ClayoutError, match="out= must be"):
        runtime.from_frame(f, "in_out_channel", engine="cpu", out=np.zeros((17, 33, 4)),
                           **args("rgb", "stretch", "bilinear"))


def test_many_threads_on_one_engine(cl_engine):
    cases = [(fmt, fit) for fmt in ("nv21", "rgb", "gray") for fit in FITS]
    frames = {fmt: frame(fmt) for fmt, _ in cases}

    def one(fmt, fit):
        return runtime.from_frame(frames[fmt], "in_out_channel", dtype="f16", engine=cl_engine,
                                  **args(fmt, fit, "bilinear"))
    want = {c: one(*c) for c in cases}
    got = []

    def work(k):
        for i in range(6):
            c = cases[(k + i) % len(cases)]
            got.append((c, one(*c)))
    in_threads(work, 8)
    assert len(got) == 48 and all(np.array_equal(bits(v), bits(want[c])) for c, v in got)


@settings(max_examples=40)
@given(st.sampled_from(FORMATS), st.integers(1, 12), st.integers(1, 12), st.data())
@pytest.mark.filterwarnings("ignore::runtime.FrameArgumentWarning")   # mean, std < 1 drawn
def test_any_crop_and_size_matches_the_reference(fmt, hw, ww, data):
    h, w = (2 * hw, 2 * ww) if fmt in YUV else (hw, ww)
    f = frame(fmt, w, h, seed=hw * 13 + ww)
    cx, cy = data.draw(st.integers(0, w - 1)), data.draw(st.integers(0, h - 1))
    cw, ch = data.draw(st.integers(1, w - cx)), data.draw(st.integers(1, h - cy))
    kw = dict(format=fmt, crop=(cx, cy, cw, ch),
              size=(data.draw(st.integers(1, 19)), data.draw(st.integers(1, 19))),
              fit=data.draw(st.sampled_from(FITS)),
              resize=data.draw(st.sampled_from(RESIZES)),
              order=data.draw(st.sampled_from(("rgb", "bgr"))), fill=data.draw(st.integers(0, 255)),
              mean=data.draw(st.floats(-300, 300)), std=data.draw(st.floats(0.5, 100)))
    cpu = runtime.from_frame(f, "nchw", engine="cpu", **kw)
    ref = runtime.from_frame(f, "nchw", engine="reference", **kw)
    within_reference(cpu, ref, "f32", kw["std"])


@settings(max_examples=12)
@given(st.sampled_from(FORMATS), st.sampled_from(FITS), st.sampled_from(RESIZES),
       st.integers(1, 23), st.integers(1, 23))
def test_any_size_cpu_equals_opencl(fmt, fit, resize, sw, sh):
    from runtime.opencl.engine import default
    f = frame(fmt, 34, 26, seed=sw + sh)
    kw = dict(format=fmt, size=(sw, sh), fit=fit, resize=resize, mean=10, std=3, fill=9)
    cpu = runtime.from_frame(f, "in_out_channel", engine="cpu", **kw)
    dev = runtime.from_frame(f, "in_out_channel", engine=default(), **kw)
    assert np.array_equal(cpu, dev)


MISTAKES = [
    (dict(format="nv22"), "unknown frame format 'nv22'; formats: rgb"),
    (dict(format="rgb"), r"does not fit format rgb: a rgb frame is a u8 array \(h, w, 3\)"),
    (dict(format="nv21", dtype="f64"), "dtype f64; allowed: f32, f16, bf16, u8, s8"),
    (dict(format="nv21", std=0), "std= must not be 0"),
    (dict(format="nv21", std=(1, 2)), r"std= takes a number or 3 numbers"),
    (dict(format="nv21", mean="x"), "mean= takes a number or 3 numbers"),
    (dict(format="nv21", crop=(1, 1, 98, 4)), r"crop=\(x=1, y=1, w=98, h=4\) is not inside "
                                               "the 98x66 frame"),
    (dict(format="nv21", crop=(0, 0, 4)), r"crop= takes \(x, y, w, h\)"),
    (dict(format="nv21", size=(0, 3)), r"size= takes \(W, H\) of the output, both > 0"),
    (dict(format="nv21", fit="pad"), "fit= 'pad'; allowed: stretch, letterbox"),
    (dict(format="nv21", resize="cubic"), "resize= 'cubic'; allowed: bilinear, nearest"),
    (dict(format="nv21", order="rbg"), "order= 'rbg'; allowed: rgb, bgr"),
    (dict(format="nv21", yuv="bt2020"), "unknown yuv= 'bt2020'; allowed: bt601"),
    (dict(format="nv21", dtype="s32"), "dtype s32; allowed: f32, f16, bf16, u8, s8"),
]


@pytest.mark.parametrize("kw,message", MISTAKES, ids=[m[1][:24] for m in MISTAKES])
def test_mistakes_are_one_clear_error(kw, message):
    with pytest.raises(ClayoutError, match=message):
        runtime.from_frame(frame("nv21"), "in_out_channel", engine="cpu", **kw)


def test_frames_of_the_wrong_kind_or_shape():
    with pytest.raises(ClayoutError, match="a frame is a u8 array .* got float32"):
        runtime.from_frame(frame("nv21").astype(np.float32), "nchw", format="nv21")
    with pytest.raises(ClayoutError, match=r"height 65 is not h\*3/2 of an even h"):
        runtime.from_frame(np.zeros((65, 98), np.uint8), "nchw", format="nv21")
    with pytest.raises(ClayoutError, match="width 97 is odd"):
        runtime.from_frame(np.zeros((66, 97), np.uint8), "nchw", format="i420")
    with pytest.raises(ClayoutError, match=r"\(h, w, 4\)"):
        runtime.from_frame(np.zeros((4, 4, 3), np.uint8), "nchw", format="rgba")
    with pytest.raises(ClayoutError, match="'conv2d_filter' is a filter layout"):
        runtime.from_frame(frame("nv21"), "conv2d_filter", format="nv21")
    with pytest.raises(ClayoutError, match="neither an activation image layout nor a 4-D buffer "
                                           "tag.*did you mean 'in_out_channel'"):
        runtime.from_frame(frame("nv21"), "in_out_chanel", format="nv21")
    mem = runtime.Memory(runtime.MemoryDesc((66, 98), "f32"), engine="cpu")
    with pytest.raises(ClayoutError, match="takes a u8 buffer Memory"):
        runtime.from_frame(mem, "nchw", format="nv21")


def test_a_strided_view_is_a_frame_too(cl_engine):
    """A view (the RGB bytes of an RGBA picture, a region of a larger frame)
    converts as its contiguous copy does, on both engines."""
    rgba = frame("rgba")
    for eng in ("cpu", cl_engine):
        for view, fmt in ((rgba[..., :3], "rgb"), (rgba[::2, ::3, 0], "gray")):
            got = runtime.from_frame(view, "nchw", format=fmt, engine=eng)
            want = runtime.from_frame(np.ascontiguousarray(view), "nchw", format=fmt, engine=eng)
            assert np.array_equal(got, want)


def test_gray_in_either_shape_and_bgr_order():
    g = frame("gray")
    a = runtime.from_frame(g, "nchw", format="gray", engine="cpu")
    b = runtime.from_frame(g[..., None], "nchw", format="gray", engine="cpu")
    assert a.shape == (1, 1, 65, 97) and np.array_equal(a, b)
    rgb = runtime.from_frame(frame("rgb"), "nchw", format="rgb", engine="cpu")
    bgr = runtime.from_frame(frame("rgb"), "nchw", format="rgb", order="bgr", engine="cpu")
    assert np.array_equal(rgb[0, ::-1], bgr[0])


def under_oclgrind(eng, bad) -> int:
    """Small frames through the kernel under oclgrind (tests/cross/test_oclgrind.py's
    child), each against the cpu engine."""
    runs = 0
    for fmt, fit, layout, dt, more in (("nv21", "stretch", "in_out_channel", "f16", {}),
                                       ("i420", "letterbox", "nchw", "f32", {}),
                                       ("bgra", "letterbox", "nChw16c", "u8", {}),
                                       ("gray", "stretch", "in_out_width", "f32", {}),
                                       ("nv12", "stretch", "nchw", "f32", {"resize": "area"}),
                                       ("rgb", "letterbox", "nhwc", "f32", {"antialias": True,
                                                                             "scale": 0.5})):
        f = frame(fmt, 10, 6)
        kw = dict(format=fmt, fit=fit, size=(5, 7) if not more else (3, 2), crop=(1, 0, 7, 6),
                  mean=3, std=2, **more)
        runs += 1
        got = runtime.from_frame(f, layout, dtype=dt, engine=eng, **kw)
        if not np.array_equal(bits(got), bits(runtime.from_frame(f, layout, dtype=dt,
                                                                   engine="cpu", **kw))):
            bad.append(f"from_frame {fmt} {layout} {dt}")
    return runs


EXIT_CHILD = """
import sys
import numpy as np
import runtime
from runtime.opencl.engine import default
f = np.random.default_rng(0).integers(0, 256, (720, 640), dtype=np.uint8)
frame = runtime.Memory(runtime.MemoryDesc(f.shape, "u8"), engine=default(), data=f)
runtime.from_frame(frame, "in_out_channel", format="nv21", size=(96, 96), mean=float(sys.argv[1]))
"""   # exits at once: the kernel, built for this new mean, may still run
EXITS = 3
_MEANS = [round(random.uniform(1, 100), 6) for _ in range(EXITS)]   # a new program each run


def start_early(items):
    """The exit children run in the background while the suite goes on."""
    if any(getattr(i, "originalname", "") == "test_exit_right_after_a_device_frame" for i in items):
        for k in range(EXITS):
            start_child(("frame exit", k), [sys.executable, "-c", EXIT_CHILD, str(_MEANS[k])],
                        env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_exit_right_after_a_device_frame(cl_engine):
    """A script that converts a frame on the device and exits without waiting
    exits cleanly: PoCL crashed at exit under a kernel it had just built (4
    exits in 6) until clayout waited for every engine's queue at exit."""
    for k in range(EXITS):
        done = child_result(("frame exit", k))
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
