"""read_output: a network output to the user's result in one pass, checked
three ways (the float64 reference, the cpu engine, the OpenCL kernel on
every implementation present) against numpy's post-processing of the
same values, over every activation layout and storage, every source dtype,
dequantize per tensor and per channel, ties, NaNs, empty and full
thresholds, the cap, and wait=False from many threads."""
from __future__ import annotations

import math

import numpy as np
import pytest

import runtime
from runtime import ClayoutError, read_output
from runtime.algebra.catalog import NAMED
from runtime.algebra.output import CAP, above

from conftest import THOROUGH, in_threads, needs, tiered

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/output.py", "runtime/algebra/output_math.py", "runtime/cli/demo.py",
           "runtime/cpu/outputs.py", "runtime/doors/read_output.py", "runtime/opencl/output.py")

ACTIVATIONS = sorted(n for n, lay in NAMED.items() if lay.kind == "activation")
SIGMOID_BOUND = 2.0 ** -22          # absolute, docs/outputs.md


def softmax_bound(c: int) -> float:
    return (c + 4) * 2.0 ** -24


def image_of(x, layout, dtype=None):
    """``x`` (logical NCHW) as the host image of ``layout``, by the reference."""
    return runtime.to_image(x, layout, dtype=dtype, engine="reference")


def logits(rng, dims, dtype="f32"):
    """Values without ties along axis 1 (each a distinct multiple of 1/64)."""
    n = math.prod(dims)
    x = (rng.permutation(n).astype(np.float64) - n / 2) / 64
    if dtype in ("s8", "u8", "s32"):
        lo, hi = {"s8": (-128, 127), "u8": (0, 255), "s32": (-5000, 5000)}[dtype]
        return rng.integers(lo, hi + 1, size=dims).astype(np.dtype({"s8": np.int8, "u8": np.uint8,
                                                                     "s32": np.int32}[dtype]))
    return x.reshape(dims).astype(np.float16 if dtype == "f16" else np.float32)


def numpy_chain(x, dequantize=None, activation=None):
    """What users write today, in float64."""
    x = x.astype(np.float64)
    if dequantize is not None:
        scale, zero = (np.asarray(v, np.float64).reshape(-1) for v in dequantize)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        x = (x - zero.reshape(shape)) * np.float32(scale).astype(np.float64).reshape(shape)
    if activation == "sigmoid":
        with np.errstate(over="ignore"):
            return 1 / (1 + np.exp(-x))
    if activation == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return x


def engines(cl_engine):
    return [("reference", "reference"), ("cpu", "cpu"), ("opencl", cl_engine)]


# a single texture holds C whole in one texel: C 1..4 (3 has no image format on a device)
CASES = [(lay, c) for lay in ACTIVATIONS for c in (1, 3, 5, 17)
         if lay != "tflite_single_texture_2d" or c in (1, 4)]


@pytest.mark.parametrize("layout, c", tiered(CASES, lambda k: k[1] == 5 or k[0] ==
                                             "in_out_channel", ids=lambda k: f"{k[0]}-C{k[1]}"))
def test_every_activation_layout_three_ways(layout, c, cl_engine):
    """Argmax and the values under each activation, every engine. Outside the
    thorough tier a layout's values go under one activation, in turn by the
    layout's place (each activation still meets a third of the layouts; a
    program per layout and activation is what makes this test slow)."""
    rng = np.random.default_rng(c)
    x = logits(rng, (2, c, 3, 5))
    img = image_of(x, layout)
    want_arg = np.argmax(x, axis=1)
    acts = (None, "sigmoid", "softmax")
    if not THOROUGH:
        acts = (acts[(ACTIVATIONS.index(layout) + c) % 3],)
    for name, eng in engines(cl_engine):
        got = read_output(img, layout, x.shape, argmax=True, engine=eng)
        assert got.dtype == np.int32 and (got == want_arg).all(), name
        for act in acts:
            val = read_output(img, layout, x.shape, activation=act, engine=eng)
            exact = numpy_chain(x, activation=act)
            bound = 0 if act is None else SIGMOID_BOUND if act == "sigmoid" else softmax_bound(c)
            assert val.dtype == np.float32 and val.shape == x.shape
            assert np.abs(val - exact).max() <= bound, (name, act)


@pytest.mark.parametrize("dtype, per_channel", [("f32", False), ("f16", False)] +
                         [(d, p) for d in ("s8", "u8", "s32") for p in (False, True)])
