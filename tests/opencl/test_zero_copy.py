"""Zero copy between the caller's memory and the OpenCL engine.

- ``Memory.from_buffer`` of a 2-D image layout reads the buffer's rows
  dense unless ``row_pitch=`` (bytes) says otherwise, on every device. Each
  test asserts what the device ``cl_engine`` is does, from its own numbers
  (``_expected``): without cl_khr_image2d_from_buffer (PoCL) a copy into a
  new image and the reason; with it (Intel's CPU runtime) a view
  (``zero_copy``, a cl.Image over the buffer, writes seen both ways) where
  the pitch and the buffer's start are multiples of the device's
  alignments (``runtime.image_pitch``), else a copy with the alignment's
  reason (dense rows of 35 pixels on Intel). Each reason is told once per
  engine (BufferCopyWarning); view and copy hold the buffer's exact bits.
  ``test_what_each_implementation_does`` pins the two implementations'
  numbers (docs/engines.md). A layout on a buffer storage holds the
  caller's buffer itself; an image array or 3-D image is always a copy.
- The decisions (``shared.buffer_pitch``, ``shared.misaligned``) with a
  stand-in device's numbers, and the engine's view path with a stand-in's
  alignments. Refusals: a buffer too small for the rows, bad input.
  tests/doors/test_row_pitch.py has the pitched host arrays and pitch refusals.
- ``host_in_place``: a host-array conversion works on the caller's arrays
  (the buffers' host memory is the arrays' own), and without it on copies.
- Threads: from_buffer and in-place conversions from eight threads on one
  engine give the bits of the same calls run one after another.
- The bench's in-place comparison runs (tiny size).
"""
import dataclasses
import sys
import threading
import warnings

import numpy as np
import pytest

import runtime
from conftest import ROOT, bits, image_side, needs
from runtime import ClayoutError, Memory, MemoryDesc
from runtime import BufferCopyWarning
from runtime.algebra.pitch import pitched

cl = needs("pyopencl")
from runtime.opencl import shared  # needs pyopencl
from runtime.opencl.engine import OpenCLEngine
from runtime.opencl.memory import DeviceMemory

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/pitch.py", "runtime/doors/checks.py", "runtime/memory.py",
           "runtime/opencl/memory.py", "runtime/opencl/shared.py")

mf = cl.mem_flags
DIMS = (1, 17, 5, 7)
WIDE = (1, 4, 3, 64)    # in_out_channel 64x3: dense rows a multiple of Intel's 64-pixel alignment
# layout, dims, dtype: RGBA f32 / f16 / u8, and a one-channel f16 image
IMAGES = [("in_out_channel", DIMS, "f32"), ("conv2d_filter", (6, 5, 3, 3), "f16"),
          ("in_out_height", (2, 9, 4, 3), "u8"), ("image_2d_weights_c1_b_fyx", (3, 2, 2, 2), "f16")]
BUFFER_STORAGES = ["tflite_buffer", "tflite_image_buffer"]
LAYERED = ["tflite_texture_array", "tflite_texture_3d"]
COPIED = ": the buffer's bytes were copied into a new image"


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


def _rows(engine, buffer, side, pitch) -> np.ndarray:
    """The image in ``buffer``: the first width pixels of rows ``pitch`` apart."""
    return _contents(engine, buffer, pitched(_pixels(side), pitch))[:, :side.width]


def _expected(engine, side, pitch, address=None) -> str | None:
    """Why the device copies a buffer of ``side``'s rows ``pitch`` pixels
    apart, starting at ``address`` (None: the driver's own allocation), from
    its own numbers; None: it views the buffer."""
    why = engine.memory.image_from_buffer()
    if why is not None:
        assert why == f"{engine.device.name} has no cl_khr_image2d_from_buffer (a 2-D image " \
                      "over a buffer)"
        return why + COPIED
    found = shared.misaligned(side, pitch, *engine.device.alignments, address,
                              engine.device.name)
    return None if found is None else found + COPIED


