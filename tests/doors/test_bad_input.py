"""Bad input and files, table-driven (docs/cli.md "Errors").

Every command-line case must exit 1 (2 for a usage error) with exactly one
error line that names what the user gave (path, tag, dims or value; never a
temporary file), no traceback, and the test's folder exactly as it was
(names, sizes, modes, inodes, times, link targets). Every Python API case must
raise ClayoutError naming the offending input. Then the cases that succeed
(symlinked outputs, big-endian input, float64 with a dtype), the environment
(no OpenCL platform, PYOPENCL_CTX, CLAYOUT_DEBUG) in subprocesses, and
SIGTERM/SIGHUP while `clayout model` writes a 100 MB file.
"""
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

import runtime
from runtime import ClayoutError, MemoryDesc, from_image, reorder, to_image

from conftest import ROOT, bits, needs, require, run, run_sub
from doors.test_api_errors import LimitedEngine

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/convert.py", "runtime/fileio.py", "runtime/limits.py",
           "runtime/model/onnx/reader.py")

try:
    onnx = needs("onnx")
    from onnx import TensorProto, helper, numpy_helper
except ImportError:   # the model cases skip (the model extra is installed in CI)
    onnx = None

X = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2) - 5.5     # nchw 1x3x2x2
TO_IMAGE = ["to-image", "x.npy", "-o", "o.npy", "--layout", "in_out_channel"]


