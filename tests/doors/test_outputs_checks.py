"""read_output takes host arrays under the other doors' rules (a buffer 1-D
or exactly its physical shape; an image exactly its host shape with every
padding lane 0), and ranks a threshold's top_k by one rule on every engine
(x for none and sigmoid, never a saturated float64 sigmoid)."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime import ClayoutError, read_output

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/doors/read_output.py", "runtime/doors/checks.py",
           "runtime/algebra/output_math.py", "runtime/cpu/outputs.py")


def engines(cl_engine):
    return [("reference", "reference"), ("cpu", "cpu"), ("opencl", cl_engine)]


def test_a_buffer_of_another_shape_is_refused_as_reorder_refuses_it(cl_engine):
    """(1, 6, 7, 5) holds as many elements as nchw (1, 6, 5, 7): before, every
    engine read it as that and returned a (1, 5, 7) result."""
    x = np.zeros((1, 6, 7, 5), np.float32)
    for name, eng in engines(cl_engine):
        with pytest.raises(ClayoutError, match="a shape that only matches in size is refused"):
            read_output(x, "nchw", (1, 6, 5, 7), argmax=True, engine=eng)
        with pytest.raises(ClayoutError, match="a shape that only matches in size is refused"):
            runtime.reorder(x, runtime.MemoryDesc((1, 6, 5, 7)),
                            runtime.MemoryDesc((1, 6, 5, 7), tag="nhwc"), engine=eng)
    # the physical shape and the 1-D physical elements are taken, as reorder takes them
    y = np.arange(210, dtype=np.float32).reshape(1, 6, 5, 7)
    nhwc = np.ascontiguousarray(y.transpose(0, 2, 3, 1))
    for name, eng in engines(cl_engine):
        want = np.argmax(y, axis=1)
        assert (read_output(y, "nchw", y.shape, argmax=True, engine=eng) == want).all(), name
        assert (read_output(y.reshape(-1), "nchw", y.shape, argmax=True, engine=eng)
                == want).all(), name
        assert (read_output(nhwc, "nhwc", y.shape, argmax=True, engine=eng) == want).all(), name


def test_a_view_of_a_buffer_is_read_through_its_strides(cl_engine):
    big = np.arange(2 * 6 * 5 * 9, dtype=np.float32).reshape(2, 6, 5, 9)
    view = big[:1, :, :, 1:8]
    want = np.argmax(view, axis=1)
    for name, eng in engines(cl_engine):
        got = read_output(view, "nchw", view.shape, argmax=True, engine=eng)
        assert (got == want).all(), name


def test_a_host_image_read_with_dims_one_channel_short_is_refused(cl_engine):
    """The issue's case: channel 5 (the largest) sits in a padding lane of
    dims 1x5x5x7; before, every engine answered class 2."""
    y = np.zeros((1, 6, 5, 7), np.float32)
    y[:, 5] = 10
    y[:, 2] = 1
    img = runtime.to_image(y, "in_out_channel")
    for name, eng in engines(cl_engine):
        with pytest.raises(ClayoutError, match="padding lane at x=7, y=0 lane 1"):
            read_output(img, "in_out_channel", (1, 5, 5, 7), argmax=True, engine=eng)
        with pytest.raises(ClayoutError, match="padding lane at x=7, y=0 lane 1"):
            runtime.from_image(img, "in_out_channel", (1, 5, 5, 7), engine=eng)
        assert (read_output(img, "in_out_channel", (1, 6, 5, 7), argmax=True, engine=eng)
                == 5).all(), name
        # the way out, as from_image's: another engine's garbage in the tails
        got = read_output(img, "in_out_channel", (1, 5, 5, 7), argmax=True, engine=eng,
                          check_padding=False)
        assert (got == 2).all(), name


def test_a_host_image_of_another_shape_is_refused(cl_engine):
    img = runtime.to_image(np.zeros((1, 6, 5, 7), np.float32), "in_out_channel")
    for name, eng in engines(cl_engine):
        with pytest.raises(ClayoutError, match="does not match layout 'in_out_channel'"):
            read_output(img.reshape(14, 5, 4), "in_out_channel", (1, 6, 5, 7), argmax=True,
                        engine=eng)


@pytest.mark.parametrize("kwargs, words", [
    (dict(threshold="0.5"), r"threshold='0.5'; allowed: a number"),
    (dict(threshold=True), r"threshold=True; allowed: a number"),
    (dict(threshold=[0.5]), r"threshold=\[0.5\]; allowed: a number"),
])
def test_arguments_of_the_wrong_type_are_refused(kwargs, words):
    x = np.zeros((1, 3, 2, 2), np.float32)
    with pytest.raises(ClayoutError, match=words):
        read_output(x, "nchw", x.shape, engine="cpu", **kwargs)


def test_sigmoid_top_k_ranks_by_x_on_every_engine(cl_engine):
    """The issue's case: x = 40, 50, 30, 45 all saturate float64's sigmoid to
    1.0; the reference ranked those ties by index ([0, 1] first), the others
    by x ([0, 1] then [0, 3])."""
    x = np.array([[40., 50., 30., 45.]], np.float32)
    img = runtime.to_image(x, "in_out_channel")
    for name, eng in engines(cl_engine):
        idx, val = read_output(img, "in_out_channel", x.shape, activation="sigmoid",
                               threshold=0.5, top_k=2, engine=eng)
        assert idx.tolist() == [[0, 1], [0, 3]], name
        assert val.tolist() == [1.0, 1.0], name


def test_saturating_logits_select_and_rank_the_same_everywhere(cl_engine):
    """Pose-model-like logits: most far past sigmoid's saturation, ties in x
    too (broken by the lower flat index); every engine the same top 100."""
    rng = np.random.default_rng(3)
    x = rng.choice(np.arange(-60, 80, 0.5, dtype=np.float32), size=(1, 17, 12, 9))
    img = runtime.to_image(x, "in_out_channel")
    key = x.reshape(-1)
    order = np.lexsort((np.arange(key.size), -key.astype(np.float64)))
    want = np.stack(np.unravel_index(order[:100], x.shape), 1)
    for name, eng in engines(cl_engine):
        idx, _ = read_output(img, "in_out_channel", x.shape, activation="sigmoid",
                             threshold=0.5, top_k=100, engine=eng)
        assert idx.tolist() == want.tolist(), name


def test_dequantized_keys_rank_by_the_float32_x(cl_engine):
    """x = float32(q - z) * scale: two q whose float32 products tie rank by
    index on every engine (a float64 x would tell them apart)."""
    q = np.array([[16777216, 16777217, 3, 16777218]], np.int32)   # 2**24 + 1 rounds to 2**24
    for name, eng in engines(cl_engine):
        idx, _ = read_output(q, "nc", q.shape, dequantize=(1.0, 0), threshold=0.0, top_k=3,
                             engine=eng)
        assert idx.tolist() == [[0, 3], [0, 0], [0, 1]], name
