"""``clayout frame`` and the .npy reader given the files users have: pictures
turned by their EXIF orientation, huge or odd pictures that make Pillow warn,
malformed .npy files, and frames the library refuses before any option was
given (runtime/cli/frame.py, runtime/fileio.py; docs/cli.md, frame).

Each failure exits 1 with one line ``clayout: error: ...`` naming the file,
no traceback, and leaves the folder as it was; each Pillow warning is at
most one ``clayout: note:`` line (checked in a child process, where a raw
warning would reach stderr)."""
import struct
import zlib

import numpy as np
import pytest

import runtime

from conftest import needs, run, run_sub

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/__init__.py", "runtime/cli/frame.py", "runtime/errors.py",
           "runtime/frame_files.py")

image = needs("PIL.Image")
ImageOps = needs("PIL.ImageOps")

RNG = np.random.default_rng(5)
ORIENTATION = 0x0112
# what each EXIF orientation does to the stored pixels to show them upright, in numpy
UPRIGHT = {1: lambda a: a, 2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1],
           4: lambda a: a[::-1], 5: lambda a: a.transpose(1, 0, 2),
           6: lambda a: np.rot90(a, -1), 7: lambda a: a[::-1, ::-1].transpose(1, 0, 2),
           8: lambda a: np.rot90(a, 1)}


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    monkeypatch.delenv("CLAYOUT_ENGINE", raising=False)
    monkeypatch.delenv("CLAYOUT_DEBUG", raising=False)
    monkeypatch.delenv("CLAYOUT_MAX_BYTES", raising=False)


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def picture_array(height=3, width=5):
    """Small, asymmetric: every turn and flip of it differs."""
    return RNG.integers(0, 256, (height, width, 3), dtype=np.uint8)


def save_with_orientation(path, arr, orientation, **options):
    exif = image.Exif()
    if orientation is not None:
        exif[ORIENTATION] = orientation
    image.fromarray(arr).save(path, exif=exif, **options)


def frame_pixels(capsys, path, *options):
    """clayout frame PATH into nchw f32 (no resize, no normalizing): the
    frame's pixels as (h, w, c), and stderr."""
    out = path.with_name(path.stem + ".out.npy")
    code, stdout, err = run(capsys, "frame", path, "-o", out, "--layout", "nchw", *options)
    assert code == 0, err
    assert stdout.startswith("wrote ") and stdout.count("\n") == 1, stdout
    arr = np.load(out)[0].transpose(1, 2, 0)
    assert (arr == np.round(arr)).all()
    return arr.astype(np.uint8), err


def assert_one_error(code, out, err, name, *texts):
    assert code == 1 and out == "", (code, out, err)
    assert err.count("\n") == 1 and err.startswith("clayout: error: "), err
    assert "Traceback" not in err and "Warning" not in err, err
    assert str(name) in err, err
    for text in texts:
        assert text in err, (text, err)


# -- 1. EXIF orientation ---------------------------------------------------------------------
@pytest.mark.parametrize("orientation", range(1, 9))
def test_png_comes_in_upright(tmp_path, capsys, orientation):
    """A phone's picture tagged 1..8: read as cv2.imread and ImageOps.exif_transpose
    show it; --no-exif-orientation: the stored pixels."""
    stored = picture_array()
    path = tmp_path / "photo.png"
    save_with_orientation(path, stored, orientation)
    want = UPRIGHT[orientation](stored)
    with image.open(path) as picture:   # Pillow's own rule agrees with the table above
        assert (np.asarray(ImageOps.exif_transpose(picture).convert("RGB")) == want).all()
    got, err = frame_pixels(capsys, path)
    assert err == ""
    assert got.shape == want.shape and (got == want).all()
    got, err = frame_pixels(capsys, path, "--no-exif-orientation")
    assert err == "" and (got == stored).all()


@pytest.mark.parametrize("orientation", range(1, 9))
def test_png_orientation_is_what_opencv_reads(tmp_path, capsys, orientation):
    cv2 = needs("cv2")
    path = tmp_path / "photo.png"
    save_with_orientation(path, picture_array(), orientation)
    got, _ = frame_pixels(capsys, path)
    assert (got == cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1]).all()


