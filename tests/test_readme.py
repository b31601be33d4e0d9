"""The README's Python examples run as written (the docs stay true)."""
import re
from pathlib import Path

import numpy as np

BLOCKS = re.findall(r"```python\n(.*?)```",
                    (Path(__file__).resolve().parents[1] / "README.md").read_text(), re.S)


def test_api_example_runs():
    ns = {}
    exec(BLOCKS[0], ns)
    assert ns["blocked"][:8].tolist() == [0, 6, 12, 18, 1, 7, 13, 19]
    assert ns["img"][0, 3].tolist() == [24, 30, 0, 0]


def test_opencl_example_runs(cl_engine):
    dims = (1, 6, 2, 3)
    x = np.arange(36, dtype=np.float32).reshape(dims)
    ns = {"nchw_array": x, "dims": dims}
    exec(BLOCKS[1].replace("    ...", "    seen = a.copy()"), ns)
    assert np.array_equal(ns["seen"], x.transpose(0, 2, 3, 1).reshape(-1))
