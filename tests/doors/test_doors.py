"""The doors check what they are given against what the call says: each test
is a new user's mistake that once gave a wrong result without a word, and
now gets one ClayoutError line (docs/engines.md, "What each door checks")."""
import numpy as np
import pytest

import runtime
from runtime import ClayoutError, Memory, MemoryDesc

from conftest import needs, run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/__init__.py", "runtime/api.py", "runtime/model/manifest.py")

X = np.arange(36, dtype=np.float32).reshape(1, 6, 2, 3) + 1   # NCHW, no zero element


def one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


# -- out= of a Memory conversion is the side the call asks for ---------------------------------
@pytest.fixture(params=["cpu", "opencl"])
def engine(request):
    if request.param == "opencl":
        return request.getfixturevalue("cl_engine")
    return runtime.engine.get("cpu")


def test_to_image_memory_out_of_another_dtype_is_refused(engine):
    src = Memory.from_numpy(X, MemoryDesc(X.shape), engine)
    out = Memory.image("in_out_channel", X.shape, "f32", engine)
    with pytest.raises(ClayoutError) as exc:
        runtime.to_image(src, "in_out_channel", dtype="f16", out=out)
    assert "f16" in one_line(exc) and "out=" in str(exc.value)


def test_to_image_memory_out_of_another_layout_is_refused(engine):
    w = np.ones((4, 6, 3, 3), np.float32)
    src = Memory.from_numpy(w, MemoryDesc(w.shape), engine)
    out = Memory.image("winograd_2x3_mace", w.shape, "f32", engine)
    with pytest.raises(ClayoutError) as exc:
        runtime.to_image(src, "conv2d_filter", out=out)
    assert "winograd_2x3_mace" in one_line(exc) and "conv2d_filter" in str(exc.value)


def test_to_image_memory_out_of_the_asked_side_is_written(engine):
    src = Memory.from_numpy(X, MemoryDesc(X.shape), engine)
    out = Memory.image("in_out_channel", X.shape, "f16", engine)
    assert runtime.to_image(src, "in_out_channel", dtype="f16", out=out) is out
    assert runtime.to_image(src, "in_out_channel", out=out) is out   # dtype=None: out's
    np.testing.assert_array_equal(out.to_numpy(), runtime.to_image(X, "in_out_channel",
                                                                   dtype="f16"))


def test_from_image_memory_dtype_against_dst_memory(engine):
    img = Memory.from_numpy(runtime.to_image(X, "in_out_channel"), "in_out_channel", engine,
                            dims=X.shape)
    dst = Memory(MemoryDesc(X.shape, "f32"), engine)
    with pytest.raises(ClayoutError) as exc:
        runtime.from_image(img, "in_out_channel", X.shape, out=dst, dtype="f16")
    assert "dtype=f16" in one_line(exc)


# -- an array whose shape matches only in element count ----------------------------------------
NHWC = MemoryDesc(X.shape, tag="nhwc")


@pytest.mark.parametrize("call", [
    lambda: runtime.to_image(X, "in_out_channel", src="nhwc", dims=X.shape),
    lambda: runtime.reorder(X, NHWC, MemoryDesc(X.shape)),
    lambda: Memory.from_numpy(X, NHWC),
    lambda: Memory(NHWC, data=X.copy()),
    lambda: runtime.reorder(X, MemoryDesc(X.shape, tag="aBcd2b"), MemoryDesc(X.shape)),
], ids=["to_image", "reorder", "from_numpy", "attach", "blocked"])
def test_an_nchw_shaped_array_is_not_read_as_nhwc(call):
    with pytest.raises(ClayoutError) as exc:
        call()
    text = one_line(exc)
    assert "(1, 6, 2, 3)" in text


def test_the_physical_shape_and_1d_are_taken():
    nhwc = X.transpose(0, 2, 3, 1).copy()
    want = runtime.to_image(X, "in_out_channel")
    for arr in (nhwc, nhwc.reshape(-1)):
        np.testing.assert_array_equal(
            runtime.to_image(arr, "in_out_channel", src="nhwc", dims=X.shape), want)
        np.testing.assert_array_equal(runtime.reorder(arr, NHWC, MemoryDesc(X.shape)),
                                      X.reshape(-1))
        np.testing.assert_array_equal(Memory.from_numpy(arr, NHWC).to_numpy(), nhwc.reshape(-1))


