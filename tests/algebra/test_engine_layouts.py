"""Other engines' layouts by name: TVM's textures, tinygrad's images, Arm
Compute Library's images, and the table of who calls what.

Each layout's table is written here a second time, in the index -> pixel
direction (the catalog and the reference write pixel -> index), and every
element of 4-D tensors with tails is checked on the reference, cpu and
opencl engines, f32 and f16, both directions.
"""
import itertools

import numpy as np
import pytest

import runtime
from runtime.algebra import catalog, peers
from runtime.algebra.catalog import ALIASES, NAMED, image_layout
from runtime.algebra.storage import Limits
from runtime.errors import ClayoutError
from tests.conftest import run
from algebra.test_image_layouts import TABLE

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/__init__.py", "runtime/algebra/catalog.py",
           "runtime/algebra/peers.py", "runtime/algebra/storage.py", "runtime/errors.py",
           "runtime/cpu/engine.py", "runtime/engine.py", "runtime/opencl/engine.py",
           "runtime/reference/engine.py")


NEW = ("tvm_texture", "tvm_texture_nhwc", "tvm_texture_weight", "tvm_texture_weight_activation",
       "tvm_texture_array", "tvm_texture_nhwc_array",
       "tinygrad_image", "tinygrad_conv_weight", "acl_nhwc_image", "acl_ohwi_image")


def place(name, index, dims):
    """(x, y[, z], lane) of ``index``: the index -> pixel table of
    tests/algebra/test_image_layouts.py, which writes each layout a second time."""
    return TABLE[name][1](*index, *dims)


def size(name, dims):
    return TABLE[name][0](*dims)


DIMS = [(2, 1, 3, 5), (1, 3, 2, 3), (2, 5, 3, 1), (1, 17, 2, 3), (2, 4, 1, 2)]


def expected_image(name, dims, dtype):
    """The image of ids 1..n built from the table alone (padding lanes 0)."""
    shape = size(name, dims)
    out = np.zeros(tuple(reversed(shape)) + (4,), dtype)
    ids = np.arange(1, np.prod(dims) + 1).reshape(dims)
    for index in itertools.product(*map(range, dims)):
        *pixel, lane = place(name, index, dims)
        out[tuple(reversed(pixel)) + (lane,)] = ids[index]
    return ids.astype(dtype), out


def test_the_new_rows_are_these():
    assert set(NEW) == {r.name for r in catalog.LAYOUTS
                        if r.source in ("TVM", "tinygrad", "Arm Compute Library")}


@pytest.mark.parametrize("dims", DIMS, ids=lambda d: ",".join(map(str, d)))
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("name", NEW)
def test_every_element_on_every_engine(name, dtype, dims, cl_engine):
    ids, want = expected_image(name, dims, dtype)
    layout = image_layout(name)
    assert layout.image_shape(dims) == size(name, dims)
    for engine in ("reference", "cpu", cl_engine):
        got = np.asarray(runtime.to_image(ids, name, engine=engine))
        assert got.dtype == want.dtype and np.array_equal(got, want), (name, engine)
        back = np.asarray(runtime.from_image(want, name, dims, engine=engine))
        assert np.array_equal(back, ids), (name, engine)
    index = tuple(d - 1 for d in dims)
    assert layout.pixel(dims, index) == place(name, index, dims)


def test_aliases_are_their_targets():
    for alias, target in ALIASES.items():
        assert image_layout(alias) is NAMED[target]
        assert alias not in NAMED
        ids = np.arange(1, 8 * 3 * 3 + 1, dtype=np.float32).reshape(8, 1, 3, 3)
        assert np.array_equal(runtime.to_image(ids, alias), runtime.to_image(ids, target))


