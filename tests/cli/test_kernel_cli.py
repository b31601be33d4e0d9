"""``clayout kernel`` (runtime/cli/kernel.py): the kernel a plan renders for
this machine's device or a GPU record, and with ``--gpu NAME --access
[--json]`` the access model's figures, for every conversion the bench lists,
a frame and read_output's kernel."""
import json

import pytest

from conftest import run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/kernel.py",)

KEYS = {"kernel", "family", "global_size", "local_size", "loads", "stores", "active_lanes",
        "local_wavefronts_per_request", "occupancy", "waves", "image_rows_per_warp"}
BENCH = [("--src", "nhwc", "--dst", "nchw"), ("--src", "nchw", "--dst", "nhwc"),
         ("--src", "nchw", "--dst", "nChw16c"), ("--src", "nhwc", "--layout", "in_out_channel"),
         ("--src", "nchw", "--layout", "in_out_channel"),
         ("--src", "oihw", "--layout", "conv2d_filter")]


def _json(capsys, *argv):
    code, out, err = run(capsys, "kernel", *argv, "--gpu", "h100", "--access", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert KEYS <= set(got), KEYS - set(got)
    for kind in ("loads", "stores"):
        for key, value in got[kind].items():
            assert value is None or (0 < value <= 1 if key.startswith("efficiency") else
                                     value >= 1), (key, value)
    assert {"efficiency", "sectors_per_request"} <= set(got["loads"])
    assert {"efficiency", "efficiency_as_emitted", "sectors_per_request"} <= set(got["stores"])
    return got


@pytest.mark.parametrize("move", BENCH, ids=lambda m: f"{m[1]}->{m[3]}")
def test_every_bench_move_answers_in_json(capsys, default_cl_engine, move):
    got = _json(capsys, *move, "--dims", "1,16,20,36")
    assert got["family"] in ("tiled", "direct") and got["groups"] >= 1
    tag = {"nhwc": "acdb", "nchw": "abcd", "oihw": "abcd"}[move[1]]
    assert got["kernel"].startswith(f"f32 1x16x20x36 {tag} -> ")
    image = move[2] == "--layout"
    assert (got["image_rows_per_warp"] is not None) == image
    assert (got["stores"]["efficiency"] is None) == image


def test_a_frame_and_an_output_answer(capsys, default_cl_engine):
    got = _json(capsys, "--frame", "nv21", "--frame-size", "64x48", "--size", "32x32",
                "--layout", "in_out_channel")
    assert got["kernel"].startswith("frame nv21") and got["loads"]["efficiency"] is not None
    got = _json(capsys, "--read-output", "softmax", "--layout", "in_out_channel",
                "--dims", "1,21,16,16")
    assert got["family"] == "output" and got["kernel"].startswith("read_output softmax")


def test_the_words_name_the_record_and_the_figures(capsys, default_cl_engine):
    code, out, _ = run(capsys, "kernel", "--src", "nchw", "--dst", "nhwc", "--dims",
                       "1,64,9,40", "--gpu", "h200", "--access")
    assert code == 0
    assert "// family: tiled (NVIDIA H200 (clayout's record): a GPU with on-chip" in out
    assert "// access model on NVIDIA H200" in out and "sectors a request" in out
    assert "__kernel" in out
    code, out, _ = run(capsys, "kernel", "--src", "nchw", "--dst", "nhwc", "--dims",
                       "1,64,9,40", "--gpu", "gpu")
    assert code == 0 and "__local" in out and "access model" not in out


@pytest.mark.parametrize("argv, words", [
    (("--src", "nchw", "--dst", "nhwc", "--dims", "1,3,4,4", "--access"), "give --gpu NAME"),
    (("--src", "nchw", "--dst", "nhwc", "--dims", "1,3,4,4", "--gpu", "h100", "--json"),
     "give --access too"),
    (("--src", "nchw", "--dst", "nhwc", "--dims", "1,3,4,4", "--gpu", "a100"),
     "no GPU record 'a100'"),
    (("--src", "nchw", "--dst", "nhwc"), "give --dims D"),
    (("--frame", "nv21", "--layout", "in_out_channel"), "--frame-size WxH"),
    (("--read-output", "argmax", "--dims", "1,3,4,4"), "the output's side"),
])
def test_refusals_say_what_to_give(capsys, argv, words):
    code, _, err = run(capsys, "kernel", *argv)
    assert code in (1, 2) and words in err, err