# -- from_image with dims that give the same image size ----------------------------------------
def test_from_image_with_dims_of_the_same_size_is_refused():
    img = runtime.to_image(X, "in_out_channel")
    with pytest.raises(ClayoutError) as exc:
        runtime.from_image(img, "in_out_channel", (1, 5, 2, 3))
    assert "padding lane" in one_line(exc) and "check_padding=False" in str(exc.value)
    got = runtime.from_image(img, "in_out_channel", (1, 5, 2, 3), check_padding=False)
    np.testing.assert_array_equal(got, X[:, :5])


@pytest.mark.parametrize("layout,dims,wrong", [
    ("in_out_height", (1, 2, 7, 3), (1, 2, 6, 3)),
    ("in_out_width", (1, 2, 3, 7), (1, 2, 3, 5)),
    ("conv2d_filter", (7, 2, 3, 3), (5, 2, 3, 3)),
    ("dw_conv2d_filter", (1, 7, 3, 3), (1, 6, 3, 3)),
    ("tflite_texture_3d", (1, 7, 2, 3), (1, 6, 2, 3)),
])
def test_each_lane_axis_is_checked(layout, dims, wrong):
    x = np.arange(1, np.prod(dims) + 1, dtype=np.float32).reshape(dims)
    img = runtime.to_image(x, layout)
    assert runtime.ImageDesc(runtime.image_layout(layout), wrong).array_shape == img.shape
    with pytest.raises(ClayoutError, match="padding lane"):
        runtime.from_image(img, layout, wrong)
    np.testing.assert_array_equal(runtime.from_image(img, layout, dims), x)


def test_from_image_tiles_are_checked_too():
    x = np.arange(1, 1 + 2 * 6 * 3 * 5, dtype=np.float32).reshape(2, 6, 3, 5)
    tiles = runtime.to_image(x, "in_out_channel", max_image=(5, 4))
    assert isinstance(tiles, tuple) and len(tiles) > 1
    with pytest.raises(ClayoutError, match="padding lane"):
        runtime.from_image(tiles, "in_out_channel", (2, 5, 3, 5))
    np.testing.assert_array_equal(runtime.from_image(tiles, "in_out_channel", x.shape), x)


def test_cli_from_image_with_wrong_dims_exits_1_and_writes_nothing(tmp_path, capsys):
    np.save(tmp_path / "img.npy", runtime.to_image(X, "in_out_channel"))
    out = tmp_path / "back.npy"
    code, _, err = run(capsys, "from-image", tmp_path / "img.npy", "-o", out,
                       "--layout", "in_out_channel", "--dims", "1,5,2,3")
    assert code == 1 and err.count("\n") == 1 and err.startswith("clayout: error:")
    assert "padding lane" in err and not out.exists()
    code, _, err = run(capsys, "from-image", tmp_path / "img.npy", "-o", out,
                       "--layout", "in_out_channel", "--dims", "1,5,2,3", "--no-check-padding")
    assert code == 0 and np.array_equal(np.load(out), X[:, :5])


# -- a converted model's images on an engine ---------------------------------------------------
def test_load_images_gives_each_stored_image_as_a_memory(tmp_path, capsys, engine):
    from importlib.resources import files
    from runtime.model.manifest import read_manifest, stored_image
    model = files("runtime") / "data" / "sample_cnn.onnx"
    path = tmp_path / "w.safetensors"
    code, _, err = run(capsys, "model", str(model), "-o", path, "--keep-buffers")
    assert code == 0, err
    loaded = runtime.load_images(path, engine)
    tensors, manifest = read_manifest(path)
    assert list(loaded) == [e["name"] for e in manifest["tensors"]]
    for entry in manifest["tensors"]:
        mem = loaded[entry["name"]]
        assert mem.engine is engine
        assert tuple(mem.dims) == tuple(entry["dims"]) and mem.dtype.name == entry["dtype"]
        np.testing.assert_array_equal(mem.to_numpy().reshape(-1),
                                      np.asarray(stored_image(tensors, entry)).reshape(-1))


def test_load_images_of_a_file_without_a_manifest(tmp_path):
    save_file = needs("safetensors.numpy").save_file
    save_file({"a": np.zeros(3, np.float32)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ClayoutError, match="no clayout manifest") as exc:
        runtime.load_images(tmp_path / "plain.safetensors")
    one_line(exc)