def test_dtypes_and_dequantize(dtype, per_channel, cl_engine):
    rng = np.random.default_rng(7)
    x = logits(rng, (1, 6, 4, 3), dtype)
    dq = None
    if dtype in ("s8", "u8", "s32"):
        dq = ((rng.uniform(0.01, 0.2, 6), rng.integers(-5, 5, 6)) if per_channel
              else (0.0625, 3))
    img = image_of(x, "in_out_channel")
    exact = numpy_chain(x, dq, "sigmoid")
    results = {}
    for name, eng in engines(cl_engine):
        got = read_output(img, "in_out_channel", x.shape, dequantize=dq, activation="sigmoid",
                          engine=eng)
        assert np.abs(got - exact).max() <= SIGMOID_BOUND, name
        sel = read_output(img, "in_out_channel", x.shape, dequantize=dq, activation="sigmoid",
                          threshold=0.5, engine=eng)
        results[name] = sel
        want = np.argwhere(exact > 0.5)
        assert (sel[0] == want).all(), name
    assert (results["cpu"][0] == results["opencl"][0]).all()


def test_ties_and_nans_as_numpy(cl_engine):
    x = np.zeros((1, 5, 2, 3), np.float32)
    x[0, 2] = 1.0
    x[0, 4] = 1.0                    # a tie: the lower channel
    x[0, :, 1, 2] = [0, 3, np.nan, np.nan, 9]   # a NaN: the first
    x[0, :, 0, 0] = [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf]
    want = np.argmax(x, axis=1)
    for name, eng in engines(cl_engine):
        for layout in ("in_out_channel", "in_out_width", "nchw", "nhwc"):
            src = x if layout in ("nchw",) else \
                x.transpose(0, 2, 3, 1).copy() if layout == "nhwc" else image_of(x, layout)
            got = read_output(src, layout, x.shape, argmax=True, engine=eng)
            assert (got == want).all(), (name, layout, got, want)


@pytest.mark.parametrize("activation", [None, "sigmoid", "softmax"])
def test_threshold_and_top_k(activation, cl_engine):
    rng = np.random.default_rng(3)
    x = logits(rng, (1, 16, 20, 20)) * np.float32(0.25)
    img = image_of(x, "in_out_channel")
    exact = numpy_chain(x, activation=activation)
    for t in (-np.inf, 0.5, 0.9, np.inf, 1e9):
        want = np.argwhere(exact > t)
        got = {}
        for name, eng in engines(cl_engine):
            if want.shape[0] > CAP:
                with pytest.raises(ClayoutError, match="over the cap"):
                    read_output(img, "in_out_channel", x.shape, activation=activation,
                                threshold=t, engine=eng)
                continue
            idx, val = read_output(img, "in_out_channel", x.shape, activation=activation,
                                   threshold=t, engine=eng)
            assert idx.dtype == np.int32 and idx.shape == (want.shape[0], 4), name
            assert (idx == want).all(), (name, t)
            assert val.dtype == np.float32
            assert np.allclose(val, exact[tuple(want.T)], rtol=0, atol=2 ** -20)
            got[name] = idx
            idx, val = read_output(img, "in_out_channel", x.shape, activation=activation,
                                   threshold=t, top_k=7, engine=eng)
            flat = np.ravel_multi_index(tuple(want.T), x.shape)
            order = np.lexsort((flat, -exact.reshape(-1)[flat]))[:7]
            assert (idx == want[order]).all(), (name, t)
            assert (np.diff(val) <= 0).all()


def test_top_k_past_the_cap_runs_again(cl_engine):
    rng = np.random.default_rng(5)
    x = logits(rng, (1, 2, 200, 200))      # 80000 values, all selected
    img = image_of(x, "in_out_channel")
    want = np.argsort(-x.reshape(-1), kind="stable")[:3]
    for name, eng in engines(cl_engine):
        idx, val = read_output(img, "in_out_channel", x.shape, threshold=-np.inf, top_k=3,
                               engine=eng)
        assert (np.ravel_multi_index(tuple(idx.T), x.shape) == want).all(), name
        with pytest.raises(ClayoutError, match=f"80000 values exceed .* cap of {CAP}"):
            read_output(img, "in_out_channel", x.shape, threshold=-np.inf, engine=eng)


