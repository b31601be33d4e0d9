"""Frames II: the sample stage's tables on every engine, a moving crop that
builds nothing, scale=, and the frame door's new refusals.

The area and antialiased resizes (runtime/algebra/frame_axis.py's tables)
give the same bits on the cpu engine and OpenCL and stay within the
documented tolerance of the reference (which evaluates their definitions in
float64, tests/doors/test_frame_resize.py holds it against OpenCV and PIL); a
tracker's crop moving every call, over frames of three sizes, builds no
OpenCL program after the first call; a hot frame gets its baked program with
the generic one's bits; threads converting different crops at once get the
single-threaded bits.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import runtime
from conftest import bits, in_threads
from runtime import ClayoutError, FrameArgumentWarning
from doors.test_frames import MEAN, STD, frame, within_reference

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/__init__.py", "runtime/algebra/frame.py",
           "runtime/algebra/frame_axis.py", "runtime/algebra/frame_taps.py", "runtime/engine.py",
           "runtime/opencl/baking.py", "runtime/opencl/moves.py", "runtime/opencl/programs.py",
           "runtime/cli/frame.py", "runtime/opencl/frame.py", "runtime/reference/frame.py")

CASES = [  # (format, frame (w, h), kwargs)
    ("rgb", (97, 65), dict(size=(31, 17), resize="area")),
    ("nv21", (98, 66), dict(size=(31, 17), resize="area", fit="letterbox", fill=114)),
    ("i420", (98, 66), dict(size=(40, 90), resize="area")),          # enlarging: the zoom rule
    ("gray", (97, 65), dict(size=(40, 30), resize="area")),          # mixed: zoom on both axes
    ("bgra", (97, 65), dict(size=(31, 17), antialias=True, order="bgr")),
    ("nv12", (98, 66), dict(size=(12, 80), antialias=True)),         # x shrinks, y enlarges
    ("rgb", (97, 65), dict(crop=(4, 3, 60, 50), size=(7, 5), antialias=True,
                           fit="letterbox", fill=(0, 128, 255))),
    ("nv21", (640, 360), dict(size=(224, 224), resize="area")),
    ("rgb", (97, 65), dict(size=(1, 1), resize="area")),
]


@pytest.mark.parametrize("fmt,wh,kw", CASES, ids=lambda c: str(c)[:40])
def test_area_and_antialias_agree_on_every_engine(fmt, wh, kw, cl_engine):
    f = frame(fmt, *wh)
    std = 57.0 if fmt == "gray" else STD
    kw = dict(format=fmt, mean=120.0 if fmt == "gray" else MEAN, std=std, **kw)
    cpu = runtime.from_frame(f, "nchw", engine="cpu", **kw)
    dev = runtime.from_frame(f, "nchw", engine=cl_engine, **kw)
    ref = runtime.from_frame(f, "nchw", engine="reference", **kw)
    assert np.array_equal(bits(cpu), bits(dev)), "cpu and opencl differ"
    within_reference(cpu, ref, "f32", std)
    img = runtime.from_frame(f, "in_out_channel", dtype="f16", engine=cl_engine, **kw)
    assert np.array_equal(bits(img), bits(runtime.from_frame(f, "in_out_channel", dtype="f16",
                                                             engine="cpu", **kw)))


def test_scale_is_torchvisions_convention(cl_engine):
    """scale=1/255 with torchvision's mean and std gives (p/255 - mean)/std,
    the fill too, on every engine; and warns nothing."""
    f = frame("nv21", 98, 66)
    kw = dict(format="nv21", size=(40, 40), fit="letterbox", fill=114, scale=1 / 255,
              mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpu = runtime.from_frame(f, "nchw", engine="cpu", **kw)
        dev = runtime.from_frame(f, "nchw", engine=cl_engine, **kw)
    ref = runtime.from_frame(f, "nchw", engine="reference", **kw)
    assert np.array_equal(bits(cpu), bits(dev))
    within_reference(cpu, ref, "f32", 255 * 0.229)
    plain = runtime.from_frame(f, "nchw", engine="reference", **dict(kw, scale=1, mean=0, std=1))
    want = (plain / 255 - np.array(kw["mean"])[None, :, None, None]) / \
        np.array(kw["std"])[None, :, None, None]
    assert np.abs(ref - want).max() < 1e-6     # the reference rounds once, to f32
    assert abs(ref[0, 0, 0, 0] - (114 / 255 - 0.485) / 0.229) < 1e-6   # the letterbox border


def test_the_torchvision_mistake_warns_where_it_is_made():
    with pytest.warns(FrameArgumentWarning, match="scale=1/255") as said:
        runtime.from_frame(frame("rgb", 9, 7), "nchw", format="rgb", engine="cpu",
                           mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    assert said[0].filename == __file__


# -- a moving crop builds nothing -------------------------------------------------------------
def test_a_moving_crop_builds_no_program(cl_engine):
    """12 distinct crops over frames of 3 sizes of one format: the first
    call builds the family's program, no other call builds anything; every
    result is the cpu engine's bits."""
    from runtime.opencl import programs
    frames = [frame("nv21", w, h, seed=w) for w, h in ((320, 180), (160, 120), (98, 66))]
    kw = dict(format="nv21", size=(48, 48), dtype="f16", mean=MEAN, std=STD)
    runtime.from_frame(frames[0], "in_out_channel", crop=(1, 1, 60, 40), engine=cl_engine, **kw)
    before = programs.STATS["builds"]
    for i in range(12):
        f = frames[i % 3]
        h, w = f.shape[0] * 2 // 3, f.shape[1]
        crop = (i % 7, (2 * i) % 5, w - 8 - i, h - 6 - (i % 4))
        got = runtime.from_frame(f, "in_out_channel", crop=crop, engine=cl_engine, **kw)
        want = runtime.from_frame(f, "in_out_channel", crop=crop, engine="cpu", **kw)
        assert np.array_equal(bits(got), bits(want)), crop
    assert programs.STATS["builds"] == before


