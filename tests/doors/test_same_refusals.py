"""The same mistake gets the same refusal at every door: reorder, to_image,
from_image, from_frame, read_output in Python, and their commands
(reorder, to-image, from-image, frame, output). One table: each mistake, the
words every door's message must carry, and the door calls that make it (a
door where the mistake cannot be made is left out of that row, never
skipped). Every Python case raises ClayoutError; every command case exits 1
with one `clayout: error:` line and writes nothing."""
from __future__ import annotations

import os

import numpy as np
import pytest

import runtime
from runtime import ClayoutError, MemoryDesc

from conftest import run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/doors/parse.py", "runtime/doors/checks.py", "runtime/doors/read_output.py",
           "runtime/algebra/checks.py", "runtime/algebra/catalog.py")

X = np.arange(210, dtype=np.float32).reshape(1, 6, 5, 7)          # nchw
IMG = runtime.to_image(X, "in_out_channel")                         # (5, 14, 4)
FRAME = np.zeros((6, 4), np.uint8)                                  # a 4x4 NV21 frame
WRONG = X.reshape(1, 6, 7, 5)                                       # the size only
NCHW, NHWC = MemoryDesc(X.shape), MemoryDesc(X.shape, tag="nhwc")


def _short_padding():
    y = X.copy()
    y[:, 5] = 10
    return runtime.to_image(y, "in_out_channel")


def _overlapping(door, shape, out_shape, *args):
    """``door(input, *args, out=out)`` with an input of ``shape`` and an out
    of ``out_shape`` sharing one float32 array's memory."""
    block = np.zeros(max(np.prod(shape), np.prod(out_shape)), np.float32)
    return door(block[:np.prod(shape)].reshape(shape), *args,
                out=block[:np.prod(out_shape)].reshape(out_shape))


# mistake -> (the words, {door: call}); each call makes that mistake at that door
PYTHON = {
    "a shape that only matches in size": (r"of shape \([0-9, ]*\) does not match", {
        "reorder": lambda: runtime.reorder(WRONG, NCHW, NHWC),
        "to_image": lambda: runtime.to_image(WRONG, "in_out_channel", dims=X.shape),
        "read_output": lambda: runtime.read_output(WRONG, "nchw", X.shape, argmax=True),
        "from_image": lambda: runtime.from_image(IMG.reshape(14, 5, 4), "in_out_channel",
                                                 X.shape),
    }),
    "dims one channel short (a padding lane not 0)": (r"padding lane at x=7, y=0 lane 1", {
        "from_image": lambda: runtime.from_image(_short_padding(), "in_out_channel",
                                                 (1, 5, 5, 7)),
        "read_output": lambda: runtime.read_output(_short_padding(), "in_out_channel",
                                                   (1, 5, 5, 7), argmax=True),
    }),
    "an out= of the wrong shape": (r"out= must be a writable, C-contiguous", {
        "reorder": lambda: runtime.reorder(X, NCHW, NHWC, out=np.zeros(3, np.float32)),
        "to_image": lambda: runtime.to_image(X, "in_out_channel", out=np.zeros(3, np.float32)),
        "from_image": lambda: runtime.from_image(IMG, "in_out_channel", X.shape,
                                                 out=np.zeros(3, np.float32)),
        "from_frame": lambda: runtime.from_frame(FRAME, "nchw", format="nv21",
                                                 out=np.zeros(3, np.float32)),
        "read_output": lambda: runtime.read_output(X, "nchw", X.shape,
                                                   out=np.zeros(3, np.float32)),
    }),
    "an out= overlapping the input": (r"out= overlaps the input", {
        "reorder": lambda: _overlapping(runtime.reorder, X.shape, (210,), NCHW, NCHW),
        "to_image": lambda: _overlapping(runtime.to_image, X.shape, IMG.shape,
                                         "in_out_channel"),
        "from_image": lambda: _overlapping(runtime.from_image, IMG.shape, X.shape,
                                           "in_out_channel", X.shape),
        "read_output": lambda: _overlapping(runtime.read_output, X.shape, X.shape, "nchw",
                                            X.shape),
    }),
    "a buffer tag where an image layout goes": (r"image layout 'nhwc': 'nhwc' is a buffer tag", {
        "to_image": lambda: runtime.to_image(X, "nhwc"),
        "from_image": lambda: runtime.from_image(IMG, "nhwc", X.shape),
    }),
    "True as a number": (r"True and False are not numbers here", {
        "to_image": lambda: runtime.to_image(X, "in_out_channel", dims=(True, 6, 5, 7)),
        "from_image": lambda: runtime.from_image(IMG, "in_out_channel", (True, 6, 5, 7)),
        "read_output": lambda: runtime.read_output(X, "nchw", (True, 6, 5, 7)),
        "from_frame": lambda: runtime.from_frame(FRAME, "nchw", format="nv21", size=(True, 4)),
        "reorder": lambda: runtime.reorder(X, MemoryDesc((True, 6, 5, 7)), NHWC),
    }),
    "an input of no clayout dtype": (r"unsupported array dtype complex64|a frame is a u8 array", {
        "reorder": lambda: runtime.reorder(X.astype(np.complex64), NCHW, NHWC),
        "to_image": lambda: runtime.to_image(X.astype(np.complex64), "in_out_channel"),
        "from_image": lambda: runtime.from_image(IMG.astype(np.complex64), "in_out_channel",
                                                 X.shape),
        "read_output": lambda: runtime.read_output(X.astype(np.complex64), "nchw", X.shape),
        "from_frame": lambda: runtime.from_frame(FRAME.astype(np.complex64), "nchw",
                                                 format="nv21"),
    }),
    "an unknown engine": (r"unknown engine 'gpu'; allowed: auto, cpu, opencl, reference", {
        "reorder": lambda: runtime.reorder(X, NCHW, NHWC, engine="gpu"),
        "to_image": lambda: runtime.to_image(X, "in_out_channel", engine="gpu"),
        "from_image": lambda: runtime.from_image(IMG, "in_out_channel", X.shape, engine="gpu"),
        "from_frame": lambda: runtime.from_frame(FRAME, "nchw", format="nv21", engine="gpu"),
        "read_output": lambda: runtime.read_output(X, "nchw", X.shape, engine="gpu"),
    }),
}

