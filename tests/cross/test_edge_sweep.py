"""Edge dims on every named layout: a zero dim, all ones, C = 1, 5 and 17
(and the same as 5-D dims where a layout takes them), through the Python
API (``to_image`` then ``from_image``) and the command line (``to-image``
then ``from-image``, in-process). Each gives the reference engine's bits or
refuses with one ClayoutError (the command line: exit 1 and exactly one
``clayout: error:`` line made from a ClayoutError); no other exception type
ever escapes. An image's size comes from its ImageDesc on every storage,
so a tensor with no elements on an image array, a 3-D image or a buffer is
refused as on a 2-D image, naming its storage and size."""
from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import runtime
from conftest import bits, run
from runtime import ClayoutError, ImageDesc
from runtime.algebra.catalog import NAMED

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/main.py",)

REF = runtime.engine.get("reference")
cli_main = importlib.import_module("runtime.cli.main")   # the module (runtime.cli.main is main())


def edge_dims(layout) -> list[tuple[int, ...]]:
    """The edge dims of ``layout``: 1-D W for an argument; else N, C (the
    second dim: C, I) and a kernel of the layout's own size (its
    transform's taps, 3 otherwise), a zero in C and in N, all ones, C = 1,
    5, 17; and, where the layout has a 5-D form, N,C,D,H,W likewise; a 2-D
    activation (N, C) with a zero."""
    if layout.ndims == 1:
        return [(0,), (1,), (5,), (17,)]
    k = layout.transform.taps if layout.transform is not None else 3
    dims = [(1, 0, k, k), (0, 2, k, k), (1, 1, 1, 1), (2, 1, k, k), (1, 5, k, k),
            (1, 17, k, 2)]
    if layout.kind == "activation":
        dims.append((3, 0))
    if layout.volume is not None:
        dims += [(1, 0, 2, 2, 3), (1, 1, 1, 1, 1), (2, 1, 2, 1, 3), (1, 5, 2, 2, 3),
                 (1, 17, 1, 2, 2)]
    return dims


CASES = [(name, dims) for name, layout in NAMED.items() for dims in edge_dims(layout)]


def _tensor(dims) -> np.ndarray:
    """Values with a fraction, a sign and a zero, distinct in each element."""
    n = int(np.prod(dims))
    return ((np.arange(n, dtype=np.float32) % 29 - 14) * 0.375).reshape(dims)


@functools.lru_cache(maxsize=None)
def reference(name: str, dims: tuple[int, ...]):
    """(image, back) by the reference engine, or the ClayoutError it raised."""
    try:
        image = runtime.to_image(_tensor(dims), name, engine=REF)
        return image, runtime.from_image(image, name, dims, engine=REF)
    except ClayoutError as exc:
        return exc


def round_trip(name, dims, engine):
    """(image, back) by ``engine``, or the ClayoutError it raised; any other
    exception fails the test where it is raised."""
    try:
        image = runtime.to_image(_tensor(dims), name, engine=engine)
        return image, runtime.from_image(image, name, dims, engine=engine)
    except ClayoutError as exc:
        return exc


def assert_like_reference(name, dims, got) -> None:
    """``got`` equals the reference's outcome: the same bits both ways, or a
    ClayoutError where the reference raised one."""
    want = reference(name, dims)
    if isinstance(want, ClayoutError):
        assert isinstance(got, ClayoutError), (name, dims, "reference refused:", str(want))
        return
    assert not isinstance(got, ClayoutError), (name, dims, str(got))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, dims, g.shape, w.shape)
        assert np.array_equal(bits(g), bits(w)), (name, dims)


@pytest.mark.parametrize("name", sorted(NAMED))
def test_python_api_on_the_cpu_engine(name):
    for dims in edge_dims(NAMED[name]):
        assert_like_reference(name, dims, round_trip(name, dims, "cpu"))
    # a zero-volume image has its ImageDesc's shape, with a 0 in it, on every storage
    for dims in edge_dims(NAMED[name]):
        if 0 in dims and not isinstance(reference(name, dims), ClayoutError):
            side = ImageDesc(NAMED[name], dims)
            assert reference(name, dims)[0].shape == side.array_shape
            assert 0 in side.shape or side.lanes == 0   # a single texture of C = 0