def _check(engine, mem, buf, side, pixels, pitch, reason) -> None:
    """``mem``, made from ``buf`` holding ``pixels`` at ``pitch`` pixels a
    row, is a view (``reason`` None) or a copy for ``reason``; the caller
    then writes ``_pixels(side, 11)`` into ``buf``."""
    pixel = side.lanes * side.dtype.itemsize
    assert mem.side == side and mem.row_pitch == pitch * pixel
    assert mem.copy_reason == reason and mem.zero_copy is (reason is None)
    assert isinstance(mem.storage, cl.Image)
    assert np.array_equal(bits(mem.to_numpy()), bits(pixels))    # same bits either way
    theirs = _pixels(side, 11)
    cl.enqueue_copy(engine.queue, buf, pitched(theirs, pitch))
    if reason is None:   # a view: the image is the buffer's bytes, both ways
        assert mem.storage.get_image_info(cl.image_info.BUFFER) == buf
        assert mem.storage.row_pitch == pitch * pixel
        assert np.array_equal(bits(mem.to_numpy()), bits(theirs))
        ours = _pixels(side, 12)
        with mem.map() as arr:
            arr[...] = ours
        assert np.array_equal(bits(_rows(engine, buf, side, pitch)), bits(ours))
    else:                # a copy: its own image, the buffer's later writes not seen
        assert mem.storage.get_image_info(cl.image_info.BUFFER) is None
        assert np.array_equal(bits(mem.to_numpy()), bits(pixels))
        assert np.array_equal(bits(_rows(engine, buf, side, pitch)), bits(theirs))


@pytest.fixture
def fresh(cl_engine):
    """A new engine on the session's context: nothing told yet."""
    return OpenCLEngine(queue=cl_engine.queue)


# -- what the device does with a buffer --------------------------------------------------------
def test_what_each_implementation_does(cl_engine):
    """The two implementations docs/engines.md names; any other: its numbers are read."""
    platform = cl_engine.device.platform
    why = cl_engine.memory.image_from_buffer()
    pitch, base = cl_engine.device.alignments
    if platform == "Portable Computing Language":
        assert "has no cl_khr_image2d_from_buffer" in why and (pitch, base) == (0, 0)
    elif platform == "Intel(R) OpenCL":
        assert why is None and (pitch, base) == (64, 64)
    assert pitch >= 0 and base >= 0 and cl_engine.pitch_alignment() == pitch
    side = image_side("in_out_channel", DIMS)                 # 35 pixels: no power of 2
    dense, wide = _expected(cl_engine, side, 35), _expected(cl_engine, image_side(
        "in_out_channel", WIDE), 64)
    assert dense is not None or why is None and pitch <= 1    # Intel: copied, the pitch says why
    assert wide is None or why is not None or 64 % pitch      # Intel: viewed


@pytest.mark.parametrize("layout,dims,dtype", IMAGES + [("in_out_channel", WIDE, "f32")])
def test_dense_rows_by_default(fresh, layout, dims, dtype):
    side = image_side(layout, dims, dtype)
    pixels = _pixels(side)
    buf = _buffer(fresh, pixels)
    reason = _expected(fresh, side, side.width)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        mem = Memory.from_buffer(buf, layout, dims, dtype, engine=fresh)
        again = Memory.from_buffer(buf, layout, dims, dtype, engine=fresh)
    assert [str(w.message) for w in told] == \
        ([] if reason is None else [f"clayout: Memory.from_buffer: {reason}"])   # once
    assert [w.category for w in told] == [BufferCopyWarning] * len(told)
    assert again.copy_reason == reason and mem.engine is fresh
    assert np.array_equal(bits(again.to_numpy()), bits(pixels))
    _check(fresh, mem, buf, side, pixels, side.width, reason)


