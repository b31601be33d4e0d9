"""Zero copy between the caller's memory and the OpenCL engine.

- ``Memory.from_buffer``: on a device without cl_khr_image2d_from_buffer
  (PoCL) a 2-D image layout copies the buffer into a new image, says why
  once per engine and reason (BufferCopyWarning), and holds the buffer's
  exact bits; a layout on a buffer storage holds the caller's buffer itself,
  writes through either seen through the other; the row pitch (bytes, as
  clCreateImage's), base address and size checks refuse with one clear
  message (the device's numbers given by a stand-in where PoCL cannot reach
  the view path); bad input is refused. tests/test_row_pitch.py has the
  pitched host arrays and the pitch refusals.
- ``host_in_place``: a host-array conversion works on the caller's arrays
  (the buffers' host memory is the arrays' own), and without it on copies.
- Threads: from_buffer and in-place conversions from eight threads on one
  engine give the bits of the same calls run one after another.
- The bench's in-place comparison runs (tiny size).
"""
import sys
import threading
import warnings

import numpy as np
import pytest

import runtime
from conftest import ROOT, bits, image_side
from runtime import ClayoutError, Memory, MemoryDesc
from runtime import BufferCopyWarning

cl = pytest.importorskip("pyopencl")
from runtime.opencl import shared  # needs pyopencl
from runtime.opencl.engine import OpenCLEngine

mf = cl.mem_flags
DIMS = (1, 17, 5, 7)
# layout, dims, dtype: RGBA f32 / f16 / u8, and a one-channel f16 image
IMAGES = [("in_out_channel", DIMS, "f32"), ("conv2d_filter", (6, 5, 3, 3), "f16"),
          ("in_out_height", (2, 9, 4, 3), "u8"), ("image_2d_weights_c1_b_fyx", (3, 2, 2, 2), "f16")]
BUFFER_STORAGES = ["tflite_buffer", "tflite_image_buffer"]
LAYERED = ["tflite_texture_array", "tflite_texture_3d"]


def _pixels(side, seed=0) -> np.ndarray:
    """Raw bits for every pixel of ``side`` (NaN payloads, -0.0 included)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2 ** 63, size=side.array_shape, dtype=np.uint64)
    return raw.astype(bits(np.zeros(1, side.dtype.np)).dtype).view(side.dtype.np)


def _buffer(engine, array) -> "cl.Buffer":
    return cl.Buffer(engine.context, mf.READ_WRITE | mf.COPY_HOST_PTR,
                     hostbuf=np.ascontiguousarray(array))


def _contents(engine, buffer, like) -> np.ndarray:
    out = np.empty_like(like)
    cl.enqueue_copy(engine.queue, out, buffer)
    return out


@pytest.fixture
def fresh(cl_engine):
    """A new engine on the session's context: nothing told yet."""
    return OpenCLEngine(queue=cl_engine.queue)


# -- the copy on a device without cl_khr_image2d_from_buffer -----------------------------------
@pytest.mark.parametrize("layout,dims,dtype", IMAGES)
def test_copy_fallback_holds_the_buffers_bits(fresh, layout, dims, dtype):
    if fresh.image_from_buffer() is None:
        pytest.skip(f"{fresh.device_name} views buffers as images: no copy to check")
    side = image_side(layout, dims, dtype)
    pixels = _pixels(side)
    buf = _buffer(fresh, pixels)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        mem = Memory.from_buffer(buf, layout, dims, dtype, engine=fresh)
        again = Memory.from_buffer(buf, layout, dims, dtype, engine=fresh)
    assert [w.category for w in told] == [BufferCopyWarning]   # once per engine
    message = str(told[0].message)
    assert "cl_khr_image2d_from_buffer" in message and "copied into a new image" in message
    assert mem.zero_copy is False and again.zero_copy is False
    assert mem.copy_reason in message and isinstance(mem.storage, cl.Image)
    assert mem.engine is fresh and mem.side == side
    assert np.array_equal(bits(mem.to_numpy()), bits(pixels))
    assert np.array_equal(bits(_contents(fresh, buf, pixels)), bits(pixels))  # untouched
    # a copy: a later write to the buffer is not seen, and the image is its own storage
    cl.enqueue_copy(fresh.queue, buf, np.zeros_like(pixels))
    assert np.array_equal(bits(again.to_numpy()), bits(pixels))