def test_the_bound_is_the_least_float_above():
    for t in (0.1, 0.5, 1.0, -2.5, 3e38, 1e-45):
        b = above(t)
        assert float(b) > t and float(np.nextafter(b, np.float32(-np.inf))) <= t


def test_tensor_into_any_tag_f16_and_out(cl_engine):
    rng = np.random.default_rng(11)
    x = logits(rng, (1, 5, 3, 4))
    img = image_of(x, "in_out_channel")
    exact = numpy_chain(x, activation="softmax")
    for name, eng in engines(cl_engine):
        got = read_output(img, "in_out_channel", x.shape, activation="softmax", dst="nhwc",
                          dtype="f16", engine=eng)
        assert got.dtype == np.float16 and got.shape == (1, 3, 4, 5)
        assert np.abs(got.astype(np.float64) - exact.transpose(0, 2, 3, 1)).max() <= 2 ** -11
        blocked = read_output(img, "in_out_channel", x.shape, dst="nChw8c", engine=eng)
        back = runtime.reorder(blocked, runtime.MemoryDesc(x.shape, "f32", tag="nChw8c"),
                               runtime.MemoryDesc(x.shape, "f32"), engine="reference")
        assert (back.reshape(x.shape) == x).all(), name
        out = np.full((1, 3, 4), -1, np.int32)
        assert read_output(img, "in_out_channel", x.shape, argmax=True, engine=eng,
                           out=out) is out
        assert (out == np.argmax(x, axis=1)).all()


def test_a_device_memory_stays_on_the_device(cl_engine):
    x = logits(np.random.default_rng(2), (1, 7, 9, 9))
    mem = runtime.Memory.image("in_out_channel", x.shape, "f32", engine=cl_engine,
                               data=image_of(x, "in_out_channel"))
    got = read_output(mem, argmax=True)
    assert (got == np.argmax(x, axis=1)).all()
    buf = runtime.Memory.from_numpy(x.transpose(0, 2, 3, 1).copy(),
                                    runtime.MemoryDesc(x.shape, "f32", tag="nhwc"),
                                    engine=cl_engine)
    assert (read_output(buf, argmax=True) == np.argmax(x, axis=1)).all()
    cpu = runtime.Memory.image("in_out_channel", x.shape, "f32", engine="cpu",
                               data=image_of(x, "in_out_channel"))
    assert (read_output(cpu, argmax=True) == np.argmax(x, axis=1)).all()


def test_pending_from_many_threads_on_one_engine(cl_engine):
    rng = np.random.default_rng(9)
    xs = [logits(rng, (1, 21, 16, 16)) for _ in range(8)]
    imgs = [image_of(x, "in_out_channel") for x in xs]
    alone = [read_output(i, "in_out_channel", (1, 21, 16, 16), activation="sigmoid",
                         threshold=0.7, engine=cl_engine) for i in imgs]
    got = {}

    def work(t):
        p = read_output(imgs[t], "in_out_channel", (1, 21, 16, 16), activation="sigmoid",
                        threshold=0.7, engine=cl_engine, wait=False)
        q = read_output(imgs[t], "in_out_channel", (1, 21, 16, 16), argmax=True,
                        engine=cl_engine, wait=False)
        got[t] = (p.result(), q.result(), p.done())
    in_threads(work)
    for t in range(8):
        (idx, val), arg, done = got[t]
        assert done and (idx == alone[t][0]).all() and (val == alone[t][1]).all()
        assert (arg == np.argmax(xs[t], axis=1)).all()


def test_zero_volume_outputs(cl_engine):
    for name, eng in engines(cl_engine):
        x = np.zeros((0, 3, 2, 2), np.float32)
        assert read_output(x, "nchw", x.shape, argmax=True, engine=eng).shape == (0, 2, 2)
        idx, val = read_output(x, "nchw", x.shape, threshold=0, engine=eng)
        assert idx.shape == (0, 4) and val.shape == (0,)


