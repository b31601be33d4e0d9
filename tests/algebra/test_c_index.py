"""The index emitter's arithmetic: magic-number division is exact for every
index below 2**31 and every divisor a generic kernel can be given."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.algebra.c_index import DIV_BITS, magic
from strategies import scaled

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/__init__.py", "runtime/algebra/c_index.py")

LIMIT = 2 ** DIV_BITS


def _check(d: int, n: np.ndarray) -> None:
    m, s = magic(d)
    assert m < 2 ** 32 and s < 64        # a uint argument; the product fits in 64 bits
    n = n[(n >= 0) & (n < LIMIT)].astype(object)    # exact Python integers
    got = np.array([(int(v) * m) >> s for v in n], dtype=object)
    assert np.array_equal(got, n // d), d


def _edges(d: int) -> np.ndarray:
    k = np.arange(0, LIMIT // d + 2, max(1, (LIMIT // d) // 200), dtype=np.int64)
    return np.concatenate([k * d - 1, k * d, k * d + 1, [LIMIT - 1, LIMIT - 2, d - 1, d]])


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 56, 224, 3136, 50176, 2 ** 16 + 1, 2 ** 20 - 3,
                               2 ** 30, 2 ** 30 + 1, 2 ** 31 - 1])
def test_magic_division_at_the_edges(d):
    _check(d, _edges(d))


@scaled(2.5)   # 300 examples in the thorough tier (the count before tiers), 125 in ci
@given(st.integers(1, LIMIT - 1), st.lists(st.integers(0, LIMIT - 1), min_size=1, max_size=50))
def test_magic_division_is_exact(d, ns):
    _check(d, np.array(ns + [LIMIT - 1], dtype=np.int64))


@pytest.mark.parametrize("d", [0, -1, LIMIT])
def test_magic_refuses_divisors_it_cannot_serve(d):
    with pytest.raises(ValueError):
        magic(d)