# -- the command line ----------------------------------------------------------------------------
@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """``cli(*argv)`` runs clayout in-process in a temporary folder and
    returns (exit code, stdout, stderr lines); every failure it reports must
    come from a ClayoutError."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLAYOUT_DEBUG", raising=False)
    raised = []
    one_line = cli_main.one_line

    def told(exc):
        raised.append(exc)
        return one_line(exc)
    monkeypatch.setattr(cli_main, "one_line", told)

    def call(*argv):
        raised.clear()
        code, out, err = run(capsys, *argv)
        lines = [line for line in err.splitlines() if line.strip()]
        if code != 0:
            assert code == 1 and len(lines) == 1 and lines[0].startswith("clayout: error: "), \
                (argv, code, err)
            assert len(raised) == 1 and isinstance(raised[0], ClayoutError), \
                (argv, [f"{type(e).__name__}: {e}" for e in raised])
        return code, out, lines
    return call


def cli_round_trip(cli, name, dims, engine) -> None:
    """to-image then from-image of ``dims`` on ``layout``: the reference's
    bits, or a refusal; refused exactly where the dims hold no element or
    the reference refuses."""
    np.save("in.npy", _tensor(dims))
    dims_arg = ",".join(map(str, dims))
    want = reference(name, dims)
    refused = isinstance(want, ClayoutError) or 0 in dims
    code, _, lines = cli("to-image", "in.npy", "-o", "img.npy", "--layout", name,
                         "--engine", engine)
    assert (code != 0) == refused, (name, dims, lines)
    if 0 in dims and not isinstance(want, ClayoutError):
        side = ImageDesc(NAMED[name], dims)
        size = "x".join(map(str, side.shape)) + ("" if 0 in side.shape else " of 0 lanes")
        assert "hold no elements" in lines[0] and f"would be {size}" in lines[0], lines
        assert side.storage.noun in lines[0], lines
        # from-image of an empty image of the right shape is refused the same way
        np.save("img.npy", np.zeros(side.array_shape, np.float32))
    elif code == 0:
        assert np.array_equal(bits(np.load("img.npy")), bits(want[0])), (name, dims)
    else:
        return
    code, _, lines = cli("from-image", "img.npy", "-o", "back.npy", "--layout", name,
                         "--dims", dims_arg, "--engine", engine)
    assert (code != 0) == refused, (name, dims, lines)
    if code == 0:
        back = np.load("back.npy")
        assert np.array_equal(bits(back), bits(want[1])), (name, dims)


@pytest.mark.parametrize("name", sorted(NAMED))
def test_command_line_on_the_cpu_engine(cli, name):
    for dims in edge_dims(NAMED[name]):
        cli_round_trip(cli, name, dims, "cpu")


def test_the_zero_volume_refusal_names_each_storage(cli):
    """The first report: a 1,0,3,4 tensor on the 3-D image, the array and the
    buffers printed a ValueError of a (width, height) unpacking."""
    np.save("z.npy", np.zeros((1, 0, 3, 4), np.float32))
    for name, text in [("tflite_texture_3d", "tflite_texture_3d image3d would be 4x3x0"),
                       ("tflite_texture_array", "image2d_array would be 4x3x0"),
                       ("tflite_buffer", "tflite_buffer buffer would be 0 pixels"),
                       ("tflite_image_buffer", "image_buffer would be 0 pixels"),
                       ("tflite_texture_2d", "tflite_texture_2d image would be 4x0")]:
        code, out, lines = cli("to-image", "z.npy", "-o", "o.npy", "--layout", name)
        assert code == 1 and out == "" and text in lines[0], lines
        assert "z.npy: dims 1,0,3,4 hold no elements" in lines[0], lines


# -- the opencl engine: a covering subset --------------------------------------------------------
# Every zero-volume case of every layout runs on the opencl engine (nothing is
# compiled for it). The other cases run for one layout of each kind of kernel,
# which covers each storage (image2d, image2d_array, image3d, image_buffer,
# buffer), each lane count (4, 1, 0), a grouped layout, the 1-D argument, the
# 5-D volume forms (in_out_channel, tflite_texture_array, tflite_texture_3d,
# tflite_buffer) and a transform stage (winograd_2x3_mace): each is a couple of
# programs (~0.5 s each to build cold), shared by all the edge dims of the
# layout. The command line runs on opencl for the storages beyond the 2-D image.
OPENCL = ["in_out_channel", "image_2d_weights_c1_b_fyx", "image_2d_weights_c4_fyx_b",
          "tflite_single_texture_2d", "argument", "tflite_texture_array", "tflite_texture_3d",
          "tflite_image_buffer", "tflite_buffer", "winograd_2x3_mace"]
OPENCL_CLI = ["tflite_texture_3d", "tflite_texture_array", "tflite_buffer",
              "tflite_image_buffer", "in_out_channel"]


@pytest.mark.parametrize("name", sorted(NAMED))
def test_zero_volume_on_the_opencl_engine(cl_engine, name):
    for dims in edge_dims(NAMED[name]):
        if 0 in dims:
            assert_like_reference(name, dims, round_trip(name, dims, cl_engine))


@pytest.mark.parametrize("engine", ["cpu", "opencl"])
def test_zero_volume_memory_on_every_storage(request, engine):
    """A Memory of no elements, allocated or on the caller's host array (its
    ImageDesc's array_shape), holds no device memory and converts to and
    from an image like the host arrays do (nothing is compiled for it)."""
    if engine == "opencl":
        engine = request.getfixturevalue("cl_engine")
    for name, dims in CASES:
        want = reference(name, dims)
        if 0 not in dims or isinstance(want, ClayoutError):
            continue
        side = ImageDesc(NAMED[name], dims)
        src = runtime.Memory(runtime.MemoryDesc(dims), engine=engine,
                             data=np.zeros(0, np.float32))
        made = runtime.to_image(src, name)
        attached = runtime.Memory.image(name, dims, engine=engine,
                                        data=np.zeros(side.array_shape, np.float32))
        for image in (made, attached):
            assert image.to_numpy().shape == want[0].shape == side.array_shape, (name, dims)
            back = runtime.from_image(image, name, dims).to_numpy()
            assert back.size == want[1].size == 0, (name, dims)


@pytest.mark.parametrize("name", OPENCL)
def test_python_api_on_the_opencl_engine(cl_engine, name):
    for dims in edge_dims(NAMED[name]):
        assert_like_reference(name, dims, round_trip(name, dims, cl_engine))


@pytest.mark.parametrize("name", OPENCL_CLI)
def test_command_line_on_the_opencl_engine(cl_engine, cli, name):
    for dims in edge_dims(NAMED[name]):
        cli_round_trip(cli, name, dims, "opencl")
