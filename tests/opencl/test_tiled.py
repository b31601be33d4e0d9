"""The tiled kernel family (local-memory tiles: runtime/opencl/launch.py's
``plan_tiled``) against the reference, bit for bit, on every OpenCL
implementation present, and the device facts that choose it.

CPU devices run the direct family by default (measured faster there), so
these tests force the tiled one (``OpenCLEngine(tiled=True)``); the whole
suite runs with ``CLAYOUT_OPENCL_TILED=1`` in ``make test-tiled``, the
tiled kernels under oclgrind in tests/cross/test_oclgrind.py, and random cases
on a tiled engine in the differential check (tests/differential.py).
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from runtime import ImageDesc, MemoryDesc, image_layout
from runtime import engine as engines
from runtime.algebra.dtypes import IMAGE_NAMES, NAMES
from strategies import MOVED, any_descs, assert_same_bits, fill, scaled, seeds, small_dims

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/kernel.py", "runtime/cli/main.py", "runtime/opencl/device.py",
           "runtime/opencl/launch.py", "runtime/opencl/sides.py", "runtime/opencl/tiled.py")

REF = engines.get("reference")


@pytest.fixture(scope="session")
def tiled(cl_engine):
    """The engine of each implementation with the tiled family forced
    (images through image objects, as on a GPU)."""
    from runtime.opencl.engine import OpenCLEngine
    return OpenCLEngine(queue=cl_engine.queue, tiled=True, image_access="direct")


@pytest.fixture(scope="session")
def tiled_staged(cl_engine):
    from runtime.opencl.engine import OpenCLEngine
    return OpenCLEngine(queue=cl_engine.queue, tiled=True, image_access="staged")


def kernel_of(engine, src, dst):
    from runtime.opencl.moves import move_plan
    return move_plan(src, dst, engine.device).kernel


# -- the moves the bench lists, on shapes whose tiles have ragged edges ----------------------
MOVES = [("nhwc", "nchw"), ("nchw", "nhwc"), ("nchw", "nChw16c"), ("nChw16c", "nchw"),
         ("nChw8c", "nchw"), ("cdab", "abcd"), ("abcd", "cdab")]


@pytest.mark.parametrize("dims", [(1, 64, 9, 40), (2, 17, 5, 37), (1, 5, 1, 70), (1, 33, 3, 3)])
@pytest.mark.parametrize("pair", MOVES, ids="->".join)
def test_transposes_are_tiled_and_exact(tiled, dims, pair):
    src, dst = (MemoryDesc(dims, "f32", tag=t) for t in pair)
    x = fill("f32", src.span, 1)
    assert kernel_of(tiled, src, dst).tiled
    assert_same_bits(tiled.convert(src, dst, x), REF.convert(src, dst, x), pair)


@pytest.mark.parametrize("src_dt, dst_dt", [("f32", "f16"), ("f16", "f32"), ("u8", "f32"),
                                            ("f32", "bf16"), ("s32", "s8"), ("bf16", "u8")])
def test_dtype_conversions_through_the_tile(tiled, src_dt, dst_dt):
    dims = (1, 19, 6, 35)
    src, dst = MemoryDesc(dims, src_dt, tag="nchw"), MemoryDesc(dims, dst_dt, tag="nhwc")
    x = fill(src_dt, src.span, 2, "special")
    assert kernel_of(tiled, src, dst).tiled
    assert_same_bits(tiled.convert(src, dst, x), REF.convert(src, dst, x), (src_dt, dst_dt))


def test_halo_and_padding_are_written_as_today(tiled):
    """A halo's fill and the logical region, through the tile (every element written)."""
    dims = (1, 7, 5, 37)
    dst = MemoryDesc(dims, "f32", tag="nhwc", halo=((0, 1, 2, 1), (0, 2, 1, 3)), fill=-7.0)
    src = MemoryDesc(dims, "f32", tag="nchw")
    x = fill("f32", src.span, 3)
    assert kernel_of(tiled, src, dst).tiled
    out = np.full(dst.span, 99.0, np.float32)
    assert_same_bits(tiled.convert(src, dst, x, out=out), REF.convert(src, dst, x))