@pytest.mark.parametrize("orientation", range(1, 9))
def test_jpeg_comes_in_upright(tmp_path, capsys, orientation):
    """JPEG is lossy: the reference is the decoded stored pixels, turned."""
    path = tmp_path / "photo.jpg"
    save_with_orientation(path, picture_array(6, 10), orientation, quality=100)
    with image.open(path) as picture:
        stored = np.asarray(picture.convert("RGB"))
    assert stored.shape == (6, 10, 3)
    got, err = frame_pixels(capsys, path)
    assert err == "" and (got == UPRIGHT[orientation](stored)).all()
    got, err = frame_pixels(capsys, path, "--no-exif-orientation")
    assert err == "" and (got == stored).all()


@pytest.mark.parametrize("orientation", [None, 0, 9, 65535])
def test_no_or_meaningless_orientation_keeps_the_stored_pixels(tmp_path, capsys, orientation):
    stored = picture_array()
    save_with_orientation(tmp_path / "photo.png", stored, orientation)
    got, err = frame_pixels(capsys, tmp_path / "photo.png")
    assert err == "" and (got == stored).all()


def test_frame_size_is_the_upright_size(tmp_path, capsys):
    save_with_orientation(tmp_path / "photo.png", picture_array(3, 5), 6)
    frame_pixels(capsys, tmp_path / "photo.png", "--frame-size", "3x5")
    code, out, err = run(capsys, "frame", tmp_path / "photo.png", "-o", tmp_path / "x.npy",
                         "--layout", "nchw", "--frame-size", "5x3")
    assert_one_error(code, out, err, "photo.png", "--frame-size 5x3, but the frame is 3x5")


def test_upright_picture_as_bgr_into_a_layout(tmp_path, capsys):
    """The turn happens before the rest of the pipeline: bgr, crop, resize."""
    stored = picture_array(8, 12)
    save_with_orientation(tmp_path / "photo.png", stored, 8)
    code, _, err = run(capsys, "frame", tmp_path / "photo.png", "-o", tmp_path / "x.npy",
                       "--format", "bgr", "--crop", "1,2,6,9", "--size", "4x4",
                       "--layout", "in_out_channel", "--dtype", "f16")
    assert code == 0, err
    upright = np.ascontiguousarray(UPRIGHT[8](stored)[..., ::-1])
    want = runtime.from_frame(upright, "in_out_channel", format="bgr", crop=(1, 2, 6, 9),
                              size=(4, 4), dtype="f16")
    assert (np.load(tmp_path / "x.npy").view(np.uint16) == want.view(np.uint16)).all()