@pytest.mark.parametrize("pitch", ["odd", "device", "64"])
def test_a_row_pitch_and_conversions(fresh, pitch):
    """A pitch of 40 pixels (a copy everywhere), the device's image_pitch (a
    view where there is one), 64 pixels (Intel: a view; PoCL: a copy)."""
    side = image_side("in_out_channel", DIMS)
    pixels = _pixels(side, 1)
    nbytes = {"odd": (side.width + 5) * 16, "64": 64 * 16,
              "device": runtime.image_pitch("in_out_channel", DIMS, device=fresh)}[pitch]
    buf = _buffer(fresh, pitched(pixels, nbytes // 16))
    reason = _expected(fresh, side, nbytes // 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BufferCopyWarning)
        mem = Memory.from_buffer(buf, "in_out_channel", DIMS, engine=fresh, row_pitch=nbytes)
    _check(fresh, mem, buf, side, pixels, nbytes // 16, reason)
    x = np.random.default_rng(2).standard_normal(DIMS).astype(np.float32)
    src = Memory.from_numpy(x.reshape(-1), MemoryDesc(DIMS), engine=fresh)
    runtime.memory.convert(src, mem)   # a write into the Memory, then back out
    back = runtime.from_image(mem, "in_out_channel", DIMS, dst="nchw")
    assert np.array_equal(back.to_numpy(), x.reshape(-1))
    want = _pixels(side, 11) if reason else runtime.to_image(x, "in_out_channel", engine="cpu")
    assert np.array_equal(bits(_rows(fresh, buf, side, nbytes // 16)), bits(want))


@pytest.mark.parametrize("extra", [0, 5])
def test_the_buffers_start(fresh, extra):
    """Host memory (USE_HOST_PTR) and sub-buffers on and off the base
    address alignment: 0 bytes past 4096, one pixel (16 bytes) and 64 bytes
    past; sub-buffer origins of CL_DEVICE_MEM_BASE_ADDR_ALIGN and 4096; dense
    rows of 64 pixels and rows 69 pixels apart (a copy everywhere)."""
    side = image_side("in_out_channel", WIDE)
    pixels, pitch = _pixels(side, 8), side.width + extra
    nbytes, kept = pitch * side.height * 16, []
    origins = sorted({int(fresh.device.cl_device.mem_base_addr_align) // 8, 4096})
    parent = cl.Buffer(fresh.context, mf.READ_WRITE, nbytes + 8192)
    for offset in [0, 16, 64] + [-o for o in origins]:
        if offset >= 0:
            host = np.zeros(nbytes + 8192, np.uint8)
            arr = host[(-host.ctypes.data) % 4096 + offset:][:nbytes]
            arr[...] = pitched(pixels, pitch).view(np.uint8).reshape(-1)
            buf = cl.Buffer(fresh.context, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=arr)
            address = arr.ctypes.data
        else:
            buf = parent.get_sub_region(-offset, nbytes)
            cl.enqueue_copy(fresh.queue, buf, pitched(pixels, pitch))
            address = -offset
        assert shared.buffer_address(buf) == address
        reason = _expected(fresh, side, pitch, address)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BufferCopyWarning)
            mem = Memory.from_buffer(buf, "in_out_channel", WIDE, engine=fresh,
                                     row_pitch=pitch * 16)
        _check(fresh, mem, buf, side, pixels, pitch, reason)
        kept.append((offset, reason))
    if fresh.device.platform == "Intel(R) OpenCL":   # viewed: on 1024 bytes, 64 pixels
        assert [o for o, r in kept if r is None] == ([0, -4096] if extra == 0 else [])


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


# -- the decisions ---------------------------------------------------------------------------
PITCH_WHY = ("the row pitch (row_pitch=, else the row's own bytes) is not a multiple of {}'s "
             "CL_DEVICE_IMAGE_PITCH_ALIGNMENT, {} pixels (runtime.image_pitch gives one that is)")
BASE_WHY = ("the buffer's start (a USE_HOST_PTR host array or a sub-buffer's origin) is not a "
            "multiple of {}'s CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT, {} pixels")


def test_the_decisions_with_a_stand_in_device():
    """shared.buffer_pitch and shared.misaligned work in pixels (Memory
    turned the caller's bytes into pixels: runtime.algebra.pitch.pitch_pixels);
    a refusal speaks bytes; a reason has no per-call number."""
    side = image_side("in_out_channel", DIMS)      # 35 x 5 RGBA f32: 16-byte pixels
    need = lambda p: p * side.height * 16                   # noqa: E731
    assert shared.buffer_pitch(side, need(35), None) == 35   # dense by default, any device
    assert shared.buffer_pitch(side, need(64), 64) == 64
    with pytest.raises(ClayoutError, match=r"cl.Buffer of 2799 bytes is too small .*at a row "
                       r"pitch of 560 bytes: it needs 2800 bytes \(5 rows of 35 pixels of 16 "
                       r"bytes\)"):
        shared.buffer_pitch(side, need(35) - 1, None)
    with pytest.raises(ClayoutError, match=r"at a row pitch of 1024 bytes: it needs 5120"):
        shared.buffer_pitch(side, need(64) - 1, 64)
    pitch_why, base_why = PITCH_WHY.format("dev", 64), BASE_WHY.format("dev", 8)
    assert shared.misaligned(side, 64, 64, 8, None, "dev") is None
    assert shared.misaligned(side, 128, 64, 8, 0x80, "dev") is None   # 8 pixels of 16 bytes
    assert shared.misaligned(side, 35, 0, 0, 0x10, "dev") is None     # no alignment: anything
    assert shared.misaligned(side, 35, 1, 1, 0x10, "dev") is None
    assert shared.misaligned(side, 35, 64, 8, None, "dev") == pitch_why
    assert shared.misaligned(side, 100, 64, 8, 0x80, "dev") == pitch_why
    assert shared.misaligned(side, 64, 64, 8, 0x40, "dev") == base_why
    assert {shared.misaligned(side, p, 64, 8, a, "dev") for p in (35, 40, 100)
            for a in (0x10, 0x40, 0x90)} == {f"{pitch_why}; and {base_why}"}
    aligned = runtime.image_pitch("in_out_channel", DIMS, device=64)
    assert aligned == 64 * 16 and shared.misaligned(side, aligned // 16, 64, 0, 0, "dev") is None


def test_the_view_path_with_a_stand_in_device(fresh, monkeypatch):
    """Where the device has the extension (alignments of 16 and 4 pixels):
    an aligned pitch and start are viewed, nothing told; a pitch or start
    off them is copied, each reason told once."""
    made = []
    # the stand-in: the device record with the extension and its alignments (facts, not a device)
    fresh.device = dataclasses.replace(
        fresh.device, extensions=fresh.device.extensions | {shared.EXTENSION},
        alignments=(16, 4))
    fresh.memory = DeviceMemory(fresh.device)
    monkeypatch.setattr(shared, "_image_over", lambda memory, side, buf, pitch: made.append(
        (buf, pitch)) or "image over the buffer")
    side = image_side("in_out_channel", DIMS)
    pixels = _pixels(side, 9)
    aligned = runtime.image_pitch("in_out_channel", DIMS, device=fresh)
    buf = _buffer(fresh, pitched(pixels, 48))
    host = np.zeros(48 * side.height * 4 + 16, np.float32)   # off the 64 bytes by 4 to 60
    start = next(i for i in range(16) if (host.ctypes.data + 4 * i) % 64)
    host[start:start + 48 * side.height * 4] = pitched(pixels, 48).reshape(-1)
    odd = cl.Buffer(fresh.context, mf.READ_WRITE | mf.USE_HOST_PTR,
                    hostbuf=host[start:start + 48 * side.height * 4])
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        mem = Memory.from_buffer(buf, "in_out_channel", DIMS, engine=fresh, row_pitch=aligned)
        copies = [Memory.from_buffer(_buffer(fresh, pitched(pixels, p)), "in_out_channel",
                                     DIMS, engine=fresh, row_pitch=p * 16) for p in (35, 40)]
        copies.append(Memory.from_buffer(_buffer(fresh, pixels), "in_out_channel", DIMS,
                                         engine=fresh))
        moved = Memory.from_buffer(odd, "in_out_channel", DIMS, engine=fresh, row_pitch=aligned)
    assert mem.zero_copy is True and mem.copy_reason is None and aligned == 48 * 16
    assert mem.storage == "image over the buffer" and made == [(buf, 48)]
    assert mem.row_pitch == aligned
    pitch_why = PITCH_WHY.format(fresh.device.name, 16) + COPIED
    base_why = BASE_WHY.format(fresh.device.name, 4) + COPIED
    assert [c.copy_reason for c in copies] == [pitch_why] * 3 and moved.copy_reason == base_why
    assert [str(w.message) for w in told] == [f"clayout: Memory.from_buffer: {why}"
                                              for why in (pitch_why, base_why)]
    for got in copies + [moved]:
        assert got.zero_copy is False and np.array_equal(bits(got.to_numpy()), bits(pixels))


def test_buffer_address_is_what_the_alignment_applies_to(cl_engine):
    host = np.zeros(1024, np.float32)
    wrapped = cl.Buffer(cl_engine.context, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host)
    assert shared.buffer_address(wrapped) == host.ctypes.data
    own = cl.Buffer(cl_engine.context, mf.READ_WRITE, 8192)
    assert shared.buffer_address(own) is None
    base = int(cl_engine.device.cl_device.mem_base_addr_align) // 8
    assert shared.buffer_address(own.get_sub_region(base, 1024)) == base


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
    made, wrap = [], engine.memory.host_buffer

    def record(arr, flags):
        buf = wrap(arr, flags)
        made.append((buf, arr))
        return buf
    monkeypatch.setattr(engine.memory, "host_buffer", record)
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
        assert eng.device.host_in_place is in_place
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
    assert OpenCLEngine(queue=cl_engine.queue).device.host_in_place is (
        cl_engine.device.kind == "cpu" or cl_engine.device.host_unified)
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
    import bench_host
    lines = []
    rows = bench_host.host_in_place_rows(["tiny"], 1, lines.append, engine=cl_engine)
    assert {r["case"] for r in rows} == {name for name, _, _ in bench.CASES}
    assert all(r[k] > 0 for r in rows for k in ("limit", "pinned floor", "pageable floor",
                                                  "in place", "pageable", "pinned", "staging"))
    assert lines[-1].startswith("geomean tiny: pageable ")
