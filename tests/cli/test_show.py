"""`clayout show` and runtime.cli.figure: the labelled picture of an image layout."""
import importlib.util
import builtins
import struct

import numpy as np
import pytest

import runtime
from runtime.cli import figure
from runtime.algebra.catalog import ROW
from runtime.reference import formulas

from conftest import require, run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/catalog.py", "runtime/cli/figure.py",
           "runtime/reference/formulas.py")

# the plot extra (`make test` installs it): the tests that draw ask require() for it
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.fixture
def plot():
    """Skip without matplotlib outside CI; fail in CI, where the plot extra is installed."""
    require("matplotlib (pip install 'clayout[plot]')", HAVE_MATPLOTLIB)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def texts(fig) -> list[str]:
    """Every text the figure draws: lane labels, title, legend entries, tick labels."""
    ax = fig.axes[0]
    found = [t.get_text() for t in ax.texts]
    found += [fig._suptitle.get_text()] if fig._suptitle else []
    found += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    found += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    return found


def test_show_writes_a_png(tmp_path, capsys, plot):
    out_path = tmp_path / "p.png"
    code, out, err = run(capsys, "show", "in_out_channel", "--dims", "1,6,3,5", "-o", out_path)
    assert code == 0, err
    width, height = png_size(out_path.read_bytes())
    assert f"wrote {out_path}: {width}x{height} PNG of the 10x3 in_out_channel image" in out
    assert width >= 600 and height >= 300
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"]   # no temporary file left


def test_show_one_channel(tmp_path, capsys, plot):
    code, out, err = run(capsys, "show", "image_2d_weights_c1_b_fyx", "--dims", "3,2,2,2",
                         "-o", tmp_path / "p.png")
    assert code == 0, err
    png_size((tmp_path / "p.png").read_bytes())
    assert "3x8 image_2d_weights_c1_b_fyx image" in out


def test_labels_activation(plot):
    fig = figure.figure("in_out_channel", (1, 6, 3, 5), formula=ROW["in_out_channel"].formula)
    found = texts(fig)
    assert "c5 h0 w2" in found and "c0 h2 w4" in found
    assert found.count("pad") == 2 * 5 * 3        # lanes of c = 6, 7 at every (h, w)
    lanes = [t for t in fig.axes[0].texts]
    assert len(lanes) == 10 * 3 * 4               # one label per lane of the 10 x 3 image
    title = fig._suptitle.get_text()
    assert "in_out_channel" in title and "N=1, C=6, H=3, W=5" in title
    assert "n=y/H, h=y%H, c=4(x/W)+k, w=x%W" in title
    legend = " ".join(t for t in found if t.startswith(("hue", "shade", "padding")))
    assert "hue: c=0" in legend and "hue: c=5" in legend
    assert "shade: position in (n, h, w)" in legend and "padding lane" in legend
    assert fig.axes[0].get_xlabel().startswith("x (image column")
    assert fig.axes[0].get_ylabel().startswith("y (image row")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]   # bottom and top axis
    assert sorted(set(ticks), key=int) == [str(x) for x in range(10)]


def test_labels_filter_follow_the_formula(plot):
    """Every lane label is the element the reference's pixel formula puts there."""
    dims = (6, 3, 2, 2)
    fig = figure.figure("conv2d_filter", dims)
    labels = {(round(t.get_position()[0] * 2 - 0.5), round(t.get_position()[1] * 2 - 0.5)):
              t.get_text() for t in fig.axes[0].texts}
    assert labels[(1, 1)] == "o3 i0 h0 w0"        # pixel (0, 0), lane 3 (A)
    width, height = runtime.image_layout("conv2d_filter").image_shape(dims)
    for y in range(height):
        for x in range(width):
            for k in range(4):
                o, i, h, w = (int(v) for v in formulas._conv2d_filter(x, y, k, dims))
                want = f"o{o} i{i} h{h} w{w}" if o < dims[0] else "pad"
                assert labels[(2 * x + k % 2, 2 * y + k // 2)] == want


def test_large_image_has_no_lane_labels(plot):
    fig = figure.figure("in_out_channel", (1, 32, 8, 8))
    assert len(fig.axes[0].texts) == 0
    assert "custom layout" in fig._suptitle.get_text()   # no formula given


def test_element_map_is_the_table():
    dims = (2, 6, 3, 5)
    emap = figure.element_map(runtime.image_layout("in_out_channel"), dims)
    y, x, k = np.indices(emap.shape)
    n, c, h, w = formulas._in_out_channel(x, y, k, dims)
    want = np.where(c < 6, np.ravel_multi_index((n, np.minimum(c, 5), h, w), dims), -1)
    assert np.array_equal(emap, want)


def test_without_matplotlib(tmp_path, capsys, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code, out, err = run(capsys, "show", "in_out_channel", "--dims", "1,6,3,5",
                         "-o", tmp_path / "p.png")
    assert code == 1 and out == ""
    assert err == "clayout: error: clayout show needs matplotlib: pip install 'clayout[plot]'\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dims, message", [
    ("1,64,224,224", "up to 2048"),
    ("1,0,2,2", "nothing to draw"),
    ("1,2,3", "takes dims N,C,H,W"),
])
def test_show_refuses(tmp_path, capsys, plot, dims, message):
    code, _, err = run(capsys, "show", "in_out_channel", "--dims", dims, "-o", tmp_path / "p.png")
    assert code == 1 and message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
