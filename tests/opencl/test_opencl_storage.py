"""The OpenCL side of every storage (runtime/opencl/images.py): image2d,
image2d_array, image3d, image_buffer and buffer, through the six tflite_*
layouts and the 5-D forms of in_out_channel and texture_2d.

Three ways agree bit for bit (OpenCL with direct and staged image access,
cpu, reference) in both directions, and round trips are exact; Memory
objects of every storage allocate, read, write, map and convert on the
device; accessors read (and write) every storage; limits are refused
before anything is allocated; 3-lane single textures (no OpenCL format)
and formats the device lacks are one clear error for device images while
host arrays still convert; oclgrind sees the 3-D, array and buffer kernels
clean (``PYTHONPATH=.:tests python -P tests/opencl/test_opencl_storage.py child`` runs
that part).
"""
import math
import sys

import numpy as np
import pyopencl as cl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from conftest import bits, run_under_oclgrind, tiered, with_facts
from runtime import ClayoutError, ImageDesc, Memory, MemoryDesc, image_layout
from runtime import engine as engines
from runtime.algebra.storage import Limits
from runtime.opencl import programs
from strategies import scaled

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/storage.py", "runtime/memory.py", "runtime/opencl/__init__.py",
           "runtime/opencl/images.py", "runtime/opencl/plan.py")

STORAGE_LAYOUTS = ["tflite_buffer", "tflite_image_buffer", "tflite_texture_2d",
                   "tflite_single_texture_2d", "tflite_texture_array", "tflite_texture_3d",
                   "in_out_channel", "texture_2d"]
IMAGE_DTYPES = ["f32", "f16", "s32", "s8", "u8"]
BUF_DTYPES = ["f32", "f16", "bf16", "s8", "u8", "s32"]
SIZES = (0, 1, 2, 3, 5, 17)
REF, CPU = engines.get("reference"), engines.get("cpu")
# 14 examples in the thorough tier (the count before tiers), 6 in ci
FEW = scaled(7 / 60, settings(deadline=None, derandomize=True,
                              suppress_health_check=list(HealthCheck)))


def values(dt: str, n: int, seed: int) -> np.ndarray:
    """Random bit patterns of ``dt`` (no signalling f16 NaNs: a device's
    half-image path may quiet them, tests/cross/test_opencl_vs_reference.py)."""
    d = runtime.algebra.dtypes.dtype(dt)
    raw = np.random.default_rng(seed).integers(0, 256, n * d.itemsize, dtype=np.uint8)
    arr = raw.view(d.np).copy()
    if d.name == "f16":
        b = arr.view(np.uint16)
        b[((b & 0x7c00) == 0x7c00) & ((b & 0x3ff) != 0)] |= 0x200
    return arr


@st.composite
def storage_cases(draw):
    """(layout name, dims): 4-D or 5-D, tails and zero-volume dims; a single
    texture's C is 1..4."""
    name = draw(st.sampled_from(STORAGE_LAYOUTS))
    nd = draw(st.sampled_from((4, 5)))
    dims = list(draw(st.lists(st.sampled_from(SIZES), min_size=nd, max_size=nd)))
    if image_layout(name).lanes == 0:
        dims[1] = draw(st.sampled_from((1, 2, 3, 4)))
    keep = {1} if image_layout(name).lanes == 0 else set()
    while math.prod(max(d, 1) for d in dims) > 300:
        i = max((k for k in range(nd) if k not in keep), key=lambda k: dims[k])
        dims[i] = {17: 5, 5: 3, 3: 2}.get(dims[i], 1)
    return name, tuple(dims)


@pytest.mark.parametrize("image_access", ["direct", "staged"])
@FEW
@given(case=storage_cases(), image_dt=st.sampled_from(IMAGE_DTYPES),
       buf_dt=st.sampled_from(BUF_DTYPES), seed=st.integers(0, 99))
