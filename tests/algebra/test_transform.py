"""The transform stage: a layout whose images hold values computed from the
tensor (U = G·g·Gᵀ), run between the two sides by every engine.

No named layout has a transform yet; these tests build one (the F(2,3)
matrix of a Winograd filter on conv2d_filter's placement) and check that the
cpu engine, the reference and the opencl engine give the same bits, that
the image holds the placement of the documented float32 evaluation, that it
stays within rounding of an exact (float64) evaluation, and that from_image
gives the tensor back through the pseudo-inverse."""
import numpy as np
import pytest

import runtime
from conftest import bits
from runtime import ClayoutError, ImageDesc, ImageLayout, MemoryDesc, Transform
from runtime.algebra.conversion import Apply, Move, stages

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/conversion.py", "runtime/algebra/transform.py",
           "runtime/opencl/transform.py")

G23 = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
WINO = ImageLayout("test_winograd", "Acdb4a", 3, kind="filter",
                   transform=Transform("F(2,3)", G23, axes=(2, 3)))
PLACED = ImageLayout("test_winograd", "Acdb4a", 3, kind="filter")


def weights(dims, seed=0):
    return np.random.default_rng(seed).standard_normal(dims).astype(np.float32)


def test_the_image_is_the_placement_of_the_f32_evaluation():
    g = weights((5, 3, 3, 3))
    u = WINO.transform.apply(g)
    assert u.shape == (5, 3, 4, 4) and u.dtype == np.float32
    want = runtime.to_image(u, PLACED, engine="reference")
    for eng in ("cpu", "reference"):
        assert np.array_equal(bits(runtime.to_image(g, WINO, engine=eng)), bits(want)), eng


def test_every_engine_gives_the_same_bits(cl_engine):
    for dims in ((1, 1, 3, 3), (5, 3, 3, 3), (17, 4, 3, 3)):
        g = weights(dims, sum(dims))
        g.reshape(-1)[::7] = 0.1
        for dtype in ("f32", "f16"):
            images = [runtime.to_image(g, WINO, dtype=dtype, engine=e)
                      for e in ("reference", "cpu", cl_engine)]
            for img in images[1:]:
                assert np.array_equal(bits(img), bits(images[0])), (dims, dtype)


def test_within_rounding_of_the_exact_transform():
    g = weights((8, 6, 3, 3), 1)
    exact = np.einsum("Ia,oiab,Jb->oiIJ", np.array(G23), g.astype(np.float64), np.array(G23))
    u = WINO.transform.apply(g).astype(np.float64)
    # each output sums 9 rounded products in 4 rounded additions: a few ulps of the terms
    terms = np.einsum("Ia,oiab,Jb->oiIJ", np.abs(G23), np.abs(g.astype(np.float64)),
                      np.abs(G23))
    assert np.all(np.abs(u - exact) <= 8 * np.finfo(np.float32).eps * terms)


def test_from_image_inverts_the_transform():
    g = weights((5, 3, 3, 3), 2)
    img = runtime.to_image(g, WINO)
    for eng in ("cpu", "reference"):
        back = runtime.from_image(img, WINO, g.shape, engine=eng)
        assert back.dtype == np.float32 and back.shape == g.shape
        np.testing.assert_allclose(back, g, rtol=0, atol=4e-6 * np.abs(g).max())
    assert np.array_equal(bits(runtime.from_image(img, WINO, g.shape, engine="cpu")),
                          bits(runtime.from_image(img, WINO, g.shape, engine="reference")))


def test_memory_on_the_device_gives_the_host_bits(cl_engine):
    g = weights((6, 5, 3, 3), 3)
    mem = runtime.Memory.from_numpy(g.reshape(-1), MemoryDesc(g.shape), engine=cl_engine)
    img = runtime.to_image(mem, WINO)
    assert np.array_equal(bits(img.to_numpy()), bits(runtime.to_image(g, WINO)))
    back = runtime.from_image(img, WINO, g.shape)
    assert np.array_equal(bits(back.to_numpy()),
                          bits(runtime.from_image(img.to_numpy(), WINO, g.shape).reshape(-1)))


def test_the_stages():
    src = MemoryDesc((2, 3, 3, 3), tag="ohwi")
    image = ImageDesc(WINO, (2, 3, 3, 3))
    steps = stages(src, image)
    assert [type(s) for s in steps] == [Move, Apply, Move]
    assert steps[1].src == MemoryDesc((2, 3, 3, 3)) and steps[1].dst == MemoryDesc((2, 3, 4, 4))
    assert steps[2].dst == ImageDesc(PLACED, (2, 3, 4, 4))
    back = stages(image, MemoryDesc((2, 3, 3, 3), "bf16"))
    assert [type(s) for s in back] == [Move, Apply, Move] and back[1].inverse
    assert image.placed == (2, 3, 4, 4) and image.extent == (3, 16, 1)


def test_wrong_input_is_one_clear_error():
    with pytest.raises(ClayoutError, match=r"takes 3 along axes \[2, 3\]"):
        runtime.to_image(weights((2, 3, 5, 5)), WINO)
    with pytest.raises(ClayoutError, match="f32 or f16, not s8"):
        runtime.to_image(weights((2, 3, 3, 3)), WINO, dtype="s8")
    with pytest.raises(ClayoutError, match="not s32"):
        runtime.from_image(runtime.to_image(weights((2, 3, 3, 3)), WINO), WINO, (2, 3, 3, 3),
                           dtype="s32")
    with pytest.raises(ClayoutError, match="T rows of r numbers"):
        Transform("bad", ((1.0, 2.0), (1.0,)), axes=(0,))