def test_copy_fallback_with_a_row_pitch_and_conversions(fresh):
    if fresh.image_from_buffer() is None:
        pytest.skip(f"{fresh.device_name} views buffers as images: no copy to check")
    side = image_side("in_out_channel", DIMS)
    pixels = _pixels(side, 1)
    pitch = side.width + 5                      # pixels; row_pitch= takes bytes
    wide = np.zeros((side.height, pitch, 4), np.float32)
    wide[:, :side.width] = pixels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BufferCopyWarning)
        mem = Memory.from_buffer(_buffer(fresh, wide), "in_out_channel", DIMS, engine=fresh,
                                 row_pitch=pitch * 16)
    assert np.array_equal(bits(mem.to_numpy()), bits(pixels))
    assert mem.row_pitch == pitch * 16
    x = np.random.default_rng(2).standard_normal(DIMS).astype(np.float32)
    src = Memory.from_numpy(x.reshape(-1), MemoryDesc(DIMS), engine=fresh)
    runtime.memory.convert(src, mem)   # a write into the Memory, then back out
    back = runtime.from_image(mem, "in_out_channel", DIMS, dst="nchw")
    assert np.array_equal(back.to_numpy(), x.reshape(-1))


@pytest.mark.parametrize("layout", LAYERED)
def test_layered_storages_are_copied_with_the_reason(fresh, layout):
    """An image array or 3-D image cannot view a buffer on any device."""
    side = image_side(layout, DIMS)
    pixels = _pixels(side, 7)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        mem = Memory.from_buffer(_buffer(fresh, pixels), layout, DIMS, engine=fresh)
    assert mem.zero_copy is False
    assert mem.copy_reason == (f"layout '{layout}' is on {side.storage.name} storage; only a "
                               "2-D image can view a buffer: the buffer's bytes were copied "
                               "into a new image")
    assert [str(w.message) for w in told] == [f"clayout: Memory.from_buffer: {mem.copy_reason}"]
    assert np.array_equal(bits(mem.to_numpy()), bits(pixels))


# -- buffer storages: the caller's buffer itself --------------------------------------------
@pytest.mark.parametrize("layout", BUFFER_STORAGES)
def test_buffer_storage_is_the_callers_buffer(cl_engine, layout):
    side = image_side(layout, DIMS)
    assert side.storage.on_buffer
    pixels = _pixels(side, 3)
    buf = _buffer(cl_engine, pixels)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BufferCopyWarning)
        mem = Memory.from_buffer(buf, layout, DIMS, engine=cl_engine)
    assert mem.zero_copy is True and mem.copy_reason is None
    assert mem.storage is buf and mem.storage.int_ptr == buf.int_ptr
    assert np.array_equal(bits(mem.to_numpy()), bits(pixels))
    # the caller writes its buffer: the Memory sees it
    theirs = _pixels(side, 4)
    cl.enqueue_copy(cl_engine.queue, buf, theirs)
    assert np.array_equal(bits(mem.to_numpy()), bits(theirs))
    # the Memory is written: the caller's buffer holds it
    ours = _pixels(side, 5)
    with mem.map() as arr:
        arr[...] = ours.reshape(arr.shape)
    assert np.array_equal(bits(_contents(cl_engine, buf, ours)), bits(ours))


