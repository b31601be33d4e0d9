"""What the H100 record's memory system makes of the kernels its plans run
for the bench's moves (runtime/opencl/access.py): the goals a GPU kernel
is held to, in numbers, so that a kernel that loses bandwidth on a GPU fails
here, on machines without one (docs/performance.md has the table, today's
and before the kernels were changed).

Per move, size and kind of program (baked, generic): global loads at least
0.9 of the bytes they move (byte-weighted over 32-byte sectors), stores 0.95
as a compiler emits them (no vector split into scalars), 0.9 of a warp's
lanes active, at most 1.1 local-memory wavefronts a request, and at
1x64x512x512 at least two waves of work-groups over the 132 SMs. Where a
layout itself forbids a goal, the exception is named with its reason.
"""
import pytest

from runtime import ImageDesc, MemoryDesc, image_layout
from runtime.opencl.access import model_move
from runtime.opencl.gpus import GPUS

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/access.py", "runtime/opencl/tiled.py")

H100 = GPUS["h100"]
MOVES = {"NCHW->NHWC": ("nchw", "nhwc"), "NHWC->NCHW": ("nhwc", "nchw"),
         "NCHW->nChw16c": ("nchw", "nChw16c"), "nChw16c->NCHW": ("nChw16c", "nchw"),
         "NHWC->in_out_channel": ("nhwc", "image:in_out_channel"),
         "NCHW->in_out_channel": ("nchw", "image:in_out_channel"),
         "OIHW->conv2d_filter": ("oihw", "image:conv2d_filter")}
SIZES = {"1x64x512x512": (1, 64, 512, 512), "1x3x224x224": (1, 3, 224, 224),
         "512x512x3x3": (512, 512, 3, 3)}
GOALS = {"loads": 0.9, "stores": 0.95, "lanes": 0.9, "wavefronts": 1.1, "waves": 2.0}
# (move, size, figure): (what it holds instead, why)
EXCEPTIONS = {
    ("nChw16c->NCHW", "1x3x224x224", "loads"):
        (0.3, "the source's 16c block holds 3 channels and 13 zeros: each 32-byte sector "
              "read holds 3 wanted floats of 8"),
}


def _cases():
    for move in MOVES:
        filt = move.startswith("OIHW")
        for size in SIZES:
            if (size == "512x512x3x3") != filt:
                continue
            for bake in (True, False):
                yield move, size, bake


_MODELS = {}


def _model(base, move, size, bake):
    key = (move, size, bake)
    if key not in _MODELS:
        src_tag, dst = MOVES[move]
        dims = SIZES[size]
        src = MemoryDesc(dims, tag=src_tag)
        target = ImageDesc(image_layout(dst[6:]), dims) if dst.startswith("image:") else \
            MemoryDesc(dims, tag=dst)
        _MODELS[key] = model_move(src, target, H100, base, bake=bake)
    return _MODELS[key]


def _held(move, size, figure, value, goal, at_least=True):
    """(ok, words) of one figure against its goal or its named exception."""
    if value is None:
        return True, ""
    goal, why = EXCEPTIONS.get((move, size, figure), (goal, ""))
    ok = value >= goal if at_least else value <= goal
    return ok, f"{figure} {value:.3f} {'>=' if at_least else '<='} {goal}" + \
        (f" (named: {why})" if why else "")


@pytest.mark.parametrize("move, size, bake", list(_cases()),
                         ids=lambda c: c if isinstance(c, str) else
                         "baked" if c is True else "generic" if c is False else str(c))
def test_the_h100_record_holds_the_goals(default_cl_engine, move, size, bake):
    m = _model(default_cl_engine.device, move, size, bake)
    f = m.figures
    assert f.complete and m.kernel.generic != bake
    checks = [_held(move, size, "loads", f.loads.efficiency, GOALS["loads"]),
              _held(move, size, "stores", f.stores.efficiency_as_emitted, GOALS["stores"]),
              _held(move, size, "lanes", f.active_lanes, GOALS["lanes"]),
              _held(move, size, "wavefronts", f.local_wavefronts_per_request,
                    GOALS["wavefronts"], at_least=False)]
    if size == "1x64x512x512":
        checks.append(_held(move, size, "waves", f.waves, GOALS["waves"]))
    failed = [words for ok, words in checks if not ok]
    assert not failed, f"{move} {size} ({m.family}): {failed}"


def test_every_named_exception_is_still_needed(default_cl_engine):
    """An exception the kernels no longer need is dropped, not kept as slack."""
    for (move, size, figure), (floor, _) in EXCEPTIONS.items():
        f = _model(default_cl_engine.device, move, size, False).figures
        value = {"loads": f.loads.efficiency}[figure]
        assert floor <= value < GOALS[figure], (move, size, figure, value)


def test_the_filter_fills_the_gpu(default_cl_engine):
    """A 512x512x3x3 filter's tiles: 32 input channels by the 9 taps merged
    (kh, kw run on in both layouts), 2048 work-groups: 1.94 waves of 1056
    (8 groups of 256 on each of 132 SMs), against 768 groups and 0.73 waves
    of its 4-wide tiles before the taps were merged."""
    f = _model(default_cl_engine.device, "OIHW->conv2d_filter", "512x512x3x3", True).figures
    assert f.groups == 2048 and f.waves > 1.9
