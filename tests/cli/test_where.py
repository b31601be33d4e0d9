"""ImageLayout.index (the inverse of pixel) and `clayout where`.

index is checked two ways: against pixel (index(pixel(i)) == i for every
element), and against the reference engine, which places arange(1, n+1) by
the table formulas, so a lane holding 0 is padding and any other value v
holds the element with flat index v - 1."""
import doctest
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from runtime import ClayoutError, engine, image_layout
from runtime.algebra.catalog import NAMED, ROW
from runtime.cli.where import explain

from conftest import run, to_img
from strategies import MOVED, SETTINGS, small_dims

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/catalog.py", "runtime/algebra/pixels.py", "runtime/cli/where.py")

REF = engine.get("reference")
CUSTOM = ("acBd4b:2", "aBcd4b:1", "Acdb4a:3", "bcda:3:1")


def _dims(draw, layout):
    if layout.ndims == 1:
        return draw(small_dims(1, sizes=(0, 1, 2, 3, 4, 5, 9, 17)))
    dims = draw(small_dims(4, max_volume=300))
    if layout.lanes == 0:            # one texel holds C whole: at most 4 channels
        dims = (dims[0], min(dims[1], 4)) + dims[2:]
    if layout.kind == "activation" and draw(st.booleans()):
        return dims[:2]   # a 2-D activation (N, C) is (N, C, 1, 1)
    return dims


def _all_lanes(layout, dims):
    """(coordinates..., lane) of every lane of the image, x first, on any storage."""
    image = runtime.ImageDesc(layout, dims)
    for outer_first in np.ndindex(*reversed(image.shape)):
        for lane in range(image.lanes):
            yield tuple(reversed(outer_first)) + (lane,)


@SETTINGS
@given(st.data(), st.sampled_from(sorted(MOVED) + list(CUSTOM)))
def test_index_inverts_pixel_and_marks_padding(data, name):
    layout = image_layout(name)
    dims = _dims(data.draw, layout)
    logical = layout.logical_dims(dims)
    image = runtime.ImageDesc(layout, logical)
    seen, padding = set(), 0
    for place in _all_lanes(layout, logical):
        idx = layout.index(dims, *place)
        if idx is None:
            padding += 1
            continue
        assert all(0 <= i < d for i, d in zip(idx, logical)), (idx, logical)
        assert layout.pixel(dims, idx) == place
        seen.add(idx)
    assert len(seen) == math.prod(logical)        # every element is somewhere, once
    assert padding == math.prod(image.shape) * image.lanes - math.prod(logical)
    for idx in np.ndindex(*logical):
        assert layout.index(dims, *layout.pixel(dims, idx)) == idx


@SETTINGS
@given(st.data(), st.sampled_from(sorted(MOVED)))
def test_index_agrees_with_the_reference_placement(data, name):
    layout = image_layout(name)
    dims = layout.logical_dims(_dims(data.draw, layout))
    n = math.prod(dims)
    values = np.arange(1, n + 1, dtype=np.int32)
    from runtime import MemoryDesc
    image = to_img(REF, values, layout, MemoryDesc(dims, "s32"), "s32")
    if layout.lanes == 1:
        image = image[..., None]
    for place in _all_lanes(layout, dims):
        idx = layout.index(dims, *place)
        stored = int(image[tuple(reversed(place[:-1])) + place[-1:]])
        if idx is None:
            assert stored == 0
        else:
            assert stored == np.ravel_multi_index(idx, dims) + 1


def test_index_worked_values():
    layout = image_layout("in_out_channel")
    assert layout.index((1, 17, 5, 7), 30, 2, 0) == (0, 16, 2, 2)
    assert layout.index((1, 17, 5, 7), 30, 2, 1) is None       # c = 17: C's tail
    assert image_layout("image_2d_weights_c4_fyx_b").index((2, 3, 2, 2), 2, 1, 1) == (1, 2, 0, 1)
    assert image_layout("texture_2d").index((2, 5, 3, 3), 5, 5, 0) == (1, 4, 2, 2)


@pytest.mark.parametrize("x, y, lane, what", [(35, 0, 0, "x 35"), (0, 5, 0, "y 5"),
                                              (0, 0, 4, "lane 4"), (-1, 0, 0, "x -1")])
def test_index_outside_the_image_is_refused(x, y, lane, what):
    with pytest.raises(ClayoutError, match=f"{what} is outside the 35x5 image"):
        image_layout("in_out_channel").index((1, 17, 5, 7), x, y, lane)


def test_index_of_an_empty_image_is_refused():
    with pytest.raises(ClayoutError, match="outside"):
        image_layout("in_out_channel").index((0, 17, 5, 7), 0, 0, 0)


