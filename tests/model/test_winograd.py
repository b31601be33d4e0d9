"""Winograd filter images (docs/winograd.md): every engine's layout, both ways,
and from one engine's to another's.

The facts below are written here a second time, independently of the
catalog: each engine's G as exact fractions, and each image formula in the
direction the engines' sources read it ((o, i, u, v) of U -> pixel). The
images are checked against an einsum of G·g·Gᵀ in float64 within the
documented bound, the three engines against each other bit for bit."""
from fractions import Fraction as F
import itertools
import math
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime
from conftest import bits
from runtime import ClayoutError, ImageDesc
from strategies import FEW
from runtime.winograd import ENGINES, WINOGRAD_LAYOUTS, convert_bound, convert_winograd

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/winograd.py",)

P = math.sqrt(2) / 2


def cdiv(a, b):
    return -(-a // b)


# name -> (G rows, transformed axes, (o, i, u, v, O, I) -> (x, y, lane), (O, I) -> (width, height))
FACTS = {
    "winograd_2x3_mace": (
        [[1, 0, 0], [F(1, 2)] * 3, [F(1, 2), F(-1, 2), F(1, 2)], [0, 0, 1]], (2, 3),
        lambda o, i, u, v, O, I: (i // 4, (u * 4 + v) * O + o, i % 4),
        lambda O, I: (cdiv(I, 4), 16 * O)),
    "winograd_4x3_mace": (
        [[F(1, 4), 0, 0], [F(-1, 6)] * 3, [F(-1, 6), F(1, 6), F(-1, 6)],
         [F(1, 24), F(1, 12), F(1, 6)], [F(1, 24), F(-1, 12), F(1, 6)], [0, 0, 1]], (2, 3),
        lambda o, i, u, v, O, I: (i // 4, (u * 6 + v) * O + o, i % 4),
        lambda O, I: (cdiv(I, 4), 36 * O)),
    "winograd_2x3_mnn": (
        [[a ** y if a is not None else int(y == 2) for y in range(3)] for a in (0, 1, -1, None)],
        (2, 3),
        lambda o, i, u, v, O, I: (i, (u * 4 + v) * cdiv(O, 4) + o // 4, o % 4),
        lambda O, I: (4 * cdiv(I, 4), 16 * cdiv(O, 4))),
    "winograd_2x5_mnn": (
        [[a ** y if a is not None else int(y == 4) for y in range(5)]
         for a in (0, 1, -1, 2, -2, None)], (2, 3),
        lambda o, i, u, v, O, I: (i, (u * 6 + v) * cdiv(O, 4) + o // 4, o % 4),
        lambda O, I: (4 * cdiv(I, 4), 36 * cdiv(O, 4))),
    "winograd_4x3_tflite": (   # image j = i % 4 of four, one above the other
        [[1, 0, 0], [1, P, 0.5], [1, -P, 0.5], [1, 2 * P, 2], [1, -2 * P, 2], [0, 0, 1]], (2, 3),
        lambda o, i, u, v, O, I: (o // 4, (i % 4) * 36 * cdiv(I, 4) + (u * 6 + v) * cdiv(I, 4)
                                  + i // 4, o % 4),
        lambda O, I: (cdiv(O, 4), 4 * 36 * cdiv(I, 4))),
    "image_2d_weights_winograd_6x3_s1_fbxyb": (
        [[1, 0, 0], [F(-2, 9)] * 3, [F(-2, 9), F(2, 9), F(-2, 9)], [F(1, 90), F(2, 90), F(4, 90)],
         [F(1, 90), F(-2, 90), F(4, 90)], [F(64, 90), F(32, 90), F(16, 90)],
         [F(64, 90), F(-32, 90), F(16, 90)], [0, 0, 1]], (2,),
        lambda o, i, t, kx, O, I: ((o // 16) * 384 + t * 48 + kx * 16 + o % 16, i, 0),
        lambda O, I: (384 * cdiv(O, 16), I)),
}
FACTS["image_2d_weights_winograd_6x3_s1_xfbyb"] = FACTS["image_2d_weights_winograd_6x3_s1_fbxyb"][:2] + (
    lambda o, i, t, kx, O, I: ((o // 16) * 48 + kx * 16 + o % 16, t * I + i, 0),
    lambda O, I: (48 * cdiv(O, 16), 8 * I))

NAMES = sorted(WINOGRAD_LAYOUTS)
SIZES = (1, 3, 4, 5, 17, 32)


def taps(name):
    return len(FACTS[name][0][0])


def dims_of(name, o, i):
    return (o, i, taps(name), taps(name))


def weights(dims, seed):
    g = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    g.reshape(-1)[::5] = 0
    return g


def exact(name, g):
    """G·g·Gᵀ in float64 from the facts: (O, I, T, T), or (O, I, T, kW) for clDNN."""
    G = np.array([[float(c) for c in row] for row in FACTS[name][0]])
    if FACTS[name][1] == (2,):
        return np.einsum("tp,oipq->oitq", G, g.astype(np.float64))
    return np.einsum("up,oipq,vq->oiuv", G, g.astype(np.float64), G)


def read(image, name, dims):
    """The image's value at every (o, i, u, v) of U, by the facts' formula."""
    to_pixel = FACTS[name][2]
    U = np.zeros(exact(name, np.zeros(dims)).shape)
    for idx in np.ndindex(*U.shape):
        x, y, k = to_pixel(*idx, dims[0], dims[1])
        U[idx] = image[y, x, k] if image.ndim == 3 else image[y, x]
    return U


def test_the_catalog_holds_the_documented_g():
    for name in NAMES:
        G = np.array([[float(c) for c in row] for row in FACTS[name][0]])
        t = WINOGRAD_LAYOUTS[name].transform
        assert np.array(t.matrix).shape == G.shape and np.allclose(t.matrix, G, rtol=1e-15), name
        assert t.axes == FACTS[name][1]
        assert np.linalg.matrix_rank(G) == G.shape[1], f"{name}: G has full column rank"


@pytest.mark.parametrize("name", NAMES)
def test_pixels_are_the_documented_formula(name):
    """Every element of U is where the facts say, index(pixel(i)) == i for
    the placed index, and every other lane is zero."""
    for o, i in ((1, 1), (5, 3), (17, 6), (32, 5)):
        dims = dims_of(name, o, i)
        g = weights(dims, o * 31 + i) + 0.5   # no zero in U by chance
        image = runtime.to_image(g, name, engine="reference")
        assert (image.shape[1], image.shape[0]) == FACTS[name][3](o, i)
        U = read(image, name, dims)
        bound = WINOGRAD_LAYOUTS[name].transform.forward_bound(g)
        assert np.all(np.abs(U - exact(name, g)) <= _logical(bound, U.shape)), (name, dims)
        side = ImageDesc(WINOGRAD_LAYOUTS[name], dims)
        written = np.zeros(image.shape, bool)
        for idx in np.ndindex(*side.placed):
            x, y, k = side.pixel(idx)
            assert side.index(x, y, k) == idx
            written[(y, x, k) if image.ndim == 3 else (y, x)] = True
        assert not np.any(image[~written]), f"{name} {dims}: a padding lane is not zero"


def _logical(bound, shape):
    """A placed bound (TFLite: O, ⌈I/4⌉, 4, T, T) as (O, I, T, T)."""
    if bound.shape == shape:
        return bound
    o, ib, j, t, _ = bound.shape
    return bound.reshape(o, ib * j, t, t)[:, :shape[1]]


@pytest.mark.parametrize("name", NAMES)
def test_engines_agree_and_stay_within_the_bound(name, cl_engine):
    for (o, i), dtype in itertools.product(((1, 1), (3, 17), (4, 5), (17, 3), (32, 4), (5, 32)),
                                           ("f32", "f16")):
        dims = dims_of(name, o, i)
        g = weights(dims, o * 7 + i)
        images = [runtime.to_image(g, name, dtype=dtype, engine=e)
                  for e in ("reference", "cpu", cl_engine)]
        for img in images[1:]:
            assert np.array_equal(bits(img), bits(images[0])), (name, dims, dtype)
        t = WINOGRAD_LAYOUTS[name].transform
        U = read(images[0].astype(np.float64), name, dims)
        assert np.all(np.abs(U - exact(name, g)) <= _logical(t.forward_bound(g, dtype), U.shape))
        back = runtime.from_image(images[0], name, dims, dtype="f32")
        assert np.all(np.abs(back - g) <= t.inverse_bound(g, dtype, "f32")), (name, dims, dtype)
        for e in ("reference", cl_engine):
            assert np.array_equal(bits(runtime.from_image(images[0], name, dims, engine=e)),
                                  bits(runtime.from_image(images[0], name, dims, engine="cpu")))


def test_engine_to_engine_equals_the_direct_image_within_the_bound():
    for a, b in itertools.product(NAMES, NAMES):
        if taps(a) != taps(b):
            with pytest.raises(ClayoutError, match="same kernel size"):
                convert_winograd(np.zeros(ImageDesc(WINOGRAD_LAYOUTS[a], dims_of(a, 4, 4))
                                          .array_shape, np.float32), a, b, dims_of(a, 4, 4))
            continue
        for (o, i), (da, db) in zip(((17, 5), (3, 32), (32, 1)),
                                    (("f32", "f32"), ("f16", "f32"), ("f32", "f16"))):
            dims = dims_of(a, o, i)
            g = weights(dims, o + i)
            converted = convert_winograd(runtime.to_image(g, a, dtype=da), a, b, dims, dtype=db)
            direct = runtime.to_image(g, b, dtype=db)
            assert converted.shape == direct.shape and converted.dtype == direct.dtype
            diff = np.abs(read(converted.astype(np.float64), b, dims)
                          - read(direct.astype(np.float64), b, dims))
            assert np.all(diff <= _logical(convert_bound(a, b, g, da, db), diff.shape)), (a, b)


def test_memory_on_the_device(cl_engine):
    g = weights((6, 5, 3, 3), 3)
    mem = runtime.Memory.from_numpy(g.reshape(-1), runtime.MemoryDesc(g.shape), engine=cl_engine)
    for name in NAMES:
        if taps(name) == 3:
            img = runtime.to_image(mem, name)
            assert np.array_equal(bits(img.to_numpy()), bits(runtime.to_image(g, name))), name


def test_cldnn_pads_o_to_16_with_zeros():
    g = weights((17, 2, 3, 3), 1)
    for name in ("image_2d_weights_winograd_6x3_s1_fbxyb", "image_2d_weights_winograd_6x3_s1_xfbyb"):
        image = runtime.to_image(g, name)
        padded = np.zeros((32, 2, 3, 3), np.float32)
        padded[:17] = g
        # equal values (a zero weight's U may be -0.0 where the padding is +0.0)
        assert np.array_equal(image, runtime.to_image(padded, name))
        assert not np.any(bits(image)[runtime.to_image(np.pad(np.ones((17, 2, 3, 3), np.float32),
                                                              ((0, 15),) + ((0, 0),) * 3), name)
                                      == 0])


def test_engines_table_names_winograd_layouts():
    for engine, by_size in ENGINES.items():
        for size, name in by_size.items():
            assert name in WINOGRAD_LAYOUTS and taps(name) == size, engine


def test_wrong_input_is_one_clear_error():
    g = weights((4, 4, 3, 3), 0)
    with pytest.raises(ClayoutError, match=r"takes 5 along axes \[2, 3\]"):
        runtime.to_image(g, "winograd_2x5_mnn")
    for dims in ((16, 4, 5, 3), (16, 4, 3, 2), (1, 1, 3, 1)):   # clDNN: 3x3 only
        with pytest.raises(ClayoutError, match=r"takes 3 along axes \[2, 3\]"):
            runtime.to_image(weights(dims, 0), "image_2d_weights_winograd_6x3_s1_fbxyb")
    for dtype in ("s8", "u8", "s32"):
        with pytest.raises(ClayoutError, match=f"f32 or f16, not {dtype}"):
            runtime.to_image(g, "winograd_4x3_tflite", dtype=dtype)
    with pytest.raises(ClayoutError, match="not a Winograd layout"):
        convert_winograd(np.zeros((3, 4, 4), np.float32), "conv2d_filter", "winograd_2x3_mnn",
                         (4, 4, 3, 3))
    with pytest.raises(ClayoutError, match="an array of shape"):
        convert_winograd(np.zeros((3, 4, 4), np.float32), "winograd_2x3_mace",
                         "winograd_2x3_mnn", (4, 4, 3, 3))


@FEW
@given(name=st.sampled_from(NAMES), o=st.sampled_from(SIZES + (0, 2, 16)),
       i=st.sampled_from(SIZES + (0, 2, 7)), dtype=st.sampled_from(("f32", "f16")),
       src=st.sampled_from(("oihw", "ohwi", "OIhw4i4o")), seed=st.integers(0, 2 ** 32 - 1))
def test_cpu_and_reference_over_dims_tags_and_dtypes(name, o, i, dtype, src, seed):
    """Any dims (zero-volume too), any source tag: the same bits on the cpu
    engine and the reference, and the inverse within its bound."""
    dims = dims_of(name, o, i)
    g = weights(dims, seed)
    desc = runtime.MemoryDesc(dims, "f32", tag=src)
    data = runtime.reorder(g.reshape(-1), runtime.MemoryDesc(dims), desc)
    images = [runtime.to_image(data, name, src=src, dims=dims, dtype=dtype, engine=e)
              for e in ("reference", "cpu")]
    assert np.array_equal(bits(images[0]), bits(images[1]))
    assert np.array_equal(bits(images[0]), bits(runtime.to_image(g, name, dtype=dtype)))
    back = runtime.from_image(images[1], name, dims, dtype="f32")
    assert np.all(np.abs(back - g) <= WINOGRAD_LAYOUTS[name].transform.inverse_bound(g, dtype))


@pytest.mark.parametrize("engine_name", ["cpu", "opencl"])
def test_threads_sharing_one_engine_give_the_sequential_bits(engine_name, cl_engine):
    """Eight threads, one engine: every Winograd layout to and from its image
    (host arrays, and Memory on the engine), the same bits as one thread."""
    eng = cl_engine if engine_name == "opencl" else runtime.engine.get("cpu")
    jobs = [(name, dims_of(name, o, i), dtype)
            for name, (o, i), dtype in zip(NAMES * 2, [(5, 3), (17, 4), (3, 32), (1, 1)] * 4,
                                           ["f32", "f16"] * 8)]

    def run(t):
        out = []
        for k, (name, dims, dtype) in enumerate(jobs[t:] + jobs[:t]):
            g = weights(dims, t * 100 + k)
            img = runtime.to_image(g, name, dtype=dtype, engine=eng)
            mem = runtime.Memory.from_numpy(g.reshape(-1), runtime.MemoryDesc(dims), engine=eng)
            out += [img, runtime.to_image(mem, name, dtype=dtype).to_numpy(),
                    runtime.from_image(img, name, dims, dtype="f32", engine=eng)]
        return out

    want = [run(t) for t in range(8)]
    got = [None] * 8
    start = threading.Barrier(8)

    def worker(t):
        start.wait()
        got[t] = run(t)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(8):
        assert len(got[t]) == len(want[t])
        for a, b in zip(got[t], want[t]):
            assert np.array_equal(bits(a), bits(b)), t