@pytest.mark.parametrize("bake", ["0", "-1"], ids=["baked", "generic"])
def test_both_program_kinds(cl_engine, monkeypatch, bake):
    """A baked program (numbers in the source) and the family's generic one
    (numbers as arguments, group ids decoded by magic division)."""
    from runtime.opencl.engine import OpenCLEngine
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_BYTES", bake)
    eng = OpenCLEngine(queue=cl_engine.queue, tiled=True)
    for dims in ((1, 24, 7, 45), (3, 5, 2, 33)):
        src, dst = MemoryDesc(dims, tag="nhwc"), MemoryDesc(dims, tag="nchw")
        k = kernel_of(eng, src, dst)
        assert k.tiled and k.generic == (bake == "-1")
        x = fill("f32", src.span, 4)
        assert_same_bits(eng.convert(src, dst, x), REF.convert(src, dst, x), dims)


# -- any pair of descs, any dtypes ------------------------------------------------------------
@scaled(0.5)
@given(st.data())
def test_any_pair_matches_the_reference(tiled, data):
    """Random descs (tags, blocks, user strides, halos, views of a parent)
    with tails and zero-volume dims, any dtype pair: the tiled engine is the
    reference's bits (moves that do not transpose run the direct family)."""
    nd = data.draw(st.integers(2, 5), "ndims")
    dims = data.draw(small_dims(nd, sizes=(0, 1, 3, 5, 17, 33), max_volume=900), "dims")
    src = data.draw(any_descs(dtype=data.draw(st.sampled_from(NAMES)), dims=dims), "src")
    dst = data.draw(any_descs(dtype=data.draw(st.sampled_from(NAMES)), dims=dims), "dst")
    x = fill(src.dtype.name, src.span, data.draw(seeds, "seed"))
    assert_same_bits(tiled.convert(src, dst, x), REF.convert(src, dst, x), (src, dst))


# -- images: each pixel stored whole from the tile ---------------------------------------------
FOUR_D = sorted(n for n, lay in MOVED.items() if lay.ndims == 4)


@pytest.mark.parametrize("name", FOUR_D)
def test_images_written_from_the_tile(tiled, tiled_staged, name):
    """Every named 4-D layout written from NHWC (its lanes along C, the
    image's rows along W: a transposing move) and from NCHW, direct and
    staged, with an image dtype other than the buffer's."""
    layout = image_layout(name)
    dims = (5, 9, 3, 7) if layout.kind == "filter" else (1, 9, 3, 37)
    for engine in (tiled, tiled_staged):
        for tag, dt in (("nhwc", "f32"), ("nchw", "f16")):
            try:
                image = ImageDesc(layout, dims, dt)
            except runtime.ClayoutError:   # a layout these dims cannot take
                continue
            src = MemoryDesc(image.dims, "f32", tag=tag)
            x = fill("f32", src.span, 5, "small")
            got = engine.convert(src, image, x)
            assert_same_bits(got, REF.convert(src, image, x), (name, tag, engine.device.options.image_access))


def test_nhwc_to_in_out_channel_is_tiled_both_ways_of_access(tiled, tiled_staged):
    dims = (1, 64, 5, 70)
    src = MemoryDesc(dims, tag="nhwc")
    image = ImageDesc(image_layout("in_out_channel"), dims)
    for engine in (tiled, tiled_staged):
        k = kernel_of(engine, src, image)
        assert k.tiled and k.dst_image == (engine.device.options.image_access == "direct")
        x = fill("f32", src.span, 6)
        assert_same_bits(engine.convert(src, image, x), REF.convert(src, image, x))


@pytest.mark.parametrize("dt", IMAGE_NAMES)
def test_image_dtypes(tiled, dt):
    dims = (1, 10, 3, 33)
    src = MemoryDesc(dims, dt, tag="nhwc")
    image = ImageDesc(image_layout("in_out_channel"), dims, dt)
    x = fill(dt, src.span, 7, "small")
    assert_same_bits(tiled.convert(src, image, x), REF.convert(src, image, x), dt)


# -- the choice ---------------------------------------------------------------------------------
def record(engine, **facts):
    """The engine's Device record with other facts: a stand-in of a device
    this machine lacks (its name tells its plans from the others' in the
    cache, as a real device's does)."""
    options = dataclasses.replace(engine.device.options, tiled=None)   # the facts decide
    return dataclasses.replace(engine.device, options=options, **facts)