# -- the formulas `where` prints --------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MOVED))
def test_where_formulas_evaluate_to_the_answer(name):
    """Every table clause is substituted and evaluates to the value the index
    math found (a clause left as written would have no ' = ')."""
    layout = NAMED[name]
    dims = (9,) if layout.ndims == 1 else (3, 4, 6, 3) if layout.lanes == 0 else (3, 5, 6, 3)
    idx = tuple(d - 1 for d in dims)
    lines = explain(layout, dims, index=idx, formula=ROW[name].formula)
    formula = next(line for line in lines if line.startswith("formula"))[10:]
    values = dict(zip(layout.storage.coords + ("k",), layout.pixel(dims, idx)))
    values["s"] = idx[1] // 4 if len(idx) > 1 else 0   # TFLite's slice of c
    values.update(zip(["n", "c", "h", "w"] if layout.kind == "activation" else
                      ["m", "i", "h", "w"] if layout.kind == "depthwise" else
                      ["w"] if layout.ndims == 1 else ["o", "i", "h", "w"], idx))
    values["f"] = (idx[1] * dims[2] + idx[2]) * dims[3] + idx[3] if layout.ndims == 4 else 0
    for clause in formula.split(", "):
        parts = clause.split(" = ")
        assert len(parts) >= 3, clause
        assert int(parts[-1]) == values[parts[0]], clause


# -- the command -----------------------------------------------------------------------------
def test_where_pixel_prints_the_index_and_formula(capsys):
    code, out, err = run(capsys, "where", "in_out_channel", "--dims", "1,17,5,7",
                         "--pixel", "30,2,0")
    assert code == 0, err
    assert "index     n=0 c=16 h=2 w=2  (0,16,2,2)" in out
    assert "c = 4(x/W)+k = 4(30/7)+0 = 16" in out
    assert "offset (y*35 + x)*4 + lane = (2*35 + 30)*4 + 0 = 400" in out


def test_where_padding_names_the_tail(capsys):
    code, out, _ = run(capsys, "where", "in_out_channel", "--dims", "1,17,5,7",
                       "--pixel", "30,2,3")
    assert code == 0
    assert "padding: c=19 is in the tail of C=17 (padded to 20)" in out
    code, out, _ = run(capsys, "where", "image_2d_weights_c4_fyx_b", "--dims", "2,3,2,1",
                       "--pixel", "1,0,3")
    assert "padding: f=7 is in the tail of I*H*W=6 (padded to 8)" in out


def test_where_index_prints_the_pixel(capsys):
    code, out, _ = run(capsys, "where", "texture_2d", "--dims", "1,17,5,7", "--index", "0,16,2,2")
    assert code == 0
    assert "pixel     x=2 y=14 lane=0" in out
    assert "y = h*ceil(C/4)+c/4 = 2*ceil(17/4)+16/4 = 14" in out


def test_where_custom_layout_has_the_tag_derivation_only(capsys):
    code, out, _ = run(capsys, "where", "acBd4b:2", "--dims", "1,5,2,2", "--index", "0,4,1,1")
    assert code == 0
    assert "formula" not in out
    assert "pixel     x=3 y=1 lane=0" in out and "tag       acBd4b" in out


@pytest.mark.parametrize("argv, code, message", [
    (["--pixel", "35,0"], 1, "x 35 is outside the 35x5 image"),
    (["--pixel", "3"], 1, "a pixel is X,Y or X,Y,LANE"),
    (["--index", "0,17,0,0"], 1, "index (0, 17, 0, 0) is outside dims (1, 17, 5, 7)"),
    (["--index", "0,1,0"], 1, "takes 4 numbers, got 3"),
    (["--pixel", "1,1", "--index", "0,0,0,0"], 2, "not allowed with"),
    ([], 2, "one of the arguments --pixel --index is required"),
])
def test_where_errors(capsys, argv, code, message):
    got, _, err = run(capsys, "where", "in_out_channel", "--dims", "1,17,5,7", *argv)
    assert got == code and message in err


# -- docs/placement.md stays true ---------------------------------------------------------
DOC = Path(__file__).resolve().parents[2] / "docs" / "placement.md"


def test_placement_doc_python_examples_run():
    parser = doctest.DocTestParser()
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)):
        test = parser.get_doctest(block, {"np": np, "runtime": runtime}, f"block {i}", "doc", 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        assert runner.summarize().failed == 0, f"docs/placement.md python block {i}"


def test_placement_doc_where_output_is_what_clayout_prints(capsys):
    text = DOC.read_text()
    runs = re.findall(r"^\$ clayout (where .*)\n((?:[a-z].*\n)+)", text, re.M)
    assert len(runs) == 2
    for argv, printed in runs:
        code, out, _ = run(capsys, *argv.split())
        assert code == 0 and out == printed, argv