# -- the folder every case runs in --------------------------------------------------------
def _npy_header_only(path, shape):
    """A .npy file whose header claims ``shape`` float32 and holds no data."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": shape})


def _onnx_model(path, weight):
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])], "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def _onnx_files(folder):
    _onnx_model(folder / "m.onnx", numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"))
    os.symlink("m.onnx", folder / "mlink.onnx")
    os.link(folder / "m.onnx", folder / "mhard.onnx")
    short = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    short.raw_data = short.raw_data[:200]                 # 432 bytes needed
    _onnx_model(folder / "short.onnx", short)
    huge = numpy_helper.from_array(np.ones(1, np.float32), "w")
    del huge.dims[:]
    huge.dims.extend([10**6, 10**6, 1000, 1])             # 4 bytes of data
    _onnx_model(folder / "huge.onnx", huge)
    (folder / "bad.onnx").write_bytes(b"not a model")
    (folder / "empty.onnx").write_bytes(b"")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """tmp_path, made the working folder, holding one of each bad file (the
    character device ``chr`` only where os.mknod is allowed: root)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLAYOUT_DEBUG", raising=False)
    monkeypatch.delenv("CLAYOUT_MAX_BYTES", raising=False)
    np.save("x.npy", X)
    np.save("f64.npy", X.astype(np.float64))
    np.save("i64.npy", np.arange(6))
    np.save("obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    np.save("img.npy", to_image(X, "in_out_channel"))
    np.save("bf16img.npy", to_image(X, "in_out_channel").astype(runtime.algebra.dtypes.dtype("bf16").np))
    np.save("flat.npy", X.reshape(-1))
    np.save("zero.npy", np.zeros((1, 0, 2, 2), np.float32))     # no elements
    open("empty.npy", "wb").close()
    _npy_header_only("huge.npy", (10**6, 10**6, 1000))
    np.save("short.npy", np.zeros(100, np.float32))
    with open("short.npy", "r+b") as f:
        f.truncate(os.path.getsize("short.npy") - 10)
    (tmp_path / "text.npy").write_text("1,2,3\n")
    (tmp_path / "badhdr.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'}")
    (tmp_path / "old.npy").write_bytes(b"old output")
    os.mkfifo("fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")                 # relative: tmp_path may exceed AF_UNIX's 108 bytes
    try:   # /dev/null's numbers, made here: the tests never touch system paths
        os.mknod("chr", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pass   # not root: the cases that need it skip (fail in CI)
    os.mkdir("out")
    os.mkdir("t.tile-0-1.npy")            # one tile of `-o t.npy --max-image 1,1` is a folder
    os.symlink("x.npy", "xlink.npy")
    os.link("x.npy", "xhard.npy")
    os.symlink("nowhere/t.npy", "dangling.npy")
    os.symlink("loop2", "loop1")
    os.symlink("loop1", "loop2")
    if onnx is not None:
        _onnx_files(tmp_path)
    return tmp_path


def listing(top) -> dict:
    """Every entry under ``top``: mode, and for files size, inode and mtime,
    for links the target."""
    found = {}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            regular = stat.S_ISREG(st.st_mode)
            found[os.path.relpath(path, top)] = (
                stat.filemode(st.st_mode),
                (st.st_size, st.st_ino, st.st_mtime_ns) if regular else None,
                os.readlink(path) if stat.S_ISLNK(st.st_mode) else None)
    return found


def check_failure(code, out, err, want_code, words):
    """Exit ``want_code``, one error line holding ``words``, no traceback."""
    assert code == want_code, err
    assert "Traceback" not in out + err
    assert ".tmp" not in err, err          # the path the user gave, never the temporary one
    lines = err.splitlines()
    listed = [line for line in lines[:-1] if line.startswith("clayout: left out: ")]
    if want_code == 1:   # after the constants `clayout model --images-only` names, if any
        assert len(lines) == len(listed) + 1 and lines[-1].startswith("clayout: error: "), err
        assert out == ""
    else:   # argparse: usage, then one line `clayout COMMAND: error: ...`
        errors = [line for line in lines if ": error: " in line]
        assert errors == lines[-1:] and lines[-1].startswith("clayout"), err
    for word in words:
        assert word in "\n".join(listed + lines[-1:]), (word, lines[-1])


# -- command line ----------------------------------------------------------------------------
CLI = [  # id, argv (paths relative to the folder), exit code, words of the message, needs:
    # None, "onnx", "chr" (a character device), "subprocess" or environment variables
    # outputs: refused before any work
    ("out-fifo", ["to-image", "x.npy", "-o", "fifo", "--layout", "in_out_channel"], 1,
     ["cannot write fifo", "FIFO"], None),
    ("out-socket", ["to-image", "x.npy", "-o", "sock", "--layout", "in_out_channel"], 1,
     ["cannot write sock", "socket"], None),
    ("out-chardev", ["to-image", "x.npy", "-o", "chr", "--layout", "in_out_channel"], 1,
     ["cannot write chr", "character device"], "chr"),
    ("out-folder", ["to-image", "x.npy", "-o", "out", "--layout", "in_out_channel"], 1,
     ["cannot write out:", "folder"], None),
    ("out-folder-reorder", ["reorder", "x.npy", "-o", "out", "--src", "nchw", "--dst", "nhwc"],
     1, ["cannot write out:", "folder"], None),
    ("out-missing-folder", ["to-image", "x.npy", "-o", "nodir/o.npy", "--layout", "argument"], 1,
     ["cannot write nodir/o.npy", "folder nodir"], None),
    ("out-dangling-link-missing-folder", TO_IMAGE[:3] + ["dangling.npy"] + TO_IMAGE[4:], 1,
     ["cannot write dangling.npy", "nowhere/t.npy"], None),
    ("out-link-loop", TO_IMAGE[:3] + ["loop1"] + TO_IMAGE[4:], 1,
     ["cannot write loop1", "symbolic links"], None),
    ("out-empty-path", TO_IMAGE[:3] + [""] + TO_IMAGE[4:], 1, ["cannot write ''", "empty"], None),
    ("out-tile-is-folder", ["to-image", "x.npy", "-o", "t.npy", "--layout", "in_out_channel",
                            "--max-image", "1,1"], 1, ["cannot write t.tile-0-1.npy", "folder"],
     None),
    ("out-is-input", ["to-image", "x.npy", "-o", "x.npy", "--layout", "in_out_channel"], 1,
     ["cannot write x.npy", "same file as the input x.npy"], None),
    ("out-hard-link-to-input", ["reorder", "x.npy", "-o", "xhard.npy", "--src", "nchw",
                                "--dst", "nhwc"], 1, ["cannot write xhard.npy", "input x.npy"],
     None),
    ("out-symlink-to-input", ["from-image", "img.npy", "-o", "img.npy", "--layout",
                              "in_out_channel", "--dims", "1,3,2,2"], 1,
     ["cannot write img.npy", "input img.npy"], None),
    ("out-symlink-to-input-2", TO_IMAGE[:3] + ["xlink.npy"] + TO_IMAGE[4:], 1,
     ["cannot write xlink.npy", "input x.npy"], None),
    ("model-out-is-input", ["model", "m.onnx", "-o", "m.onnx"], 1,
     ["cannot write m.onnx", "same file as the input m.onnx"], "onnx"),
    ("model-out-hard-link", ["model", "m.onnx", "-o", "mhard.onnx"], 1,
     ["cannot write mhard.onnx", "input m.onnx"], "onnx"),
    ("model-out-symlink", ["model", "m.onnx", "-o", "mlink.onnx"], 1,
     ["cannot write mlink.onnx", "input m.onnx"], "onnx"),
    ("model-out-fifo", ["model", "m.onnx", "-o", "fifo"], 1, ["cannot write fifo", "FIFO"],
     "onnx"),
    ("model-out-folder", ["model", "m.onnx", "-o", "out"], 1, ["cannot write out:", "folder"],
     "onnx"),
    # input files
    ("in-empty", ["to-image", "empty.npy"] + TO_IMAGE[2:], 1, ["empty.npy", "0 bytes"], None),
    ("in-huge-header", ["to-image", "huge.npy"] + TO_IMAGE[2:], 1,
     ["huge.npy", "(1000000, 1000000, 1000)", "4000000000000000 bytes", "host memory limit"],
     None),
    ("in-short-data", ["to-image", "short.npy"] + TO_IMAGE[2:], 1,
     ["short.npy", "400 bytes", "holds 390 bytes"], None),
    ("in-pickled", ["reorder", "obj.npy", "-o", "o.npy", "--src", "x", "--dst", "x"], 1,
     ["obj.npy", "pickled"], None),
    ("in-not-npy", ["to-image", "text.npy"] + TO_IMAGE[2:], 1, ["text.npy", "not a .npy file"],
     None),
    ("in-corrupt-header", ["to-image", "badhdr.npy"] + TO_IMAGE[2:], 1,
     ["badhdr.npy", "not a readable .npy"], None),
    ("in-fifo", ["to-image", "fifo"] + TO_IMAGE[2:], 1, ["cannot read fifo", "FIFO"],
     "subprocess"),   # reading it would wait for a writer: a timeout, not a hung test
    ("in-socket", ["to-image", "sock"] + TO_IMAGE[2:], 1, ["cannot read sock", "socket"], None),
    ("in-chardev", ["to-image", "chr"] + TO_IMAGE[2:], 1, ["cannot read chr", "character"],
     "chr"),
    ("in-folder", ["to-image", "out"] + TO_IMAGE[2:], 1, ["cannot read out", "folder"], None),
    ("in-missing", ["to-image", "missing.npy"] + TO_IMAGE[2:], 1,
     ["missing.npy", "No such file"], None),
    ("model-in-empty", ["model", "empty.onnx", "-o", "o.safetensors"], 1,
     ["empty.onnx", "empty file"], "onnx"),
    ("model-in-corrupt", ["model", "bad.onnx", "-o", "o.safetensors"], 1,
     ["bad.onnx", "not an ONNX model"], "onnx"),
    ("model-raw-data-short", ["model", "short.onnx", "-o", "o.safetensors"], 1,
     ["short.onnx", "'w'", "(4, 3, 3, 3)", "432 bytes", "has 200"], "onnx"),
    ("model-raw-data-huge-dims", ["model", "huge.onnx", "-o", "o.safetensors"], 1,
     ["huge.onnx", "(1000000, 1000000, 1000, 1)", "4000000000000000 bytes", "has 4"], "onnx"),
    ("model-in-fifo", ["model", "fifo", "-o", "o.safetensors"], 1, ["cannot read fifo", "FIFO"],
     "onnx"),
    ("model-over-max-image", ["model", "m.onnx", "-o", "o.safetensors", "--max-image", "2,2",
                              "--no-tiles", "--images-only"], 1,
     ["'w'", "2,2"], "onnx"),
    # tags, layouts, dims, dtypes
    ("tag-case", TO_IMAGE + ["--src", "NHWC"], 1, ["'NHWC'", "did you mean 'nhwc'"], None),
    ("tag-malformed", ["reorder", "x.npy", "-o", "o.npy", "--src", "aBcd9x", "--dst", "nchw"], 1,
     ["tag 'aBcd9x'"], None),
    ("tag-rank", ["reorder", "x.npy", "-o", "o.npy", "--src", "ncw", "--dst", "nwc"], 1,
     ["'ncw'", "has 4 dims"], None),
    ("layout-unknown", ["to-image", "x.npy", "-o", "o.npy", "--layout", "in_out_chanel"], 1,
     ["'in_out_chanel'", "in_out_channel"], None),
    ("layout-rank", ["to-image", "x.npy", "-o", "o.npy", "--layout", "argument"], 1,
     ["(1, 3, 2, 2)", "tag 'x'"], None),
    ("dims-mismatch", ["reorder", "x.npy", "-o", "o.npy", "--src", "nhwc", "--dst", "nchw",
                       "--dims", "2,5,4,3"], 1, ["x.npy of shape (1, 3, 2, 2)", "2x5x4x3"], None),
    ("dims-huge-image", ["from-image", "img.npy", "-o", "o.npy", "--layout", "in_out_channel",
                         "--dims", "1000000,1000000,1000,1"], 1,
     ["(1000000, 1000000, 1000, 1)", "(2, 2, 4)"], None),
    ("dims-huge-blocked", ["to-image", "flat.npy", "-o", "o.npy", "--layout", "in_out_channel",
                           "--src", "nChw4c", "--dims", "1000000,1000000,1000,1"], 1,
     ["(1000000, 1000000, 1000, 1)", "host memory limit"], None),
    ("dims-malformed", TO_IMAGE + ["--dims", "1,x"], 2, ["dims '1,x'"], None),
    ("dims-negative", ["info", "in_out_channel", "--dims", "1,-3,2,2"], 2, ["'1,-3,2,2'"], None),
    ("max-image-zero", TO_IMAGE + ["--max-image", "0,0"], 2, ["'0,0'"], None),
    ("float64-without-dtype", ["to-image", "f64.npy", "-o", "o.npy", "--layout",
                               "in_out_channel"], 1, ["f64.npy", "float64", "--dtype"], None),
    ("int64-without-dtype", ["reorder", "i64.npy", "-o", "o.npy", "--src", "x", "--dst", "x"], 1,
     ["i64.npy", "int64", "--dtype"], None),
    ("dtype-unknown", TO_IMAGE + ["--dtype", "f64"], 1, ["'f64'", "allowed"], None),
    ("bf16-image", TO_IMAGE + ["--dtype", "bf16"], 1, ["bf16", "f32, f16, s32, s8, u8"], None),
    # an unknown dtype: exit 1 and the allowed values on every command, before any file is read
    ("dtype-unknown-before-input", ["to-image", "missing.npy", "-o", "o.npy", "--layout",
                                    "argument", "--dtype", "f64"], 1,
     ["--dtype: unsupported image dtype 'f64'", "allowed: f32, f16, s32, s8, u8"], None),
    ("dtype-unknown-from-image", ["from-image", "img.npy", "-o", "o.npy", "--layout",
                                  "in_out_channel", "--dims", "1,3,2,2", "--dtype", "q8"], 1,
     ["'q8'", "allowed: f32, f16, bf16, s32, s8, u8"], None),
    ("dtype-unknown-reorder", ["reorder", "x.npy", "-o", "o.npy", "--src", "nchw", "--dst",
                               "nhwc", "--dtype", "float64"], 1, ["'float64'", "allowed"], None),
    ("dtype-unknown-kernel", ["kernel", "--dims", "1,3,2,2", "--src", "nchw", "--dst", "nhwc",
                              "--dst-dtype", "i4"], 1, ["--dst-dtype", "'i4'", "allowed"], None),
    ("dtype-bf16-kernel-image", ["kernel", "--dims", "1,3,2,2", "--src", "nchw", "--layout",
                                 "in_out_channel", "--image-dtype", "bf16"], 1,
     ["--image-dtype", "bf16", "f32, f16, s32, s8, u8"], None),
    ("dtype-unknown-model", ["model", "missing.onnx", "-o", "o.safetensors", "--dtype", "bf16"],
     1, ["--dtype 'bf16'", "f32 or f16"], None),
    # an output named for another format
    ("out-ext-to-image", ["to-image", "x.npy", "-o", "x.png", "--layout", "in_out_channel"], 1,
     ["cannot write x.png", "writes a .npy array", "ending in .npy"], None),
    ("out-ext-reorder", ["reorder", "x.npy", "-o", "x.txt", "--src", "nchw", "--dst", "nhwc"],
     1, ["cannot write x.txt", ".npy"], None),
    ("out-ext-from-image", ["from-image", "img.npy", "-o", "back", "--layout",
                            "in_out_channel", "--dims", "1,3,2,2"], 1,
     ["cannot write back", "no extension", ".npy"], None),
    ("out-ext-show", ["show", "in_out_channel", "--dims", "1,3,2,2", "-o", "pic.jpg"], 1,
     ["cannot write pic.jpg", "a PNG picture", ".png"], None),
    ("out-ext-model", ["model", "m.onnx", "-o", "w.npy"], 1,
     ["cannot write w.npy", "a safetensors file", ".safetensors"], "onnx"),
    # a tensor with no elements cannot be an OpenCL image
    ("zero-size-to-image", ["to-image", "zero.npy", "-o", "o.npy", "--layout", "in_out_channel"],
     1, ["zero.npy", "dims 1,0,2,2 hold no elements", "0x2", "width or height of 0"], None),
    ("zero-size-from-image", ["from-image", "img.npy", "-o", "o.npy", "--layout",
                              "in_out_channel", "--dims", "1,3,0,2"], 1,
     ["img.npy", "dims 1,3,0,2 hold no elements"], None),
    ("bf16-image-input", ["from-image", "bf16img.npy", "-o", "o.npy", "--layout",
                          "in_out_channel", "--dims", "1,3,2,2"], 1, ["bf16"], None),
    ("engine-unknown", TO_IMAGE + ["--engine", "gpu"], 2, ["'gpu'"], None),
    ("info-too-many-tiles", ["info", "in_out_channel", "--dims", "1,4,100000,100000",
                             "--max-image", "1,1"], 1,
     ["(1, 4, 100000, 100000)", "10000000000 tiles"], None),
    ("where-pixel-outside", ["where", "in_out_channel", "--dims", "1,3,2,2", "--pixel", "9,0"], 1,
     ["x 9", "2x2 image"], None),
    ("kernel-tag-case", ["kernel", "--dims", "1,3,2,2", "--src", "NCHW", "--dst", "nhwc"], 1,
     ["'NCHW'", "'nchw'"], None),
    ("host-limit", TO_IMAGE, 1, ["x.npy", "needs 48 bytes,", "limit of 16 bytes"],
     {"CLAYOUT_MAX_BYTES": "16"}),
    ("host-limit-malformed", TO_IMAGE, 1, ["CLAYOUT_MAX_BYTES='lots'"],
     {"CLAYOUT_MAX_BYTES": "lots"}),
]


def _needs(folder, needs, monkeypatch):
    if needs == "onnx" and onnx is None:
        pytest.skip("the model cases need onnx (pip install 'clayout[model]')")
    if needs == "chr":
        require("a character device in tmp_path", os.path.exists(folder / "chr"),
                "os.mknod was refused (not root)")
    if isinstance(needs, dict):
        for key, value in needs.items():
            monkeypatch.setenv(key, value)


@pytest.mark.parametrize("argv, code, words, needs", [c[1:] for c in CLI],
                         ids=[c[0] for c in CLI])
def test_cli_bad_input(folder, capsys, monkeypatch, argv, code, words, needs):
    _needs(folder, needs, monkeypatch)
    before = listing(folder)
    if needs == "subprocess":
        done = run_sub(*argv, cwd=folder, timeout=30)
        check_failure(done.returncode, done.stdout, done.stderr, code, words)
    else:
        check_failure(*run(capsys, *argv), code, words)
    assert listing(folder) == before     # nothing written, nothing clobbered, nothing left


# -- Python API -------------------------------------------------------------------------------
def _convert(src, dst):
    from runtime import model
    return model.convert_file(src, dst)


def _read_only_out():
    out = np.zeros((2, 2, 4), np.float32)
    out.setflags(write=False)
    return to_image(X, "in_out_channel", out=out)


IMG = to_image(X, "in_out_channel")
API = [  # id, call, words of the message
    ("strides-1e12", lambda: reorder(np.zeros(6, np.float32), MemoryDesc((2, 3)),
                                     MemoryDesc((2, 3), strides=(10**12, 1))),
     ["strides=1000000000000,1", "8000000000000 bytes", "host memory limit"]),
    ("offset0-1e11", lambda: reorder(np.zeros(6, np.float32), MemoryDesc((2, 3)),
                                     MemoryDesc((2, 3), offset0=10**11)),
     ["offset0=100000000000", "400000000024 bytes", "host memory limit"]),
    ("halo-1e10", lambda: reorder(np.zeros(6, np.float32), MemoryDesc((2, 3)),
                                  MemoryDesc((2, 3), halo=((0, 0), (10**10, 10**10)))),
     ["halo=(0, 0)/(10000000000, 10000000000)", "host memory limit"]),
    ("memory-offset0-1e12", lambda: runtime.Memory(MemoryDesc((2, 3), offset0=10**12),
                                                   engine="cpu"),
     ["offset0=1000000000000", "4000000000024 bytes", "host memory limit"]),
    ("memory-image-huge-dims", lambda: runtime.Memory.image(
        "in_out_channel", (10**6, 10**6, 1000, 1), engine="cpu"),
     ["(1000000, 1000000, 1000, 1)", "4000000000000000 bytes", "host memory limit"]),
    ("tile-plan-huge-dims",
     lambda: runtime.tile_plan(runtime.ImageDesc(
         runtime.image_layout("in_out_channel"), (10**9,) * 4), (1, 1)),
     ["(1000000000, 1000000000, 1000000000, 1000000000)", "tiles"]),
    ("src-offset0-1e9", lambda: reorder(np.zeros(6, np.float32),
                                        MemoryDesc((2, 3), offset0=10**9), MemoryDesc((2, 3))),
     ["6 elements", "offset0=1000000000", "1000000006"]),
    ("huge-dims-image", lambda: to_image(np.zeros(6, np.float32), "in_out_channel",
                                         src="nChw4c", dims=(10**6, 10**6, 1000, 1)),
     ["(1000000, 1000000, 1000, 1)", "4000000000000000 bytes", "host memory limit"]),
    ("dims-string", lambda: from_image(IMG, "in_out_channel", "1,3,2,2"), ["'1,3,2,2'"]),
    ("dims-none", lambda: MemoryDesc(None), ["dims", "None"]),
    ("offset0-string", lambda: MemoryDesc((2, 3), offset0="x"), ["offset0", "'x'"]),
    ("fill-string", lambda: MemoryDesc((2, 3), fill="zero"), ["fill", "'zero'"]),
    ("engine-unknown", lambda: to_image(X, "in_out_channel", engine="gpu"),
     ["'gpu'", "auto, cpu, opencl, reference"]),
    ("engine-not-an-engine", lambda: to_image(X, "in_out_channel", engine=5), ["engine 5"]),
    ("memory-engine-not-an-engine", lambda: runtime.Memory(MemoryDesc((2, 3)), engine=5),
     ["engine 5"]),
    ("memory-queue-not-a-queue", lambda: runtime.Memory(MemoryDesc((2, 3)), queue=5),
     ["queue=", "int"]),
    ("physical-shape-not-a-desc", lambda: runtime.physical_shape("nchw"), ["MemoryDesc", "str"]),
    ("convert-list-of-floats", lambda: runtime.convert([1.5, 2.5], "f16"), ["float64"]),
    ("layout-unknown", lambda: to_image(X, "in_out_chanel"), ["'in_out_chanel'"]),
    ("layout-custom-malformed", lambda: to_image(X, "abcd:9"), ["'abcd:9'"]),
    ("tag-case", lambda: to_image(X, "in_out_channel", src="NCHW"), ["'NCHW'", "'nchw'"]),
    ("tag-malformed", lambda: MemoryDesc((1, 3, 2, 2), tag="aBcd"), ["'aBcd'"]),
    ("tag-rank", lambda: MemoryDesc((2, 3), tag="nchw"), ["'nchw'", "(2, 3)"]),
    ("data-size", lambda: reorder(np.zeros(5, np.float32), MemoryDesc((2, 3)),
                                  MemoryDesc((2, 3), tag="ba")), ["5 elements", "needs 6"]),
    ("data-dtype", lambda: reorder(np.zeros(6, np.float16), MemoryDesc((2, 3)),
                                   MemoryDesc((2, 3))), ["f16", "f32"]),
    ("float64-without-dtype", lambda: to_image(X.astype(np.float64), "in_out_channel"),
     ["float64", "dtype="]),
    ("list-without-dtype", lambda: to_image([[1, 2, 3]], "in_out_channel"),
     ["int64", "dtype="]),
    ("object-array", lambda: to_image(np.array([1, "a"], object), "argument"), ["object"]),
    ("dtype-unknown", lambda: to_image(X, "in_out_channel", dtype="f64"), ["'f64'"]),
    ("bf16-image", lambda: to_image(X, "in_out_channel", dtype="bf16"), ["bf16"]),
    ("image-over-device-limit", lambda: to_image(np.zeros((1, 8, 2, 5), np.float32),
                                                 "in_out_channel", engine=LimitedEngine()),
     ["'in_out_channel'", "10x2", "8x8", "(1, 8, 2, 5)"]),
    ("image-shape", lambda: from_image(IMG[:, :, :3], "in_out_channel", X.shape),
     ["(2, 2, 3)", "expected (2, 2, 4)"]),
    ("max-image-zero", lambda: to_image(X, "in_out_channel", max_image=(0, 0)), ["(0, 0)"]),
    ("reshape-blocked", lambda: MemoryDesc((2, 8, 3, 4), tag="aBcd8b").reshape((2, 96)),
     ["aBcd8b", "(2, 96)"]),
    ("submemory-outside", lambda: MemoryDesc((2, 8, 3, 4)).submemory((2, 8, 3, 5), (0, 0, 0, 0)),
     ["[0, 5)", "[0, 4)"]),
    ("submemory-offset-1e12", lambda: MemoryDesc((2, 8, 3, 4)).submemory(
        (2, 8, 3, 4), (0, 0, 0, 10**12)), ["1000000000000"]),
    ("out-wrong-shape", lambda: to_image(X, "in_out_channel", out=np.zeros(3, np.float32)),
     ["out=", "shape (3,)", "(2, 2, 4)"]),
    ("out-not-an-array", lambda: to_image(X, "in_out_channel", out=[0.0] * 16), ["out=", "list"]),
    ("out-read-only", _read_only_out, ["out=", "read-only"]),
    ("out-overlaps-input", lambda: reorder(X.reshape(-1), MemoryDesc((12,)), MemoryDesc((12,)),
                                           out=X.reshape(-1)), ["out=", "overlaps"]),
    ("reorder-not-descs", lambda: reorder(X, "nchw", "nhwc"), ["MemoryDesc"]),
    ("model-out-is-input", lambda: _convert("m.onnx", "m.onnx"),
     ["cannot write m.onnx", "same file as the input m.onnx"]),
    ("model-out-folder", lambda: _convert("m.onnx", "out"), ["cannot write out:", "folder"]),
    ("model-raw-data-short", lambda: _convert("short.onnx", "o.safetensors"),
     ["short.onnx", "'w'", "432 bytes"]),
]


@pytest.mark.parametrize("call, words", [c[1:] for c in API], ids=[c[0] for c in API])
def test_api_bad_input(folder, call, words, request):
    if request.node.callspec.id.startswith("model-") and onnx is None:
        pytest.skip("the model cases need onnx")
    before = listing(folder)
    with pytest.raises(ClayoutError) as info:
        call()
    assert type(info.value) is ClayoutError   # not MemoryError, ValueError, EOFError, ...
    msg = str(info.value)
    assert "\n" not in msg
    for word in words:
        assert word in msg, (word, msg)
    assert listing(folder) == before


def test_enough_cases():
    assert len(CLI) + len(API) >= 40 and len(CLI) >= 40


# -- what succeeds ------------------------------------------------------------------------------
def test_symlinked_output_replaces_its_target(folder, capsys):
    os.mkdir("real")
    (folder / "real" / "target.npy").write_bytes(b"old output")
    os.chmod("real/target.npy", 0o640)
    os.symlink("real/target.npy", "olink.npy")
    before = listing(folder)
    code, out, err = run(capsys, "to-image", "x.npy", "-o", "olink.npy", "--layout",
                         "in_out_channel")
    assert code == 0 and err == "" and out.startswith("wrote olink.npy: ")
    assert os.readlink("olink.npy") == "real/target.npy"       # still the same link
    assert np.array_equal(bits(np.load("real/target.npy")), bits(to_image(X, "in_out_channel")))
    after = listing(folder)
    assert after[os.path.join("real", "target.npy")][0] == "-rw-r-----"   # its mode kept
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {os.path.join("real", "target.npy")} and set(after) == set(before)


def test_dangling_symlink_output_creates_its_target(folder, capsys):
    os.symlink("new.npy", "dlink.npy")
    before = listing(folder)
    code, _, err = run(capsys, "to-image", "flat.npy", "-o", "dlink.npy", "--layout", "argument")
    assert code == 0, err
    assert os.readlink("dlink.npy") == "new.npy" and os.path.isfile("new.npy")
    assert np.array_equal(np.load("dlink.npy"), to_image(X.reshape(-1), "argument"))
    assert set(listing(folder)) == set(before) | {"new.npy"}


def test_replaced_output_keeps_its_mode(folder, capsys):
    os.chmod("old.npy", 0o600)
    code, _, err = run(capsys, *TO_IMAGE[:3], "old.npy", *TO_IMAGE[4:])
    assert code == 0, err
    assert stat.S_IMODE(os.stat("old.npy").st_mode) == 0o600


def test_read_only_output_is_refused(folder, capsys, monkeypatch):
    os.chmod("old.npy", 0o444)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # root may write any file (access() says yes): answer as its owner would
        monkeypatch.setattr(os, "access", lambda p, mode: bool(os.stat(p).st_mode & stat.S_IWUSR))
    before = listing(folder)
    check_failure(*run(capsys, *TO_IMAGE[:3], "old.npy", *TO_IMAGE[4:]), 1,
                  ["cannot write old.npy", "read-only"])
    assert listing(folder) == before


def test_big_endian_input_is_bit_exact(folder, capsys):
    np.save("be.npy", X.astype(">f4"))
    assert run(capsys, "to-image", "be.npy", "-o", "be_img.npy", "--layout", "in_out_channel")[0] \
        == 0
    assert run(capsys, *TO_IMAGE)[0] == 0
    got, want = np.load("be_img.npy"), np.load("o.npy")
    assert got.dtype == np.float32 and got.dtype.isnative
    assert np.array_equal(bits(got), bits(want))


def test_float64_with_dtype_is_accepted(folder, capsys):
    code, out, err = run(capsys, "to-image", "f64.npy", "-o", "o.npy", "--layout",
                         "in_out_channel", "--dtype", "f32")
    assert code == 0 and err == "", err
    assert np.array_equal(bits(np.load("o.npy")), bits(to_image(X, "in_out_channel")))
    assert np.array_equal(to_image(X.astype(np.float64), "in_out_channel", dtype="f32"),
                          to_image(X, "in_out_channel"))


# -- environment: subprocesses ------------------------------------------------------------------
def _env_cases(folder):
    (folder / "no_icd").mkdir()
    return {  # OCL_ICD_VENDORS: an empty folder of ICDs is no OpenCL platform at all
        "no-platform": ({"OCL_ICD_VENDORS": str(folder / "no_icd"), "PYOPENCL_CTX": None},
                        ["no OpenCL platform", "--engine cpu"]),
        "ctx-index": ({"PYOPENCL_CTX": "7"}, ["PYOPENCL_CTX='7'", "devices found", "--engine cpu"]),
        "ctx-name": ({"PYOPENCL_CTX": "nosuchdevice"},
                     ["PYOPENCL_CTX='nosuchdevice'", "devices found", "--engine cpu"]),
    }


@pytest.mark.parametrize("case", ["no-platform", "ctx-index", "ctx-name"])
def test_no_opencl_device(folder, case):
    env, words = _env_cases(folder)[case]
    before = listing(folder)
    done = run_sub(*TO_IMAGE, "--engine", "opencl", cwd=folder, env=env)
    check_failure(done.returncode, done.stdout, done.stderr, 1, words)
    assert listing(folder) == before
    if case == "no-platform":   # and the cpu engine does work there
        done = run_sub(*TO_IMAGE, "--engine", "cpu", cwd=folder, env=env)
        assert done.returncode == 0 and done.stderr == "", done.stderr


def test_clayout_debug_shows_the_traceback(folder):
    argv = ["to-image", "empty.npy", "-o", "o.npy", "--layout", "in_out_channel"]
    quiet = run_sub(*argv, cwd=folder)
    check_failure(quiet.returncode, quiet.stdout, quiet.stderr, 1, ["empty.npy"])
    debug = run_sub(*argv, cwd=folder, env={"CLAYOUT_DEBUG": "1"})
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert "ClayoutError: empty.npy: empty file" in debug.stderr
    assert not os.path.exists("o.npy")


# -- signals while `clayout model` writes ---------------------------------------------------
@pytest.fixture(scope="module")
def big_model(tmp_path_factory):
    """An ONNX model of about 113 MB: three 1024x1024x3x3 Conv weights."""
    if onnx is None:
        pytest.skip("needs onnx")
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(np.full((1024, 1024, 3, 3), i + 0.5, np.float32),
                                             f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"y{i}"], pads=[1, 1, 1, 1]))
        prev = f"y{i}"
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, None)], [helper.make_tensor_value_info(
            prev, TensorProto.FLOAT, None)], initializer=inits)
    path = tmp_path_factory.mktemp("big") / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    assert path.stat().st_size > 100_000_000
    return path