GPU = dict(kind="gpu", host_unified=False, local_is_dedicated=True, local_memory=48 << 10,
           max_work_group=1024, name="stand-in GPU", platform="stand-in")


def test_a_gpu_record_picks_the_tiled_family(cl_engine):
    from runtime.opencl.moves import move_plan
    gpu = record(cl_engine, **GPU)
    dims = (1, 64, 9, 40)
    p = move_plan(MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc"), gpu)
    assert p.tiled and p.kernel.tiled and "GPU with on-chip local memory" in p.family_why
    assert "tiled:" in p.kernel.chosen and "__local" in p.kernel.source
    # a move that does not transpose stays direct on the same device
    same = move_plan(MemoryDesc(dims, tag="nChw16c"), MemoryDesc(dims, tag="nChw8c"), gpu)
    assert same.tiled and not same.kernel.tiled and "direct:" in same.kernel.chosen
    # so does a padding pass in place: a tile read by one work item is written by another
    from runtime.opencl.plan import plan
    desc = MemoryDesc(dims, tag="nChw16c")
    assert not plan(desc, desc, aliased=True, tiled=True).tiled


@pytest.mark.parametrize("facts, words", [
    (dict(GPU, local_is_dedicated=False, name="stand-in GPU, global local memory"),
     "without on-chip local memory"),
    (dict(GPU, max_work_group=128, name="stand-in GPU, groups of 128"),
     "without on-chip local memory"),
    (dict(kind="cpu", name="stand-in CPU"), "CPU device"),
])
def test_other_records_keep_the_direct_family(cl_engine, facts, words):
    from runtime.opencl.moves import move_plan
    dims = (1, 64, 9, 40)
    p = move_plan(MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc"),
                  record(cl_engine, **facts))
    assert not p.tiled and not p.kernel.tiled and words in p.family_why


def test_the_option_and_the_setting_force_a_family(cl_engine, monkeypatch):
    from runtime.opencl.device import EngineOptions
    from runtime.opencl.engine import OpenCLEngine
    from runtime.opencl.moves import family_of
    monkeypatch.setenv("CLAYOUT_OPENCL_TILED", "1")
    forced = OpenCLEngine(queue=cl_engine.queue)
    assert forced.device.options.tiled is True and family_of(forced.device)[0]
    monkeypatch.setenv("CLAYOUT_OPENCL_TILED", "0")
    assert EngineOptions.read().tiled is False
    assert EngineOptions.read(tiled=True).tiled is True     # the argument beats the setting
    off = dataclasses.replace(OpenCLEngine(queue=cl_engine.queue).device, **GPU)   # its option kept
    assert family_of(off) == (False, "tiled=False (the engine's option or CLAYOUT_OPENCL_TILED)")
    monkeypatch.setenv("CLAYOUT_OPENCL_TILED", "yes")
    with pytest.raises(runtime.ClayoutError, match="CLAYOUT_OPENCL_TILED"):
        EngineOptions.read()


def test_the_default_on_this_machine_is_direct(cl_engine):
    """The CPU devices CI has keep the direct family (the bench measured
    the tiled one 0.2-1.07x as fast there)."""
    from runtime.opencl.moves import family_of
    if cl_engine.device.kind == "cpu" and cl_engine.device.options.tiled is None:
        assert family_of(cl_engine.device)[0] is False


def test_clayout_kernel_names_the_family(capsys):
    from runtime.cli import main
    assert main(["kernel", "--src", "nchw", "--dst", "nhwc", "--dims", "1,64,9,40",
                 "--family", "tiled"]) == 0
    out = capsys.readouterr().out
    assert "__local" in out and "// family: tiled (--family tiled)" in out
    assert main(["kernel", "--src", "nchw", "--dst", "nhwc", "--dims", "1,64,9,40",
                 "--family", "direct"]) == 0
    out = capsys.readouterr().out
    assert "__local" not in out and "// family: direct (--family direct)" in out
    assert main(["kernel", "--src", "nChw16c", "--dst", "nChw8c", "--dims", "1,64,9,40",
                 "--family", "tiled"]) == 0
    assert "the move does not transpose" in capsys.readouterr().out
