"""Prepared conversions (runtime.prepare) and the ordinary doors' kept
parses: bit-identical to the doors on every engine, for host arrays and
Memory objects; the doors' one-line errors for what changes between calls;
many threads on one prepared call; and, counted rather than timed, the
Python calls a repeated call makes and the settings it reads (none)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import runtime
from runtime import ClayoutError, Memory, MemoryDesc, prepare
from runtime.opencl.engine import OpenCLEngine

from conftest import in_threads, same_bits

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/doors/prepare.py", "runtime/doors/prepared_call.py", "runtime/api.py",
           "runtime/doors/read_output.py", "runtime/settings.py", "runtime/limits.py")

DIMS = (1, 5, 6, 7)
X = np.random.default_rng(0).standard_normal(DIMS).astype(np.float32)


def engines(cl_engine):
    return [("cpu", "cpu"), ("reference", "reference"), ("opencl", cl_engine)]


def test_prepared_calls_give_the_doors_bits(cl_engine):
    img = runtime.to_image(X, "in_out_channel", engine="reference")
    nhwc = np.ascontiguousarray(X.transpose(0, 2, 3, 1))
    frame = np.random.default_rng(1).integers(0, 256, (48, 40), np.uint8)
    for name, eng in engines(cl_engine):
        cases = [
            (prepare.to_image(DIMS, "f32", "in_out_channel", dtype="f16", engine=eng), X,
             lambda: runtime.to_image(X, "in_out_channel", dtype="f16", engine=eng)),
            (prepare.to_image(nhwc.shape, "f32", "in_out_width", src="nhwc", engine=eng), nhwc,
             lambda: runtime.to_image(nhwc, "in_out_width", src="nhwc", engine=eng)),
            (prepare.from_image(img.shape, "f32", "in_out_channel", DIMS, dst="nChw8c",
                                engine=eng), img,
             lambda: runtime.from_image(img, "in_out_channel", DIMS, dst="nChw8c",
                                        engine=eng)),
            (prepare.reorder(MemoryDesc(DIMS), MemoryDesc(DIMS, "bf16", tag="nhwc"),
                             engine=eng), X,
             lambda: runtime.reorder(X, MemoryDesc(DIMS), MemoryDesc(DIMS, "bf16", tag="nhwc"),
                                     engine=eng)),
            (prepare.from_frame(frame.shape, "nchw", format="nv21", size=(20, 16), engine=eng),
             frame, lambda: runtime.from_frame(frame, "nchw", format="nv21", size=(20, 16),
                                               engine=eng)),
        ]
        for conv, data, door in cases:
            want = door()
            assert same_bits(conv(data), want), (name, conv)
            out = np.full_like(want, 7)
            assert conv(data, out=out) is out and same_bits(out, want), (name, conv)
            pending = conv(data, wait=False)
            assert pending.done() in (True, False) and same_bits(pending.result(), want)
            assert name in repr(conv) or eng is cl_engine


def test_prepared_read_output(cl_engine):
    img = runtime.to_image(X, "in_out_channel", engine="reference")
    for name, eng in engines(cl_engine):
        for kw in (dict(argmax=True), dict(activation="sigmoid", threshold=0.5, top_k=7),
                   dict(activation="softmax")):
            conv = prepare.read_output("in_out_channel", DIMS, engine=eng, **kw)
            want = runtime.read_output(img, "in_out_channel", DIMS, engine=eng, **kw)
            got = conv(img)
            if isinstance(want, tuple):
                assert all(np.array_equal(a, b) for a, b in zip(got, want)), (name, kw)
            else:
                assert np.array_equal(got, want), (name, kw)
            assert "read_output" in repr(conv)


def test_a_prepared_call_takes_a_memory_of_its_side(cl_engine):
    conv = prepare.to_image(DIMS, "f32", "in_out_channel", engine=cl_engine)
    src = Memory.from_numpy(X, MemoryDesc(DIMS), engine=cl_engine)
    img = Memory.image("in_out_channel", DIMS, engine=cl_engine)
    assert conv(src, out=img) is img
    assert same_bits(img.to_numpy(), runtime.to_image(X, "in_out_channel", engine="cpu"))
    fresh = conv(src)
    assert isinstance(fresh, Memory) and same_bits(fresh.to_numpy(), img.to_numpy())
    frames = prepare.from_frame((48, 40), "in_out_channel", format="nv21", size=(20, 16),
                                engine=cl_engine)
    frame = np.random.default_rng(2).integers(0, 256, (48, 40), np.uint8)
    into = Memory.image("in_out_channel", (1, 3, 16, 20), engine=cl_engine)
    assert frames(frame, out=into) is into      # a host frame uploaded into a Memory
    want = runtime.from_frame(frame, "in_out_channel", format="nv21", size=(20, 16),
                              engine="cpu")
    assert np.abs(into.to_numpy() - want).max() <= 1e-4


@pytest.mark.parametrize("mistake, words", [
    (lambda c: c(np.zeros((1, 5, 6, 8), np.float32)), r"takes an array of shape \(1, 5, 6, 7\) "
     r"and dtype float32; got shape \(1, 5, 6, 8\)"),
    (lambda c: c(X.astype(np.float16)), r"got shape \(1, 5, 6, 7\), dtype float16"),
    (lambda c: c(X, out=np.zeros(3, np.float32)), r"out= must be a writable, C-contiguous"),
    (lambda c: c(X, out=np.zeros((6, 14, 4), np.float32)[:, ::2]), r"not C-contiguous"),
    (lambda c: c(X, wait="no"), r"wait='no'; allowed: True or False"),
    (lambda c: c(X, wait_for=[3]), r"wait_for holds 3"),
    (lambda c: c(Memory.from_numpy(X, MemoryDesc(DIMS), engine="reference")),
     r"takes a Memory of f32 1x5x6x7 abcd on <clayout engine cpu>; got"),
])
def test_what_changes_between_calls_gets_the_doors_one_line_errors(mistake, words):
    conv = prepare.to_image(DIMS, "f32", "in_out_channel", engine="cpu")
    with pytest.raises(ClayoutError, match=words):
        mistake(conv)


def test_a_view_or_a_big_endian_array_is_taken_as_the_door_takes_it():
    conv = prepare.to_image(DIMS, "f32", "in_out_channel", engine="cpu")
    want = runtime.to_image(X, "in_out_channel", engine="cpu")
    wide = np.zeros((1, 5, 6, 14), np.float32)
    wide[..., ::2] = X
    assert same_bits(conv(wide[..., ::2]), want)
    assert same_bits(conv(X.astype(">f4")), want)


def test_prepare_checks_what_the_door_checks():
    with pytest.raises(ClayoutError, match="unknown image layout 'in_out_chanel'"):
        prepare.to_image(DIMS, "f32", "in_out_chanel")
    with pytest.raises(ClayoutError, match="a shape that only matches in size"):
        prepare.to_image((1, 5, 7, 6), "f32", "in_out_channel", dims=DIMS)
    with pytest.raises(ClayoutError, match="input dtype"):
        prepare.to_image(DIMS, object(), "in_out_channel")


def test_a_host_image_s_padding_is_checked_each_call():
    conv = prepare.from_image((6, 14, 4), "f32", "in_out_channel", (1, 5, 6, 7), engine="cpu")
    img = runtime.to_image(np.ones((1, 6, 6, 7), np.float32), "in_out_channel")
    with pytest.raises(ClayoutError, match="padding lane at x=7, y=0 lane 1"):
        conv(img)
    for _ in range(2):   # the ordinary door, its parse kept after the first call, too
        with pytest.raises(ClayoutError, match="padding lane at x=7, y=0 lane 1"):
            runtime.from_image(img, "in_out_channel", (1, 5, 6, 7), engine="cpu")


@pytest.mark.parametrize("layout, dims", [("tinygrad_image", (0, 2, 17, 3)),
                                          ("dw_conv2d_filter", (16, 17, 0, 7))])
def test_an_image_of_no_elements_with_padding_lanes(layout, dims, cl_engine):
    """A padded layout at dims with a zero: its prepared call (and the
    door's second call, which is one) gives the empty tensor as the first
    call does, on every engine (the planned padding views once crashed)."""
    for engine in ("cpu", "reference", cl_engine):
        img = runtime.to_image(np.zeros(dims, np.float32), layout, engine=engine)
        for _ in range(2):
            got = runtime.from_image(img, layout, dims, engine=engine)
            assert got.shape == dims and got.dtype == np.float32
        got = prepare.from_image(img.shape, "f32", layout, dims, engine=engine)(img)
        assert got.shape == dims


def test_one_prepared_call_from_many_threads(cl_engine):
    for eng in ("cpu", cl_engine):
        conv = prepare.to_image(DIMS, "f32", "in_out_height", dtype="f16", engine=eng)
        xs = [np.random.default_rng(i).standard_normal(DIMS).astype(np.float32)
              for i in range(8)]
        want = [runtime.to_image(x, "in_out_height", dtype="f16", engine="cpu") for x in xs]
        got = {}

        def work(t):
            got[t] = [conv(xs[(t + k) % 8]) for k in range(20)]
        in_threads(work, 8)
        assert all(same_bits(r, want[(t + k) % 8]) for t, rs in got.items()
                   for k, r in enumerate(rs))


# -- counted, not timed -----------------------------------------------------------------------
def _count(fn, n: int = 20, only: str = "") -> float:
    """Python function calls (profile 'call' events) per call of ``fn``;
    ``only``: of the functions whose file's path holds it."""
    fn()
    calls = [0]

    def hook(frame, event, arg):
        if event == "call" and only in frame.f_code.co_filename:
            calls[0] += 1
    sys.setprofile(hook)
    try:
        for _ in range(n):
            fn()
    finally:
        sys.setprofile(None)
    return calls[0] / n


def test_a_repeated_call_makes_few_python_calls(cl_engine):
    """Python function calls per call (the lambda counted): on the cpu
    engine a prepared call is its checks and one ctypes call (the parse of
    an ordinary door made 190 before); on OpenCL a Memory -> Memory call is
    its checks, the staging lease and the events (clayout's own functions
    counted: pyopencl's wrappers vary with the state of its events)."""
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    img = runtime.to_image(x, "in_out_channel", engine="cpu")
    out = np.empty_like(img)
    conv = prepare.to_image(x.shape, "f32", "in_out_channel", engine="cpu")
    assert _count(lambda: conv(x, out=out)) <= 9
    assert _count(lambda: runtime.to_image(x, "in_out_channel", engine="cpu", out=out)) <= 13
    eng = OpenCLEngine(queue=cl_engine.queue)   # its own pool: what it holds is this test's
    src = Memory.from_numpy(x, MemoryDesc(x.shape), engine=eng)
    into = Memory.image("in_out_channel", x.shape, engine=eng)
    conv = prepare.to_image(x.shape, "f32", "in_out_channel", engine=eng)
    assert _count(lambda: conv(src, out=into), only="/runtime/") <= 56   # 51 (68 before)
    eng.queue.finish()


def test_a_repeated_call_reads_no_setting(monkeypatch):
    """The environment and the machine's memory are read once per process
    (runtime/settings.py), not per call: CLAYOUT_MAX_BYTES and sysconf were
    read twice a call, CLAYOUT_ENGINE each call with no engine named."""
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    img = runtime.to_image(x, "in_out_channel")
    runtime.from_image(img, "in_out_channel", x.shape)
    runtime.reorder(x, MemoryDesc(x.shape), MemoryDesc(x.shape, tag="nhwc"))
    reads = []
    real_get, real_sysconf = os.environ.get, os.sysconf
    monkeypatch.setattr(os.environ, "get", lambda *a: reads.append(a[0]) or real_get(*a))
    monkeypatch.setattr(os, "sysconf", lambda *a: reads.append(a[0]) or real_sysconf(*a))
    monkeypatch.setattr(os, "getenv", lambda *a: reads.append(a[0]) or real_get(*a))
    for _ in range(5):
        runtime.to_image(x, "in_out_channel")
        runtime.from_image(img, "in_out_channel", x.shape)
        runtime.reorder(x, MemoryDesc(x.shape), MemoryDesc(x.shape, tag="nhwc"))
        runtime.read_output(img, "in_out_channel", x.shape, argmax=True)
    assert reads == []
