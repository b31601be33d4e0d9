"""``clayout frame`` (runtime/cli/frame.py): a frame file as a model input.

Every happy path equals ``runtime.from_frame`` on the same array bit for bit;
every failure exits 1 (2 for usage errors) with one line on stderr naming the
problem, and leaves the folder as it was (no output, no temporary file).
"""
import sys

import numpy as np
import pytest

import runtime

from conftest import bits, needs, run, same_bits

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/args.py", "runtime/cli/frame.py", "runtime/frame_files.py")

RNG = np.random.default_rng(11)
MEAN, STD = "123.675,116.28,103.53", "58.395,57.12,57.375"
MEAN_T, STD_T = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)


def nv21(width=64, height=36):
    return RNG.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    monkeypatch.delenv("CLAYOUT_ENGINE", raising=False)
    monkeypatch.delenv("CLAYOUT_DEBUG", raising=False)


def frame_ok(capsys, *argv):
    code, out, err = run(capsys, "frame", *argv)
    assert code == 0, err
    assert err == "" and out.count("\n") == 1 and out.startswith("wrote "), out
    return out


# -- .npy and raw frames -----------------------------------------------------------------
@pytest.mark.parametrize("engine", ["cpu", "reference"])
def test_npy_nv21_matches_from_frame(tmp_path, capsys, engine):
    frame = nv21()
    np.save(tmp_path / "cam.npy", frame)
    out = frame_ok(capsys, tmp_path / "cam.npy", "-o", tmp_path / "x.npy", "--format", "nv21",
                   "--size", "32x24", "--mean", MEAN, "--std", STD, "--layout", "in_out_channel",
                   "--dtype", "f16", "--engine", engine)
    want = runtime.from_frame(frame, "in_out_channel", format="nv21", size=(32, 24),
                              mean=MEAN_T, std=STD_T, dtype="f16", engine=engine)
    assert same_bits(np.load(tmp_path / "x.npy"), want)
    assert want.shape == (24, 32, 4)
    assert out == (f"wrote {tmp_path / 'x.npy'}: in_out_channel image 32x24 RGBA f16 of dims "
                   f"1x3x24x32, array (24, 32, 4) (from {tmp_path / 'cam.npy'}: frame nv21 bt601 "
                   "64x36 -> 32x24 stretch bilinear rgb)\n")


@pytest.mark.parametrize("name, fmt", [("cam.nv21", None), ("cam.yuv", "nv21"),
                                       ("cam.bin", "nv21")])
