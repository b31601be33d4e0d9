"""clayout output: a network's output file to its tensor, argmax (.npy or a
class mask .png) or the values above a threshold (.csv), every option
checked before the input is read and the output written whole or not at all."""
from __future__ import annotations

import numpy as np
import pytest

import runtime

from conftest import needs, run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/__init__.py", "runtime/cli/demo.py", "runtime/cli/output.py",
           "runtime/doors/read_output.py", "runtime/algebra/output.py",
           "runtime/opencl/output.py")


@pytest.fixture
def seg(tmp_path):
    x = np.random.default_rng(1).standard_normal((1, 6, 5, 7)).astype(np.float32)
    path = tmp_path / "seg.npy"
    np.save(path, runtime.to_image(x, "in_out_channel"))
    return x, path


def test_argmax_tensor_and_csv(seg, tmp_path, capsys):
    x, path = seg
    code, out, err = run(capsys, "output", path, "-o", tmp_path / "a.npy", "--layout",
                         "in_out_channel", "--dims", "1,6,5,7", "--argmax")
    assert code == 0 and "int32 array (1, 5, 7)" in out, err
    assert (np.load(tmp_path / "a.npy") == np.argmax(x, axis=1)).all()
    code, out, err = run(capsys, "output", path, "-o", tmp_path / "p.npy", "--layout",
                         "in_out_channel", "--dims", "1,6,5,7", "--activation", "softmax",
                         "--dst", "nhwc", "--dtype", "f16")
    assert code == 0, err
    p = np.load(tmp_path / "p.npy")
    e = np.exp(x - x.max(1, keepdims=True))
    assert p.dtype == np.float16 and np.allclose(p, (e / e.sum(1, keepdims=True))
                                                 .transpose(0, 2, 3, 1), atol=1e-3)
    code, out, err = run(capsys, "output", path, "-o", tmp_path / "t.csv", "--layout",
                         "in_out_channel", "--dims", "1,6,5,7", "--threshold", "1.5")
    assert code == 0, err
    rows = (tmp_path / "t.csv").read_text().splitlines()
    want = np.argwhere(x > 1.5)
    assert rows[0] == "i0,i1,i2,i3,value" and len(rows) == 1 + len(want)
    assert [list(map(int, r.split(",")[:4])) for r in rows[1:]] == want.tolist()
    assert [float(r.split(",")[4]) for r in rows[1:]] == x[tuple(want.T)].tolist()


def test_a_class_mask_png(seg, tmp_path, capsys):
    needs("PIL")
    from PIL import Image
    from runtime.cli.output import palette
    x, path = seg
    code, out, err = run(capsys, "output", path, "-o", tmp_path / "m.png", "--layout",
                         "in_out_channel", "--dims", "1,6,5,7", "--argmax")
    assert code == 0, err
    pic = np.asarray(Image.open(tmp_path / "m.png").convert("RGB"))
    # a 7x5 mask is drawn 28x larger (within the legend's 200 pixels), each class a square
    want = palette(6)[np.argmax(x, axis=1)[0]].repeat(28, 0).repeat(28, 1)
    assert (pic[:5 * 28, :7 * 28] == want).all()
    assert pic.shape[0] > 5 * 28   # the legend below
    assert "7x5 (drawn 28x larger)" in out


def test_the_palette_keeps_classes_apart():
    """39 classes (a segmentation model's), pairwise >= 40 RGB units apart,
    none white (the legend's background); class 0 black."""
    from runtime.cli.output import palette
    for n in (2, 21, 39, 150):
        p = palette(n).astype(float)
        d = np.linalg.norm(p[:, None] - p[None], axis=2)
        np.fill_diagonal(d, np.inf)
        assert p.shape == (n, 3) and d.min() >= 40, (n, d.min())
        assert p[0].tolist() == [0, 0, 0] and not (p == 255).all(axis=1).any()


@pytest.mark.parametrize("argv, words", [
    (["-o", "x.npy", "--threshold", "0.5"], "write it as .csv"),
    (["-o", "x.csv", "--argmax"], "give --threshold"),
    (["-o", "x.png"], "give --argmax"),
    (["-o", "x.txt", "--argmax"], "writes .npy"),
    (["-o", "x.npy", "--activation", "softmx"], "did you mean 'softmax'"),
    (["-o", "x.npy", "--dequantize", "0.1"], "give SCALE,ZERO_POINT"),
    (["-o", "x.npy", "--dequantize", "0.1,2"], "--dequantize on a f32 output"),
    (["-o", "x.csv", "--threshold", "0.5", "--top-k", "0"], "--top-k=0; allowed"),
    (["-o", "x.npy", "--dtype", "s8"], "dtype s8; allowed: f32, f16"),
])
def test_bad_options_exit_1_and_write_nothing(seg, tmp_path, capsys, monkeypatch, argv, words):
    _, path = seg
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "output", path, "--layout", "in_out_channel", "--dims",
                         "1,6,5,7", *argv)
    assert code == 1 and words in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seg.npy"]


def test_dims_that_do_not_fit(seg, tmp_path, capsys):
    _, path = seg
    code, out, err = run(capsys, "output", path, "-o", tmp_path / "a.npy", "--layout",
                         "in_out_channel", "--dims", "1,6,5,8", "--argmax")
    assert code == 1 and "does not match" in err, err


def test_the_docs_mask_picture_is_what_the_command_draws(tmp_path, capsys):
    """docs/outputs.md shows the mask of a made-up four-class output of the
    demo's picture; drawn again, it is the same picture."""
    needs("PIL")
    from conftest import ROOT
    from runtime.cli.demo import sample_rgb
    rgb = sample_rgb(160, 120).astype(np.float32)
    logits = np.concatenate([np.full((1,) + rgb.shape[:2], 150, np.float32),
                             rgb.transpose(2, 0, 1)])[None]
    np.save(tmp_path / "seg.npy", runtime.to_image(logits, "in_out_channel", dtype="f16"))
    code, out, err = run(capsys, "output", tmp_path / "seg.npy", "-o", tmp_path / "m.png",
                         "--layout", "in_out_channel", "--dims", "1,4,120,160", "--argmax")
    assert code == 0, err
    from PIL import Image   # the mask's pixels (the legend's text is Pillow's font's)
    drawn, shown = (np.asarray(Image.open(p).convert("RGB"))
                    for p in (tmp_path / "m.png", ROOT / "docs/img/output_mask.png"))
    assert drawn.shape == shown.shape and (drawn[:120] == shown[:120]).all()
