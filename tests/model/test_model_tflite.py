"""clayout model on synthetic .tflite flatbuffers: every operator's constants,
quantized and sparse weights, custom ops, names, and files that are not right.

The models are written by tests/tflite_builder.py (the ``tflite`` package's
generated builders); what LiteRT's interpreter computes for a tensor
(``run_litert``) is the ground truth wherever the interpreter can run the model.
"""
import numpy as np
import pytest

import runtime
from runtime import model
from runtime.model.manifest import read_manifest, steps_of
from tests.conftest import run, same_bits
from model.test_model_plan import files
from conftest import needs

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/model/formats.py", "runtime/model/tflite/constants.py",
           "runtime/model/tflite/roles.py")

builder = needs("tests.tflite_builder")
T, Op, build, run_litert = builder.T, builder.Op, builder.build, builder.run_litert

RNG = np.random.default_rng(29)


def weights(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def write(tmp_path, tensors, ops, inputs=(0,), outputs=None, name="m.tflite", **kw):
    data = build(tensors, ops, list(inputs), list(outputs or [ops[-1].outputs[0]]), **kw)
    path = tmp_path / name
    path.write_bytes(data)
    return path, data


def convert(capsys, path, *extra, code=0):
    out = path.with_suffix(".safetensors")
    got, stdout, err = run(capsys, "model", path, "-o", out, "--verify", "--engine", "cpu",
                           *extra)
    assert got == code, err
    if code:
        return err
    images, manifest = read_manifest(out)
    return images, manifest, {e["name"]: e for e in manifest["tensors"]}, \
        {s["name"]: s for s in manifest["skipped"]}, stdout


def same_image(images, entry, logical):
    ref = runtime.to_image(np.ascontiguousarray(logical), entry["layout"], dtype=entry["dtype"],
                           engine="reference")
    return same_bits(ref, images[entry["name"]])


# -- float models: every operator's constants ------------------------------------------------
def conv_model(tmp_path, f16=False):
    """conv (OHWI 6x3x3x4) -> depthwise (M=2) -> PRELU -> ADD -> FC, biases
    everywhere; the conv weight float16 behind a DEQUANTIZE when ``f16``."""
    w = weights(6, 3, 3, 4)
    dw = weights(1, 3, 3, 12)
    fc = weights(5, 12 * 4 * 4)
    t = [T("input", (1, 4, 4, 4)),                                   # 0
         T("conv/w", (6, 3, 3, 4), "float16" if f16 else "float32",
           data=w.astype(np.float16) if f16 else w),               # 1
         T("conv/b", (6,), data=weights(6)),                       # 2
         T("conv/out", (1, 4, 4, 6)),                              # 3
         T("dw/w", (1, 3, 3, 12), data=dw),                        # 4
         T("dw/b", (12,), data=weights(12)),                       # 5
         T("dw/out", (1, 4, 4, 12)),                               # 6
         T("prelu/alpha", (1, 1, 12), data=weights(1, 1, 12)),     # 7
         T("prelu/out", (1, 4, 4, 12)),                            # 8
         T("add/c", (12,), data=weights(12)),                      # 9
         T("add/out", (1, 4, 4, 12)),                              # 10
         T("flat/shape", (2,), "int32", data=np.array([1, 192], np.int32)),   # 11
         T("flat/out", (1, 192)),                                  # 12
         T("fc/w", (5, 192), data=fc),                             # 13
         T("fc/b", (5,), data=weights(5)),                         # 14
         T("fc/out", (1, 5)),                                      # 15
         T("conv/w_dequantize", (6, 3, 3, 4))]                     # 16
    conv_w = 16 if f16 else 1
    ops = ([Op("DEQUANTIZE", [1], [16])] if f16 else []) + [
        Op("CONV_2D", [0, conv_w, 2], [3], {"padding": "SAME", "stride_w": 1, "stride_h": 1}),
        Op("DEPTHWISE_CONV_2D", [3, 4, 5], [6], {"padding": "SAME", "stride_w": 1,
                                                   "stride_h": 1, "depth_multiplier": 2}),
        Op("PRELU", [6, 7], [8]), Op("ADD", [8, 9], [10]), Op("RESHAPE", [10, 11], [12]),
        Op("FULLY_CONNECTED", [12, 13, 14], [15])]
    return write(tmp_path, t, ops, outputs=[15])


@pytest.mark.parametrize("f16", [False, True], ids=["f32", "f16-dequantize"])
def test_every_operator_against_litert(tmp_path, capsys, f16):
    path, data = conv_model(tmp_path, f16)
    values = run_litert(data)
    images, manifest, by, skipped, _ = convert(capsys, path)
    # float32 biases beside the float16 filter: f32 images, the f16 values widened exactly
    assert manifest["source_format"] == "tflite" and manifest["dtype"] == "f32"
    conv_name = "conv/w_dequantize" if f16 else "conv/w"
    w = values[conv_name].astype(np.float32)
    expect = {conv_name: ("filter", "conv2d_filter", w.transpose(0, 3, 1, 2), "OHWI"),
              "fc/w": ("fc_weight", "weight_width", values["fc/w"][:, :, None, None], "OI")}
    dw = values["dw/w"]
    logical_dw = np.empty((2, 6, 3, 3), np.float32)
    for c in range(6):
        for m in range(2):
            logical_dw[m, c] = dw[0, :, :, c * 2 + m]
    expect["dw/w"] = ("depthwise", "dw_conv2d_filter", logical_dw, "1HWC")
    for name in ("conv/b", "dw/b", "prelu/alpha", "add/c", "fc/b"):
        expect[name] = ("argument", "argument", values[name].reshape(-1), None)
    assert set(by) == set(expect)
    for name, (role, layout, logical, source_layout) in expect.items():
        e = by[name]
        assert (e["role"], e["layout"], tuple(e["dims"])) == (role, layout, logical.shape), name
        assert e.get("source_layout") == source_layout, name
        assert same_image(images, e, logical), name
        back = model.read_back(images[name], e).astype(np.float32)
        assert np.array_equal(back, model.source_weight(logical, steps_of(e), e["source_shape"]))
    assert skipped["flat/shape"]["reason"].startswith("int32 tensor")
    if f16:
        assert skipped["conv/w"]["folded_into"] == ["conv/w_dequantize"]
        assert by[conv_name]["origin"] == "buffer 1 -> DEQUANTIZE #0"
        assert by[conv_name]["consumer"] == "CONV_2D #1 input 1"


def test_f16_model_to_f32_is_exact(tmp_path, capsys):
    path, data = conv_model(tmp_path, True)
    images, manifest, by, _, _ = convert(capsys, path, "--dtype", "f32")
    assert manifest["dtype"] == "f32" and by["conv/w_dequantize"]["dtype"] == "f32"
    value = run_litert(data)["conv/w_dequantize"]
    assert same_image(images, by["conv/w_dequantize"], value.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("engine", ["cpu", "opencl"])
def test_engines_store_the_same_bits(tmp_path, capsys, cl_engine, engine):
    path, _ = conv_model(tmp_path, True)
    out = tmp_path / f"{engine}.safetensors"
    code, _, err = run(capsys, "model", path, "-o", out, "--engine", engine, "--verify")
    assert code == 0, err
    images, _ = read_manifest(out)
    reference, _ = read_manifest(convert(capsys, path) and path.with_suffix(".safetensors"))
    assert set(images) == set(reference)
    for name in images:
        assert np.array_equal(images[name].view(np.uint8), reference[name].view(np.uint8)), name


def test_transposed_convolutions_and_batch_matmul(tmp_path, capsys):
    w = weights(3, 2, 2, 4)
    custom = weights(5, 3, 3, 4)
    y = weights(8, 6)
    t = [T("input", (1, 4, 4, 4)),
         T("shape", (4,), "int32", data=np.array([1, 8, 8, 3], np.int32)),
         T("tconv/w", (3, 2, 2, 4), data=w), T("tconv/out", (1, 8, 8, 3)),
         T("mp/w", (5, 3, 3, 4), data=custom), T("mp/b", (5,), data=weights(5)),
         T("mp/out", (1, 8, 8, 5)),
         T("x", (1, 4, 8)), T("bmm/y", (8, 6), data=y), T("bmm/out", (1, 4, 6)),
         T("bmm2/y", (6, 8), data=y.T.copy()), T("bmm2/out", (1, 4, 6))]
    ops = [Op("TRANSPOSE_CONV", [1, 2, 0], [3], {"padding": "SAME", "stride_w": 2,
                                                  "stride_h": 2}),
           Op("Convolution2DTransposeBias", [0, 4, 5], [6], custom=True),
           Op("BATCH_MATMUL", [7, 8], [9]),
           Op("BATCH_MATMUL", [7, 10], [11], {"adj_y": True})]
    path, _ = write(tmp_path, t, ops, inputs=[0, 7], outputs=[3, 6, 9, 11])
    images, _, by, skipped, _ = convert(capsys, path)
    assert same_image(images, by["tconv/w"], w.transpose(0, 3, 1, 2))
    assert same_image(images, by["mp/w"], custom.transpose(0, 3, 1, 2))
    assert by["mp/w"]["consumer"] == "Convolution2DTransposeBias #1 input 1"
    assert by["mp/b"]["role"] == "argument"
    assert same_image(images, by["bmm/y"], y.T[:, :, None, None])
    assert same_image(images, by["bmm2/y"], y.T[:, :, None, None])
    assert "shape" in skipped


def test_unknown_custom_op_constants_are_listed(tmp_path, capsys):
    t = [T("x", (1, 4)), T("fc/w", (3, 4), data=weights(3, 4)), T("y", (1, 3)),
         T("anchors", (4, 4), data=weights(4, 4)), T("out", (1, 4))]
    path, _ = write(tmp_path, t, [Op("FULLY_CONNECTED", [0, 1], [2]),
                                  Op("TFLite_Detection_PostProcess", [2, 3], [4], custom=True)])
    err = convert(capsys, path, "--images-only", code=1)   # the model needs them: named
    assert "'anchors' (4, 4) (TFLite_Detection_PostProcess #1 input 1): custom op" in err
    _, _, by, skipped, stdout = convert(capsys, path)
    assert set(by) == {"fc/w", "anchors"} and by["anchors"]["layout"] == "buffer"
    assert by["anchors"]["consumer"] == "TFLite_Detection_PostProcess #1 input 1"
    assert by["anchors"]["reason"] == (
        "custom op TFLite_Detection_PostProcess input 1: clayout knows the inputs of no custom "
        "op but Convolution2DTransposeBias")
    assert "TFLite_Detection_PostProcess 0/1/0" in stdout


def test_a_weight_with_no_role_is_a_buffer_unless_images_only(tmp_path, capsys):
    t = [T("x", (1, 2, 3)), T("fc/w", (4, 2, 3), data=weights(4, 2, 3)), T("out", (1, 4))]
    path, _ = write(tmp_path, t, [Op("FULLY_CONNECTED", [0, 1], [2])])
    before = files(tmp_path)
    err = convert(capsys, path, "--images-only", code=1)
    assert "'fc/w' (4, 2, 3) (FULLY_CONNECTED #0 input 1): FULLY_CONNECTED weight of rank 3" in err
    assert "drop --images-only" in err and files(tmp_path) == before
    images, _, by, _, _ = convert(capsys, path)
    assert by["fc/w"]["layout"] == "buffer"


# -- quantized --------------------------------------------------------------------------------
def int8_model(tmp_path):
    """A full-integer conv: int8 per-channel weights, int32 bias; and a
    dynamic-range FC: int8 weight behind a DEQUANTIZE."""
    q = RNG.integers(-127, 128, (4, 3, 3, 2), dtype=np.int8)
    scale = [0.02, 0.5, 0.001, 0.0375]
    bias_scale = [s * 0.1 for s in scale]     # the input's scale times the weight's
    bias = RNG.integers(-1000, 1000, 4, dtype=np.int32)
    fq = RNG.integers(-127, 128, (3, 4), dtype=np.int8)
    t = [T("input", (1, 5, 5, 2), "int8", scale=[0.1], zero_point=[3]),
         T("conv/w", (4, 3, 3, 2), "int8", data=q, scale=scale, zero_point=[0] * 4,
           quantized_dimension=0),
         T("conv/b", (4,), "int32", data=bias, scale=bias_scale,
           zero_point=[0] * 4),
         T("conv/out", (1, 5, 5, 4), "int8", scale=[0.2], zero_point=[-1]),
         T("x", (1, 4)), T("fc/q", (3, 4), "int8", data=fq, scale=[0.125], zero_point=[2]),
         T("fc/w", (3, 4)), T("fc/out", (1, 3))]
    ops = [Op("CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "stride_w": 1, "stride_h": 1}),
           Op("DEQUANTIZE", [5], [6]), Op("FULLY_CONNECTED", [4, 6], [7])]
    path, data = write(tmp_path, t, ops, inputs=[0, 4], outputs=[3, 7])
    return path, data, q, np.array(scale, np.float32), (bias, np.array(bias_scale, np.float32)), fq


def test_int8_weights_fold_as_litert_dequantizes(tmp_path, capsys):
    path, data, q, scale, bias, fq = int8_model(tmp_path)
    values = run_litert(data)
    images, manifest, by, skipped, stdout = convert(capsys, path)
    assert manifest["dtype"] == "f32"
    folded = (q.astype(np.float32) * scale[:, None, None, None])
    assert same_image(images, by["conv/w"], folded.transpose(0, 3, 1, 2))
    assert by["conv/w"]["dequantized"]["axis"] == 0
    assert same_image(images, by["conv/b"], bias[0].astype(np.float32) * bias[1])
    # the interpreter's DEQUANTIZE output is the value stored
    assert same_image(images, by["fc/w"], values["fc/w"][:, :, None, None])
    assert skipped["fc/q"]["folded_into"] == ["fc/w"]
    assert "(q - zero_point) * scale of their DEQUANTIZE" in stdout


def test_int8_weights_kept(tmp_path, capsys):
    path, _, q, scale, bias, fq = int8_model(tmp_path)
    images, _, by, _, stdout = convert(capsys, path, "--quantized", "keep")
    e = by["conv/w"]
    assert e["dtype"] == "s8" and e["quantization"]["axis"] == 0
    assert same_image(images, e, q.transpose(0, 3, 1, 2))
    assert same_image(images, by["conv/w.scale"], scale)
    assert by["conv/b"]["dtype"] == "s32" and same_image(images, by["conv/b"], bias[0])
    assert by["fc/w"]["dtype"] == "s8" and same_image(images, by["fc/w"], fq[:, :, None, None])
    assert np.array_equal(images["fc/w.zero_point"].reshape(-1)[:1], [2])
    assert "to their integers q" in stdout and "TFLite quantization parameters" in stdout


def test_integer_weight_without_scale_is_refused(tmp_path, capsys):
    t = [T("x", (1, 4)), T("q", (3, 4), "int8", data=np.ones((3, 4), np.int8)), T("w", (3, 4)),
         T("out", (1, 3))]
    path, _ = write(tmp_path, t, [Op("DEQUANTIZE", [1], [2]),
                                  Op("FULLY_CONNECTED", [0, 2], [3])])
    err = convert(capsys, path, code=1)
    assert err.count("\n") == 1 and "DEQUANTIZE #0 reads 'q', a int8 tensor without " \
        "quantization parameters" in err


# -- sparse -----------------------------------------------------------------------------------
def test_sparse_weight_behind_densify_against_litert(tmp_path, capsys):
    dense = weights(8, 8)
    dense[:, 4:][::2] = 0          # zero 1x4 blocks in even rows
    blocks = dense.reshape(8, 2, 4)
    keep = np.abs(blocks).sum(-1) != 0
    segments = np.concatenate([[0], np.cumsum(keep.sum(1))]).tolist()
    indices = np.nonzero(keep)[1].tolist()
    values = blocks[keep].reshape(-1)
    sparsity = {"traversal_order": [0, 1, 2], "block_map": [1],
                "dim_metadata": [{"format": "dense", "dense_size": 8},
                                 {"format": "csr", "segments": segments, "indices": indices},
                                 {"format": "dense", "dense_size": 4}]}
    t = [T("x", (1, 8)), T("fc/sparse", (8, 8), data=values, sparsity=sparsity),
         T("fc/w", (8, 8)), T("out", (1, 8))]
    path, data = write(tmp_path, t, [Op("DENSIFY", [1], [2]),
                                     Op("FULLY_CONNECTED", [0, 2], [3])])
    litert = run_litert(data)["fc/w"]
    assert np.array_equal(litert, dense)
    images, _, by, skipped, _ = convert(capsys, path)
    assert same_image(images, by["fc/w"], litert[:, :, None, None])
    assert by["fc/w"]["origin"] == "buffer 1 (sparse, densified) -> DENSIFY #0"
    assert skipped["fc/sparse"]["folded_into"] == ["fc/w"]


# -- names and Winograd -------------------------------------------------------------------------
def test_unnamed_and_repeated_names(tmp_path, capsys):
    t = [T("x", (1, 4)), T("", (3, 4), data=weights(3, 4)), T("y", (1, 3)),
         T("w", (3, 3), data=weights(3, 3)), T("w", (3, 3), data=weights(3, 3)), T("z", (1, 3)),
         T("z2", (1, 3))]
    ops = [Op("FULLY_CONNECTED", [0, 1], [2]), Op("FULLY_CONNECTED", [2, 3], [5]),
           Op("FULLY_CONNECTED", [5, 4], [6])]
    path, _ = write(tmp_path, t, ops, outputs=[6])
    _, _, by, _, _ = convert(capsys, path)
    assert {"tensor1", "w", "w#4"} <= set(by)


def test_winograd_takes_tflite_conv_filters(tmp_path, capsys):
    t = [T("x", (1, 6, 6, 4)), T("w", (8, 3, 3, 4), data=weights(8, 3, 3, 4)), T("y", (1, 6, 6, 8)),
         T("w2", (8, 3, 3, 8), data=weights(8, 3, 3, 8)), T("z", (1, 3, 3, 8))]
    ops = [Op("CONV_2D", [0, 1], [2], {"padding": "SAME", "stride_w": 1, "stride_h": 1}),
           Op("CONV_2D", [2, 3], [4], {"padding": "SAME", "stride_w": 2, "stride_h": 2})]
    path, _ = write(tmp_path, t, ops, outputs=[4])
    _, _, by, _, _ = convert(capsys, path, "--winograd", "mace")
    assert by["w"]["layout"] == "winograd_4x3_mace" and "transform" in by["w"]
    assert by["w2"]["layout"] == "conv2d_filter" and "transform" not in by["w2"]
    only_strided, _ = write(tmp_path, t[2:], [Op("CONV_2D", [0, 1], [2], ops[1].options)],
                            name="strided.tflite")
    plan, _ = model.plan_file(str(only_strided), model.Options(winograd="mace"))
    assert "'w2': strides 2,2 (CONV_2D #0 input 1)" in plan.winograd_note


# -- files that are not right -------------------------------------------------------------------
def test_bad_files_say_one_line_and_write_nothing(tmp_path, capsys):
    path, data = conv_model(tmp_path)
    cases = {"cut.tflite": data[:len(data) // 2],
             "neither.bin": b"\x08\x07" + bytes(60)}
    for name, content in cases.items():
        bad = tmp_path / name
        bad.write_bytes(content)
        before = files(tmp_path)
        code, _, err = run(capsys, "model", bad, "-o", tmp_path / "o.safetensors")
        assert code == 1 and err.count("\n") == 1, err
        assert files(tmp_path) == before
    assert "nor a TensorFlow Lite one" in err


def test_shape_that_does_not_match_its_buffer(tmp_path, capsys):
    t = [T("x", (1, 4)), T("fc/w", (3, 4), raw=bytes(40)), T("out", (1, 3))]
    path, _ = write(tmp_path, t, [Op("FULLY_CONNECTED", [0, 1], [2])])
    err = convert(capsys, path, code=1)
    assert err.count("\n") == 1 and "'fc/w'" in err and "48 bytes" in err and "40" in err
