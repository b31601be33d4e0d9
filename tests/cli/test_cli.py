"""The clayout command line and offline model conversion (runtime.cli, runtime.model).

Every happy path is compared with the reference engine bit for bit; every
failure must exit 1 (2 for usage errors) with one `clayout: error:` line, no
traceback, and no output or temporary file left behind.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime import engine, model
from runtime.algebra import dtypes
REF = engine.get("reference")
from runtime.algebra.desc import MemoryDesc
from runtime.model.manifest import steps_of, stored_image

from conftest import bits, needs, run, run_sub, same_bits

onnx = needs("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
needs("safetensors")
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/desc.py", "runtime/algebra/dtypes.py", "runtime/cli/__init__.py",
           "runtime/cli/args.py", "runtime/cli/bench.py", "runtime/cli/checks.py",
           "runtime/cli/convert.py", "runtime/engine.py", "runtime/fileio.py",
           "runtime/model/manifest.py", "runtime/model/report.py")

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(7)


def save(path, arr):
    np.save(path, arr)
    return path


def values(shape, dtype=np.float32):
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def only_files(folder):
    return sorted(p.name for p in Path(folder).iterdir())


# -- to-image / from-image / reorder ---------------------------------------------------
@pytest.mark.parametrize("layout, src, phys_shape, dims", [
    ("in_out_channel", "nhwc", (2, 3, 4, 5), None),
    ("in_out_channel", "nchw", (2, 5, 3, 4), None),
    ("in_out_channel", None, (3, 6), None),                 # 2-D activation (N, C)
    ("in_out_height", "nchw", (1, 3, 7, 2), None),
    ("texture_2d", "nhwc", (2, 3, 2, 5), None),
    ("conv2d_filter", "ohwi", (6, 3, 3, 5), None),
    ("dw_conv2d_filter", None, (2, 5, 3, 3), None),
    ("weight_width", "oihw", (7, 9, 1, 1), None),
    ("image_2d_weights_c1_b_fyx", None, (3, 2, 2, 2), None),
    ("argument", None, (10,), None),
    ("acBd4b:2", "nchw", (1, 6, 2, 3), None),               # custom layout
    ("in_out_channel", "nChw4c", (2 * 8 * 3 * 2,), "2,7,3,2"),  # blocked input, 1-D with --dims
])
def test_to_image_matches_reference(tmp_path, capsys, layout, src, phys_shape, dims):
    x = values(phys_shape)
    argv = ["to-image", save(tmp_path / "x.npy", x), "-o", tmp_path / "img.npy", "--layout", layout]
    argv += ["--src", src] if src else []
    argv += ["--dims", dims] if dims else []
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert out.startswith(f"wrote {tmp_path / 'img.npy'}: ")
    kw = {"dims": tuple(int(d) for d in dims.split(","))} if dims else {}
    want = runtime.to_image(x, layout, src=src, engine="reference", **kw)
    assert same_bits(np.load(tmp_path / "img.npy"), want)


def test_to_image_dtype_f16(tmp_path, capsys):
    x = values((1, 5, 2, 3))
    x.flat[:3] = [np.nan, 1e6, 2.0 ** -20]
    code, _, err = run(capsys, "to-image", save(tmp_path / "x.npy", x), "-o", tmp_path / "i.npy",
                       "--layout", "in_out_width", "--dtype", "f16")
    assert code == 0, err
    got = np.load(tmp_path / "i.npy")
    assert got.dtype == np.float16
    assert same_bits(got, runtime.to_image(x, "in_out_width", dtype="f16", engine="reference"))


@pytest.mark.parametrize("layout, dims, dst, dtype", [
    ("in_out_channel", (2, 5, 3, 4), "nhwc", None),
    ("in_out_channel", (2, 5, 3, 4), "nChw8c", None),
    ("conv2d_filter", (6, 3, 3, 3), None, "f16"),
    ("weight_height", (5, 6, 1, 1), "ohwi", None),
    ("argument", (9,), None, "s8"),
])
def test_from_image_matches_reference(tmp_path, capsys, layout, dims, dst, dtype):
    logical = values(dims)
    image = runtime.to_image(logical, layout, engine="reference")
    argv = ["from-image", save(tmp_path / "img.npy", image), "-o", tmp_path / "out.npy",
            "--layout", layout, "--dims", ",".join(map(str, dims))]
    argv += ["--dst", dst] if dst else []
    argv += ["--dtype", dtype] if dtype else []
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    want = runtime.from_image(image, layout, dims, dst=dst, dtype=dtype, engine="reference")
    assert same_bits(np.load(tmp_path / "out.npy"), want)


@pytest.mark.parametrize("src, dst, phys_shape, dims, dtype", [
    ("nhwc", "nchw", (2, 3, 4, 5), None, None),
    ("nchw", "nChw8c", (2, 17, 3, 2), None, None),        # padded blocked output, 1-D
    ("nChw8c", "nhwc", (2 * 24 * 3 * 2,), "2,17,3,2", None),
    ("oihw", "OIhw8i16o2i", (20, 30, 3, 3), None, "f16"),
    ("nc", "cn", (7, 9), None, "s8"),                      # saturation
    ("nchw", "nchw", (1, 4, 2, 2), None, "bf16"),
])
def test_reorder_matches_reference(tmp_path, capsys, src, dst, phys_shape, dims, dtype):
    x = values(phys_shape) * 50
    argv = ["reorder", save(tmp_path / "x.npy", x), "-o", tmp_path / "y.npy", "--src", src,
            "--dst", dst]
    argv += ["--dims", dims] if dims else []
    argv += ["--dtype", dtype] if dtype else []
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    if dims:
        logical = tuple(int(d) for d in dims.split(","))
    else:
        order = runtime.parse_tag(src).order
        logical = [0] * len(order)
        for pos, d in enumerate(order):
            logical[d] = phys_shape[pos]
    s = MemoryDesc(logical, "f32", tag=src)
    d = MemoryDesc(logical, dtype or "f32", tag=dst)
    want = REF.convert(s, d, x.reshape(-1)).reshape(runtime.physical_shape(d))
    got = np.load(tmp_path / "y.npy")
    if dtype == "bf16":  # numpy stores bfloat16 as raw 'V2'; the CLI reads it back as bf16
        assert got.dtype == np.dtype("V2")
        got = got.view(dtypes.dtype("bf16").np)
    assert same_bits(got, want)


def test_bf16_npy_round_trip(tmp_path, capsys):
    x = values((1, 3, 2, 2))
    run(capsys, "reorder", save(tmp_path / "x.npy", x), "-o", tmp_path / "b.npy", "--src", "nchw",
        "--dst", "nhwc", "--dtype", "bf16")
    code, _, err = run(capsys, "reorder", tmp_path / "b.npy", "-o", tmp_path / "f.npy",
                       "--src", "nhwc", "--dst", "nchw", "--dtype", "f32")
    assert code == 0, err
    assert same_bits(np.load(tmp_path / "f.npy"),
                     dtypes.convert(dtypes.convert(x, "bf16"), "f32"))


# -- failures ----------------------------------------------------------------------------
def _inputs(tmp_path):
    save(tmp_path / "x.npy", values((2, 3, 4, 5)))
    save(tmp_path / "i64.npy", np.arange(6))
    np.save(tmp_path / "obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    (tmp_path / "bad.onnx").write_bytes(b"not a model")


FAILURES = [  # argv (x.npy etc. relative to tmp_path), exit code, words the message must have
    (["reorder", "x.npy", "-o", "o.npy", "--src", "nhwq", "--dst", "nchw"], 1, "tag 'nhwq'"),
    (["reorder", "x.npy", "-o", "o.npy", "--src", "nChw8c", "--dst", "nchw"], 1, "pass --dims"),
    (["reorder", "x.npy", "-o", "o.npy", "--src", "nhwc", "--dst", "nchw", "--dims", "2,5,4,3"],
     1, "a shape that only matches in size is refused"),
    (["reorder", "x.npy", "-o", "o.npy", "--src", "ncw", "--dst", "nwc"], 1, "has 4 dims"),
    (["reorder", "i64.npy", "-o", "o.npy", "--src", "x", "--dst", "x"], 1, "dtype int64"),
    (["reorder", "obj.npy", "-o", "o.npy", "--src", "x", "--dst", "x"], 1, "pickled"),
    (["reorder", "missing.npy", "-o", "o.npy", "--src", "x", "--dst", "x"], 1,
     "missing.npy: No such file"),
    (["reorder", "x.npy", "-o", "o.npy", "--src", "nchw", "--dst", "nchw", "--dtype", "f64"], 1,
     "allowed: f32"),
    (["to-image", "x.npy", "-o", "o.npy", "--layout", "in_out_channel", "--dtype", "bf16"], 1,
     "images cannot hold bf16"),
    (["to-image", "x.npy", "-o", "o.npy", "--layout", "nonesuch"], 1, "unknown image layout"),
    (["to-image", "x.npy", "-o", "o.npy", "--layout", "argument"], 1, "has 4 dims but"),
    (["to-image", "x.npy", "-o", "o.npy", "--layout", "in_out_channel", "--dims", "1,x"], 2,
     "dims '1,x'"),
    (["to-image", "x.npy", "-o", "o.npy", "--layout", "in_out_channel", "--engine", "gpu"], 2,
     "invalid choice"),
    (["to-image", "x.npy", "-o", "nodir/o.npy", "--layout", "in_out_channel"], 1,
     "cannot write nodir/o.npy"),
    (["from-image", "x.npy", "-o", "o.npy", "--layout", "in_out_channel", "--dims", "1,2,3,4"], 1,
     "does not match layout"),
    (["from-image", "x.npy", "-o", "o.npy", "--layout", "in_out_channel"], 2, "--dims"),
    (["model", "bad.onnx", "-o", "o.safetensors"], 1, "not an ONNX model"),
    (["model", "missing.onnx", "-o", "o.safetensors"], 1, "missing.onnx: no such file"),
    (["model", "bad.onnx", "-o", "o.safetensors", "--dtype", "s8"], 1,
     "--dtype 's8': model images are f32 or f16"),
    (["model", "bad.onnx", "-o", "o.safetensors", "--max-image", "10"], 2, "WIDTH,HEIGHT"),
    (["info", "in_out_channel", "--dims", "1,2,3"], 1, "takes dims N,C,H,W"),
    (["info", "acBd4b:2:3", "--dims", "1,2,3,4"], 1, "lanes must be 4"),
    (["frobnicate"], 2, "invalid choice"),
    ([], 2, "required"),
]


@pytest.mark.parametrize("argv, code, words", FAILURES, ids=[" ".join(f[0][:3]) for f in FAILURES])
def test_failures(tmp_path, capsys, monkeypatch, argv, code, words):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = only_files(tmp_path)
    got, out, err = run(capsys, *argv)
    assert got == code, err
    assert words in err
    assert "Traceback" not in err
    if code == 1:
        assert err.startswith("clayout: error: ") and err.count("\n") == 1, err
    assert only_files(tmp_path) == before  # no output, no temporary file


def test_exit_codes_in_subprocess(tmp_path):
    save(tmp_path / "x.npy", values((1, 3, 2, 2)))
    ok = run_sub("to-image", "x.npy", "-o", "img.npy", "--layout", "in_out_channel", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stderr == "" and (tmp_path / "img.npy").exists()
    bad = run_sub("reorder", "x.npy", "-o", "o.npy", "--src", "aBcd9x", "--dst", "nchw",
                  cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.startswith("clayout: error: tag 'aBcd9x'") and bad.stderr.count("\n") == 1
    usage = run_sub("reorder", "x.npy", cwd=tmp_path)
    assert usage.returncode == 2 and "usage: clayout reorder" in usage.stderr
    assert "Traceback" not in bad.stderr + usage.stderr
    assert not (tmp_path / "o.npy").exists()
    assert run_sub("--help").returncode == 0


def test_console_script_installed():
    script = Path(sys.executable).with_name("clayout")
    if not script.exists():
        pytest.skip("the clayout console script is not installed in this environment")
    done = subprocess.run([str(script), "info", "argument", "--dims", "9"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "3 x 1 pixels" in done.stdout


def test_failed_write_keeps_old_output(tmp_path, capsys):
    (tmp_path / "o.npy").write_bytes(b"old")
    save(tmp_path / "x.npy", values((2, 3)))
    code, _, _ = run(capsys, "to-image", tmp_path / "x.npy", "-o", tmp_path / "o.npy",
                     "--layout", "conv2d_filter")
    assert code == 1
    assert (tmp_path / "o.npy").read_bytes() == b"old"
    assert only_files(tmp_path) == ["o.npy", "x.npy"]


# -- model conversion ------------------------------------------------------------------
def convert(tmp_path, capsys, onnx_path, *extra):
    out = tmp_path / "w.safetensors"
    code, stdout, err = run(capsys, "model", onnx_path, "-o", out, *extra)
    assert code == 0, err
    with safe_open(str(out), "np") as f:
        manifest = json.loads(f.metadata()["clayout"])
    return load_file(str(out)), manifest, stdout


def check_images(images, manifest, onnx_path):
    """Every image equals the reference's image of the logical weight, and reads
    back to the ONNX weight (bit for bit, after the image dtype's rounding)."""
    originals = model.weight_arrays(str(onnx_path))
    assert set(images) == {e["name"] for e in manifest["tensors"]}
    for e in manifest["tensors"]:
        image, original = images[e["name"]], originals[e["name"]]
        assert tuple(e["size"]) == runtime.image_layout(e["layout"]).image_shape(e["dims"])
        assert image.shape[:2] == tuple(e["size"][::-1]) and e["bytes"] == image.nbytes
        assert dtypes.of_array(image).name == e["dtype"] == manifest["dtype"]
        logical = model.logical_weight(original, steps_of(e))
        assert logical.shape == tuple(e["dims"])
        want = runtime.to_image(np.ascontiguousarray(logical), e["layout"], dtype=e["dtype"],
                                src="abcd"[:len(e["dims"])], engine="reference")
        assert same_bits(image, want), e["name"]
        back = model.read_back(image, e, engine="reference")
        assert same_bits(back, dtypes.convert(original, e["dtype"])), e["name"]


def test_sample_model(tmp_path, capsys):
    path = ROOT / "runtime" / "data" / "sample_cnn.onnx"
    images, manifest, out = convert(tmp_path, capsys, path)
    roles = {e["name"]: (e["role"], e["layout"], tuple(e["dims"])) for e in manifest["tensors"]}
    assert roles == {
        "conv1.weight": ("filter", "conv2d_filter", (8, 3, 3, 3)),
        "conv1.bias": ("argument", "argument", (8,)),
        "bn1.scale": ("argument", "argument", (8,)), "bn1.bias": ("argument", "argument", (8,)),
        "bn1.mean": ("argument", "argument", (8,)), "bn1.var": ("argument", "argument", (8,)),
        "dw2.weight": ("depthwise", "dw_conv2d_filter", (2, 8, 3, 3)),
        "dw2.bias": ("argument", "argument", (16,)),
        "pw3.weight": ("filter", "conv2d_filter", (16, 16, 1, 1)),
        "fc.weight": ("fc_weight", "weight_width", (10, 16, 1, 1)),
        "fc.bias": ("argument", "argument", (10,)),
    }
    assert [s["name"] for s in manifest["skipped"]] == ["flatten.shape", "fc.weight_io"]
    assert manifest["skipped"][1]["folded_into"] == ["fc.weight"]
    origins = {e["name"]: e["origin"] for e in manifest["tensors"]}
    assert origins["pw3.weight"] == "Constant node pw3.weight"
    assert origins["fc.weight"] == "Constant node fc.weight_io -> Transpose fc.transpose"
    assert origins["conv1.weight"] == "initializer"
    assert "role" not in manifest["skipped"][0] and "int64" in manifest["skipped"][0]["reason"]
    assert manifest["max_image"] == [8192, 8192] and manifest["source"] == "sample_cnn.onnx"
    assert "conv1.weight  filter     conv2d_filter" in out and "skipped flatten.shape" in out
    check_images(images, manifest, path)


def test_sample_model_is_reproducible(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_sample_model.py"), "--check",
                           "-o", str(ROOT / "runtime" / "data" / "sample_cnn.onnx")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ROOT / "runtime" / "data" / "sample_cnn.onnx").stat().st_size < 16384


def _f32(name, *shape):
    return numpy_helper.from_array(values(shape), name)


def build_model(tmp_path, nodes, inits, name="m.onnx"):
    graph = helper.make_graph(
        nodes, "test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / name
    onnx.save(m, str(path))
    return path, m


def every_role_model(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["a"], group=1),
        helper.make_node("Conv", ["a", "dw.w"], ["b"], group=4),             # C=4, M=3
        helper.make_node("Conv", ["b", "grp.w"], ["c"], group=2),            # grouped, not dw
        helper.make_node("ConvTranspose", ["c", "deconv.w", "deconv.b"], ["d"]),
        helper.make_node("BatchNormalization", ["d", "bn.s", "bn.b", "bn.m", "bn.v"], ["e"]),
        helper.make_node("Add", ["e", "add.c"], ["f"]),
        helper.make_node("Mul", ["f", "mul.scalar"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["h"]),
        helper.make_node("Gemm", ["h", "gemm0.b", "gemm0.c"], ["i"], transB=0),
        helper.make_node("Gemm", ["i", "gemm1.b", "gemm1.c"], ["j"], transB=1),
        helper.make_node("MatMul", ["j", "mm.w"], ["k"]),
    ]
    inits = [
        _f32("conv.w", 4, 3, 3, 3), _f32("conv.b", 4), _f32("dw.w", 12, 1, 3, 3),
        _f32("grp.w", 6, 6, 1, 1), _f32("deconv.w", 6, 5, 2, 2), _f32("deconv.b", 5),
        _f32("bn.s", 5), _f32("bn.b", 5), _f32("bn.m", 5), _f32("bn.v", 5),
        _f32("add.c", 1, 5, 1, 1), _f32("mul.scalar", 1),
        numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
        _f32("gemm0.b", 5, 7), _f32("gemm0.c", 7), _f32("gemm1.b", 9, 7), _f32("gemm1.c", 1, 9),
        _f32("mm.w", 9, 6), _f32("unused", 3),
    ]
    return build_model(tmp_path, nodes, inits)


def test_every_role(tmp_path, capsys):
    path, m = every_role_model(tmp_path)
    images, manifest, _ = convert(tmp_path, capsys, path, "--keep-buffers")
    kept = {e["name"]: e for e in manifest["tensors"] if e["layout"] == "buffer"}
    assert list(kept) == ["mul.scalar"] and "scalar" in kept["mul.scalar"]["reason"]
    assert images.pop("mul.scalar").tolist() == model.weight_arrays(str(path))["mul.scalar"].tolist()
    manifest["tensors"] = [e for e in manifest["tensors"] if e["layout"] != "buffer"]
    by = {e["name"]: e for e in manifest["tensors"]}
    expect = {
        "conv.w": ("conv2d_filter", (4, 3, 3, 3)), "conv.b": ("argument", (4,)),
        "dw.w": ("dw_conv2d_filter", (3, 4, 3, 3)), "grp.w": ("conv2d_filter", (6, 6, 1, 1)),
        "deconv.w": ("conv2d_filter", (5, 6, 2, 2)), "deconv.b": ("argument", (5,)),
        "bn.s": ("argument", (5,)), "bn.b": ("argument", (5,)), "bn.m": ("argument", (5,)),
        "bn.v": ("argument", (5,)), "add.c": ("argument", (5,)),
        "gemm0.b": ("weight_width", (7, 5, 1, 1)), "gemm0.c": ("argument", (7,)),
        "gemm1.b": ("weight_width", (9, 7, 1, 1)), "gemm1.c": ("argument", (9,)),
        "mm.w": ("weight_width", (6, 9, 1, 1)),
    }
    assert {n: (e["layout"], tuple(e["dims"])) for n, e in by.items()} == expect
    skipped = {s["name"]: s["reason"] for s in manifest["skipped"]}
    assert set(skipped) == {"shape", "unused"}
    assert "int64" in skipped["shape"] and "not used" in skipped["unused"]
    fates = {c["name"]: c["fate"] for c in manifest["accounting"]["constants"]}
    assert fates["mul.scalar"] == "kept" and fates["unused"] == "dead"
    check_images(images, manifest, path)

    arrays = model.weight_arrays(str(path))
    logical = {n: runtime.from_image(images[n], e["layout"], e["dims"], engine="reference")
               for n, e in by.items()}
    dw, l_dw = arrays["dw.w"], logical["dw.w"]        # element [m, c] = onnx[c*M + m]
    for mm in range(3):
        for c in range(4):
            assert np.array_equal(l_dw[mm, c], dw[c * 3 + mm, 0])
    assert np.array_equal(logical["deconv.w"], arrays["deconv.w"].transpose(1, 0, 2, 3))
    assert np.array_equal(logical["gemm0.b"][:, :, 0, 0], arrays["gemm0.b"].T)   # transB=0
    assert np.array_equal(logical["gemm1.b"][:, :, 0, 0], arrays["gemm1.b"])     # transB=1
    assert np.array_equal(logical["mm.w"][:, :, 0, 0], arrays["mm.w"].T)
    assert by["gemm0.b"]["transposed"] and not by["gemm1.b"]["transposed"]


def test_model_f16(tmp_path, capsys):
    path, m = every_role_model(tmp_path)
    images, manifest, _ = convert(tmp_path, capsys, path, "--dtype", "f16", "--keep-buffers")
    images.pop("mul.scalar")
    manifest["tensors"] = [e for e in manifest["tensors"] if e["layout"] != "buffer"]
    assert manifest["dtype"] == "f16"
    assert all(img.dtype == np.float16 for img in images.values())
    check_images(images, manifest, path)


def test_max_image_fallback_and_failure(tmp_path, capsys):
    nodes = [helper.make_node("Gemm", ["x", "fc.w"], ["y"], transB=1)]
    path, m = build_model(tmp_path, nodes, [_f32("fc.w", 300, 8)])
    images, manifest, out = convert(tmp_path, capsys, path, "--max-image", "128,128")
    (entry,) = manifest["tensors"]
    # weight_width would be 2 x 300; weight_height (8 x 75) is the next fc_weight candidate,
    # as choose_layout("fc_weight", ...) says, and the manifest says why
    assert entry["role"] == "fc_weight" and entry["fallback_from"] == "weight_width"
    assert entry["layout"] == "weight_height" and entry["size"] == [8, 75]
    assert entry["layout"] == runtime.choose_layout("fc_weight", (300, 8, 1, 1),
                                                    limits=(128, 128)).name
    assert "rejected (over the limit): weight_width 2x300" in entry["choice"]
    assert "not weight_width: too big" in out
    check_images(images, manifest, path)

    # no filter layout fits 16x16: weight_width is split into tiles of at most 16x16 ...
    images, manifest, out = convert(tmp_path, capsys, path, "--max-image", "16,16")
    (entry,) = manifest["tensors"]
    assert entry["layout"] == "weight_width" and entry["size"] == [2, 300]
    assert [(t["key"], t["y0"], t["height"]) for t in entry["tiles"]][-1] == ("fc.w.tile-18-0",
                                                                               288, 12)
    assert sorted(images) == sorted(t["key"] for t in entry["tiles"])
    back = model.read_back(stored_image(images, entry), entry, engine="reference")
    assert same_bits(back, model.weight_arrays(str(path))["fc.w"])
    assert "1 images (1 in 19 tiles)" in out

    # ... unless --no-tiles: then it is a buffer, or with --images-only it fails and leaves
    # the output as it was
    images, manifest, out = convert(tmp_path, capsys, path, "--max-image", "16,16",
                                    "--no-tiles")
    assert manifest["tensors"][0]["layout"] == "buffer" and "1 weight over --max-image (--no-tiles)" in out
    (tmp_path / "keep.safetensors").write_bytes(b"old")
    code, _, err = run(capsys, "model", path, "-o", tmp_path / "keep.safetensors",
                       "--max-image", "16,16", "--no-tiles", "--images-only")
    assert code == 1 and "left out: 'fc.w'" in err and "16,16" in err and err.count("\n") == 2
    assert (tmp_path / "keep.safetensors").read_bytes() == b"old"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# -- info, devices, bench, demo (show: test_show.py) --------------------------------------------------------
def test_info(capsys):
    code, out, _ = run(capsys, "info", "in_out_channel", "--dims", "1,17,5,7")
    assert code == 0
    assert "image     35 x 5 pixels" in out
    assert "n=y/H, h=y%H, c=4(x/W)+k, w=x%W" in out
    assert "tag       acBd4b, rows 2: y = a,c; x = B,d; lane = 4b" in out
    assert "f32 2800, f16 1400" in out and "8192x8192: fits" in out
    code, out, _ = run(capsys, "info", "weight_width", "--dims", "10000,64,1,1")
    assert "8192x8192: too big; fit: conv2d_filter, weight_height" in out
    assert "16384x16384: fits" in out
    code, out, _ = run(capsys, "info", "acBd4b:2", "--dims", "1,5,2,2")
    assert code == 0 and "custom layout" in out and "image     4 x 2 pixels" in out


def test_info_alone_lists_every_named_layout(capsys):
    """What the refusal of a buffer tag as a layout points to."""
    from runtime.algebra.catalog import NAMED
    code, out, _ = run(capsys, "info")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert names == list(NAMED)
    assert "in_out_channel" in out and "MACE" in out and "'TAG:ROWS[:LANES]" in out


def test_devices(capsys):
    code, out, _ = run(capsys, "devices")
    assert code == 0 and ("images up to" in out or "no OpenCL device" in out
                          or "no image support" in out)


def test_devices_without_pyopencl(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    for name in [n for n in sys.modules if n.startswith("runtime.opencl")]:
        monkeypatch.delitem(sys.modules, name)      # as in a process that never had pyopencl
    code, out, err = run(capsys, "devices")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("cpu: L1d ") and lines[1].startswith("cpu engine: ")
    assert lines[2].startswith("no OpenCL device found") and "uses the cpu engine" in lines[2]


def test_bench(capsys, monkeypatch, tmp_path):
    from runtime.cli import bench as commands
    monkeypatch.setattr(commands, "bench_script", lambda: None)
    code, _, err = run(capsys, "bench")
    assert code == 1 and err.startswith("clayout: error: clayout bench runs tools/bench.py of "
                                        "a source checkout")
    fake = tmp_path / "bench.py"
    fake.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    monkeypatch.setattr(commands, "bench_script", lambda: fake)
    code, out, _ = run(capsys, "bench", "--quick", "--sizes", "1,3,8,8")
    assert code == 3 and out == "args ['--quick', '--sizes', '1,3,8,8']\n"


def test_demo(tmp_path, capsys):
    code, out, err = run(capsys, "demo", "--engine", "cpu", "-o", tmp_path / "demo.safetensors")
    assert code == 0, err
    assert "engine  cpu (asked for)" in out
    assert "11/11 images exact" in out and "DIFFERS" not in out
    assert (tmp_path / "demo.safetensors").exists()


def test_auto_says_what_it_chose(monkeypatch):
    eng, why = engine.choose_engine("auto")
    assert why.startswith(f"{eng.name} (auto: ") and eng.name in ("cpu", "opencl")
    monkeypatch.setitem(sys.modules, "runtime.opencl", None)     # no OpenCL engine in the build
    eng, why = engine.choose_engine("auto")
    assert eng.name == "cpu" and why.startswith("cpu (auto: the OpenCL engine could not be loaded")
    monkeypatch.setenv("CLAYOUT_ENGINE", "reference")
    assert engine.choose_engine(None)[1] == "reference (CLAYOUT_ENGINE)"


def test_demo_in_temporary_folder(capsys, monkeypatch):
    code, out, err = run(capsys, "demo", "--engine", "reference")
    assert code == 0, err
    assert "11/11 images exact" in out
    assert "the files were written to a temporary folder and removed" in out


@pytest.mark.parametrize("argv, has, lacks", [
    # the direct family's buffer stores are vectors (the tiled one's, a GPU's, elements)
    (["--src", "nchw", "--dst", "nChw16c", "--family", "direct"], "vstore", "image2d_t"),
    (["--src", "nhwc", "--layout", "in_out_channel"], "write_imagef", "read_image"),
    (["--src", "nhwc", "--layout", "in_out_channel", "--staged"], "vstore4", "image2d_t"),
    (["--layout", "conv2d_filter", "--dst", "oihw", "--image-dtype", "f16"], "read_imagef",
     "write_image"),
    (["--src", "nchw", "--dst", "nhwc", "--dtype", "f32", "--dst-dtype", "bf16"], "ushort",
     "image2d_t"),
])
def test_kernel_prints_the_rendered_source(capsys, argv, has, lacks):
    code, out, err = run(capsys, "kernel", "--dims", "2,5,3,3", *argv)
    assert code == 0 and err == ""
    assert "void clayout_convert(" in out and has in out and lacks not in out


def test_kernel_needs_two_sides(capsys):
    code, out, err = run(capsys, "kernel", "--dims", "2,5,3,3", "--src", "nchw")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("clayout: error: give two of --src")