# -- 2. Pillow's warnings: huge pictures, corrupt EXIF, palettes ----------------------------
def png_header_only(path, width, height, mode=0):
    """A PNG that declares WIDTHxHEIGHT gray pixels and holds almost none:
    what a decompression bomb looks like to a reader of headers."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, mode, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def test_a_9500x9500_png_is_refused_before_decoding(tmp_path):
    """The user's file: 88 KB of PNG, 90 Mpixel; Pillow would warn
    (DecompressionBombWarning) on stderr: one clean line instead."""
    image.new("L", (9500, 9500)).save(tmp_path / "big.png")
    assert (tmp_path / "big.png").stat().st_size < 200_000
    done = run_sub("frame", "big.png", "-o", "x.npy", "--layout", "nchw", cwd=tmp_path)
    assert_one_error(done.returncode, done.stdout, done.stderr, "big.png",
                     "a picture of 9500x9500 (90250000 pixels)", "at most 67108864 pixels")
    assert listing(tmp_path) == ["big.png"]


@pytest.mark.parametrize("size, text", [
    ((8193, 8192), "8193x8192 (67117056 pixels)"),
    ((40000, 40000), "1600000000 pixels"),   # over twice Pillow's own limit: it refuses to open
    ((1, 70_000_000), "1x70000000 (70000000 pixels)"),
])
def test_header_over_the_budget(tmp_path, capsys, size, text):
    png_header_only(tmp_path / "bomb.png", *size)
    code, out, err = run(capsys, "frame", tmp_path / "bomb.png", "-o", tmp_path / "x.npy",
                         "--layout", "nchw")
    assert_one_error(code, out, err, "bomb.png", text, "67108864 pixels")
    assert listing(tmp_path) == ["bomb.png"]


def test_the_budget_itself_is_read(tmp_path, capsys):
    """8192x8192 (exactly 64 Mpixel) is decoded: the limit is inclusive."""
    image.new("L", (8192, 8192), 7).save(tmp_path / "edge.png")
    code, out, err = run(capsys, "frame", tmp_path / "edge.png", "-o", tmp_path / "x.npy",
                         "--layout", "nchw", "--size", "4x4", "--resize", "nearest")
    assert code == 0 and err == "", err
    assert (np.load(tmp_path / "x.npy") == 7).all()


def test_decoded_picture_over_the_host_memory_limit(tmp_path, capsys, monkeypatch):
    image.fromarray(picture_array(100, 100)).save(tmp_path / "p.png")
    monkeypatch.setenv("CLAYOUT_MAX_BYTES", "20000")
    code, out, err = run(capsys, "frame", tmp_path / "p.png", "-o", tmp_path / "x.npy",
                         "--layout", "nchw")
    assert_one_error(code, out, err, "p.png", "the decoded 100x100 picture", "host memory limit")
    assert listing(tmp_path) == ["p.png"]


def exif_block(data: bytes) -> int:
    """Where the TIFF header of the EXIF block starts in a JPEG or PNG file."""
    at = data.find(b"Exif\x00\x00")
    if at >= 0:
        return at + 6
    at = data.index(b"eXIf") + 4   # PNG: the chunk's data is the TIFF directory itself
    return at


def fix_png_crc(data: bytearray) -> bytearray:
    at = data.index(b"eXIf")
    length = struct.unpack(">I", data[at - 4:at])[0]
    crc = zlib.crc32(bytes(data[at:at + 4 + length])) & 0xFFFFFFFF
    data[at + 4 + length:at + 8 + length] = struct.pack(">I", crc)
    return data


def corrupt(path, how):
    """Patch bytes inside the picture's EXIF block (its size kept)."""
    data = bytearray(path.read_bytes())
    tiff = exif_block(bytes(data))
    order = "<" if data[tiff:tiff + 2] == b"II" else ">"
    ifd = tiff + struct.unpack(order + "I", data[tiff + 4:tiff + 8])[0]
    if how == "entry-count":      # 65535 entries in a block of a few: "Corrupt EXIF data"
        data[ifd:ifd + 2] = b"\xff\xff"
    elif how == "tiff-header":    # not a TIFF directory at all
        data[tiff:tiff + 4] = b"XX\x00*"
    elif how == "tag-offset":     # the Make string's data far past the block's end
        for entry in range(ifd + 2, ifd + 2 + 12 * 2, 12):
            if struct.unpack(order + "H", data[entry:entry + 2])[0] == 0x010F:
                data[entry + 8:entry + 12] = struct.pack(order + "I", 60000)
    if path.suffix == ".png":
        data = fix_png_crc(data)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["entry-count", "tiff-header", "tag-offset"])