def _state(pid: int) -> str:
    """The process state letter of /proc/PID/stat ('T' when stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _until(what, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.0005)
    return False


OLD = b"the old output, which must survive\n"


@pytest.mark.slow
@pytest.mark.alone   # the signal must land in a window: no background child shifts its timing
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("name, status", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_signal_mid_write_keeps_the_old_output(tmp_path, big_model, name, status):
    """The signal arrives while the temporary file is being written: the CLI
    exits by itself with 128 + signal, removes the temporary file and leaves
    the old output byte for byte. To be sure the signal lands mid-write, the
    process is stopped (SIGSTOP) as soon as the temporary file appears and
    the signal is queued before it continues; a run whose file was renamed
    before it stopped is tried again."""
    out = tmp_path / "out.safetensors"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("CLAYOUT_DEBUG", None)
    argv = [sys.executable, "-m", "runtime", "model", str(big_model), "-o", out.name,
            "--engine", "cpu"]
    temps = lambda: [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]  # noqa: E731
    for attempt in range(3):
        for leftover in temps():     # of a run killed below
            os.unlink(tmp_path / leftover)
        out.write_bytes(OLD)
        before = listing(tmp_path)
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            assert _until(lambda: temps() or proc.poll() is not None, 120), "no temporary file"
            if proc.poll() is not None:
                continue   # finished between two looks (a very fast disk): try again
            os.kill(proc.pid, signal.SIGSTOP)
            assert _until(lambda: _state(proc.pid) == "T", 10), "SIGSTOP did not stop it"
            if not temps() or out.read_bytes() != OLD:
                continue   # renamed already: killed below, try again
            os.kill(proc.pid, getattr(signal, name))
            os.kill(proc.pid, signal.SIGCONT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:   # SIGKILL ends a stopped process too
                proc.kill()
                proc.communicate(timeout=60)
        assert proc.returncode == status, err      # its own exit: -15 would mean it was killed
        assert err.decode().splitlines()[-1] == \
            f"clayout: error: stopped by {name}; nothing was written"
        assert temps() == []
        assert out.read_bytes() == OLD
        assert listing(tmp_path) == before
        return
    pytest.fail("three runs finished writing before they could be stopped")
