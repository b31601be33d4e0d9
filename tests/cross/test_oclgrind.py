"""Every template family under oclgrind: buffer->buffer, buffer->image,
image->buffer, the staged half image, and each dtype helper path, on tiny
shapes; the tiled family (local memory and a barrier: races are checked); accessors (loads and stores, images and buffers, baked and generic),
a convolution of the compute kernels, the forward transform stage's
kernel (tests/opencl/test_opencl_transform.py's ``under_oclgrind``) and the frame
kernel (tests/doors/test_frames.py's) and read_output's (tests/doors/test_outputs.py's). oclgrind reports errors in its log and still exits 0, so the log is
parsed: any line in it fails the test. The child process sees only the
oclgrind platform (an ICD file in a temporary OCL_ICD_VENDORS folder) and also
compares every result with the reference.

Run by hand: ``PYTHONPATH=.:tests python -P tests/cross/test_oclgrind.py child`` under
that environment (``-P``: the folder's own conftest is not the suite's).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import OCLGRIND_ICD, from_img, require, run_under_oclgrind, to_img

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/compute/__init__.py", "runtime/compute/ops.py", "runtime/opencl/accessor.py",
           "runtime/opencl/engine.py", "runtime/opencl/moves.py")

ROOT = Path(__file__).resolve().parents[2]


def child() -> int:
    import numpy as np

    from runtime import IMAGE_LAYOUTS, MemoryDesc
    from runtime import engine as engines
    from runtime.opencl.engine import default
    eng = default()
    assert "oclgrind" in eng.device.platform.lower(), eng
    ref = engines.get("reference")
    rng = np.random.default_rng(0)

    def values(desc):
        raw = rng.integers(0, 256, desc.span * desc.dtype.itemsize, dtype=np.uint8)
        arr = raw.view(desc.dtype.np).copy()
        if desc.dtype.name == "f16":    # no signalling NaNs on half images (see vs_reference)
            b = arr.view(np.uint16)
            b[((b & 0x7c00) == 0x7c00) & ((b & 0x3ff) != 0)] |= 0x200
        if desc.dtype.name == "f32":    # oclgrind's write_imagef quiets f32 ones too
            b = arr.view(np.uint32)
            b[((b & 0x7f800000) == 0x7f800000) & ((b & 0x7fffff) != 0)] |= 0x400000
        return arr

    def same(a, b):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        return a.shape == b.shape and a.tobytes() == b.tobytes()

    bad, runs = [], 0
    dims = (1, 5, 2, 3)
    pairs = [("f32", "f32"), ("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f16"),
             ("s32", "bf16"), ("f32", "s8"), ("s8", "u8"), ("u8", "s32"), ("f16", "s32")]
    tags = [("nchw", "nhwc"), ("nhwc", "nChw4c"), ("nChw4c", "nchw")]
    for i, (s_dt, d_dt) in enumerate(pairs):      # buffer -> buffer, every helper
        s_tag, d_tag = tags[i % len(tags)]
        src, dst = MemoryDesc(dims, s_dt, tag=s_tag), MemoryDesc(dims, d_dt, tag=d_tag)
        x = values(src)
        runs += 1
        if not same(eng.convert(src, dst, x), ref.convert(src, dst, x)):
            bad.append(f"reorder {src!r} -> {dst!r}")
    halo = MemoryDesc(dims, "f32", tag="aBcd4b", halo=((0, 1, 1, 0), (0, 0, 1, 2)), fill=2)
    x = values(MemoryDesc(dims))
    runs += 1
    if not same(eng.convert(MemoryDesc(dims), halo, x), ref.convert(MemoryDesc(dims), halo, x)):
        bad.append("reorder into halo")
    img_cases = [("in_out_channel", "f32", "f32"), ("conv2d_filter", "f16", "f16"),
                 ("image_2d_weights_c4_fyx_b", "s8", "f32"), ("texture_2d", "u8", "s32"),
                 ("argument", "s32", "s32"), ("image_2d_weights_c1_b_fyx", "f16", "f32"),
                 ("image_2d_weights_c1_b_fyx", "f32", "f32"), ("in_out_height", "f16", "f32")]
    for name, img_dt, buf_dt in img_cases:
        layout = IMAGE_LAYOUTS[name]
        d = (7,) if layout.ndims == 1 else dims
        src = MemoryDesc(d, buf_dt, tag="a" if len(d) == 1 else "nhwc")
        x = values(src)
        runs += 2
        img = to_img(eng, x, layout, src, img_dt)
        want = to_img(ref, x, layout, src, img_dt)
        if not same(img, want):
            bad.append(f"to_image {name} {img_dt}")
        dst = MemoryDesc(d, buf_dt, tag="a" if len(d) == 1 else "nChw4c")
        if not same(from_img(eng, want, layout, dst), from_img(ref, want, layout, dst)):
            bad.append(f"from_image {name} {img_dt}")
    runs += tiled_family(eng, values, same, ref, bad)
    runs += out_of_order(eng, same, ref, bad)
    runs += accessors_and_compute(eng, bad)
    from opencl.test_opencl_transform import under_oclgrind
    runs += under_oclgrind(eng, bad)
    from doors.test_frames import under_oclgrind as frames_under_oclgrind
    runs += frames_under_oclgrind(eng, bad)
    from doors.test_outputs import under_oclgrind as outputs_under_oclgrind
    runs += outputs_under_oclgrind(eng, bad)
    print(f"oclgrind: {runs} conversions, {len(bad)} mismatches", flush=True)
    for b in bad:
        print("MISMATCH", b, flush=True)
    return 1 if bad else 0


def out_of_order(eng, same, ref, bad) -> int:
    """Independent Memory conversions on an out-of-order queue, a staging
    buffer leased by each and ordered by events only (where oclgrind takes
    such a queue; it says so when it does not)."""
    import numpy as np
    import pyopencl as cl

    import runtime
    from runtime import Memory, MemoryDesc
    from runtime.opencl.engine import OpenCLEngine
    try:
        queue = cl.CommandQueue(eng.context, properties=cl.command_queue_properties
                                .OUT_OF_ORDER_EXEC_MODE_ENABLE)
    except cl.Error as exc:
        print(f"oclgrind: no out-of-order queue ({exc})", flush=True)
        return 0
    ooo = OpenCLEngine(queue=queue, image_access="staged")
    dims = (1, 6, 3, 5)
    xs = [np.random.default_rng(i).standard_normal(dims).astype(np.float32) for i in range(4)]
    imgs = [runtime.to_image(Memory.from_numpy(x, MemoryDesc(dims), engine=ooo),
                             "in_out_height") for x in xs]
    backs = [runtime.from_image(m, "in_out_height", dims, dst="nhwc") for m in imgs]
    queue.finish()
    for x, img, back in zip(xs, imgs, backs):
        if not same(img.to_numpy(), ref.convert(MemoryDesc(dims), img.side, x.reshape(-1))):
            bad.append("out-of-order to_image")
        if not same(back.to_numpy(), x.transpose(0, 2, 3, 1).reshape(-1)):
            bad.append("out-of-order from_image")
    return 2 * len(xs)


def tiled_family(eng, values, same, ref, bad) -> int:
    """The tiled family (local-memory tiles, a barrier) on small odd shapes
    whose tiles have ragged edges: buffer pairs that transpose (plain,
    blocked, a halo, a dtype change), and images written from a source
    whose lanes lie along another axis (direct and staged), each baked and
    generic; and the direct family on the same moves (oclgrind is a GPU
    device, so the default engine above takes the tiled one); every kernel
    checked to be of the family asked for."""
    from runtime import ImageDesc, MemoryDesc, image_layout
    from runtime.opencl.engine import OpenCLEngine
    from runtime.opencl.moves import move_plan
    dims = (1, 7, 3, 37)
    halo = MemoryDesc(dims, "f32", tag="nhwc", halo=((0, 1, 1, 0), (0, 0, 1, 2)), fill=2)
    cases = [(MemoryDesc(dims, "f32", tag="nchw"), MemoryDesc(dims, "f32", tag="nhwc")),
             (MemoryDesc(dims, "f16", tag="nhwc"), MemoryDesc(dims, "f32", tag="nchw")),
             (MemoryDesc(dims, "u8", tag="nchw"), MemoryDesc(dims, "u8", tag="nChw8c")),
             (MemoryDesc(dims, "f32", tag="nChw4c"), MemoryDesc(dims, "bf16", tag="nchw")),
             (MemoryDesc(dims, "f32", tag="nchw"), halo),
             (MemoryDesc(dims, "f32", tag="nhwc"), ImageDesc(image_layout("in_out_channel"), dims)),
             (MemoryDesc((6, 5, 3, 3), "f32", tag="oihw"),
              ImageDesc(image_layout("conv2d_filter"), (6, 5, 3, 3), "f16"))]
    runs = 0
    for baked in ("0", "-1"):
        saved = os.environ.get("CLAYOUT_SPECIALIZE_BYTES")
        os.environ["CLAYOUT_SPECIALIZE_BYTES"] = baked   # 0: every shape baked; -1: generic
        try:
            engines = [OpenCLEngine(queue=eng.queue, tiled=tiled, image_access=access)
                       for access in ("direct", "staged") for tiled in (True, False)]
        finally:
            if saved is None:
                del os.environ["CLAYOUT_SPECIALIZE_BYTES"]
            else:
                os.environ["CLAYOUT_SPECIALIZE_BYTES"] = saved
        for tiled in engines:
            for src, dst in cases:
                if tiled.device.options.image_access == "staged" and not dst.is_image:
                    continue
                x = values(src)
                runs += 1
                if move_plan(src, dst, tiled.device).kernel.tiled != tiled.device.options.tiled:
                    bad.append(f"not of the family asked for: {src!r} -> {dst!r}")
                if not same(tiled.convert(src, dst, x), ref.convert(src, dst, x)):
                    bad.append(f"tiled={tiled.device.options.tiled} {tiled.device.options.image_access} "
                               f"{baked}: {src!r} -> {dst!r}")
    return runs


def accessors_and_compute(eng, bad) -> int:
    """Accessors (gather by load and load4, scatter by store4/store) on a few
    images and buffers, and one convolution of the compute kernels."""
    import numpy as np

    import runtime
    from runtime import ImageDesc, Memory, MemoryDesc, image_layout
    from runtime.compute import ops
    from runtime.opencl.accessor import accessor
    from opencl.test_accessor import VALUE, gather, program, scatter, values
    runs = 0
    sides = [ImageDesc(image_layout("in_out_channel"), (1, 5, 2, 3), "f32"),
             ImageDesc(image_layout("conv2d_filter"), (5, 3, 1, 2), "f16"),
             ImageDesc(image_layout("texture_2d"), (2, 3, 1, 2), "s8"),
             MemoryDesc((1, 5, 2, 3), "f32", tag="nChw4c")]
    for k, side in enumerate(sides):
        dt = side.dtype.name
        x = values(dt, int(np.prod(side.dims)), k)
        held = runtime.to_image(x.reshape(side.dims), side.layout, src="abcd") \
            if side.is_image else runtime.reorder(x, MemoryDesc(side.dims, dt), side)
        read, write = accessor(side, name="t", generic=k % 2 == 1), \
            accessor(side, name="u", access="write", generic=k % 2 == 1)
        prg = program(eng, read, write)
        runs += 3
        want = x.astype(VALUE[dt])
        if not np.array_equal(gather(eng, prg, read, held), want):
            bad.append(f"accessor load {side!r}")
        if not np.array_equal(gather(eng, prg, read, held, True), want):
            bad.append(f"accessor load4 {side!r}")
        back = scatter(eng, prg, write, want)
        got = back if side.is_image else runtime.reorder(back, side, MemoryDesc(side.dims, dt))
        expect = held if side.is_image else x
        if got.tobytes() != expect.tobytes():
            bad.append(f"accessor store {side!r}")
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((1, 5, 3, 3), (6, 5, 3, 3), (6,)))
    mem = {n: Memory.from_numpy(runtime.to_image(a, lay), lay, engine=eng, dims=a.shape)
           for n, a, lay in (("x", x, "in_out_channel"), ("w", w, "conv2d_filter"),
                             ("b", b, "argument"))}
    y = Memory.image("in_out_channel", (1, 6, 3, 3), "f32", eng)
    ops.conv(mem["x"], mem["w"], mem["b"], y, pads=(1, 1))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + 3, j:j + 3], w[:, :, i, j])
               for i in range(3) for j in range(3)) + b[None, :, None, None]
    runs += 1
    if np.abs(runtime.from_image(y.to_numpy(), "in_out_channel", y.dims) - want).max() > 1e-4:
        bad.append("compute conv")
    return runs


@pytest.mark.slow
def test_every_template_family_under_oclgrind(tmp_path):
    proc = run_under_oclgrind(__file__, tmp_path, ROOT)
    assert "oclgrind:" in proc.stdout, proc.stdout


def test_oclgrind_log_is_read(tmp_path):
    """The check works: an out-of-bounds write shows up in the parsed log."""
    require("oclgrind", OCLGRIND_ICD.exists(), "apt-get install oclgrind")
    (tmp_path / "oclgrind.icd").write_text(f"{OCLGRIND_ICD}\n")
    log = tmp_path / "oclgrind.log"
    script = ("import numpy as np, pyopencl as cl\n"
              "ctx = cl.Context(cl.get_platforms()[0].get_devices()); q = cl.CommandQueue(ctx)\n"
              "b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16)\n"
              "p = cl.Program(ctx, '__kernel void oob(__global float *o)"
              "{ o[get_global_id(0) + 1] = 1.0f; }').build()\n"
              "p.oob(q, (4,), None, b); q.finish()\n")
    env = dict(os.environ, OCL_ICD_VENDORS=str(tmp_path), OCLGRIND_LOG=str(log))
    subprocess.run([sys.executable, "-c", script], env=env, timeout=120, check=True,
                   capture_output=True)
    assert "Invalid write" in log.read_text()


if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    sys.exit(child())