# -- the checks --------------------------------------------------------------------------------
def test_pitch_alignment_and_size_with_a_stand_in_device():
    """shared.buffer_pitch works in pixels (Memory turned the caller's bytes
    into pixels: runtime.hostside.pitch_pixels) and speaks bytes."""
    side = image_side("in_out_channel", DIMS)      # 35 x 5 RGBA f32: 16-byte pixels
    pixel, need = 16, lambda p: p * side.height * 16
    pitch = shared.buffer_pitch(side, need(64), None, 64, 0, None, "dev", view=True)
    assert pitch == 64                                       # 35 rounded up to 64
    assert runtime.image_pitch("in_out_channel", DIMS, device=64) == 64 * pixel
    assert shared.buffer_pitch(side, need(128), 128, 64, 0, None, "dev", view=True) == 128
    assert shared.buffer_pitch(side, need(35), None, 64, 0, None, "dev", view=False) == 35
    assert shared.buffer_pitch(side, need(40), 40, 64, 16, 8, "dev", view=False) == 40
    with pytest.raises(ClayoutError, match=r"row_pitch 1600 bytes \(100 pixels of 16 bytes\) is "
                       r"not a multiple of dev's CL_DEVICE_IMAGE_PITCH_ALIGNMENT 64 pixels "
                       r"\(1024 bytes\); allowed: a multiple of 1024 bytes >= the row's 560, "
                       r"e\.g\. 1024"):
        shared.buffer_pitch(side, need(100), 100, 64, 0, None, "dev", view=True)
    with pytest.raises(ClayoutError, match=r"starts at address 0x40, not a multiple of dev's "
                       r"CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT 8 pixels \(128 bytes"):
        shared.buffer_pitch(side, need(64), None, 64, 8, 0x40, "dev", view=True)
    assert shared.buffer_pitch(side, need(64), None, 64, 8, 0x80, "dev", view=True) == 64
    with pytest.raises(ClayoutError, match=rf"cl.Buffer of {need(64) - 1} bytes is too small "
                       rf".*at a row pitch of 1024 bytes: it needs {need(64)} bytes \(5 rows "
                       rf"of 64 pixels of {pixel} bytes\)"):
        shared.buffer_pitch(side, need(64) - 1, None, 64, 0, None, "dev", view=True)


def test_the_view_path_with_a_stand_in_device(fresh, monkeypatch):
    """Where the device has the extension: the image views the buffer at the
    checked pitch, nothing is copied and nothing is told."""
    made = []
    monkeypatch.setattr(fresh, "image_from_buffer", lambda: None)
    monkeypatch.setattr(fresh, "image_alignments", lambda: (16, 4))
    monkeypatch.setattr(fresh, "_image_over", lambda side, buf, pitch: made.append(
        (buf, pitch)) or "image over the buffer")
    side = image_side("in_out_channel", DIMS)
    buf = cl.Buffer(fresh.context, mf.READ_WRITE, 48 * side.height * 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BufferCopyWarning)
        mem = Memory.from_buffer(buf, "in_out_channel", DIMS, engine=fresh)
    assert mem.zero_copy is True and mem.copy_reason is None
    assert mem.storage == "image over the buffer" and made == [(buf, 48)]
    assert mem.row_pitch == 48 * 16 == runtime.image_pitch("in_out_channel", DIMS, device=fresh)
    with pytest.raises(ClayoutError, match=r"row_pitch 640 bytes \(40 pixels of 16 bytes\) is "
                                           r"not a multiple of .*PITCH_ALIGNMENT 16 pixels"):
        Memory.from_buffer(buf, "in_out_channel", DIMS, engine=fresh, row_pitch=40 * 16)
    # a host array wrapped with USE_HOST_PTR at an address off the alignment (4 x 16 bytes)
    host = np.zeros(48 * side.height * 4 + 16, np.float32)
    start = next(i for i in range(16) if (host.ctypes.data + 4 * i) % 64)
    odd = cl.Buffer(fresh.context, mf.READ_WRITE | mf.USE_HOST_PTR,
                    hostbuf=host[start:start + 48 * side.height * 4])
    with pytest.raises(ClayoutError, match="CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT 4 pixels"):
        Memory.from_buffer(odd, "in_out_channel", DIMS, engine=fresh)
    assert len(made) == 1


