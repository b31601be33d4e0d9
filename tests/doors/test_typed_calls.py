"""Typed calls and one kind of limit.

Each door parses its arguments into one frozen call of its kind
(runtime/doors/calls.py) and converts it with ``apply()``; nothing dispatches on a
door's name. The command line builds each call once: an image side and a
tile plan are made once per command (counted here). Below the doors a
device's limits are a ``Limits``: a (width, height) is converted where it is
given, and nowhere else.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime.doors import calls
from runtime.algebra import tiles
from runtime.algebra.layout import ImageDesc
from runtime.algebra.side import Side
from runtime.doors.parse import parse_from_frame, parse_from_image, parse_reorder, parse_to_image
from runtime.doors.checks import SIDES
from conftest import run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/layout.py", "runtime/algebra/side.py", "runtime/algebra/tiles.py",
           "runtime/doors/__init__.py", "runtime/doors/calls.py", "runtime/doors/checks.py",
           "runtime/doors/parse.py")

RUNTIME = Path(runtime.__file__).resolve().parent
X = np.arange(1 * 5 * 3 * 7, dtype=np.float32).reshape(1, 5, 3, 7)


def test_each_door_builds_a_call_of_its_kind():
    desc = runtime.MemoryDesc(X.shape, "f32")
    blocked = runtime.MemoryDesc(X.shape, "f32", tag="nChw8c")
    cases = [
        (parse_reorder(X, desc, blocked, engine="cpu"), calls.ReorderCall),
        (parse_to_image(X, "in_out_channel", engine="cpu"), calls.ToImageCall),
        (parse_to_image(X, "in_out_channel", engine="cpu", max_image=(4, 2)), calls.ToTilesCall),
        (parse_to_image(X, "in_out_channel", engine="cpu", row_pitch=256), calls.ToImageCall),
        (parse_from_image(runtime.to_image(X, "in_out_channel"), "in_out_channel", X.shape,
                          engine="cpu"), calls.FromImageCall),
        (parse_from_image(runtime.to_image(X, "in_out_channel", max_image=(4, 2)),
                          "in_out_channel", X.shape, engine="cpu"), calls.FromTilesCall),
        (parse_from_frame(np.zeros((6, 4, 3), np.uint8), "nchw", format="rgb", engine="cpu"),
         calls.FrameCall),
        (parse_reorder(runtime.Memory.from_numpy(X, desc, engine="cpu"), None, blocked),
         calls.MemoryCall),
        (parse_from_frame(runtime.Memory(runtime.MemoryDesc((6, 4, 3), "u8"),
                                         engine=runtime.engine.get("cpu"),
                                         data=np.zeros((6, 4, 3), np.uint8)),
                          "nchw", format="rgb"), calls.MemoryFrameCall),
    ]
    for call, kind in cases:
        assert type(call) is kind, (call, kind)
        assert not hasattr(call, "door")
        assert isinstance(call.src, Side) and isinstance(call.dst, Side)   # buffer, image, frame
        assert call.src.dtype is not None
        assert call.src.is_frame == (kind in (calls.FrameCall, calls.MemoryFrameCall))
        with pytest.raises(AttributeError):   # frozen: what the door decided stays decided
            call.engine = None
    tiles_call = cases[2][0]
    assert tiles_call.tiles.split and len(tiles_call.apply()) == len(tiles_call.tiles.tiles)
    back = cases[5][0].apply()
    assert np.array_equal(back, X)
    sampled = cases[-1][0].apply()   # the frame's Memory, sampled onto a new Memory
    assert sampled.dims == (1, 3, 6, 4) and not sampled.to_numpy().any()


def test_no_code_dispatches_on_a_door_name():
    text = "".join(p.read_text() for p in (RUNTIME / "doors").glob("*.py"))
    assert not re.search(r"\bdoor\s*==|\.door\b|door:\s*str", text)


class Counter:
    """Calls of the functions ``codes`` names, counted with a profile hook
    (callers import them by name, so patching a module attribute would miss them)."""

    def __init__(self, **codes):
        self.codes = {fn.__code__: name for name, fn in codes.items()}
        self.counts = dict.fromkeys(codes, 0)

    def __enter__(self):
        def hook(frame, event, arg):
            if event == "call" and frame.f_code in self.codes:
                self.counts[self.codes[frame.f_code]] += 1
        sys.setprofile(hook)
        return self.counts

    def __exit__(self, *exc):
        sys.setprofile(None)


@pytest.mark.parametrize("max_image, n_tiles", [(None, 0), ("4,2", 8)])
def test_the_cli_builds_each_side_and_tile_plan_once(tmp_path, capsys, max_image, n_tiles):
    src = tmp_path / "x.npy"
    np.save(src, X)
    img = tmp_path / "img.npy"
    limit = ["--max-image", max_image] if max_image else []
    SIDES.clear()
    with Counter(image=ImageDesc.__init__, plan=tiles.tile_plan) as counts:
        code, out, err = run(capsys, "to-image", src, "-o", img, "--layout", "in_out_channel",
                             *limit)
    assert code == 0, err
    assert counts == {"image": 1, "plan": 1 if max_image else 0}, out
    assert out.startswith(f"wrote {n_tiles} tiles" if n_tiles else f"wrote {img}")
    back = tmp_path / "back.npy"
    SIDES.clear()
    with Counter(image=ImageDesc.__init__, plan=tiles.tile_plan) as counts:
        code, out, err = run(capsys, "from-image", img, "-o", back, "--layout", "in_out_channel",
                             "--dims", "1,5,3,7", *limit)
    assert code == 0, err
    assert counts == {"image": 1, "plan": 1 if max_image else 0}, out
    assert np.array_equal(np.load(back), X)


def test_the_cli_refuses_an_empty_image_in_its_own_words(tmp_path, capsys):
    src = tmp_path / "empty.npy"
    np.save(src, np.zeros((1, 0, 3, 3), np.float32))
    code, out, err = run(capsys, "to-image", src, "-o", tmp_path / "o.npy",
                         "--layout", "in_out_channel")
    assert code == 1 and f"{src}: dims 1,0,3,3 hold no elements" in err
    assert "OpenCL cannot create" in err and not (tmp_path / "o.npy").exists()
    # the API takes the empty tensor: a host array of no elements is a fine answer
    assert runtime.to_image(np.zeros((1, 0, 3, 3), np.float32), "in_out_channel").size == 0


def test_max_image_is_a_limits_or_a_pair_at_every_door():
    limits = runtime.Limits.of((4, 2))
    by_pair = runtime.to_image(X, "in_out_channel", max_image=(4, 2))
    by_limits = runtime.to_image(X, "in_out_channel", max_image=limits)
    assert len(by_pair) == len(by_limits) == 8
    assert all(np.array_equal(a, b) for a, b in zip(by_pair, by_limits))
    plan = runtime.tile_plan(ImageDesc(runtime.image_layout("in_out_channel"), X.shape), limits)
    assert plan == runtime.tile_plan(plan.side, (4, 2))
    # a storage that is not cut must fit what the limit implies, at the API as on the CLI
    with pytest.raises(runtime.ClayoutError, match="image3d.*over the device limit 2x2x"):
        runtime.to_image(X, "tflite_texture_3d", max_image=(2, 2))
    with pytest.raises(runtime.ClayoutError, match=r"max_image \(4, 0\).*at least 1"):
        runtime.to_image(X, "in_out_channel", max_image=(4, 0))


# the modules where a limit argument is taken as given, and converted once: the
# doors (and the command line's), the public tile and placement functions, the
# model's options, the peers' facts, and Limits and its converter themselves
DOORS = {"doors/parse.py", "placement.py", "algebra/tiles.py", "algebra/storage.py",
         "algebra/peers.py", "model/plan.py"}


def test_limits_are_one_type_below_the_doors():
    """No engine or device speaks of ``image_limits`` / ``storage_limits``
    (one ``limits``, a Limits); a (width, height) becomes a Limits only in
    the modules that take one from a caller."""
    found = {}
    for path in RUNTIME.rglob("*.py"):
        rel = path.relative_to(RUNTIME).as_posix()
        text = path.read_text()
        assert not re.search(r"\b(image_limits|storage_limits)\b", text), rel
        if re.search(r"Limits\.of\(|\bas_limits\(|\bimage_limit\(", text) and \
                not rel.startswith("cli/"):
            found[rel] = True
    assert set(found) <= DOORS, sorted(set(found) - DOORS)
    eng = runtime.engine.get("cpu")
    assert eng.limits is None
    with pytest.raises(TypeError, match="a storage.Limits or None"):
        runtime.algebra.catalog.check_fits(
            ImageDesc(runtime.image_layout("in_out_channel"), X.shape), (4, 4))


def test_a_storage_names_its_own_bound():
    limits = runtime.Limits((16, 8), (4, 4, 2), 3, 100, 4096)
    bounds = {name: limits.bounds(store) for name, store in
              runtime.algebra.storage.STORAGES.items()}
    assert bounds == {"image2d": (16, 8), "image2d_array": (16, 8, 3), "image3d": (4, 4, 2),
                      "image_buffer": (100,), "buffer": (1024,)}
    storage = (RUNTIME / "algebra" / "storage.py").read_text()
    limits_class = storage[storage.index("class Limits"):]
    assert "store.name" not in limits_class   # facts of the Storage record, never its name
