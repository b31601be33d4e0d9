"""The README's Python examples run as written (the docs stay true)."""
import re
from pathlib import Path

import numpy as np

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cli/parser.py",)

BLOCKS = re.findall(r"```python\n(.*?)```",
                    (Path(__file__).resolve().parents[2] / "README.md").read_text(), re.S)


def test_api_example_runs():
    ns = {}
    exec(BLOCKS[0], ns)
    assert ns["blocked"][:8].tolist() == [0, 6, 12, 18, 1, 7, 13, 19]
    assert ns["img"][0, 3].tolist() == [24, 30, 0, 0]


def test_prepared_example_runs():
    block = next(b for b in BLOCKS if "runtime.prepare" in b)
    ns = {}
    exec(block, ns)
    assert (ns["img"][..., :3] == 2).all() and (ns["img"][..., 3] == 0).all()
    logits = np.random.default_rng(0).standard_normal((1, 1000)).astype(np.float32)
    idx, _ = ns["top5"](__import__("runtime").to_image(logits, "in_out_channel", src="nc"))
    assert idx[:, 1].tolist() == np.argsort(-logits[0])[:5].tolist()


def test_opencl_example_runs(cl_engine):
    dims = (1, 6, 2, 3)
    x = np.arange(36, dtype=np.float32).reshape(dims)
    ns = {"nchw_array": x, "dims": dims}
    block = next(b for b in BLOCKS[1:] if "    ..." in b)
    exec(block.replace("    ...", "    seen = a.copy()"), ns)
    assert np.array_equal(ns["seen"], x.transpose(0, 2, 3, 1).reshape(-1))


def test_frame_example_runs():
    """The chain and the one call agree within 2 pixel units (values times std)."""
    from conftest import needs
    cv2 = needs("cv2")
    block = next(b for b in BLOCKS if "from_frame" in b)
    rng = np.random.default_rng(0)
    smooth = np.add.outer(np.arange(540) % 200, np.arange(640) % 50).astype(np.uint8)
    nv21 = np.clip(smooth + rng.integers(0, 6, smooth.shape), 0, 255).astype(np.uint8)
    import runtime
    ns = {"cv2": cv2, "np": np, "runtime": runtime, "nv21": nv21,
          "mean": np.array((123.675, 116.28, 103.53), np.float32),
          "std": np.array((58.395, 57.12, 57.375), np.float32)}
    exec(block.replace("img = runtime.to_image(x[None]", "chain = runtime.to_image(x[None]"), ns)
    got, chain = ns["img"].astype(np.float64), ns["chain"].astype(np.float64)
    assert got.shape == chain.shape == (320, 320, 4)
    # f16 rounding adds up to 0.002 of a value, 0.12 pixel units at std 58
    assert (np.abs(got[..., :3] - chain[..., :3]) * ns["std"]).max() <= 2.2


def test_outputs_example_runs(cl_engine):
    """The Outputs block, with a network that hands its input on and outputs
    already on the device."""
    import runtime
    block = next(b for b in BLOCKS if "read_output" in b)
    rng = np.random.default_rng(3)
    seg = rng.standard_normal((1, 21, 8, 8)).astype(np.float32)
    mem = lambda x: runtime.Memory.image("in_out_channel", x.shape, "f32", engine=cl_engine,  # noqa: E731
                                         data=runtime.to_image(x, "in_out_channel"))
    logits = rng.standard_normal((1, 1000)).astype(np.float32)
    ns = {"runtime": runtime, "network": lambda m: m, "inp": mem(seg),
          "scores": mem(rng.standard_normal((1, 16, 4, 4)).astype(np.float32) - 1),
          "logits_img": runtime.to_image(logits, "in_out_channel", src="nc")}
    exec(block, ns)
    assert (ns["mask"] == np.argmax(seg, axis=1)).all()
    assert (ns["pending"].result() == ns["mask"]).all()
    assert ns["probs"].shape == (1, 1000) and abs(float(ns["probs"].sum()) - 1) < 1e-5
    assert ns["idx"].shape[1] == 4 and (ns["val"] > 0.5).all()


def test_the_synopsis_lists_every_command():
    import argparse
    from runtime.cli.parser import build_parser
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    synopsis = readme.split("## Command line", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    listed = {line.split()[1] for line in synopsis.splitlines() if line.startswith("clayout ")}
    assert set(sub.choices) <= listed, set(sub.choices) - listed
    assert len(readme.splitlines()) <= 250
