"""choose_layout (layout 'any' by role) and tiles (images over max_image).

The candidate order is written here a second time, as docs/placement.md
documents it, and the rule is re-derived from it: the first tier with a
layout that fits, least padding inside the tier, then candidate order."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from runtime.cpu.engine import CpuEngine
from runtime import ClayoutError, ImageDesc, choose_layout, layout_choice, tile_plan
from runtime.algebra.catalog import NAMED

from conftest import run
from strategies import FEW, MOVED, SETTINGS, assert_same_bits, fill, small_dims

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/tiles.py", "runtime/placement.py")

# tiles cut 2-D images (arrays, 3-D images and buffers are not split)
FLAT = sorted(n for n, layout in MOVED.items() if layout.storage.plain and layout.lanes)

DOCUMENTED = {
    "activation": [["in_out_channel"], ["texture_2d"], ["in_out_height"], ["in_out_width"],
                   ["tflite_texture_array", "tflite_texture_3d"]],
    "filter": [["conv2d_filter"], ["weight_height", "weight_width"],
               ["image_2d_weights_c4_fyx_b"], ["image_2d_weights_c1_b_fyx"]],
    "depthwise": [["dw_conv2d_filter"]],
    "argument": [["argument"]],
    "fc_weight": [["weight_width"], ["weight_height"], ["image_2d_weights_c4_fyx_b"],
                  ["conv2d_filter"], ["image_2d_weights_c1_b_fyx"]],
}


def fits(name, size, limits):
    """The documented bounds under a 2-D limit (W, H): a 2-D image W x H; an
    array's layers W x H, at most 2048 of them; a 3-D image at most
    min(W, 2048) x min(H, 2048) x 2048 (OpenCL 1.2's minimums)."""
    w, h = limits
    bounds = {"tflite_texture_array": (w, h, 2048),
              "tflite_texture_3d": (min(w, 2048), min(h, 2048), 2048)}.get(name, (w, h))
    return all(n <= b for n, b in zip(size, bounds))


def expected(role, dims, limits):
    """(name or None, {name: size}) by the documented rule."""
    sizes, best = {}, None
    for tier in DOCUMENTED[role]:
        fitting = []
        for name in tier:
            layout = NAMED[name]
            size = sizes[name] = layout.image_shape(dims)
            if fits(name, size, limits):
                fitting.append((math.prod(size) * layout.lanes, name))   # same dims: lanes order padding
        if fitting and best is None:
            best = min(fitting, key=lambda f: f[0])[1]
    return best, sizes


def shown(size):
    return "x".join(map(str, size))


@st.composite
def role_dims(draw):
    role = draw(st.sampled_from(sorted(DOCUMENTED)))
    if role == "argument":
        return role, draw(small_dims(1, sizes=(0, 1, 3, 4, 9, 17, 40)))
    return role, draw(small_dims(4, sizes=(0, 1, 2, 3, 4, 5, 8, 17), max_volume=2000))


@SETTINGS
@given(role_dims(), st.integers(1, 40), st.integers(1, 40))
def test_choose_layout_follows_the_documented_rule(rd, max_w, max_h):
    role, dims = rd
    want, sizes = expected(role, dims, (max_w, max_h))
    choice = layout_choice(role, dims, limits=(max_w, max_h))
    rejected = [n for n, size in sizes.items() if not fits(n, size, (max_w, max_h))]
    assert [c.name for c in choice.rejected] == rejected
    if want is None:
        assert not choice.fits
        with pytest.raises(ClayoutError) as err:
            choose_layout(role, dims, limits=(max_w, max_h))
        for name, size in sizes.items():
            assert f"{name} {shown(size)}" in str(err.value)
        return
    layout = choose_layout(role, dims, limits=(max_w, max_h))
    assert layout.name == want and choice.layout is layout and choice.fits
    assert fits(want, layout.image_shape(dims), (max_w, max_h))
    for name in rejected:
        assert f"{name} {shown(sizes[name])}" in choice.reason


@pytest.mark.parametrize("role", sorted(DOCUMENTED))
def test_unlimited_is_the_first_candidate(role):
    dims = (9,) if role == "argument" else (3, 5, 2, 2)
    assert choose_layout(role, dims, engine="cpu").name == DOCUMENTED[role][0][0]
    assert choose_layout(role, dims, limits=(10 ** 6, 10 ** 6)).name == DOCUMENTED[role][0][0]
    assert layout_choice(role, dims, engine="reference").limits is None


@pytest.mark.parametrize("dims, limits, want, why", [
    ((4, 2, 3, 3), (18, 8), "weight_height", "weight_width (72 padding lanes)"),
    ((5, 4, 3, 3), (36, 17), "weight_width", "weight_height (108 padding lanes)"),
    ((4, 4, 3, 3), (36, 8), "weight_height", "weight_width (0 padding lanes)"),  # equal: order
])
def test_filter_ties_go_to_least_padding_then_order(dims, limits, want, why):
    choice = layout_choice("filter", dims, limits=limits)
    assert choice.layout.name == want
    assert f"chosen over {why} of the same tier by least padding" in choice.reason
    assert "conv2d_filter" in [c.name for c in choice.rejected]


def test_limits_come_from_the_engine():
    class Device(CpuEngine):   # an engine whose device limits its images, as OpenCL's do
        limits = runtime.Limits.of((2048, 4096))
    assert choose_layout("activation", (4, 64, 224, 224), engine=Device()).name == "texture_2d"
    given = layout_choice("activation", (4, 64, 224, 224), limits=(4096, 4096), engine=Device())
    assert given.max_image == (4096, 4096) and given.layout.name == "in_out_channel"


def test_choice_reports_sizes_padding_and_bytes():
    c = layout_choice("fc_weight", (4096, 1000, 1, 1), "f16", limits=(2048, 2048))
    assert c.layout.name == "weight_height" and c.dtype == "f16"
    assert [(r.name, r.size) for r in c.rejected] == [
        ("weight_width", (250, 4096)), ("image_2d_weights_c4_fyx_b", (250, 4096)),
        ("image_2d_weights_c1_b_fyx", (4096, 1000))]
    assert c.chosen.padding == 0 and c.chosen.nbytes == 1000 * 1024 * 4 * 2


@pytest.mark.parametrize("args, message", [
    (("weights", (1, 2, 3, 4)), "unknown role 'weights'; roles: activation"),
    (("fc_weight", (10, 20)), "role 'fc_weight' takes dims O,I,H,W"),
    (("argument", (1, 2)), "role 'argument' takes dims W"),
    (("filter", (1, 2, 3, -1)), "role 'filter' takes dims O,I,H,W"),
])
def test_choose_layout_bad_input(args, message):
    with pytest.raises(ClayoutError, match=message):
        choose_layout(*args)


@pytest.mark.parametrize("kw, message", [
    (dict(limits=(0, 5)), "at least 1"), (dict(limits=7), "expected \\(max width, max height\\)"),
    (dict(dtype="bf16"), "bf16"), (dict(dtype="f64"), "unsupported dtype"),
])
def test_choose_layout_bad_limits_and_dtype(kw, message):
    with pytest.raises(ClayoutError, match=message):
        choose_layout("activation", (1, 3, 4, 4), **kw)


# -- the tile rule ------------------------------------------------------------------------
@SETTINGS
@given(st.sampled_from(FLAT), st.data(), st.integers(1, 12), st.integers(1, 12))
def test_tile_plan_covers_the_image_row_major(name, data, max_w, max_h):
    layout = NAMED[name]
    dims = data.draw(small_dims(layout.ndims, max_volume=400))
    width, height = layout.image_shape(dims)
    plan = tile_plan(ImageDesc(layout, dims), (max_w, max_h))
    over = width > max_w or height > max_h
    assert plan.split == (over and width * height > 0)
    if not plan.split:
        assert [(t.x0, t.y0, t.width, t.height) for t in plan.tiles] == [(0, 0, width, height)]
        return
    assert (plan.rows, plan.cols) == (math.ceil(height / max_h), math.ceil(width / max_w))
    covered = np.zeros((height, width), int)
    for i, t in enumerate(plan.tiles):
        assert (t.index, t.row, t.col) == (i, i // plan.cols, i % plan.cols)
        assert (t.x0, t.y0) == (t.col * max_w, t.row * max_h)
        assert 1 <= t.width <= max_w and 1 <= t.height <= max_h
        covered[t.y0:t.y0 + t.height, t.x0:t.x0 + t.width] += 1
    assert (covered == 1).all()


def concatenate(tiles, plan):
    """The documented rule, written out: along y, along x, or bands of columns."""
    if plan.cols == 1:
        return np.concatenate(tiles, axis=0)
    if plan.rows == 1:
        return np.concatenate(tiles, axis=1)
    return np.concatenate([np.concatenate(tiles[r * plan.cols:(r + 1) * plan.cols], axis=1)
                           for r in range(plan.rows)], axis=0)


# image at least 5x5 pixels (argument: one row) so limits can force 2-5 tiles per axis
TILE_DIMS = {"in_out_channel": (2, 9, 3, 5), "in_out_height": (2, 3, 9, 5),
             "in_out_width": (2, 3, 5, 9), "texture_2d": (2, 9, 3, 5),
             "conv2d_filter": (5, 6, 2, 3), "dw_conv2d_filter": (2, 17, 2, 3),
             "argument": (41,), "weight_height": (17, 3, 2, 1), "weight_width": (6, 9, 2, 1),
             "image_2d_weights_c4_fyx_b": (6, 5, 2, 2), "image_2d_weights_c1_b_fyx": (6, 3, 2, 1),
             "tflite_texture_2d": (2, 9, 3, 5), "tvm_texture": (2, 9, 3, 5),
             "tvm_texture_nhwc": (2, 9, 3, 5), "tvm_texture_weight": (5, 6, 2, 3),
             "tvm_texture_weight_activation": (3, 9, 2, 3),
             "tinygrad_image": (2, 9, 3, 5), "tinygrad_conv_weight": (5, 6, 2, 3),
             "acl_nhwc_image": (2, 9, 3, 5), "acl_ohwi_image": (5, 6, 2, 3)}


@st.composite
def tile_limits(draw, layout, dims):
    """A max_image that cuts each axis into 2-5 tiles (or leaves one axis whole)."""
    width, height = layout.image_shape(dims)
    cols = draw(st.integers(1 if height > 1 else 2, min(5, width)))
    rows = draw(st.integers(1 if cols > 1 else 2, min(5, height)))
    return math.ceil(width / cols), math.ceil(height / rows)


def check_round_trip(eng, name, dims, limits, src_dt, image_dt, seed, mode):
    layout = NAMED[name]
    x = fill(src_dt, math.prod(dims), seed, mode).reshape(dims)
    full = runtime.to_image(x, layout, dtype=image_dt, engine="reference")
    tiles = runtime.to_image(x, layout, dtype=image_dt, engine=eng, max_image=limits)
    plan = tile_plan(ImageDesc(layout, dims), limits)
    assert isinstance(tiles, tuple) and len(tiles) == plan.rows * plan.cols >= 2
    assert 1 <= plan.rows <= 5 and 1 <= plan.cols <= 5
    for tile in tiles:
        assert tile.shape[0] <= limits[1] and tile.shape[1] <= limits[0]
    assert_same_bits(concatenate(tiles, plan), full, f"{name} tiles joined")
    back = runtime.from_image(tiles, layout, dims, dtype=src_dt, engine=eng)
    want = runtime.from_image(full, layout, dims, dtype=src_dt, engine="reference")
    assert_same_bits(back, want, f"{name} from tiles")


@FEW
@given(st.sampled_from(FLAT), st.data(), st.sampled_from(["reference", "cpu"]),
       st.sampled_from([("f32", "f32"), ("f16", "f16"), ("f32", "f16"), ("s8", "s8"),
                        ("u8", "u8"), ("f32", "u8"), ("s32", "s32")]),
       st.integers(0, 2 ** 32 - 1))
def test_tiles_round_trip_on_host_engines(name, data, eng, dts, seed):
    dims = TILE_DIMS[name]
    limits = data.draw(tile_limits(NAMED[name], dims))
    check_round_trip(eng, name, dims, limits, dts[0], dts[1], seed, "mixed")


@FEW
@given(st.sampled_from(FLAT), st.data(), st.integers(0, 2 ** 32 - 1))
def test_tiles_round_trip_on_opencl(cl_engine, name, data, seed):
    dims = TILE_DIMS[name]   # fixed per layout: limits change no kernel, dims would
    limits = data.draw(tile_limits(NAMED[name], dims))
    check_round_trip(cl_engine, name, dims, limits, "f32", "f32", seed, "special")


@pytest.mark.parametrize("src_dt, image_dt", [("f32", "f16"), ("u8", "u8"), ("f32", "s8")])
def test_tiles_convert_dtypes_on_opencl(cl_engine, src_dt, image_dt):
    check_round_trip(cl_engine, "in_out_channel", TILE_DIMS["in_out_channel"], (4, 4),
                     src_dt, image_dt, 7, "small")


def test_tiles_of_a_2d_activation_on_every_engine(cl_engine):
    x = fill("f32", 2 * 23, 3, "small").reshape(2, 23)
    for eng in ("reference", "cpu", cl_engine):
        tiles = runtime.to_image(x, "in_out_channel", engine=eng, max_image=(2, 1))
        assert len(tiles) == 6
        assert_same_bits(runtime.from_image(tiles, "in_out_channel", (2, 23), engine=eng), x)


def test_an_image_within_the_limit_is_one_array():
    x = np.arange(2 * 5 * 3 * 3, dtype=np.float32).reshape(2, 5, 3, 3)
    img = runtime.to_image(x, "in_out_channel", max_image=(6, 6))
    assert isinstance(img, np.ndarray)
    assert_same_bits(img, runtime.to_image(x, "in_out_channel"))
    assert_same_bits(runtime.from_image((img,), "in_out_channel", x.shape), x)
    empty = runtime.to_image(np.zeros((0, 5, 3, 3), np.float32), "in_out_channel",
                             max_image=(1, 1))
    assert isinstance(empty, np.ndarray) and empty.size == 0


def _tiles():
    x = np.arange(2 * 9 * 3 * 5, dtype=np.float32).reshape(2, 9, 3, 5)
    return runtime.to_image(x, "in_out_channel", max_image=(6, 4))   # 15x6: 2 rows x 3 cols


@pytest.mark.parametrize("change, message", [
    (lambda t: t[:-1], "expected 6 tiles in row-major order, got 5"),
    (lambda t: (t[2],) + t[1:], "of at most 3x4 pixels\\): expected 10 tiles .*, got 6"),
    (lambda t: t[:1] + (t[2],) + t[2:], "tile 1 .* has shape \\(4, 3, 4\\), expected \\(4, 6, 4\\)"),
    (lambda t: t[:5] + (t[5].astype(np.float16),), "tile 5 has dtype f16 but tile 0 has f32"),
    (lambda t: (), "an empty tuple of tiles"),
    (lambda t: t[:2] + ([[1.0]],) + t[3:], "tile 2 is a list; tiles are numpy arrays"),
    (lambda t: (t[0][..., 0],) + t[1:], "tile 0 has shape \\(4, 6\\); .* \\(height, width, 4\\)"),
])
def test_from_image_refuses_bad_tiles(change, message):
    with pytest.raises(ClayoutError, match=message):
        runtime.from_image(change(_tiles()), "in_out_channel", (2, 9, 3, 5))


@pytest.mark.parametrize("max_image, message", [
    ((0, 4), "at least 1"), ((4,), "expected \\(max width, max height\\)"), ("big", "expected")])
def test_to_image_refuses_bad_max_image(max_image, message):
    with pytest.raises(ClayoutError, match=message):
        runtime.to_image(np.zeros((1, 4, 2, 2), np.float32), "in_out_channel",
                         max_image=max_image)


def test_max_image_over_the_device_limit_is_refused(cl_engine):
    width, height = cl_engine.limits.image2d
    with pytest.raises(ClayoutError, match="over the device's image limit"):
        runtime.to_image(np.zeros((1, 4, 2, 2), np.float32), "in_out_channel",
                         engine=cl_engine, max_image=(width + 1, height))


# -- the command line ---------------------------------------------------------------------
def test_cli_to_image_writes_tiles_and_from_image_reads_them(tmp_path, capsys):
    x = fill("f32", 2 * 9 * 3 * 5, 1, "mixed").reshape(2, 9, 3, 5)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(capsys, "to-image", tmp_path / "x.npy", "-o", tmp_path / "img.npy",
                         "--layout", "in_out_channel", "--max-image", "6,4")
    assert code == 0, err
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["img.tile-0-0.npy", "img.tile-0-1.npy", "img.tile-0-2.npy",
                     "img.tile-1-0.npy", "img.tile-1-1.npy", "img.tile-1-2.npy", "x.npy"]
    assert "img.tile-1-2.npy: x [12, 15) y [4, 6)" in out
    full = runtime.to_image(x, "in_out_channel")
    assert_same_bits(np.load(tmp_path / "img.tile-1-2.npy"), full[4:6, 12:15])
    code, _, err = run(capsys, "from-image", tmp_path / "img.npy", "-o", tmp_path / "back.npy",
                       "--layout", "in_out_channel", "--dims", "2,9,3,5", "--max-image", "6,4")
    assert code == 0, err
    assert_same_bits(np.load(tmp_path / "back.npy"), x)
    code, _, err = run(capsys, "from-image", tmp_path / "img.npy", "-o", tmp_path / "b2.npy",
                       "--layout", "in_out_channel", "--dims", "2,9,3,5", "--max-image", "6,3")
    assert code == 1 and "has shape (4, 6, 4), expected (3, 6, 4)" in err
    (tmp_path / "img.tile-0-1.npy").unlink()
    code, _, err = run(capsys, "from-image", tmp_path / "img.npy", "-o", tmp_path / "b3.npy",
                       "--layout", "in_out_channel", "--dims", "2,9,3,5", "--max-image", "6,4")
    assert code == 1 and "missing: " + str(tmp_path / "img.tile-0-1.npy") in err
    assert not (tmp_path / "b2.npy").exists() and not (tmp_path / "b3.npy").exists()


def test_cli_to_image_within_the_limit_writes_one_file(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((1, 4, 2, 2), np.float32))
    code, out, _ = run(capsys, "to-image", tmp_path / "x.npy", "-o", tmp_path / "img.npy",
                       "--layout", "in_out_channel", "--max-image", "2,2")
    assert code == 0 and (tmp_path / "img.npy").exists() and "tile" not in out


def test_cli_layout_any_prints_the_choice_on_stderr(tmp_path, capsys):
    np.save(tmp_path / "w.npy", fill("f32", 8 * 6, 2, "small").reshape(8, 6, 1, 1))
    code, out, err = run(capsys, "to-image", tmp_path / "w.npy", "-o", tmp_path / "img.npy",
                         "--layout", "any", "--role", "fc_weight", "--max-image", "4,8")
    assert code == 0, err
    assert "layout any chose weight_width: fc_weight dims 8,6,1,1 f32" in err
    assert "wrote" in out and "weight_width image 2x8" in out
    code, out, err = run(capsys, "info", "any", "--role", "fc_weight", "--dims", "8,6,1,1",
                         "--max-image", "6,2")
    assert code == 0 and out.startswith("layout    weight_height")
    assert "rejected (over the limit): weight_width 2x8" in err


def test_cli_layout_any_splits_when_nothing_fits(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((1, 9, 3, 5), np.float32))
    code, out, err = run(capsys, "to-image", tmp_path / "x.npy", "-o", tmp_path / "img.npy",
                         "--layout", "any", "--role", "activation", "--max-image", "6,2")
    assert code == 0, err
    assert "layout any will split in_out_channel: no activation layout fits for dims 1,9,3,5: "\
        "over the image2d limit 6x2: in_out_channel 15x3" in err
    assert "in_out_channel 15x3" in err and "wrote 6 tiles" in out


@pytest.mark.parametrize("argv, message", [
    (["info", "any", "--dims", "1,2,3,4"], "layout 'any' needs --role R"),
    (["info", "in_out_channel", "--role", "activation", "--dims", "1,2,3,4"],
     "--role activation goes with --layout any"),
    (["info", "any", "--role", "fc_weight", "--dims", "4,6"], "role 'fc_weight' takes dims"),
])
def test_cli_any_errors(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 1 and message in err


def test_cli_info_lists_tiles(capsys):
    code, out, _ = run(capsys, "info", "in_out_channel", "--dims", "1,17,5,7",
                       "--max-image", "16,4")
    assert code == 0
    assert "tiles     16x4: 6 tiles, 2 row(s) x 3 column(s): (0,0) x [0, 16) y [0, 4)" in out


def test_max_image_with_a_memory_is_refused():
    mem = runtime.Memory(runtime.MemoryDesc((1, 4, 2, 2)), engine="cpu")
    with pytest.raises(ClayoutError, match="max_image= goes with a host array"):
        runtime.to_image(mem, "in_out_channel", max_image=(1, 1))
    with pytest.raises(ClayoutError, match="tile 0 is a Memory; tiles are numpy arrays"):
        runtime.from_image((mem,), "in_out_channel", (1, 4, 2, 2))
