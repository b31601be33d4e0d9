"""Views of host arrays as input, and custom layouts whose texel holds a
whole dim: every door takes any numpy view (strided, negative-stride,
transposed, broadcast, misaligned, big-endian) on every engine, bit for bit
what a contiguous copy gives; the cpu and reference engines read a view of a
plain tensor in place through a strided desc, everything else is copied
once; only ``out=`` and an attached Memory must be contiguous. A lanes-0
layout whose rows and layers take the texel's dim too is refused by one
ClayoutError at every door (docs/engines.md "Views as input",
docs/layouts.md "Custom layouts")."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

import runtime
from conftest import bits
from runtime import ClayoutError, ImageLayout, Memory, MemoryDesc
from runtime import engine as engines
from runtime.algebra import hostarray

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/hostarray.py", "runtime/api.py")

pytestmark = pytest.mark.usefixtures("cpu_path")   # the cpu engine on both of its paths


@pytest.fixture(params=["reference", "cpu", "opencl"])
def engine(request):
    if request.param == "opencl":
        return request.getfixturevalue("cl_engine")
    return engines.get(request.param)


BASE = np.arange(2 * 6 * 5 * 7, dtype=np.float32).reshape(2, 6, 5, 7) - 100.5
VIEWS = {   # name: (the view, its tag, its logical dims)
    "step": (BASE[:, ::2], "nchw", (2, 3, 5, 7)),
    "crop": (BASE[:, 1:4, 1:4, 2:6], "nchw", (2, 3, 3, 4)),
    "reversed": (BASE[:, ::-1, :, ::-1], "nchw", (2, 6, 5, 7)),
    "transposed as nhwc": (np.transpose(BASE, (0, 2, 3, 1)), "nhwc", (2, 6, 5, 7)),
    "1-D step": (BASE.reshape(-1)[::3], "x", (140,)),
    "broadcast": (np.broadcast_to(BASE[:1], BASE.shape), "nchw", BASE.shape),
    "misaligned": (np.frombuffer(b"\0" + BASE.tobytes(), np.float32, offset=1)
                   .reshape(BASE.shape), "nchw", BASE.shape),
    "big-endian": (BASE.astype(">f4"), "nchw", BASE.shape),
    "the last rows of its parent": (np.arange(24, dtype=np.float32).reshape(3, 8)[:, 1::2],
                                    "ab", (3, 4)),
    "the last batch of its parent": (BASE[1:, 2:5, 1:4, 3:], "nchw", (1, 3, 3, 4)),
}
BLOCKED = {4: "nChw16c", 2: "AB8b4a", 1: "A8a"}


@pytest.mark.parametrize("name", VIEWS)
def test_reorder_of_a_view_is_the_reorder_of_its_copy(engine, name):
    view, tag, dims = VIEWS[name]
    src, dst = MemoryDesc(dims, tag=tag), MemoryDesc(dims, tag=BLOCKED[len(dims)])
    want = runtime.reorder(np.ascontiguousarray(view, np.float32), src, dst, engine="reference")
    assert np.array_equal(bits(runtime.reorder(view, src, dst, engine=engine)), bits(want))
    out = np.full(want.shape, np.nan, np.float32)
    runtime.reorder(view, src, dst, engine=engine, out=out)
    assert np.array_equal(bits(out), bits(want))


@pytest.mark.parametrize("name", [n for n, (_, _, dims) in VIEWS.items() if len(dims) == 4])
def test_to_image_of_a_view_is_the_image_of_its_copy(engine, name):
    view, tag, dims = VIEWS[name]
    for layout in ("in_out_channel", "conv2d_filter", "tflite_texture_3d"):
        want = runtime.to_image(np.ascontiguousarray(view, np.float32), layout, src=tag,
                                engine="reference")
        got = runtime.to_image(view, layout, src=tag, dtype="f32", engine=engine)
        assert np.array_equal(bits(got), bits(want)), layout


def test_the_issues_examples(engine):
    x = np.arange(60, dtype=np.float32)[::2]
    got = runtime.reorder(x, MemoryDesc((1, 3, 2, 5)), MemoryDesc((1, 3, 2, 5), tag="nChw8c"),
                          engine=engine)
    assert got[:10].tolist() == [0, 20, 40, 0, 0, 0, 0, 0, 2, 22]
    w = np.arange(2 * 8 * 3 * 3, dtype=np.float32).reshape(2, 8, 3, 3)
    assert runtime.to_image(w[0, :, 0, 0], "argument", engine=engine).reshape(-1).tolist() == \
        [0, 9, 18, 27, 36, 45, 54, 63]


def test_from_image_and_memory_take_views(engine):
    dims = (1, 6, 3, 5)
    x = (np.arange(90, dtype=np.float32) - 40).reshape(dims)
    image = runtime.to_image(x, "in_out_channel", engine="reference")
    wide = np.zeros((image.shape[0], image.shape[1] * 2, 4), np.float32)
    wide[:, ::2] = image
    assert np.array_equal(runtime.from_image(wide[:, ::2], "in_out_channel", dims,
                                             engine=engine), x)
    mem = Memory.from_numpy(x[:, :, :, ::-1], MemoryDesc(dims), engine=engine)
    assert np.array_equal(mem.to_numpy(), x[:, :, :, ::-1].reshape(-1))
    img = Memory.from_numpy(wide[:, ::2], "in_out_channel", engine=engine, dims=dims)
    assert np.array_equal(img.to_numpy(), image)


def test_a_plain_view_is_read_in_place_by_host_engines_and_copied_once_for_opencl():
    """host_input: the cpu engine gets the view's own memory and a strided
    desc (no copy); an engine that does not read views gets one contiguous
    copy and the desc as given. Its docstring runs as written."""
    view, tag, dims = VIEWS["crop"]
    desc = MemoryDesc(dims, tag=tag)
    flat, viewed = hostarray.host_input(view, desc, views=True)
    assert np.shares_memory(flat, view) and not flat.flags.writeable
    assert viewed.strides == (210, 35, 7, 1) and viewed.dims == dims
    # the window ends at the view's last element (the desc's span would reach past BASE)
    assert flat.size == 210 + 2 * 35 + 2 * 7 + 3 + 1 < viewed.span
    flat, same = hostarray.host_input(view, desc, views=False)
    assert not np.shares_memory(flat, view) and flat.flags.c_contiguous and same == desc
    assert engines.get("cpu").reads_views and engines.get("reference").reads_views
    finder = doctest.DocTestFinder().find(hostarray.host_input, "host_input",
                                          globs={"np": np, "MemoryDesc": MemoryDesc,
                                                 "host_input": hostarray.host_input})
    runner = doctest.DocTestRunner()
    for test in finder:
        runner.run(test)
    assert runner.failures == 0 and runner.tries == 3


@pytest.mark.parametrize("name", ["reversed", "broadcast", "misaligned"])
def test_views_that_no_strided_desc_reads_in_place_are_copied(name):
    """A negative or zero stride, a misaligned start: copied once."""
    view, tag, dims = VIEWS[name]
    flat, desc = hostarray.host_input(view, MemoryDesc(dims, tag=tag), views=True)
    assert not np.shares_memory(flat, view) and desc == MemoryDesc(dims, tag=tag)


def test_a_blocked_desc_given_as_a_strided_1d_view_is_copied():
    desc = MemoryDesc((1, 3, 2, 5), tag="nChw8c")
    big = np.arange(desc.span * 2, dtype=np.float32)
    flat, got = hostarray.host_input(big[::2], desc, views=True)
    assert not np.shares_memory(flat, big) and got == desc
    assert np.array_equal(runtime.reorder(big[::2], desc, MemoryDesc((1, 3, 2, 5))),
                          runtime.reorder(big[::2].copy(), desc, MemoryDesc((1, 3, 2, 5))))


def test_out_and_attached_memory_keep_the_contiguity_rule():
    x = np.zeros((1, 3, 2, 5), np.float32)
    out = np.zeros(60, np.float32)[::2]
    with pytest.raises(ClayoutError, match="not C-contiguous"):
        runtime.reorder(x, MemoryDesc(x.shape), MemoryDesc(x.shape, tag="nhwc"), out=out)
    with pytest.raises(ClayoutError, match="C-contiguous"):
        Memory(MemoryDesc((30,)), engine="cpu", data=np.zeros(60, np.float32)[::2])


# -- lanes 0: the texel's dim is never also a row or a layer ------------------------------
FULL_RANK = ["ab:2:0", "abcd:4:0", "bcda:0:0@image2d_array:4", "bcda:1:0@image3d:3",
             "cab:3:0"]


@pytest.mark.parametrize("name", FULL_RANK)
def test_a_full_rank_lanes_0_layout_is_refused_at_every_door(engine, name):
    nd = len(name.split(":")[0])
    dims = (2, 3, 4, 2)[:nd] if nd != 2 else (2, 3)
    with pytest.raises(ClayoutError, match="texel"):
        runtime.image_layout(name)
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    with pytest.raises(ClayoutError, match="texel"):
        runtime.to_image(x, name, engine=engine)
    with pytest.raises(ClayoutError, match="texel"):
        runtime.from_image(np.zeros((6, 1, 3), np.float32), name, dims, engine=engine)
    tag, rows = name.split(":")[0], int(name.split(":")[1])
    storage, _, layers = name.partition("@")[2].partition(":")
    with pytest.raises(ClayoutError, match="texel"):
        ImageLayout("mine", tag, rows, 0, ndims=nd, storage=storage or "image2d",
                    layers=int(layers or 0))


def test_lanes_0_with_the_texel_outside_the_rows(engine):
    """The largest valid lanes-0 layouts: one lane per element, the same
    image on every engine."""
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    assert runtime.image_layout("ab:1:0").array_shape((2, 3)) == (2, 1, 3)
    image = runtime.to_image(x, "ab:1:0", engine=engine)
    assert image.reshape(-1).tolist() == [1, 2, 3, 4, 5, 6]
    assert np.array_equal(runtime.from_image(image, "ab:1:0", (2, 3), engine=engine), x)
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4, 1)
    image = runtime.to_image(y, "bcda:0:0@image2d_array:3", engine=engine)
    assert image.shape == (12, 1, 1, 2)   # z: (b, c, d); a texel: the two values of a
    assert np.array_equal(runtime.from_image(image, "bcda:0:0@image2d_array:3", y.shape,
                                             engine=engine), y)