def test_every_storage_three_ways_both_directions(cl_engine, image_access, case, image_dt,
                                                  buf_dt, seed):
    from runtime.opencl.engine import OpenCLEngine
    eng = OpenCLEngine(queue=cl_engine.queue, image_access=image_access)
    name, dims = case
    img = ImageDesc(image_layout(name), dims, image_dt)
    src = MemoryDesc(dims, buf_dt, tag="abcde"[:len(dims)])
    x = values(buf_dt, src.span, seed)
    want = REF.convert(src, img, x)
    for other in (eng, CPU):
        assert np.array_equal(bits(other.convert(src, img, x)), bits(want)), (other, name, dims)
    pixels = values(image_dt, want.size, seed + 1).reshape(want.shape)
    dst = MemoryDesc(dims, buf_dt, tag="acdeb"[:len(dims)] if len(dims) == 5 else "acdb")
    back = REF.convert(img, dst, pixels)
    for other in (eng, CPU):
        assert np.array_equal(bits(other.convert(img, dst, pixels)), bits(back)), (other, name)
    # a round trip through an image of the buffer's own dtype is exact
    if buf_dt in IMAGE_DTYPES:
        same = img.with_dtype(buf_dt)
        there = eng.convert(src, same, x)
        mid = eng.convert(same, dst, there)
        assert np.array_equal(bits(eng.convert(dst, same, mid)), bits(there))
        assert np.array_equal(bits(eng.convert(same, src, there)), bits(x))


MEMORY_CASES = [
    ("tflite_texture_3d", (2, 5, 3, 3)), ("tflite_texture_array", (1, 6, 2, 3, 5)),
    ("tflite_image_buffer", (2, 5, 3, 1)), ("tflite_buffer", (1, 9, 2, 2, 3)),
    ("tflite_single_texture_2d", (2, 4, 3, 5)), ("tflite_single_texture_2d", (1, 1, 3, 2)),
    ("in_out_channel", (1, 5, 2, 3, 3)), ("texture_2d", (2, 3, 2, 1, 3))]


def _memory_covered(case) -> bool:
    """The covering set (24 of the 48 cases in every tier, the rest in the
    thorough tier): every storage case in f32 with both image accesses, and
    in one more dtype in turn (f16, u8, f16, ...: CL_HALF_FLOAT and
    CL_UNSIGNED_INT8 images each met on 2-D, array or 3-D images, a buffer
    storage and a single texture) with direct access, the one whose kernels
    reach the image object through its format; a staged access moves the
    image's bytes with a buffer<->image copy whatever the dtype."""
    access, name, dims, dt = case
    turn = ("f16", "u8")[MEMORY_CASES.index((name, dims)) % 2]
    return dt == "f32" or (access == "direct" and dt == turn)


@pytest.mark.parametrize("cl_image_engine, name, dims, dt", tiered(
    [(access, name, dims, dt) for access in ("direct", "staged") for name, dims in MEMORY_CASES
     for dt in ("f32", "f16", "u8")], _memory_covered,
    ids=lambda case: f"{case[0]}-{case[3]}-{case[1]}-{'x'.join(map(str, case[2]))}"),
    indirect=["cl_image_engine"])
def test_memory_of_every_storage(cl_image_engine, name, dims, dt):
    """allocate (zeroed), from_numpy / to_numpy, map, conversions between
    Memory objects (buffer -> image -> buffer -> existing image) on the device."""
    if dt == "f16" and ImageDesc(image_layout(name), dims).lanes == 1:
        dt = "f32"   # PoCL 3.1: CL_R + half (a staged copy handles it in conversions)
    eng = cl_image_engine
    side = ImageDesc(image_layout(name), dims, dt)
    mem = Memory.image(name, dims, dt, engine=eng)
    assert np.array_equal(mem.to_numpy(), np.zeros(side.array_shape, side.dtype.np))
    if side.storage.on_buffer:
        assert isinstance(mem.storage, cl.Buffer) and mem.storage.size >= side.nbytes
    else:
        assert isinstance(mem.storage, cl.Image)
    plain = MemoryDesc(dims, dt)
    x = values(dt, plain.span, 5)
    want = REF.convert(plain, side, x)
    loaded = Memory.from_numpy(want, name, engine=eng, dims=dims)
    assert np.array_equal(bits(loaded.to_numpy()), bits(want))
    with loaded.map(write=False) as arr:
        assert np.array_equal(bits(arr), bits(want))
    src = Memory.from_numpy(x, plain, engine=eng)
    img = runtime.memory.convert(src, side)
    assert np.array_equal(bits(img.to_numpy()), bits(want))
    other = MemoryDesc(dims, dt, tag="acdb" if len(dims) == 4 else "acdeb")
    moved = runtime.memory.convert(img, other)
    assert np.array_equal(bits(moved.to_numpy()), bits(REF.convert(plain, other, x)))
    again = runtime.memory.convert(moved, Memory.image(name, dims, dt, engine=eng))
    assert np.array_equal(bits(again.to_numpy()), bits(want))
    with mem.map() as arr:                      # a write through map stays
        arr[...] = want
    assert np.array_equal(bits(mem.to_numpy()), bits(want))