@pytest.mark.parametrize("suffix", [".jpg", ".png"])
def test_corrupt_exif_is_ignored_with_one_note(tmp_path, how, suffix):
    """The rule (docs/cli.md): a corrupt EXIF block is ignored as a whole, the
    stored pixels are read, exit 0, one note; no raw Pillow warning."""
    path = tmp_path / f"photo{suffix}"
    exif = image.Exif()
    exif[0x010F] = "A camera maker's name, long enough to live outside its entry"
    exif[ORIENTATION] = 6
    image.fromarray(picture_array(4, 6)).save(path, exif=exif, quality=100)
    with image.open(path) as picture:
        stored = np.asarray(picture.convert("RGB"))
    corrupt(path, how)
    for options, notes in (([], 1), (["--no-exif-orientation"], 0)):
        done = run_sub("frame", path.name, "-o", "x.npy", "--layout", "nchw", *options,
                       cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == notes, done.stderr
        if notes:
            assert lines[0].startswith(f"clayout: note: {path.name}: its EXIF data is corrupt "
                                       "and was ignored"), done.stderr
        got = np.load(tmp_path / "x.npy")[0].transpose(1, 2, 0)
        assert (got == stored).all()


@pytest.mark.parametrize("fmt", [None, "rgb", "gray"])
def test_palette_with_transparency(tmp_path, fmt):
    """A palette PNG with transparency bytes: RGBA by default; --format rgb or
    gray keeps each pixel's palette colour. Pillow's 'Palette images with
    Transparency expressed in bytes' warning never shows."""
    palette = image.new("P", (6, 4))
    palette.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 10, 20, 30] + [0, 0, 0] * 252)
    indices = RNG.integers(0, 4, (4, 6), dtype=np.uint8)
    palette.putdata(indices.reshape(-1).tolist())
    palette.save(tmp_path / "logo.png", transparency=b"\x00\x80\xff\x40")
    options = ["--format", fmt] if fmt else []
    done = run_sub("frame", "logo.png", "-o", "x.npy", "--layout", "nchw", *options,
                   cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert f"frame {fmt or 'rgba'} 6x4" in done.stdout, done.stdout
    colours = np.array([[0, 0, 0, 0], [255, 0, 0, 128], [0, 255, 0, 255], [10, 20, 30, 64]],
                       np.uint8)[indices]
    frame = {None: colours, "rgb": colours[..., :3],
             "gray": np.asarray(image.fromarray(colours[..., :3]).convert("L"))}[fmt]
    want = runtime.from_frame(np.ascontiguousarray(frame), "nchw", format=fmt or "rgba")
    assert (np.load(tmp_path / "x.npy") == want).all()


def test_library_advice_is_a_note_in_options_words(tmp_path):
    """mean and std for pixels in 0..1 without --scale: the API warns; the
    command says it once, as options, and goes on."""
    np.save(tmp_path / "cam.npy", picture_array())
    done = run_sub("frame", "cam.npy", "-o", "x.npy", "--format", "rgb", "--layout", "nchw",
                   "--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Warning" not in done.stderr, done.stderr
    assert lines[0].startswith("clayout: note: --mean "), done.stderr
    assert "--scale" in lines[0], done.stderr
    assert "mean=" not in lines[0] and "scale=" not in lines[0], done.stderr


# -- 3. malformed .npy files, through every command that reads them -------------------------
def npy_v1(header: str, data: bytes = b"") -> bytes:
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def truncated() -> bytes:
    import io
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((8, 8, 3), np.uint8))
    return buffer.getvalue()[:-10]


NPY_FILES = {
    # the user's file: the closing brace missing (numpy: TokenError, no file name)
    "unclosed": (npy_v1("{'descr': '<u1', 'fortran_order': False, 'shape': (2, 3", b"\0" * 6),
                 "its header is not the dictionary"),
    # 15 bytes, version 2.0, a header length of almost 4 GiB: refused unread
    "huge-header": (b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{'d",
                    "its header claims 4294967280 bytes, over the 65536"),
    "header-past-end": (b"\x93NUMPY\x01\x00" + struct.pack("<H", 400) + b"{'descr'",
                        "its header claims 400 bytes, but only 8 bytes follow"),
    "truncated-data": (truncated(), "(192 bytes of data) but the file holds 182 bytes"),
    "object-dtype": (npy_v1("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
                            b"\x80\x04N." + b"\0" * 12), "pickled"),
    "overflow": (npy_v1("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (4294967296, 4294967296), }"), "overflows"),
    "overflow-empty": (npy_v1("{'descr': '<u1', 'fortran_order': False, "
                              "'shape': (4294967296, 4294967296, 0), }"), "overflows"),
    "negative": (npy_v1("{'descr': '<u1', 'fortran_order': False, 'shape': (-2, 3), }",
                        b"\0" * 6), "has a negative dim"),
    "version": (b"\x93NUMPY\x07\x00" + b"\0" * 20, "unknown format version 7.0"),
    "not-a-dict": (npy_v1("[1, 2, 3]"), "Header is not a dictionary"),
    "bad-descr": (npy_v1("{'descr': 'zz', 'fortran_order': False, 'shape': (2,), }", b"\0\0"),
                  "descr is not a valid dtype descriptor"),
    "ends-early": (b"\x93NUMPY\x01\x00\x10", "the file ends inside its header"),
}
READERS = {
    "frame": ["frame", "IN", "-o", "out.npy", "--format", "rgb", "--layout", "nchw"],
    "reorder": ["reorder", "IN", "-o", "out.npy", "--src", "nhwc", "--dst", "nchw"],
    "to-image": ["to-image", "IN", "-o", "out.npy", "--layout", "in_out_channel", "--src",
                 "nhwc"],
    "from-image": ["from-image", "IN", "-o", "out.npy", "--layout", "in_out_channel",
                   "--dims", "1,3,2,8"],
}


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("name", NPY_FILES)
def test_malformed_npy(tmp_path, capsys, monkeypatch, name, command):
    data, text = NPY_FILES[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / f"{name}.npy").write_bytes(data)
    argv = [f"{name}.npy" if a == "IN" else a for a in READERS[command]]
    code, out, err = run(capsys, *argv)
    assert_one_error(code, out, err, f"{name}.npy", text)
    if name not in ("truncated-data", "object-dtype"):
        assert "not a readable .npy array" in err
    assert listing(tmp_path) == [f"{name}.npy"]   # no output, no temporary file


def test_malformed_npy_in_a_child_process(tmp_path):
    """The user's two files as the user runs them: no traceback, no
    4 GiB allocation, no raw warning."""
    for name in ("unclosed", "huge-header"):
        (tmp_path / f"{name}.npy").write_bytes(NPY_FILES[name][0])
        done = run_sub("frame", f"{name}.npy", "-o", "out.npy", "--format", "rgb",
                       "--layout", "nchw", cwd=tmp_path)
        assert_one_error(done.returncode, done.stdout, done.stderr, f"{name}.npy",
                         NPY_FILES[name][1], "not a readable .npy array")
    assert (tmp_path / "huge-header.npy").stat().st_size == 15
    assert listing(tmp_path) == ["huge-header.npy", "unclosed.npy"]


def test_python2_header_reads_without_a_warning(tmp_path):
    """numpy reads a Python 2 header ('2L') with a UserWarning of its own:
    the array is read and nothing is said."""
    (tmp_path / "old.npy").write_bytes(npy_v1(
        "{'descr': '|u1', 'fortran_order': False, 'shape': (1L, 2L, 2L, 3L), }",
        bytes(range(12))))
    done = run_sub("reorder", "old.npy", "-o", "out.npy", "--src", "nhwc", "--dst", "nchw",
                   cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (np.load(tmp_path / "out.npy") ==
            np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3).transpose(0, 3, 1, 2)).all()


# -- 4. only options that were given are blamed -----------------------------------------------
@pytest.mark.parametrize("shape, fmt, texts", [
    ((1, 40000), "gray", ["the 40000x1 frame: at most 32768 pixels along an axis are read",
                          "give --crop X,Y,W,H to read a part of it"]),
    ((0, 64, 3), "rgb", ["a frame of shape (0, 64, 3) has no pixels"]),
])
def test_frame_refused_without_size_or_crop(tmp_path, capsys, shape, fmt, texts):
    np.save(tmp_path / "cam.npy", np.zeros(shape, np.uint8))
    code, out, err = run(capsys, "frame", tmp_path / "cam.npy", "-o", tmp_path / "x.npy",
                         "--format", fmt, "--layout", "nchw")
    assert_one_error(code, out, err, "cam.npy", *texts)
    line = err[len("clayout: error: "):]
    assert line.startswith(f"{tmp_path / 'cam.npy'}: "), err   # the file is blamed
    assert "--size" not in line and "size=" not in line and "crop=" not in line, err
    assert not line.startswith("--crop"), err
    assert listing(tmp_path) == ["cam.npy"]


def test_given_options_are_named_as_typed(tmp_path, capsys):
    np.save(tmp_path / "cam.npy", np.zeros((1, 40000), np.uint8))
    base = [tmp_path / "cam.npy", "-o", tmp_path / "x.npy", "--format", "gray",
            "--layout", "nchw"]
    code, out, err = run(capsys, "frame", *base, "--crop", "0,0,40000,1", "--size", "8x1")
    assert_one_error(code, out, err, "--crop 40000x1: at most 32768 pixels")
    code, out, err = run(capsys, "frame", *base, "--crop", "0,0,8,1", "--size", "40000x1")
    assert_one_error(code, out, err, "--size (40000, 1): at most 32768 pixels")


def test_as_options_rewrites_every_api_word():
    from runtime.cli.frame import as_options
    from runtime.errors import ClayoutError
    said = [
        ("the 40000x1 frame: at most 32768 pixels along an axis are read; crop= a part of it",
         "f.npy: the 40000x1 frame: at most 32768 pixels along an axis are read; give --crop "
         "X,Y,W,H to read a part of it"),
        ("crop=(x=0, y=0, w=65, h=36) is not inside the 64x36 frame",
         "--crop (x=0, y=0, w=65, h=36) is not inside the 64x36 frame"),
        ("antialias=True goes with resize='bilinear'; resize='nearest' takes one pixel",
         "--antialias goes with --resize bilinear; --resize nearest takes one pixel"),
        ("yuv= 'bt709' chooses the matrix; leave yuv= out",
         "--yuv bt709 chooses the matrix; leave --yuv out"),
        ("the output is the crop's size (40000, 1): at most 32768 pixels; give size=",
         "f.npy: the output is the crop's size (40000, 1): at most 32768 pixels; give --size"),
        ("a frame of shape (0, 64, 3) has no pixels (64x0)",
         "f.npy: a frame of shape (0, 64, 3) has no pixels (64x0)"),
        ("f.npy: a frame is a u8 array", "f.npy: a frame is a u8 array"),
    ]
    for api, cli in said:
        assert str(as_options(ClayoutError(api), "f.npy")) == cli