def test_buffer_address_is_what_the_alignment_applies_to(cl_engine):
    host = np.zeros(1024, np.float32)
    wrapped = cl.Buffer(cl_engine.context, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host)
    assert shared.buffer_address(wrapped) == host.ctypes.data
    own = cl.Buffer(cl_engine.context, mf.READ_WRITE, 8192)
    assert shared.buffer_address(own) is None
    base = int(cl_engine.device.mem_base_addr_align) // 8
    assert shared.buffer_address(own.get_sub_region(base, 1024)) == base


def test_device_alignments_are_read(cl_engine):
    pitch, base = cl_engine.image_alignments()
    assert pitch >= 0 and base >= 0   # 0 on a device without the extension (PoCL)


@pytest.mark.parametrize("layout", ["in_out_channel"] + BUFFER_STORAGES)
def test_refusals(cl_engine, layout):
    side = image_side(layout, DIMS)
    small = cl.Buffer(cl_engine.context, mf.READ_WRITE, side.nbytes - 4)
    with warnings.catch_warnings(), pytest.raises(
            ClayoutError, match=rf"cl.Buffer of {side.nbytes - 4} bytes is too small for "
            rf"{layout} 1x17x5x7 f32.*it needs {side.nbytes} bytes"):
        warnings.simplefilter("ignore", BufferCopyWarning)
        Memory.from_buffer(small, layout, DIMS, engine=cl_engine)
    buf = cl.Buffer(cl_engine.context, mf.READ_WRITE, 2 * side.nbytes)
    with pytest.raises(ClayoutError, match="needs an OpenCL engine .*not engine 'cpu'"):
        Memory.from_buffer(buf, layout, DIMS, engine="cpu")
    with pytest.raises(ClayoutError, match="takes a pyopencl Buffer, got ndarray; for a host "
                                           r"array use Memory.image\(layout, dims, dtype, "):
        Memory.from_buffer(np.zeros(side.array_shape, np.float32), layout, DIMS)
    with pytest.raises(ClayoutError, match="takes a pyopencl Buffer, got Image"):
        Memory.from_buffer(cl.create_image(cl_engine.context, mf.READ_WRITE,
                                           cl.ImageFormat(cl.channel_order.RGBA,
                                                          cl.channel_type.FLOAT), shape=(4, 4)),
                           layout, DIMS, engine=cl_engine)


@pytest.mark.parametrize("layout", BUFFER_STORAGES + LAYERED)
def test_row_pitch_only_on_image2d(cl_engine, layout):
    side = image_side(layout, DIMS)
    buf = cl.Buffer(cl_engine.context, mf.READ_WRITE, 4 * side.nbytes)
    with pytest.raises(ClayoutError, match=rf"row_pitch=\d+, but row_pitch applies to layouts "
                                           rf"on image2d storage .*layout '{layout}' is on "
                                           rf"{side.storage.name}"):
        Memory.from_buffer(buf, layout, DIMS, engine=cl_engine, row_pitch=(side.width + 1) * 16)


# -- host arrays in place ---------------------------------------------------------------------
def _spy(engine, monkeypatch) -> list:
    """The cl.Buffers the engine wraps host arrays in, as they are made."""
    made, wrap = [], engine._host_buffer

    def record(arr, flags):
        buf = wrap(arr, flags)
        made.append((buf, arr))
        return buf
    monkeypatch.setattr(engine, "_host_buffer", record)
    return made


