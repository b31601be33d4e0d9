"""The cpu engine's compiled frames (runtime/cpu/frames.py, templates/cpu_frame.c).

The C must give the numpy path's bits (runtime.algebra.frame_sample.sample,
itself the OpenCL kernel's bits) on every format x resize method x fit x
channel order x normalization, at odd sizes, 1x1 outputs and crops touching
the frame's edges; by both of its ways of reading the taps (AVX2 gathers and
the scalar gather) and in bands on the library's workers. Written straight
into a layout (``place``), it must equal the conversion of the numpy path's
tensor and the OpenCL engine's result; many threads on one engine must get
the single-threaded bits; an engine on the numpy path must still work.
"""
from __future__ import annotations

import ctypes
import itertools
import mmap
import sys

import numpy as np
import pytest

import runtime
from conftest import bits, in_threads
from runtime.algebra import frame_sample
from runtime.algebra.frame import frame_plan
from runtime.algebra.frame_formats import FORMATS as FRAME_FORMATS
from runtime.cpu import frames, native
from runtime.cpu.engine import CpuEngine

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/desc.py", "runtime/algebra/frame.py",
           "runtime/algebra/frame_formats.py", "runtime/algebra/frame_sample.py",
           "runtime/cpu/__init__.py", "runtime/cpu/engine.py", "runtime/cpu/frames.py",
           "runtime/cpu/native.py")

FORMATS = ("rgb", "bgr", "rgba", "bgra", "gray", "nv12", "nv21", "i420")
YUV = ("nv12", "nv21", "i420")
# resize, antialias: the four methods a user picks
METHODS = (("bilinear", False), ("nearest", False), ("area", False), ("bilinear", True))
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
XMODES = ("auto", "scalar", "gathers")
NUMPY = CpuEngine("numpy")


def library():
    """The default cpu engine's library."""
    return runtime.engine.get("cpu").library


@pytest.fixture(scope="module", autouse=True)
def compiled():
    """The library, built (a machine with a C compiler: its failure fails the test)."""
    lib = library()
    if lib.dll is None and runtime.engine.get("cpu").path == "numpy":
        pytest.skip("the default cpu engine is on the numpy path: no compiled frames to compare")
    assert lib.dll is not None, lib.reason
    return lib


def make_frame(fmt: str, w: int, h: int, seed: int = 0) -> np.ndarray:
    """Random bytes over the whole u8 range (luma below 16 and chroma at both
    ends included: the clamps are taken) in the format's array shape."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, FRAME_FORMATS[fmt].shape(h, w), dtype=np.uint8)


def numbers(fmt: str, kind: int) -> dict:
    """The normalization cases: plain pixels, ImageNet's, a scale with a fill."""
    gray = fmt == "gray"
    return [dict(),
            dict(mean=120.0 if gray else MEAN, std=57.0 if gray else STD, fill=114),
            dict(scale=1 / 255, mean=0.5 if gray else (0.485, 0.456, 0.406),
                 std=0.25 if gray else (0.229, 0.224, 0.225), fill=(7,) if gray else (0, 128, 255))
            ][kind]


def check(plan, f, xmode="auto", threads=1):
    want = frame_sample.sample(plan, f)
    got = frames.sample(plan, f, library=library(), xmode=xmode, threads=threads)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.array_equal(bits(got), bits(want)), \
        f"{plan.describe()} ({xmode}, {threads} threads): " \
        f"{int((bits(got) != bits(want)).sum())} values differ"