def test_buffer_storages_are_buffers_and_attach_in_place(cl_engine):
    """A buffer storage is the caller's cl.Buffer (size checked) or numpy
    array (in place); an image storage takes a cl.Image of its type, size
    and format only."""
    dims = (1, 5, 2, 3)
    side = ImageDesc(image_layout("tflite_buffer"), dims)
    buf = cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE, side.nbytes + 64)
    mem = Memory.image("tflite_buffer", dims, engine=cl_engine, data=buf)
    assert mem.storage is buf
    with pytest.raises(ClayoutError, match=f"too small.*needs {side.nbytes} bytes"):
        Memory.image("tflite_buffer", dims, engine=cl_engine,
                     data=cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE, 16))
    arr = values("f32", int(np.prod(side.array_shape)), 1).reshape(side.array_shape)
    held = Memory.image("tflite_image_buffer", dims, engine=cl_engine, data=arr)
    assert np.array_equal(bits(held.to_numpy()), bits(arr))
    img3 = ImageDesc(image_layout("tflite_texture_3d"), dims)
    from runtime.opencl import images
    right = images.create(cl_engine.context, img3, cl_engine.limits)
    assert Memory.image("tflite_texture_3d", dims, engine=cl_engine, data=right).storage is right
    wrong = images.create(cl_engine.context, ImageDesc(image_layout("tflite_texture_array"),
                                                        dims), cl_engine.limits)
    with pytest.raises(ClayoutError, match="IMAGE2D_ARRAY 3x2x2 .* expected a 3x2x2 image3d"):
        Memory.image("tflite_texture_3d", dims, engine=cl_engine, data=wrong)
    with pytest.raises(ClayoutError, match="takes a cl.Buffer"):
        Memory.image("tflite_buffer", dims, engine=cl_engine, data=right)


def test_limits_are_refused_before_allocation(cl_engine, monkeypatch):
    from runtime.opencl import images
    from runtime.opencl.engine import OpenCLEngine
    eng = with_facts(monkeypatch, OpenCLEngine(queue=cl_engine.queue),
                     limits=Limits((64, 64), (4, 4, 2), 2, 16, 1 << 20))

    def no(*args, **kwargs):
        raise AssertionError("allocated before the limit was checked")
    monkeypatch.setattr(images.cl, "create_image", no)
    monkeypatch.setattr(images.cl, "Buffer", no)
    for name, dims, what in [("tflite_texture_3d", (1, 12, 2, 2), "2x2x3 image3d, over the "
                              "device limit 4x4x2"),
                             ("tflite_texture_array", (1, 12, 2, 2), "image2d_array, over"),
                             ("tflite_image_buffer", (1, 4, 3, 6), "18 image_buffer, over the "
                              "device limit 16"),
                             ("tflite_buffer", (1, 4, 512, 256), "131072 buffer of 2097152 "
                              "bytes, over the device's max allocation 1048576 bytes")]:
        with pytest.raises(ClayoutError, match=f"layout '{name}'.*{what}"):
            Memory.image(name, dims, engine=eng)
        side = ImageDesc(image_layout(name), dims)
        with pytest.raises(ClayoutError, match=what):
            images.create(eng.context, side, eng.limits)


def test_three_lanes_and_missing_formats_are_one_clear_error(cl_engine):
    """A single texture of C = 3 has no OpenCL image format (CL_RGB is for
    packed types only): a device image of it is refused, and so is its
    accessor; its host arrays convert (through its dense buffer). A format
    the device lacks (PoCL: CL_RG) is refused the same way."""
    from runtime.opencl import images
    dims = (1, 3, 2, 5)
    with pytest.raises(ClayoutError, match="CL_RGB.* only for packed channel types"):
        Memory.image("tflite_single_texture_2d", dims, engine=cl_engine)
    with pytest.raises(ClayoutError, match="no accessor.*CL_RGB"):
        runtime.accessor("tflite_single_texture_2d", dims)
    x = values("f32", 30, 2)
    img = ImageDesc(image_layout("tflite_single_texture_2d"), dims)
    got = cl_engine.convert(MemoryDesc(dims), img, x)
    assert np.array_equal(bits(got), bits(REF.convert(MemoryDesc(dims), img, x)))
    rg = ImageDesc(image_layout("tflite_single_texture_2d"), (1, 2, 2, 5))
    why = images.unsupported(cl_engine.context, rg)
    if why is None:
        assert Memory.image("tflite_single_texture_2d", rg.dims, engine=cl_engine).storage
    else:
        assert "CL_RG FLOAT image2d" in why and "does not support" in why
        with pytest.raises(ClayoutError, match="CL_RG FLOAT image2d"):
            Memory.image("tflite_single_texture_2d", rg.dims, engine=cl_engine)