@pytest.mark.parametrize("target", ["nhwc", "in_out_channel"])
def test_host_in_place_uses_the_callers_arrays(cl_engine, monkeypatch, target):
    x = np.random.default_rng(6).standard_normal(DIMS).astype(np.float32).reshape(-1)
    src = MemoryDesc(DIMS)
    dst = MemoryDesc(DIMS, tag="nhwc") if target == "nhwc" else \
        image_side(target, DIMS).layout
    shape = (x.size,) if target == "nhwc" else dst.array_shape(DIMS)
    results = {}
    for in_place in (True, False):
        eng = OpenCLEngine(queue=cl_engine.queue, host_in_place=in_place)
        assert eng.host_in_place is in_place
        made = _spy(eng, monkeypatch)
        out = np.empty(shape, np.float32)
        if target == "nhwc":
            got = runtime.reorder(x, src, dst, engine=eng, out=out)
        else:
            got = runtime.to_image(x.reshape(DIMS), target, engine=eng, out=out)
        assert got is out
        wrapped = {buf.get_host_array((1,), "u1").ctypes.data for buf, _ in made
                   if buf.flags & mf.USE_HOST_PTR}
        if in_place:   # the kernel read x and wrote out where they are
            assert {x.ctypes.data, out.ctypes.data} <= wrapped
        else:
            assert wrapped == set()
        results[in_place] = out.copy()
        monkeypatch.undo()
    # the default: in place where the device shares host memory (PoCL: a CPU device)
    assert OpenCLEngine(queue=cl_engine.queue).host_in_place is (
        cl_engine.is_cpu or bool(cl_engine.device.host_unified_memory))
    want = runtime.reorder(x, src, dst, engine="reference") if target == "nhwc" else \
        runtime.to_image(x.reshape(DIMS), target, engine="reference")
    assert np.array_equal(bits(results[True]), bits(want))
    assert np.array_equal(bits(results[False]), bits(want))


# -- threads ----------------------------------------------------------------------------------
THREADS, CALLS = 8, 12


def _job(engine, t, k):
    """One from_buffer (thread t, call k) and its bits, and a host conversion."""
    layout, dims, dtype = IMAGES[(t + k) % len(IMAGES)]
    side = image_side(layout, dims, dtype)
    pixels = _pixels(side, 100 * t + k)
    mem = Memory.from_buffer(_buffer(engine, pixels), layout, dims, dtype, engine=engine)
    x = np.random.default_rng(t).standard_normal(DIMS).astype(np.float32).reshape(-1)
    host = runtime.reorder(x, MemoryDesc(DIMS), MemoryDesc(DIMS, tag="nChw16c"), engine=engine)
    return bits(mem.to_numpy()).tobytes(), bits(host).tobytes()


def test_from_buffer_and_conversions_from_eight_threads(cl_engine):
    engine = OpenCLEngine(queue=cl_engine.queue, host_in_place=True)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        alone = [[_job(engine, t, k) for k in range(CALLS)] for t in range(THREADS)]
        single = sum(w.category is BufferCopyWarning for w in told)
        shared_engine = OpenCLEngine(queue=cl_engine.queue, host_in_place=True)
        got = [None] * THREADS
        start = threading.Barrier(THREADS)

        def work(t):
            start.wait()
            got[t] = [_job(shared_engine, t, k) for k in range(CALLS)]
        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert got == alone
    # each engine told each reason once, threads or not
    assert single == 1 and sum(w.category is BufferCopyWarning for w in told) == 2


# -- the bench --------------------------------------------------------------------------------
def test_bench_host_in_place_rows_tiny(cl_engine):
    sys.path.insert(0, str(ROOT / "tools"))
    import bench
    lines = []
    rows = bench.host_in_place_rows(["tiny"], 1, lines.append, engine=cl_engine)
    assert {r["case"] for r in rows} == {name for name, _, _ in bench.CASES}
    assert all(r["limit"] > 0 and r["in place"] > 0 and r["copies"] > 0 for r in rows)
    assert lines[-1].startswith("geomean tiny: host arrays with out= in place")
