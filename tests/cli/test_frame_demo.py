"""``clayout demo``'s run from a camera frame (runtime/cli/demo.py) and
``network.run`` taking its input as a Memory already on the device
(runtime/compute/network.py).

- The demo's frame: deterministic, photo-like (smooth regions, edges, values
  spread, not noise), NV21 of the right shape, its BT.601 limited-range
  forward conversion undone by OpenCV's and by ``from_frame``'s decoding.
- The demo on the OpenCL engine prints the frame line, agreeing with
  onnxruntime; on the cpu engine it says why the line was not run; a
  disagreement is counted in the exit status.
- ``network.run`` of an image Memory made by ``from_frame`` on the device
  equals, bit for bit, its host-array form on the same values.
"""
import re

import numpy as np
import pytest

import runtime
from conftest import bits, needs, run
from runtime import Memory, MemoryDesc
from runtime.cli import demo
from runtime.errors import ClayoutError

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/__init__.py", "runtime/cli/demo.py", "runtime/compute/__init__.py",
           "runtime/compute/network.py", "runtime/errors.py", "runtime/model/manifest.py",
           "runtime/algebra/frame.py", "runtime/cli/frame.py", "runtime/opencl/frame.py",
           "runtime/reference/frame.py")

onnx = needs("onnx")
needs("onnxruntime")

LINE = re.compile(r"^end to end from a frame: 640x480 NV21 -> from_frame \((.*)\) -> sample CNN "
                  r"through accessor kernels: largest difference to onnxruntime (\S+) "
                  r"\(outputs up to (\S+); the device's input against the reference's (\S+)\); "
                  r"read_output's argmax on the device \[(\d+)\], onnxruntime's \[(\d+)\]$",
                  re.M)


# -- the frame --------------------------------------------------------------------------------
def test_the_frame_is_deterministic_nv21():
    frame = demo.sample_frame()
    assert frame.dtype == np.uint8 and frame.shape == (480 * 3 // 2, 640)
    assert np.array_equal(frame, demo.sample_frame())
    other = demo.sample_frame(seed=1)     # another noise draw: the same scene
    assert not np.array_equal(frame, other)
    assert np.abs(frame.astype(int) - other).mean() < 3
    assert demo.sample_frame(64, 48).shape == (72, 64)


def test_the_frame_looks_like_a_photo():
    frame = demo.sample_frame()
    luma, chroma = frame[:480].astype(float), frame[480:].astype(float)
    assert 16 <= luma.min() and luma.max() <= 235 + 6          # limited range, plus noise
    assert luma.std() > 25 and np.ptp(luma) > 150 and len(np.unique(luma)) > 150
    assert chroma.std() > 5 and len(np.unique(chroma)) > 40    # colours, not grey
    # smooth: neighbours differ by about the noise, far less than the picture varies
    step = np.abs(np.diff(luma, axis=1)).mean()
    assert 0.5 < step < 5 < luma.std()
    # edges: a few columns where a shape starts, steps much larger than the noise
    assert (np.abs(np.diff(luma, axis=1)) > 25).sum() > 300
    # not noise: a coarse block average keeps most of the variation
    blocks = luma.reshape(30, 16, 40, 16).mean(axis=(1, 3))
    assert blocks.std() > 0.9 * luma.std()


def test_nv21_planes_follow_bt601_limited_range():
    rgb = np.zeros((2, 4, 3), np.uint8)
    rgb[:, 0:2] = 255, 0, 0            # a red 2x2 block
    rgb[:, 2:4] = 128, 128, 128         # a grey one
    frame = demo.rgb_to_nv21(rgb)
    assert frame.shape == (3, 4)
    assert frame[:2, :2].tolist() == [[81, 81]] * 2 and frame[:2, 2:].tolist() == [[126, 126]] * 2
    assert frame[2].tolist() == [240, 90, 128, 128]       # V, U of red; V, U of grey
    with pytest.raises(ClayoutError, match="even"):
        demo.rgb_to_nv21(np.zeros((3, 4, 3), np.uint8))


def test_the_frame_decodes_back_to_its_picture():
    cv2 = needs("cv2")
    rgb, frame = demo.sample_rgb(), demo.sample_frame()
    opencv = cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV21).astype(float)
    assert np.abs(opencv - rgb).mean() < 2.5        # chroma at half resolution, rounding
    ours = runtime.from_frame(frame, "nchw", format="nv21", engine="reference")[0]
    assert np.abs(ours.transpose(1, 2, 0) - opencv).max() <= 0.5 + 1e-4   # OpenCV rounds to u8