def test_an_image_buffer_is_read_through_its_image1d_buffer_view(cl_engine):
    from runtime.opencl import images
    dims = (1, 6, 2, 3)
    side = ImageDesc(image_layout("tflite_image_buffer"), dims)
    mem = Memory.image("tflite_image_buffer", dims, engine=cl_engine)
    view = cl_engine.memory.image_view(mem.storage, side)
    assert view.type == cl.mem_object_type.IMAGE1D_BUFFER and view.width == side.width
    assert cl_engine.memory.image_view(mem.storage, side) is view      # made once per buffer
    acc = runtime.accessor(side)
    assert acc.params.startswith("__read_only image1d_buffer_t t")
    assert acc.args(mem.storage)[0] is view
    with pytest.raises(ClayoutError,
                       match="cl.Buffer of 16 bytes is too small for .*it needs 192 bytes"):
        images.buffer_view(cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE, 16), side)


# -- accessors ---------------------------------------------------------------------------
ACCESSOR_CASES = [("tflite_texture_3d", (2, 5, 3, 3)), ("tflite_texture_array", (1, 6, 2, 3, 2)),
                  ("tflite_image_buffer", (2, 5, 3, 1)), ("tflite_buffer", (1, 9, 2, 2, 3)),
                  ("tflite_single_texture_2d", (2, 4, 3, 5)),
                  ("tflite_single_texture_2d", (1, 1, 3, 2)), ("tflite_texture_2d", (1, 5, 2, 3)),
                  ("in_out_channel", (1, 5, 2, 3, 3)), ("texture_2d", (2, 3, 2, 1, 3))]


# The covering set (every tier): every case baked (f32), and generic (s8) on
# one case of each storage: image3d, image2d_array, image1d_buffer, buffer, a
# single texture and a 2-D image (its 5-D form). A generic accessor's index
# math for every layout is test_accessor.py's; the other 3 generic cases run in
# the thorough tier.
GENERIC_CASES = ACCESSOR_CASES[:5] + ACCESSOR_CASES[8:]


@pytest.mark.parametrize("generic, name, dims", tiered(
    [(generic, *case) for generic in (False, True) for case in ACCESSOR_CASES],
    lambda case: not case[0] or case[1:] in GENERIC_CASES,
    ids=lambda case: f"{case[0]}-{case[1]}-dims{ACCESSOR_CASES.index(case[1:])}"))
def test_accessors_of_every_storage(cl_engine, name, dims, generic):
    """gather by load and load4 gives the tensor; scatter by store4 (store
    where the storage takes one element) gives to_image's bits, padding
    lanes included; loads outside the dims give 0."""
    from opencl.test_accessor import VALUE, gather, program, scatter
    dt = "s8" if generic else "f32"
    side = ImageDesc(image_layout(name), dims, dt)
    x = values(dt, int(np.prod(dims)), 3)
    image = REF.convert(MemoryDesc(dims, dt), side, x)
    acc = runtime.accessor(side, name="t", generic=generic)
    out = runtime.accessor(side, name="u", access="write", generic=generic)
    prg = program(cl_engine, acc, out)
    want = x.astype(VALUE[dt])
    assert np.array_equal(gather(cl_engine, prg, acc, image), want)
    if acc.lane_axis is not None:
        assert np.array_equal(gather(cl_engine, prg, acc, image, True), want)
    assert np.array_equal(bits(scatter(cl_engine, prg, out, want)), bits(image))
    assert out.store_one == (side.storage.name == "buffer" or side.lanes == 1)
    # the zero border: -1 and the dim on every axis
    probes = []
    for k in range(len(dims)):
        for v in (-1, dims[k]):
            idx = [0] * len(dims)
            idx[k] = v
            probes.append(idx)
    calls = "\n    ".join(f"o[{i}] = t_load(t_ARGS, {', '.join(map(str, p))});"
                          for i, p in enumerate(probes))
    text = acc.source + f"__kernel void probe(t_PARAMS, __global int *o) {{ {calls} }}"
    from opencl.test_accessor import storage
    buf = cl.Buffer(cl_engine.context, cl.mem_flags.READ_WRITE, 4 * len(probes))
    programs.build(cl_engine.context, text).probe(
        cl_engine.queue, (1,), None, *acc.args(storage(cl_engine, side, image + 1)), buf)
    got = np.full(len(probes), 7, np.int32)
    cl.enqueue_copy(cl_engine.queue, got, buf)
    assert (got == 0).all(), got


