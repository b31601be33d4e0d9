"""The mistakes a new user makes first, one test each, written as the
mistake: what clayout answers (one line naming what was wrong and what is
allowed; exit 1, or 2 for a usage error) or what it now does instead
(docs/cli.md "Errors", docs/decisions.md, docs/layouts.md,
docs/placement.md)."""
import doctest
import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest

import runtime
from runtime import ClayoutError, ImageDesc, image_layout, layout_choice, parse_tag
from runtime.algebra.storage import STORAGES, Limits

from conftest import ROOT, needs, run, run_sub

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/checks.py",)

X = np.arange(30, dtype=np.float32).reshape(1, 5, 2, 3)   # nchw 1x5x2x3
TAG_RULE = ("a tag is letters a..l (upper case: blocked outer part) followed by blocks "
            "like 16b")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An empty working folder holding x.npy (X) and no CLAYOUT_* settings."""
    monkeypatch.chdir(tmp_path)
    for name in ("CLAYOUT_ENGINE", "CLAYOUT_DEBUG", "CLAYOUT_MAX_BYTES"):
        monkeypatch.delenv(name, raising=False)
    np.save(tmp_path / "x.npy", X)
    return tmp_path


def one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("clayout: error: "), err
    return lines[0]


# 1 -------------------------------------------------------------------------------------------
def test_tag_nhcw_suggests_nchw(folder, capsys):
    code, out, err = run(capsys, "reorder", "x.npy", "-o", "y.npy", "--src", "nhcw",
                         "--dst", "nchw")
    assert code == 1 and out == "" and not (folder / "y.npy").exists()
    assert one_error(err) == (
        f"clayout: error: tag 'nhcw': 'n' is not a dim letter (a..l, at most 12 dims) at "
        f"character 1; {TAG_RULE}; 'nhcw' is no alias clayout knows (4-D aliases: nchw, oihw, "
        "mihw, nhwc, ohwi, chwn, ihwo, hwio, iohw, bfyx, byxf, yxfb, fyxb); did you mean 'nchw' "
        "or 'nhwc'?")
    with pytest.raises(ClayoutError, match=r"; did you mean 'nChw16c'\?$"):
        parse_tag("nChw16")
    with pytest.raises(ClayoutError, match=r"; did you mean 'nhwc'\?$"):
        parse_tag("NHWC")                              # the case hint stays as it was
    with pytest.raises(ClayoutError) as caught:        # nothing near: no guess
        parse_tag("abce")
    assert "did you mean" not in str(caught.value) and "alias" not in str(caught.value)


# 2 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["In_Out_Channel", "in-out-channel"])
def test_layout_name_in_another_spelling_suggests_the_one_spelling(folder, capsys, name):
    code, out, err = run(capsys, "info", name, "--dims", "1,5,2,3")
    assert code == 1 and out == ""
    assert one_error(err).startswith(
        f"clayout: error: unknown image layout {name!r} (did you mean 'in_out_channel'? names "
        "are exact: lower case, with _); named layouts: in_out_channel, ")
    with pytest.raises(ClayoutError, match=r"\(did you mean 'in_out_channel'\?\)"):
        image_layout("in_out_chanel")                  # a near miss
    assert image_layout("in_out_channel").name == "in_out_channel"


# 3 -------------------------------------------------------------------------------------------
def test_info_of_a_buffer_larger_than_memory_is_too_big(folder, capsys, monkeypatch):
    monkeypatch.setenv("CLAYOUT_MAX_BYTES", str(1 << 30))
    code, out, err = run(capsys, "info", "tflite_buffer", "--dims", "1000000,1000000,1000,1000")
    assert code == 0 and err == ""
    assert [line for line in out.splitlines() if line.startswith("limit")] == [
        f"limit     {n}x{n} (buffer max allocation: the host memory limit 1.0 GiB, no device "
        "given): too big; no named layout of this kind fits" for n in (8192, 16384)]
    # a device's max allocation bounds a buffer by its bytes, whatever its dtype
    limits = Limits((8192, 8192), (2048, 2048, 2048), 2048, 65536, 1 << 20)
    assert limits.text(STORAGES["buffer"]) == "max allocation 1048576 bytes"
    assert limits.text(STORAGES["image_buffer"]) == "65536 pixels, max allocation 1048576 bytes"
    dims = (1, 4, 1, 100000)                            # 100000 pixels
    assert limits.refusal(ImageDesc(image_layout("tflite_buffer"), dims, "f16")) is None
    assert "over the device's max allocation 1048576 bytes" in \
        limits.refusal(ImageDesc(image_layout("tflite_buffer"), dims, "f32"))


# 4 -------------------------------------------------------------------------------------------
def test_from_image_without_dst_names_the_default_tag(folder, capsys):
    assert run(capsys, "to-image", "x.npy", "-o", "img.npy", "--layout", "in_out_channel")[0] == 0
    code, out, err = run(capsys, "from-image", "img.npy", "-o", "back.npy", "--layout",
                         "in_out_channel", "--dims", "1,5,2,3")
    assert code == 0 and err == ""
    assert out == ("wrote back.npy: nchw 1x5x2x3 f32, array (1, 5, 2, 3) (from in_out_channel "
                   "image)\n")
    assert np.array_equal(np.load("back.npy"), X)


# 5 -------------------------------------------------------------------------------------------
def test_max_image_zero_says_at_least_1(folder, capsys):
    code, out, err = run(capsys, "info", "in_out_channel", "--dims", "1,5,2,3",
                         "--max-image", "0,0")
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == (
        "clayout info: error: argument --max-image: size '0,0': the width and height must be "
        "at least 1 pixel (WIDTH,HEIGHT such as 8192,8192)")


# 6 -------------------------------------------------------------------------------------------
def test_bad_pyopencl_ctx_with_engine_auto_notes_the_fallback(folder):
    argv = ["to-image", "x.npy", "-o", "img.npy", "--layout", "in_out_channel"]
    env = {"PYOPENCL_CTX": "99", "CLAYOUT_ENGINE": None}
    done = run_sub(*argv, "--engine", "auto", cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote img.npy: in_out_channel image 6x2 RGBA f32")
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "clayout: note: engine auto fell back to cpu: "), done.stderr
    if importlib.util.find_spec("pyopencl") is not None:
        assert "PYOPENCL_CTX='99' names no usable OpenCL device" in lines[0]
    quiet = run_sub(*argv, "--engine", "cpu", cwd=folder, env=env)   # asked for cpu: no note
    assert quiet.returncode == 0 and quiet.stderr == ""


# 7 -------------------------------------------------------------------------------------------
def test_choose_layout_without_limits_says_nothing_was_refused(folder, capsys):
    dims = (1, 64, 2048, 2048)               # in_out_channel 32768x2048: no GPU holds it
    choice = layout_choice("activation", dims)
    assert choice.fits and choice.layout.name == "in_out_channel" and choice.limits is None
    assert choice.reason == (
        "activation dims 1,64,2048,2048 f32: in_out_channel (32768x2048, 0 padding lanes) "
        "chosen with no device limits given (pass engine= or limits=), so nothing is refused")
    assert runtime.choose_layout("activation", dims, limits=(8192, 8192)).name != "in_out_channel"
    code, _, err = run(capsys, "info", "any", "--role", "activation", "--dims", "1,64,2048,2048")
    assert code == 0 and err.endswith(
        "chosen with no device limits given (give --max-image W,H), so nothing is refused\n")


# 8 -------------------------------------------------------------------------------------------
def test_dir_runtime_lists_accessor_and_help_says_what_is_there():
    assert {"accessor", "Accessor", "to_image", "choose_layout"} <= set(dir(runtime))
    missing = [name for name in runtime.__all__
               if not re.search(rf"``{re.escape(name)}\b", runtime.__doc__)]
    assert not missing, f"public names the module docstring does not list: {missing}"
    result = doctest.testmod(runtime, verbose=False)
    assert result.failed == 0 and result.attempted > 0
    # dir() and the docstring load nothing: importing runtime still leaves pyopencl out
    probe = ("import sys, runtime; dir(runtime); runtime.__doc__; "
             "print('pyopencl' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


# 9 -------------------------------------------------------------------------------------------
README = (ROOT / "README.md").read_text()


def test_readme_opencl_snippet_runs_as_written(cl_engine):
    block = next(b for b in re.findall(r"```python\n(.*?)```", README, re.S)
                 if "OpenCLEngine()" in b)
    ns = {}                                          # nothing given: the block defines it all
    exec(block.replace("    ...", "    seen = a.copy()"), ns)
    want = ns["nchw_array"].transpose(0, 2, 3, 1).reshape(-1)
    assert np.array_equal(ns["seen"], want)


def test_readme_says_the_demo_prints_a_table(folder, capsys):
    assert "prints the manifest" not in README
    assert "prints a table of where each weight went" in README
    needs("onnx")
    needs("safetensors")
    code, out, _ = run(capsys, "demo", "--engine", "cpu")
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("name "))
    assert header.split() == ["name", "role", "layout", "dims", "image", "dtype", "bytes"]


def test_frictions_a_newcomer_met(cl_engine, tmp_path, capsys, monkeypatch):
    """A host frame into a device out= Memory is uploaded; 'NCHW' as a layout
    says it is a tag; fp16 is taken as a dtype; reorder prints the tags given."""
    from conftest import run
    nv = np.random.default_rng(0).integers(0, 256, (6, 4)).astype(np.uint8)
    out = runtime.Memory.image("in_out_channel", (1, 3, 4, 4), "f32", engine=cl_engine)
    assert runtime.from_frame(nv, "in_out_channel", format="nv21", out=out) is out
    want = runtime.from_frame(nv, "in_out_channel", format="nv21", engine="cpu")
    assert np.array_equal(out.to_numpy(), want)
    with pytest.raises(runtime.ClayoutError, match="reads as the buffer tag 'nchw'"):
        runtime.image_layout("NCHW")
    assert runtime.to_image(np.zeros((1, 3, 2, 2), np.float32), "in_out_channel",
                            dtype="fp16").dtype == np.float16
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.zeros((1, 8, 2, 3), np.float32))
    code, printed, err = run(capsys, "reorder", "x.npy", "-o", "y.npy", "--src", "nchw",
                             "--dst", "nChw16c")
    assert code == 0 and printed.startswith("wrote y.npy: nChw16c f32 of dims 1x8x2x3 (from "
                                            "nchw f32)"), printed + err