# (frame w, h), crop, output (W, H): shrinking, enlarging, mixed, copy, odd, 1x1, edges
SHAPES = (((98, 66), None, (31, 17)),             # odd output from an even frame
          ((98, 66), (0, 0, 97, 65), (31, 17)),   # 97x65 at the top-left corner
          ((98, 66), None, (1, 1)),
          ((98, 66), None, (98, 66)),             # copy on both axes
          ((98, 66), None, (98, 40)),             # copy along x, shrink along y
          ((40, 30), None, (97, 65)),             # enlarging
          ((98, 66), None, (150, 20)),            # mixed: wider, shorter
          ((98, 66), (57, 35, 41, 31), (7, 1)),   # a crop touching the right and bottom edges
          ((98, 66), (57, 35, 41, 31), (50, 40)),
          ((98, 66), (1, 1, 96, 64), (33, 33)),
          ((2, 2), None, (5, 3)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_compiled_equals_numpy_on_every_method_fit_and_order(fmt):
    for (i, ((fw, fh), crop, size)), (resize, aa), fit, order, kind in itertools.product(
            enumerate(SHAPES), METHODS, ("stretch", "letterbox"), ("rgb", "bgr"), range(3)):
        if order == "bgr" and fmt == "gray":
            continue
        f = make_frame(fmt, fw, fh, seed=i)
        plan = frame_plan(f.shape, fmt, size=size, crop=crop, fit=fit, resize=resize,
                          antialias=aa, order=order, **numbers(fmt, kind))
        for xmode in XMODES:
            check(plan, f, xmode)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("resize,aa", METHODS)
def test_large_frames_in_bands_on_the_workers(fmt, resize, aa):
    """A camera-sized frame, the bands on two threads and the edge columns
    of every row taken by the AVX2 path and the scalar one alike."""
    f = make_frame(fmt, 320, 180, seed=3)
    for size, fit in (((96, 96), "letterbox"), ((97, 50), "stretch"), ((500, 301), "stretch"),
                      ((45, 40), "stretch"), ((160, 90), "stretch"), ((320, 180), "stretch")):
        plan = frame_plan(f.shape, fmt, size=size, fit=fit, resize=resize, antialias=aa,
                          **numbers(fmt, 1))
        for xmode in XMODES:
            check(plan, f, xmode, threads=2)


def test_a_frame_ending_at_a_guard_page():
    """The AVX2 gathers read 32-bit words: none may reach past the frame's
    last byte (the page after it is unreadable, so a read there crashes)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("mprotect through ctypes: Linux")
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    for fmt, (w, h) in (("nv21", (64, 40)), ("i420", (62, 42)), ("rgb", (61, 33)),
                        ("bgra", (37, 21)), ("gray", (71, 29)), ("nv12", (2, 2))):
        shape = FRAME_FORMATS[fmt].shape(h, w)
        n = int(np.prod(shape))
        pages = -(-n // page) + 1
        buf = mmap.mmap(-1, pages * page)
        whole = np.frombuffer(buf, np.uint8)
        guard = ctypes.c_void_p(whole.ctypes.data + (pages - 1) * page)
        f = whole[(pages - 1) * page - n:(pages - 1) * page].reshape(shape)
        f[...] = make_frame(fmt, w, h)
        assert libc.mprotect(guard, page, 0) == 0   # PROT_NONE
        try:
            for size, resize in (((w, h), "bilinear"), ((w // 2 + 1, h // 3 + 1), "bilinear"),
                                 ((w * 2, h), "nearest"), ((max(1, w // 3), 7), "area")):
                for xmode in XMODES:
                    check(frame_plan(shape, fmt, size=size, resize=resize), f, xmode)
        finally:
            libc.mprotect(guard, page, 3)             # PROT_READ | PROT_WRITE
            del f, whole


LAYOUTS = ("nchw", "nhwc", "in_out_channel", "texture_2d", "tflite_single_texture_2d",
           "in_out_width", "nChw16c")
DTYPES = ("f32", "f16", "bf16", "u8", "s8")


@pytest.mark.parametrize("fmt", ("nv21", "i420", "rgba", "gray"))
def test_written_into_layouts_as_the_numpy_path_converts(fmt):
    """``place`` (straight into the layout's memory, rounded by the dtype
    rules) gives the bits of the numpy path's tensor converted by to_image."""
    f = make_frame(fmt, 98, 66, seed=5)
    kw = dict(format=fmt, size=(33, 17), fit="letterbox", **numbers(fmt, 1))
    for layout, dtype in itertools.product(LAYOUTS, DTYPES):
        if dtype == "bf16" and layout not in ("nchw", "nhwc", "nChw16c"):
            continue   # bf16: buffers only
        got = runtime.from_frame(f, layout, dtype=dtype, engine="cpu", **kw)
        out = np.full(got.shape, 3, got.dtype)
        again = runtime.from_frame(f, layout, dtype=dtype, engine="cpu", out=out, **kw)
        want = runtime.from_frame(f, layout, dtype=dtype, engine=NUMPY, **kw)
        assert again is out and np.array_equal(bits(out), bits(got)), (layout, dtype)
        assert np.array_equal(bits(got), bits(want)), (layout, dtype)


def test_where_the_c_writes_straight_into_the_layout():
    from runtime import ImageDesc, image_layout
    from runtime.algebra.desc import MemoryDesc
    dims = (1, 3, 5, 7)
    assert frames.target(MemoryDesc(dims, "f32", tag="nchw"), dims) == ("f32", 140, 28, 4, 0)
    assert frames.target(MemoryDesc(dims, "f16", tag="nhwc"), dims) == ("f16", 2, 42, 6, 0)
    assert frames.target(ImageDesc(image_layout("in_out_channel"), dims, "f16").memory,
                         dims) == ("f16", 2, 56, 8, 1)
    assert frames.target(MemoryDesc((1, 1, 5, 7), "u8", tag="nChw16c"), (1, 1, 5, 7)) == \
        ("u8", 1, 112, 16, 15)
    # W padded to a block between channels: converted from the tensor instead
    assert frames.target(ImageDesc(image_layout("in_out_width"), dims, "f16").memory,
                         dims) is None
    assert frames.target(MemoryDesc(dims, "s32", tag="nchw"), dims) is None


@pytest.mark.parametrize("fmt,fit,resize,aa,layout,dtype", [
    ("nv21", "letterbox", "bilinear", False, "in_out_channel", "f16"),
    ("nv12", "stretch", "area", False, "nchw", "f32"),
    ("i420", "letterbox", "nearest", False, "nhwc", "u8"),
    ("bgra", "stretch", "bilinear", True, "texture_2d", "f16"),
    ("gray", "letterbox", "bilinear", False, "in_out_channel", "u8"),
    ("nv21", "stretch", "bilinear", True, "nhwc", "bf16"),
    ("rgb", "stretch", "area", False, "nChw16c", "s8")])
def test_cpu_equals_opencl(fmt, fit, resize, aa, layout, dtype, cl_engine):
    f = make_frame(fmt, 130, 72, seed=9)
    kw = dict(format=fmt, size=(61, 45), crop=(2, 4, 120, 66), fit=fit, resize=resize,
              antialias=aa, order="bgr" if fmt != "gray" else "rgb", **numbers(fmt, 1))
    cpu = runtime.from_frame(f, layout, dtype=dtype, engine="cpu", **kw)
    dev = runtime.from_frame(f, layout, dtype=dtype, engine=cl_engine, **kw)
    assert cpu.shape == dev.shape and np.array_equal(bits(cpu), bits(dev))


def test_many_threads_on_one_engine():
    """8 threads x 20 calls on the cpu engine (the library's workers busy
    with one call while others run theirs alone) give the single-threaded bits."""
    cases = [("nv21", (320, 320), "in_out_channel", "f16"), ("rgb", (97, 65), "nchw", "f32"),
             ("i420", (224, 224), "nhwc", "f32"), ("gray", (64, 48), "in_out_channel", "u8"),
             ("nv12", (300, 171), "nchw", "f32")]
    sources = {fmt: make_frame(fmt, 640, 360, seed=i) for i, (fmt, *_) in enumerate(cases)}

    def one(case):
        fmt, size, layout, dtype = case
        return runtime.from_frame(sources[fmt], layout, format=fmt, size=size, dtype=dtype,
                                  fit="letterbox", engine="cpu", **numbers(fmt, 1))
    want = [one(c) for c in cases]
    got = []

    def work(t):
        for i in range(20):
            k = (t + i) % len(cases)
            got.append((k, one(cases[k])))
    in_threads(work, 8)
    assert len(got) == 160
    assert all(np.array_equal(bits(v), bits(want[k])) for k, v in got)


def test_the_numpy_path_still_works():
    f = make_frame("nv21", 98, 66)
    kw = dict(format="nv21", size=(40, 30), mean=MEAN, std=STD, dtype="f16")
    compiled_result = runtime.from_frame(f, "in_out_channel", engine="cpu", **kw)
    lib = NUMPY.library
    assert lib.dll is None
    plan = frame_plan(f.shape, "nv21", size=(40, 30))
    assert np.array_equal(frames.sample(plan, f, library=lib), frame_sample.sample(plan, f))
    assert frames.place(plan, f, runtime.MemoryDesc(plan.dims, "f32"), library=lib) is None
    got = runtime.from_frame(f, "in_out_channel", engine=NUMPY, **kw)
    assert np.array_equal(bits(got), bits(compiled_result))


SANITIZED = """
import itertools, numpy as np
from runtime.algebra import frame_sample
from runtime.algebra.frame import frame_plan
from runtime.algebra.frame_formats import FORMATS
from runtime.cpu import frames
from runtime.cpu.engine import ENGINE
n = 0
for fmt in ("nv21", "i420", "rgb", "bgra", "gray"):
    for (w, h), size, (resize, aa), fit in itertools.product(
            ((98, 66), (2, 2)), ((31, 17), (98, 66), (150, 20), (1, 1)),
            (("bilinear", False), ("nearest", False), ("area", False), ("bilinear", True)),
            ("stretch", "letterbox")):
        f = np.random.default_rng(n).integers(0, 256, FORMATS[fmt].shape(h, w), dtype=np.uint8)
        plan = frame_plan(f.shape, fmt, size=size, resize=resize, antialias=aa, fit=fit)
        want = frame_sample.sample(plan, f)
        for xmode in ("auto", "scalar", "gathers"):
            got = frames.sample(plan, f, library=ENGINE.library, xmode=xmode, threads=2)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (fmt, size, xmode)
        n += 1
print("swept", n)
"""


@pytest.mark.thorough
def test_sanitizers_find_nothing_in_a_frame_sweep(tmp_path):
    """Every format and method at small and odd sizes, built with ASan and
    UBSan (test_cpu_compiled.py's build): the numpy path's bits, no report."""
    from cpu.test_cpu_compiled import _sanitized
    done = _sanitized(SANITIZED, tmp_path)
    assert done.returncode == 0 and "swept 320" in done.stdout, done.stderr[-3000:]
    assert "runtime error" not in done.stderr and "Sanitizer" not in done.stderr


def test_one_library_for_every_plan():
    """Numbers and tables are data: the library's source names no plan, and
    a new crop, size or normalization builds nothing."""
    source = native.render()
    assert "clayout_frame(" in source
    lib = library()
    f = make_frame("nv21", 98, 66)
    for crop in ((0, 0, 98, 66), (3, 5, 61, 41), (10, 2, 20, 30)):
        frames.sample(frame_plan(f.shape, "nv21", crop=crop, size=(17, 9), mean=crop[0]), f,
                      library=lib)
    assert native.library(runtime.engine.get("cpu").path).path == lib.path
    assert native.render() == source