def test_kernel_text_per_storage():
    """The parameter and coordinate each storage's kernels use."""
    from runtime.opencl import plan as cl_plan
    dims = (1, 5, 2, 3)
    for name, param, coord in [
            ("tflite_texture_3d", "__write_only image3d_t dst", "(int4)(g0, g1, g2, 0)"),
            ("tflite_texture_array", "__write_only image2d_array_t dst", "(int4)(g0, g1, g2, 0)"),
            ("tflite_texture_2d", "__write_only image2d_t dst", "(int2)(g0, g1)")]:
        side = ImageDesc(image_layout(name), dims)
        k = cl_plan.plan(MemoryDesc(dims), side)
        assert param in k.source and coord in k.source
        assert k.sizes == side.extent
        assert ("cl_khr_3d_image_writes" in k.source) == (name == "tflite_texture_3d")
        back = cl_plan.plan(side, MemoryDesc(dims)).source
        assert "image" in back and "clayout_sampler, (int" in back
    acc = runtime.accessor("tflite_buffer", dims, access="write")
    assert acc.params.startswith("__global float *t")


# -- oclgrind ------------------------------------------------------------------------------
def child() -> int:
    """Conversions (direct and staged) and accessors of the 3-D, array and
    buffer storages under oclgrind, each compared with the reference."""
    from runtime.opencl.engine import OpenCLEngine, default
    from opencl.test_accessor import VALUE, gather, program, scatter
    base = default()
    assert "oclgrind" in base.device.platform.lower(), base
    bad, runs = [], 0
    cases = [("tflite_texture_3d", (1, 5, 2, 3), "f32"), ("tflite_texture_array", (1, 6, 2, 1, 3),
                                                          "f16"),
             ("tflite_image_buffer", (2, 3, 1, 2), "s8"), ("tflite_buffer", (1, 5, 2, 3), "u8"),
             ("tflite_single_texture_2d", (1, 2, 2, 3), "f32"),
             ("in_out_channel", (1, 5, 2, 1, 3), "f32")]
    for access in ("direct", "staged"):
        eng = OpenCLEngine(queue=base.queue, image_access=access)
        for i, (name, dims, dt) in enumerate(cases):
            side = ImageDesc(image_layout(name), dims, dt)
            src = MemoryDesc(dims, "f32", tag="abcde"[:len(dims)])
            x = values("f32", src.span, i)
            runs += 2
            want = REF.convert(src, side, x)
            if eng.convert(src, side, x).tobytes() != want.tobytes():
                bad.append(f"{access} to {name}")
            if eng.convert(side, src, want).tobytes() != REF.convert(side, src, want).tobytes():
                bad.append(f"{access} from {name}")
    for i, (name, dims, dt) in enumerate(cases[:4]):
        side = ImageDesc(image_layout(name), dims, dt)
        x = values(dt, int(np.prod(dims)), i)
        held = REF.convert(MemoryDesc(dims, dt), side, x)
        read = runtime.accessor(side, name="t", generic=i % 2 == 1)
        write = runtime.accessor(side, name="u", access="write", generic=i % 2 == 1)
        prg = program(base, read, write)
        runs += 2
        if not np.array_equal(gather(base, prg, read, held), x.astype(VALUE[dt])):
            bad.append(f"accessor load {name}")
        if scatter(base, prg, write, x.astype(VALUE[dt])).tobytes() != held.tobytes():
            bad.append(f"accessor store {name}")
    print(f"oclgrind: {runs} runs, {len(bad)} mismatches", flush=True)
    for b in bad:
        print("MISMATCH", b, flush=True)
    return 1 if bad else 0


def test_storage_kernels_under_oclgrind(tmp_path):
    run_under_oclgrind(__file__, tmp_path, tmp_path)


if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    sys.exit(child())