# -- the demo ---------------------------------------------------------------------------------
def test_demo_runs_the_frame_on_opencl(cl_engine, tmp_path, capsys):
    code, out, err = run(capsys, "demo", "--engine", "opencl", "-o", tmp_path / "d.safetensors")
    assert code == 0, err
    found = LINE.findall(out)
    assert len(found) == 1, out
    how, diff, top, inputs = found[0][0], *map(float, found[0][1:4])
    assert found[0][4] == found[0][5]                # read_output's argmax, onnxruntime's
    assert how.startswith("one kernel") and "16x16 in_out_channel image on opencl" in how
    assert 0 <= diff <= 1e-4 * top + 1e-6 and top > 0.1
    assert inputs < 1e-5                             # the frame kernel against float64
    assert out.index("end to end: the sample CNN") < out.index("end to end from a frame")


def test_demo_on_cpu_says_why_not(tmp_path, capsys):
    code, out, err = run(capsys, "demo", "--engine", "cpu", "-o", tmp_path / "d.safetensors")
    assert code == 0, err
    assert "end to end from a frame: needs an OpenCL device" in out
    assert "the cpu engine was used, so it was not run" in out


def test_a_disagreement_fails_the_demo(cl_engine, tmp_path, capsys, monkeypatch):
    from runtime.compute import network
    monkeypatch.setattr(network, "compare_frame_with_onnxruntime",
                        lambda *a, **k: ("end to end from a frame: made to disagree", False))
    code, out, _ = run(capsys, "demo", "--engine", "opencl", "-o", tmp_path / "d.safetensors")
    assert code == 1 and "made to disagree" in out


# -- network.run of a Memory on the device ----------------------------------------------------
@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from runtime import model
    from runtime.model.manifest import read_manifest
    path = demo.sample_path()
    out = tmp_path_factory.mktemp("frame_demo") / "w.safetensors"
    model.convert_file(path, str(out), engine="cpu")
    images, manifest = read_manifest(out)
    return onnx.load(path), images, manifest


def device_input(engine, layout="in_out_channel", seed=0):
    frame = demo.sample_frame(seed=seed)
    src = Memory(MemoryDesc(frame.shape, "u8"), engine=engine, data=frame)
    return runtime.from_frame(src, layout, format="nv21", size=(16, 16),
                              mean=demo.IMAGENET_MEAN, std=demo.IMAGENET_STD, engine=engine)


def test_network_input_shape(sample):
    from runtime.compute import network
    assert network.input_shape(sample[0]) == (1, 3, 16, 16)


@pytest.mark.parametrize("seed", [0, 3])
def test_run_of_a_device_image_equals_the_host_form(cl_engine, sample, seed):
    from runtime.compute import network
    mem = device_input(cl_engine, seed=seed)
    assert mem.is_image and mem.layout.name == "in_out_channel" and mem.dims == (1, 3, 16, 16)
    x = runtime.from_image(mem.to_numpy(), mem.layout, mem.dims)   # the same values, on the host
    got = network.run(*sample, mem, cl_engine)
    want = network.run(*sample, x, cl_engine)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == (1, 10)
    assert np.array_equal(bits(got), bits(want))
    again = network.run(*sample, network.to_image_memory(x, "in_out_channel", cl_engine),
                        cl_engine)
    assert np.array_equal(bits(again), bits(want))


def test_run_of_a_device_buffer_or_other_layout(cl_engine, sample):
    from runtime.compute import network
    want = network.run(*sample, runtime.from_image(*_host(device_input(cl_engine))), cl_engine)
    for layout in ("nchw", "texture_2d"):
        got = network.run(*sample, device_input(cl_engine, layout), cl_engine)
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def _host(mem):
    return mem.to_numpy(), mem.layout, mem.dims


def test_run_refuses_a_wrong_input(cl_engine, sample):
    from runtime.compute import network
    x = np.zeros((1, 3, 8, 8), np.float32)
    with pytest.raises(ClayoutError, match=r"dims \(1, 3, 8, 8\); the model declares"):
        network.run(*sample, x, cl_engine)
    with pytest.raises(ClayoutError, match=r"dims \(1, 3, 8, 8\)"):
        network.run(*sample, network.to_image_memory(x, "in_out_channel", cl_engine), cl_engine)
    on_cpu = Memory.image("in_out_channel", (1, 3, 16, 16), "f32", engine="cpu")
    with pytest.raises(ClayoutError, match="not on the engine the model runs on"):
        network.run(*sample, on_cpu, cl_engine)