@pytest.mark.parametrize("kwargs, words", [
    (dict(activation="softmx"), "did you mean 'softmax'"),
    (dict(argmax=True, threshold=0.5), "two results"),
    (dict(top_k=3), "top_k goes with threshold"),
    (dict(threshold=0.5, top_k=0), "top_k=0; allowed: an integer"),
    (dict(dequantize=(0.1, 0)), "dequantize= on a f32 output"),
    (dict(threshold=float("nan")), "threshold is NaN"),
    (dict(dtype="s8"), "dtype s8; allowed: f32, f16"),
    (dict(dst="nchw8"), "dst='nchw8'"),
    (dict(argmax=True, out=np.zeros((2, 2), np.int32)), "out= must be"),
    (dict(threshold=0.1, out=np.zeros(3, np.float32)), "out= with threshold"),
])
def test_bad_input_is_one_clear_error(kwargs, words):
    x = np.zeros((1, 3, 2, 2), np.float32)
    with pytest.raises(ClayoutError, match=words):
        read_output(x, "nchw", x.shape, engine="cpu", **kwargs)


def test_bad_sources_are_clear_errors():
    q = np.zeros((1, 3, 2, 2), np.int8)
    with pytest.raises(ClayoutError, match="zero_point's|one per channel|allowed: one number"):
        read_output(q, "nchw", q.shape, dequantize=([0.1, 0.2], 0), engine="cpu")
    with pytest.raises(ClayoutError, match="does not match"):
        read_output(q, "nchw", (1, 3, 2, 3), engine="cpu")
    with pytest.raises(ClayoutError, match="needs layout="):
        read_output(q)
    with pytest.raises(ClayoutError, match="did you mean"):
        read_output(q, "in_out_chanel", q.shape, engine="cpu")
    with pytest.raises(ClayoutError, match="no channels"):
        read_output(np.zeros((1, 0, 2), np.float32), "abc", (1, 0, 2), argmax=True,
                    engine="cpu")