def test_tinygrad_depthwise_formula():
    """tinygrad's depthwise weight (O, 1, kH, kW): x = kh*kW + kw, y = o/4, lane o%4."""
    dims = (6, 1, 3, 2)
    for o, kh, kw in itertools.product(range(6), range(3), range(2)):
        assert image_layout("tinygrad_dw_weight").pixel(dims, (o, 0, kh, kw)) == \
            (kh * 2 + kw, o // 4, o % 4)


def test_tinygrad_conv_weight_is_its_reshape_and_permute():
    """tinygrad's own construction: w.reshape(O/4, 4, I/4, 4, kH, kW)
    .permute(0, 4, 2, 5, 3, 1) -> (O/4, kH * I/4 * kW * 4, 4)."""
    O, I, kh, kw = 8, 8, 3, 2
    w = np.arange(O * I * kh * kw, dtype=np.float32).reshape(O, I, kh, kw)
    theirs = w.reshape(O // 4, 4, I // 4, 4, kh, kw).transpose(0, 4, 2, 5, 3, 1) \
        .reshape(O // 4, kh * (I // 4) * kw * 4, 4)
    assert np.array_equal(runtime.to_image(w, "tinygrad_conv_weight"), theirs)


def test_acl_images_view_the_nhwc_and_ohwi_buffers():
    """With C a multiple of 4 (ACL's condition), the image is the NHWC (OHWI)
    buffer itself, read four channels per pixel."""
    x = np.random.default_rng(0).standard_normal((2, 8, 3, 5)).astype(np.float32)
    nhwc = x.transpose(0, 2, 3, 1).reshape(-1, 2, 4)       # (N*H*W, C/4, 4)
    assert np.array_equal(runtime.to_image(x, "acl_nhwc_image"), nhwc)
    assert np.array_equal(runtime.to_image(x, "acl_ohwi_image"), nhwc)


def test_tvm_textures_are_nchw4c_flattened():
    """TVM's NCHW4c tensor, flattened at its separator."""
    x = np.random.default_rng(1).standard_normal((2, 8, 3, 5)).astype(np.float32)
    nchw4c = x.reshape(2, 2, 4, 3, 5).transpose(0, 1, 3, 4, 2)   # (N, C/4, H, W, 4)
    assert np.array_equal(runtime.to_image(x, "tvm_texture"), nchw4c.reshape(2 * 2 * 3, 5, 4))
    assert np.array_equal(runtime.to_image(x, "tvm_texture_nhwc"), nchw4c.reshape(4, 15, 4))
    assert np.array_equal(runtime.to_image(x, "tvm_texture_array"), nchw4c.reshape(4, 3, 5, 4))
    assert np.array_equal(runtime.to_image(x, "tvm_texture_nhwc_array"),
                          nchw4c.reshape(2, 2, 15, 4))
    w = np.random.default_rng(2).standard_normal((8, 2, 3, 5)).astype(np.float32)
    oihw4o = w.reshape(2, 4, 2, 3, 5).transpose(0, 2, 3, 4, 1)   # OIHW, O blocked by 4
    assert np.array_equal(runtime.to_image(w, "tvm_texture_weight"), oihw4o.reshape(2, 30, 4))


# -- who calls what -------------------------------------------------------------------------------
def test_every_peer_names_real_layouts_of_the_right_kind():
    for p in peers.PEERS.values():
        for n in p.names:
            image_layout(n.layout)
        for role, names in p.roles.items():
            kind = catalog.ROLES[role].kind
            for name in names:
                assert image_layout(name).kind == kind, (p.name, role, name)


@pytest.mark.parametrize("name", list(peers.PEERS))
def test_info_lists_every_engine(capsys, name):
    code, out, err = run(capsys, "info", "--engine", name)
    assert code == 0, err
    p = peers.PEERS[name]
    assert out.startswith(f"engine    {name}: {p.title}")
    for n in p.names:
        assert any(line.startswith(n.theirs) and f" {n.layout} " in line
                   for line in out.splitlines()), n


def test_choosing_among_an_engines_layouts():
    """TVM's relax pass (annotate_custom_storage.cc, Scope()) on NCHW4c shapes:
    texture-weight while N and C/4*H*W are under 16384, else texture-nhwc
    while N < 2048, C/4 < 16384 and H*W < 16384, else texture while
    N*C/4 < 2048, H and W < 16384, else a buffer: each strictly under."""
    want = {(1, 64, 8, 8): "tvm_texture_weight_activation",
            (1, 32, 16, 16): "tvm_texture_weight_activation",
            (1, 1024, 7, 7): "tvm_texture_weight_activation",      # 256*49 = 12544
            (1, 64, 56, 56): "tvm_texture_nhwc_array",             # 16*3136 over; 3136 under
            (200, 64, 8, 8): "tvm_texture_weight_activation",
            (1, 3, 224, 224): "tvm_texture_array",                 # 50176 over, twice
            (3000, 64, 56, 56): None,                              # N over 2048: a buffer
            (1, 16384 * 4, 1, 1): None,                            # C/4 = 16384: not under
            (2048, 65536, 1, 1): None,                             # every texture over: a buffer
            }
    for dims, name in want.items():
        choice = runtime.layout_choice("activation", dims, layouts_of="tvm")
        assert (choice.layout.name if choice.fits else None) == name, (dims, choice.reason)
    # the limit itself is refused: 16383 columns fit texture-weight, 16384 do not
    assert runtime.choose_layout("activation", (1, 4 * 16383, 1, 1), layouts_of="tvm").name == \
        "tvm_texture_weight_activation"
    assert runtime.choose_layout("activation", (2, 4 * 16384, 1, 1), limits=(16384, 16384),
                                 layouts_of="tvm").name == "tvm_texture_weight_activation"
    over = runtime.layout_choice("activation", (2048, 65536, 1, 1), layouts_of="tvm")
    assert over.fits is False and "16383x16383x2047" in over.reason
    # given limits win over the engine's own
    assert runtime.choose_layout("activation", (1, 64, 224, 224), limits=(512, 512),
                                 layouts_of="tvm").name == "tvm_texture_array"
    # relax keeps conv2d weights in buffers: no texture for a filter
    with pytest.raises(ClayoutError, match="names no image layout for role 'filter'.*No Texture "
                       "for weights"):
        runtime.choose_layout("filter", (16, 16, 3, 3), layouts_of="tvm")
    with pytest.raises(ClayoutError, match="tinygrad .* names no image layout for role "
                       "'depthwise'.*its roles: activation, filter, fc_weight"):
        runtime.choose_layout("depthwise", (1, 64, 3, 3), layouts_of="tinygrad")
    with pytest.raises(ClayoutError, match=r"unknown engine 'tvn' \(did you mean 'tvm' or 'tnn'\?\)"):
        runtime.choose_layout("activation", (1, 4, 4, 4), layouts_of="tvn")


def test_info_any_with_an_engine(capsys):
    code, out, err = run(capsys, "info", "any", "--role", "activation", "--dims", "1,64,56,56",
                         "--engine", "tvm")
    assert code == 0, err
    assert out.startswith("layout    tvm_texture_nhwc_array")
    assert "layout any chose tvm_texture_nhwc_array" in err
    code, _, err = run(capsys, "info", "in_out_channel", "--dims", "1,4,4,4", "--engine", "tvm")
    assert code == 1 and "--engine tvm with the layout 'in_out_channel': --engine goes alone" in err


def test_the_engines_page_is_the_table():
    """docs/engine-layouts.md has one row per engine name, with the clayout
    layout the catalog gives it."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "engine-layouts.md").read_text()
    table = text[text.index("## Who calls what"):].split("\n\n")[1]
    shown = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    want = [[p.name, f"`{n.theirs}`", f"[`{n.layout}`](layouts.md#{image_layout(n.layout).name})"]
            for p in peers.PEERS.values() for n in p.names]
    assert [row[:3] for row in shown] == want