def test_raw_file_equals_the_npy(tmp_path, capsys, name, fmt):
    frame = nv21()
    np.save(tmp_path / "cam.npy", frame)
    frame.tofile(tmp_path / name)
    common = ["--size", "32,24", "--mean", MEAN, "--std", STD, "--layout", "in_out_channel",
              "--dtype", "f16"]
    frame_ok(capsys, tmp_path / "cam.npy", "-o", tmp_path / "a.npy", "--format", "nv21", *common)
    frame_ok(capsys, tmp_path / name, "-o", tmp_path / "b.npy", "--frame-size", "64x36",
             *(["--format", fmt] if fmt else []), *common)
    assert same_bits(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


@pytest.mark.parametrize("fmt, shape", [("i420", (36 * 3 // 2, 64)), ("bgr", (36, 64, 3)),
                                        ("gray", (36, 64))])
def test_raw_formats(tmp_path, capsys, fmt, shape):
    frame = RNG.integers(0, 256, shape, dtype=np.uint8)
    frame.tofile(tmp_path / "cam.raw")
    frame_ok(capsys, tmp_path / "cam.raw", "-o", tmp_path / "x.npy", "--format", fmt,
             "--frame-size", "64x36", "--layout", "nchw", "--order", "bgr")
    want = runtime.from_frame(frame, "nchw", format=fmt, order="bgr")
    assert same_bits(np.load(tmp_path / "x.npy"), want)


def test_letterbox_fill_into_nchw(tmp_path, capsys):
    frame = nv21(64, 36)
    np.save(tmp_path / "cam.npy", frame)
    frame_ok(capsys, tmp_path / "cam.npy", "-o", tmp_path / "x.npy", "--format", "nv21",
             "--size", "32x32", "--fit", "letterbox", "--fill", "114,0,255", "--yuv", "bt709",
             "--layout", "nchw")
    got = np.load(tmp_path / "x.npy")
    want = runtime.from_frame(frame, "nchw", format="nv21", size=(32, 32), fit="letterbox",
                              fill=(114, 0, 255), yuv="bt709")
    assert got.shape == (1, 3, 32, 32) and same_bits(got, want)
    assert (got[0, :, 0, :] == np.array([114, 0, 255], np.float32)[:, None]).all()  # the border


def test_crop_and_nearest(tmp_path, capsys):
    frame = nv21()
    np.save(tmp_path / "cam.npy", frame)
    frame_ok(capsys, tmp_path / "cam.npy", "-o", tmp_path / "x.npy", "--format", "nv12",
             "--crop", "8,4,40,24", "--size", "20x10", "--resize", "nearest", "--layout",
             "in_out_channel")
    want = runtime.from_frame(frame, "in_out_channel", format="nv12", crop=(8, 4, 40, 24),
                              size=(20, 10), resize="nearest")
    assert same_bits(np.load(tmp_path / "x.npy"), want)


@pytest.mark.parametrize("fmt, dims", [("nv21", (1, 3, 24, 32)), ("gray", (1, 1, 24, 32))])
def test_nchw_shape(tmp_path, capsys, fmt, dims):
    frame = nv21() if fmt == "nv21" else RNG.integers(0, 256, (36, 64), dtype=np.uint8)
    np.save(tmp_path / "cam.npy", frame)
    out = frame_ok(capsys, tmp_path / "cam.npy", "-o", tmp_path / "x.npy", "--format", fmt,
                   "--size", "32x24", "--layout", "nchw")
    assert np.load(tmp_path / "x.npy").shape == dims
    assert f"nchw f32 of dims {'x'.join(map(str, dims))}, array {dims}" in out


# -- pictures --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, fmt, ext", [("RGB", "rgb", ".png"), ("RGBA", "rgba", ".png"),
                                            ("L", "gray", ".png"), ("RGB", "rgb", ".jpg")])
def test_picture_matches_from_frame(tmp_path, capsys, mode, fmt, ext):
    image = needs("PIL.Image")
    shape = (30, 40) + ({"RGB": (3,), "RGBA": (4,), "L": ()}[mode])
    path = tmp_path / f"pic{ext}"
    image.fromarray(RNG.integers(0, 256, shape, dtype=np.uint8), mode).save(path)
    decoded = np.asarray(image.open(path))
    out = frame_ok(capsys, path, "-o", tmp_path / "x.npy", "--size", "16x16", "--fit",
                   "letterbox", "--fill", "114", "--layout", "nchw")
    want = runtime.from_frame(decoded, "nchw", format=fmt, size=(16, 16), fit="letterbox",
                              fill=114)
    assert same_bits(np.load(tmp_path / "x.npy"), want)
    assert f"frame {fmt} 40x30 -> 16x16 letterbox" in out


def test_picture_as_bgr_is_the_same_input(tmp_path, capsys):
    image = needs("PIL.Image")
    image.fromarray(RNG.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(tmp_path / "p.png")
    for fmt in ("rgb", "bgr"):
        frame_ok(capsys, tmp_path / "p.png", "-o", tmp_path / f"{fmt}.npy", "--format", fmt,
                 "--layout", "in_out_channel")
    assert same_bits(np.load(tmp_path / "rgb.npy"), np.load(tmp_path / "bgr.npy"))


# -- failures ----------------------------------------------------------------------------------
def write_inputs(folder):
    np.save(folder / "cam.npy", nv21())
    nv21().tofile(folder / "cam.nv21")
    np.save(folder / "odd.npy", np.zeros((54, 63), np.uint8))
    np.save(folder / "f32.npy", np.zeros((54, 64), np.float32))
    (folder / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not a picture")
    (folder / "cam.bin").write_bytes(b"\0" * 10)


ERRORS = [
    (["missing.npy", "--format", "nv21"], 1, "cannot read missing.npy: No such file"),
    (["missing.png"], 1, "cannot read missing.png: No such file"),
    (["bad.png"], 1, "bad.png: not a readable PNG/JPEG picture"),
    (["cam.nv21", "--frame-size", "64x38"], 1,
     "cam.nv21: a 64x38 nv21 frame is 3648 bytes (57x64), but the file holds 3456 bytes"),
    (["cam.nv21", "--frame-size", "63x36"], 1, "--frame-size 63x36: nv21 needs an even width"),
    (["cam.nv21"], 1, "cam.nv21: a raw frame file has no header; give its size with --frame-size"),
    (["odd.npy", "--format", "nv21"], 1, "odd.npy: frame of shape (54, 63) does not fit format nv21"),
    (["f32.npy", "--format", "nv21"], 1,
     "f32.npy: a frame is a u8 array (numpy uint8), got float32"),
    (["cam.npy"], 1, "cam.npy: give --format (rgb, bgr, rgba, bgra, gray, nv12, nv21, i420)"),
    (["cam.bin"], 1, "cam.bin: not a frame file clayout knows by its name"),
    (["cam.npy", "--format", "nv21", "--frame-size", "32x18"], 1,
     "cam.npy: --frame-size 32x18, but the frame is 64x36"),
    (["cam.npy", "--format", "nv21", "--mean", "1,2"], 1,
     "--mean takes a number or 3 numbers (one per output channel), got 2"),
    (["cam.npy", "--format", "nv21", "--std", "0"], 1, "--std must not be 0"),
    (["cam.npy", "--format", "nv21", "--crop", "0,0,65,36"], 1,
     "--crop (x=0, y=0, w=65, h=36) is not inside the 64x36 frame"),
    (["cam.npy", "--format", "nv21", "--dtype", "s32"], 1,
     "--dtype s32: clayout frame writes f32, f16, bf16, u8, s8"),
    (["cam.npy", "--format", "nv21", "--layout", "in_out_chanel"], 1,
     "--layout 'in_out_chanel' is neither an activation image layout nor a 4-D buffer tag"),
    (["cam.npy", "--format", "nv21", "--layout", "conv2d_filter"], 1,
     "clayout frame writes a model input (N,C,H,W): 'conv2d_filter' is a filter layout"),
    (["cam.npy", "--format", "nv21", "-o", "nowhere/x.npy"], 1,
     "cannot write nowhere/x.npy: folder nowhere does not exist"),
    (["cam.npy", "--format", "nv21", "-o", "x.txt"], 1,
     "cannot write x.txt: clayout frame writes a .npy array, but the name has .txt"),
    (["cam.npy", "--format", "nv21", "--size", "32by24"], 2,
     "argument --size: size '32by24': expected WIDTHxHEIGHT or WIDTH,HEIGHT"),
    (["cam.npy", "--format", "nv21", "--size", "0x24"], 2, "argument --size: size '0x24'"),
    (["cam.npy", "--format", "yuyv"], 2, "argument --format: invalid choice: 'yuyv'"),
    (["cam.npy", "--format", "nv21", "--crop", "1,2,3"], 2, "argument --crop: crop '1,2,3'"),
    (["cam.npy", "--format", "nv21", "--mean", "a,b,c"], 2, "argument --mean: 'a,b,c'"),
]


@pytest.mark.parametrize("argv, status, text", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors(tmp_path, capsys, monkeypatch, argv, status, text):
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path)
    before = listing(tmp_path)
    if "-o" not in argv:
        argv = [*argv, "-o", "x.npy"]
    if "--layout" not in argv:
        argv = [*argv, "--layout", "in_out_channel"]
    code, out, err = run(capsys, "frame", *argv)
    assert code == status and out == ""
    line = err.splitlines()[-1]
    prefix = "clayout: error: " if status == 1 else "clayout frame: error: "
    assert line.startswith(prefix) and text in line, err
    if status == 1:
        assert err.count("\n") == 1, err
    assert listing(tmp_path) == before   # no output, no temporary file


def test_failure_keeps_the_old_output(tmp_path, capsys):
    np.save(tmp_path / "cam.npy", nv21())
    (tmp_path / "x.npy").write_bytes(b"old")
    code, _, err = run(capsys, "frame", tmp_path / "cam.npy", "-o", tmp_path / "x.npy",
                       "--format", "nv21", "--layout", "in_out_channel", "--mean", "1,2")
    assert code == 1 and err.count("\n") == 1
    assert (tmp_path / "x.npy").read_bytes() == b"old"
    assert listing(tmp_path) == ["cam.npy", "x.npy"]


def test_without_pillow_the_error_names_the_extra(tmp_path, capsys, monkeypatch):
    (tmp_path / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setitem(sys.modules, "PIL", None)        # an import of PIL now fails
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    code, out, err = run(capsys, "frame", tmp_path / "p.png", "-o", tmp_path / "x.npy",
                         "--layout", "nchw")
    assert code == 1 and err.count("\n") == 1
    assert "pip install 'clayout[image]'" in err
    assert listing(tmp_path) == ["p.png"]


def test_unreadable_truncated_picture(tmp_path, capsys):
    image = needs("PIL.Image")
    image.fromarray(RNG.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(tmp_path / "p.png")
    data = (tmp_path / "p.png").read_bytes()
    (tmp_path / "p.png").write_bytes(data[:len(data) // 2])
    code, out, err = run(capsys, "frame", tmp_path / "p.png", "-o", tmp_path / "x.npy",
                         "--layout", "nchw")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"clayout: error: {tmp_path / 'p.png'}: not a readable PNG/JPEG"), err
    assert listing(tmp_path) == ["p.png"]


def test_help_lists_the_options(capsys):
    code, out, err = run(capsys, "frame", "--help")
    assert code == 0
    for option in ("--output", "--format", "--frame-size", "--size", "--crop", "--fit",
                   "--fill", "--resize", "--mean", "--std", "--order", "--yuv", "--layout",
                   "--dtype", "--engine", "nv21", "letterbox", "bt601-full"):
        assert option in out, option
    code, out, err = run(capsys, "--help")
    assert code == 0 and "frame" in out