# -- real outputs: what onnxruntime gives for real models, post-processed as users do -------
def _ort(path, x):
    ort = needs("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_the_sample_cnn_logits(cl_engine):
    from runtime.cli.demo import sample_path
    x = np.random.default_rng(4).standard_normal((4, 3, 16, 16)).astype(np.float32)
    logits = np.concatenate([_ort(sample_path(), x[i:i + 1]) for i in range(4)])   # (4, 10)
    p = numpy_chain(logits, activation="softmax")
    img = runtime.to_image(logits, "in_out_channel", src="nc")
    for name, eng in engines(cl_engine):
        assert (read_output(img, "in_out_channel", logits.shape, argmax=True, engine=eng)
                == np.argmax(logits, axis=1)).all(), name
        got = read_output(img, "in_out_channel", logits.shape, activation="softmax", engine=eng)
        assert np.abs(got - p).max() <= softmax_bound(10), name
        idx, val = read_output(img, "in_out_channel", logits.shape, activation="softmax",
                               threshold=-np.inf, top_k=5, engine=eng)
        flat = np.argsort(-p.reshape(-1), kind="stable")[:5]
        assert (np.ravel_multi_index(tuple(idx.T), p.shape) == flat).all(), name


def test_a_text_detector_probability_map(ppocr, cl_engine):
    """PP-OCRv4 det gives a 1x1xHxW probability map; DB's post-processing
    starts from the pixels above a threshold."""
    from runtime.cli.demo import sample_rgb
    rgb = sample_rgb(96, 64).astype(np.float32) / 255
    x = ((rgb - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()
    prob = _ort(ppocr["det"], x)
    assert prob.shape == (1, 1, 64, 96)
    img = runtime.to_image(prob, "in_out_channel", dtype="f16")
    half = prob.astype(np.float16).astype(np.float64)
    t = float(np.quantile(half, 0.9))
    want = np.argwhere(half > t)
    assert 0 < want.shape[0] < prob.size
    for name, eng in engines(cl_engine):
        idx, val = read_output(img, "in_out_channel", prob.shape, threshold=t, engine=eng)
        assert (idx == want).all() and (val == half[tuple(want.T)]).all(), name


def under_oclgrind(eng, bad) -> int:
    """read_output's kernel on small outputs under oclgrind
    (tests/cross/test_oclgrind.py runs it): every result kind, an image and a
    buffer, a dequantized integer output, against the cpu engine."""
    rng = np.random.default_rng(12)
    runs = 0
    x = logits(rng, (1, 5, 2, 3))
    q = logits(rng, (1, 5, 2, 3), "s8")
    cases = [(image_of(x, "in_out_channel"), "in_out_channel", None),
             (x.transpose(0, 2, 3, 1).copy(), "nhwc", None),
             (image_of(q, "in_out_width"), "in_out_width", ([0.1, 0.2, 0.3, 0.4, 0.5], 2))]
    kinds = [dict(argmax=True), dict(activation="softmax"),
             dict(activation="sigmoid", dst="nChw4c", dtype="f16"),
             dict(activation="sigmoid", threshold=0.5), dict(threshold=0.0, top_k=3)]
    for src, layout, dq in cases:
        for kw in kinds:
            runs += 1
            got = read_output(src, layout, x.shape, dequantize=dq, engine=eng, **kw)
            want = read_output(src, layout, x.shape, dequantize=dq, engine="cpu", **kw)
            got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            if any(g.shape != w.shape or np.abs(g.astype(np.float64) - w).max(initial=0) > 1e-6
                   for g, w in zip(got, want)):
                bad.append(f"read_output {layout} {kw}")
    # several work-groups (S = 600 over groups of up to 256): each group's local count
    # and its one global atomic, on the generic program and then the baked one
    from runtime.algebra.output import output_rule
    from runtime.opencl import baking, output as cl_output
    big = logits(rng, (1, 5, 20, 30))
    for kw in (dict(threshold=0.0), dict(activation="sigmoid", threshold=0.4, top_k=9),
               dict(argmax=True), dict(activation="softmax", dst="nhwc")):
        want = read_output(big, "nchw", big.shape, engine="cpu", **kw)
        plan = cl_output.output_plan(eng, runtime.MemoryDesc(big.shape),
                                     output_rule(big.shape, "f32", **kw))
        plan.uses_left = 1   # hot at the next call: baked off the calling thread
        for step in range(2):
            runs += 1
            got = read_output(big, "nchw", big.shape, engine=eng, **kw)
            baking.settle()
            got, w = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            if any(g.shape != x.shape or np.abs(g.astype(np.float64) - x).max(initial=0) > 1e-6
                   for g, x in zip(got, w)):
                bad.append(f"read_output (1, 5, 20, 30) {kw} {'baked' if step else 'generic'}")
        if plan.kernel.generic:
            bad.append(f"read_output (1, 5, 20, 30) {kw}: not baked")
    return runs


@pytest.mark.parametrize("dtype", ["f32", "f16", "s8"])
def test_the_cpu_engines_two_paths_agree(dtype):
    """The compiled rows (templates/cpu_output.c.mako) and the numpy path
    (CpuEngine(path="numpy")): the same indices, values within the bound."""
    from runtime.cpu.engine import CpuEngine
    rng = np.random.default_rng(13)
    x = logits(rng, (2, 7, 5, 6), dtype)
    x.reshape(-1)[5] = np.nan if dtype != "s8" else x.reshape(-1)[5]
    dq = ([0.05] * 7, list(range(-3, 4))) if dtype == "s8" else None
    img = image_of(x, "in_out_channel")
    calls = [dict(argmax=True), dict(activation="softmax"), dict(activation="sigmoid"),
             dict(activation="sigmoid", threshold=0.6), dict(activation="softmax", threshold=0.3,
                                                             top_k=9)]
    got = {}
    for path in ("compiled", "numpy"):
        eng = CpuEngine(path)
        got[path] = [read_output(img, "in_out_channel", x.shape, dequantize=dq, engine=eng, **kw)
                     for kw in calls]
    for kw, a, b in zip(calls, got["compiled"], got["numpy"]):
        a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
        for u, v in zip(a, b):
            assert u.shape == v.shape and u.dtype == v.dtype, kw
            if u.dtype == np.int32:
                assert (u == v).all(), kw
            else:
                assert np.allclose(u, v, rtol=0, atol=2 ** -20, equal_nan=True), kw


def test_an_out_overlapping_the_input_is_refused():
    """out= is checked as at every door: an out= sharing the input's memory is refused."""
    x = logits(np.random.default_rng(6), (1, 4, 2, 3))
    img = image_of(x, "in_out_channel")
    buf = np.zeros(img.nbytes, np.uint8)
    src = buf.view(np.float32).reshape(img.shape)
    src[...] = img
    out = buf[:4 * 6].view(np.int32).reshape(1, 2, 3)
    with pytest.raises(ClayoutError, match="read_output: out= overlaps the input"):
        read_output(src, "in_out_channel", x.shape, argmax=True, engine="cpu", out=out)
    assert (read_output(src, "in_out_channel", x.shape, argmax=True, engine="cpu")
            == np.argmax(x, axis=1)).all()