def test_a_hot_frame_gets_its_baked_program_with_the_same_bits(cl_engine, monkeypatch):
    from runtime.opencl import baking, programs
    from runtime.opencl.moves import move_plan
    from runtime.algebra.frame import frame_side
    # a program cache with room: a full one gives a baked program up first (its plan falls
    # back to the generic one: tests/cross/test_caches.py), which after the thorough tier's
    # earlier builds in this process it did at once
    monkeypatch.setattr(programs.PROGRAMS, "budget", 1 << 40)
    f = frame("nv21", 320, 180)
    kw = dict(size=(256, 256), mean=MEAN, std=STD)
    first = runtime.from_frame(f, "nchw", format="nv21", engine=cl_engine, **kw)
    plan = move_plan(frame_side(f.shape, "nv21", **kw), runtime.MemoryDesc((1, 3, 256, 256)),
                     cl_engine.device)
    assert plan.generic
    before = programs.STATS["builds"]
    for _ in range(cl_engine.device.options.specialize_after + 1):
        again = runtime.from_frame(f, "nchw", format="nv21", engine=cl_engine, **kw)
        assert np.array_equal(bits(again), bits(first))
    baking.settle()   # built off the calling thread, swapped in when ready
    assert not plan.generic and programs.STATS["builds"] == before + 1
    assert programs.STATS["builds_in_background"] >= 1
    assert np.array_equal(bits(runtime.from_frame(f, "nchw", format="nv21", engine=cl_engine,
                                                  **kw)), bits(first))
    assert "320x180 -> 256x256" in plan.kernel.source   # the baked program names its frame


def test_threads_with_different_crops(cl_engine):
    f = frame("nv12", 160, 120)
    crops = [(i, 2 * i, 100 - i, 80 - 2 * i) for i in range(8)]
    kw = dict(format="nv12", size=(32, 24), resize="area", mean=MEAN, std=STD)
    want = [runtime.from_frame(f, "nchw", crop=c, engine=cl_engine, **kw) for c in crops]
    for eng in (cl_engine, runtime.engine.get("cpu")):
        got = {}

        def work(k, eng=eng):
            for r in range(4):
                c = (k + r) % len(crops)
                got[k, r] = c, runtime.from_frame(f, "nchw", crop=crops[c], engine=eng, **kw)
        in_threads(work, 8)
        for c, result in got.values():
            assert np.array_equal(bits(result), bits(want[c]))
        assert len(got) == 32


# -- the frame door's refusals ----------------------------------------------------------------
NV21 = frame("nv21", 98, 66)
REFUSED = [
    (dict(format="rgb", yuv="bt709"), "yuv= 'bt709' chooses the matrix of the YUV formats"),
    (dict(fill=300), r"fill= is a pixel value before scale and normalization, 0\.\.255"),
    (dict(fill=-1), "fill= is a pixel value"),
    (dict(std=1e-300), "overflows float32"),
    (dict(mean=1e39), "not finite in float32"),
    (dict(scale=0), "scale= takes a finite number other than 0"),
    (dict(scale=float("nan")), "scale= takes a finite number"),
    (dict(scale="1/255"), "scale= takes a finite number"),
    (dict(format=["nv21"]), r"format= \['nv21'\]; formats: rgb"),
    (dict(yuv={}), r"unknown yuv= \{\}; allowed: bt601"),
    (dict(resize=["area"]), r"resize= \['area'\]; allowed: bilinear, nearest, area"),
    (dict(antialias=1), "antialias= takes True or False"),
    (dict(antialias=True, resize="area"), "antialias=True goes with resize='bilinear'"),
    (dict(antialias="yes"), "antialias= takes True or False"),
]


@pytest.mark.parametrize("kw,message", REFUSED, ids=[m[1][:30] for m in REFUSED])
def test_refused_in_one_line(kw, message):
    args = dict(format="nv21")
    args.update(kw)
    f = frame("rgb", 8, 6) if args["format"] == "rgb" else NV21
    with pytest.raises(ClayoutError, match=message) as caught:
        runtime.from_frame(f, "nchw", engine="cpu", **args)
    assert "\n" not in str(caught.value)


def test_near_miss_names_and_frames_without_pixels():
    with pytest.raises(ClayoutError, match="did you mean 'nchw'"):
        runtime.from_frame(NV21, "NCHW", format="nv21")
    with pytest.raises(ClayoutError, match=r"a frame of shape \(0, 64, 3\) has no pixels"):
        runtime.from_frame(np.zeros((0, 64, 3), np.uint8), "nchw", format="rgb")
    with pytest.raises(ClayoutError, match="the 40000x1 frame: at most 32768 pixels") as caught:
        runtime.from_frame(np.zeros((1, 40000), np.uint8), "nchw", format="gray")
    assert "size=" not in str(caught.value)