CASES = [(mistake, door) for mistake, (_, calls) in PYTHON.items() for door in calls]


@pytest.mark.parametrize("mistake, door", CASES, ids=[f"{m}-{d}" for m, d in CASES])
def test_every_door_refuses_the_same_mistake_alike(mistake, door):
    words, calls = PYTHON[mistake]
    with pytest.raises(ClayoutError, match=words):
        calls[door]()


def test_each_mistake_is_made_at_every_door_that_can_take_it():
    """A row leaves a door out only where the mistake cannot be made there."""
    cannot = {"dims one channel short (a padding lane not 0)": {"reorder", "to_image",
                                                               "from_frame"},
              "a shape that only matches in size": {"from_frame"},    # its shape is its size
              "an out= overlapping the input": {"from_frame"},        # u8 in, another dtype out
              "a buffer tag where an image layout goes": {"reorder", "from_frame",
                                                          "read_output"}}   # take tags
    doors = {"reorder", "to_image", "from_image", "from_frame", "read_output"}
    for mistake, (_, calls) in PYTHON.items():
        assert set(calls) | cannot.get(mistake, set()) == doors, mistake


# -- the commands ------------------------------------------------------------------------------
def _files(folder):
    np.save(folder / "wrong.npy", WRONG)
    np.save(folder / "img.npy", IMG)
    np.save(folder / "short.npy", _short_padding())
    np.save(folder / "x.npy", X)
    np.save(folder / "frame.npy", FRAME)


COMMANDS = {
    "a shape that only matches in size": (r"does not match", [
        ["reorder", "wrong.npy", "-o", "o.npy", "--src", "nchw", "--dst", "nhwc", "--dims",
         "1,6,5,7"],
        ["to-image", "wrong.npy", "-o", "o.npy", "--layout", "in_out_channel", "--dims",
         "1,6,5,7"],
        ["output", "wrong.npy", "-o", "o.npy", "--layout", "nchw", "--dims", "1,6,5,7",
         "--argmax"],
    ]),
    "dims one channel short (a padding lane not 0)": (r"padding lane at x=7, y=0 lane 1.*"
                                                      r"--no-check-padding", [
        ["from-image", "short.npy", "-o", "o.npy", "--layout", "in_out_channel", "--dims",
         "1,5,5,7"],
        ["output", "short.npy", "-o", "o.npy", "--layout", "in_out_channel", "--dims",
         "1,5,5,7", "--argmax"],
    ]),
    "a buffer tag where an image layout goes": (r"image layout 'nhwc': 'nhwc' is a buffer tag", [
        ["to-image", "x.npy", "-o", "o.npy", "--layout", "nhwc"],
        ["from-image", "img.npy", "-o", "o.npy", "--layout", "nhwc", "--dims", "1,6,5,7"],
    ]),
}
COMMAND_CASES = [(m, i) for m, (_, argvs) in COMMANDS.items() for i in range(len(argvs))]


@pytest.mark.parametrize("mistake, i", COMMAND_CASES,
                         ids=[f"{m}-{COMMANDS[m][1][i][0]}" for m, i in COMMAND_CASES])
def test_every_command_refuses_the_same_mistake_alike(mistake, i, tmp_path, capsys,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    _files(tmp_path)
    before = sorted(os.listdir(tmp_path))
    words, argvs = COMMANDS[mistake]
    code, out, err = run(capsys, *argvs[i])
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clayout: error: "), err
    assert __import__("re").search(words, lines[0]), lines[0]
    assert sorted(os.listdir(tmp_path)) == before   # nothing written
