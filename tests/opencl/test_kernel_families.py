"""Generic kernels: one program per conversion family, whatever the dims.

A family is what a generic kernel's source depends on (render.structure of
both sides, the image layout, the vector width, the tiling axis, the run
length, the index type). Converting every layout over 20 different dims must
give exactly one source per family, and the engine builds each at most once.
"""
import numpy as np
import pytest

import runtime

from runtime import IMAGE_LAYOUTS, ClayoutError, MemoryDesc
from strategies import MOVED
from runtime.opencl import baking, moves
from runtime.opencl import plan as cl_plan
from runtime.opencl.engine import OpenCLEngine
from runtime.opencl import programs
from conftest import THOROUGH, from_img, image_side, to_img

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/baking.py", "runtime/opencl/launch.py", "runtime/opencl/moves.py",
           "runtime/opencl/plan.py", "runtime/cli/kernel.py")

ACTIVATIONS = [(1, 3, 5, 7), (2, 17, 3, 4), (1, 8, 2, 2), (3, 5, 7, 1), (1, 1, 1, 1),
               (2, 16, 4, 4), (1, 33, 9, 2), (4, 3, 2, 8), (1, 64, 3, 3), (2, 2, 2, 2),
               (1, 5, 1, 9), (3, 7, 4, 5), (1, 12, 6, 6), (2, 9, 5, 3), (1, 4, 8, 1),
               (5, 6, 2, 3), (1, 31, 2, 2), (2, 1, 7, 7), (1, 20, 3, 5), (3, 3, 3, 3)]
TAGS = ["nchw", "nhwc", "chwn", "nChw4c", "nChw8c", "nChw16c", "ABcd16b16a", "Acdb4a",
        "ABcd8b16a2b", "BAcd16a16b"]
PAIRS = [(a, b) for a in TAGS for b in TAGS if a != b]
# What the engine converts in test_every_layout_over_20_dims_...: in the
# thorough tier every layout over all 20 dims and every pair over 5 (240
# programs, 0.1-0.5 s each on a cold PoCL cache); in ci every layout over 3
# dims whose families recur (each family met is met again by another of the
# three: 46 programs) and every 4th pair (each tag a source and a
# destination at least once) over 2 dims that share all their families (23
# programs). That each family has one source over all 20 dims, for every
# layout and pair, is test_one_source_per_family's (plans only, every tier).
ENGINE_DIMS = ACTIVATIONS if THOROUGH else [ACTIVATIONS[i] for i in (0, 11, 19)]
ENGINE_PAIRS = (PAIRS, ACTIVATIONS[::4]) if THOROUGH else (PAIRS[::4], [ACTIVATIONS[0],
                                                                        ACTIVATIONS[3]])


def _sweep(plans):
    """{family: set of sources} over the generic plans."""
    seen = {}
    for k in plans:
        if k.generic:
            seen.setdefault(k.family, set()).add(k.source)
    return seen


def _reorders(tiled=False):
    for a, b in PAIRS:
        for dims in ACTIVATIONS:
            yield cl_plan.plan(MemoryDesc(dims, tag=a), MemoryDesc(dims, tag=b), tiled=tiled)
    for dims in ACTIVATIONS:   # halo, strided, dtype pairs
        yield cl_plan.plan(MemoryDesc(dims, halo=((0, 1, 1, 0), (0, 2, 1, 0)), fill=1),
                           MemoryDesc(dims, "f16", tag="nChw8c"), tiled=tiled)
        n, c, h, w = dims
        strided = MemoryDesc(dims, strides=(c * h * (w + 3), h * (w + 3), w + 3, 1))
        yield cl_plan.plan(strided, MemoryDesc(dims, "s8", tag="nhwc"), tiled=tiled)


def _held(layout, dims) -> bool:
    """A single texture holds C <= 4 channels in one texel: larger C is no image of it."""
    return layout.lanes != 0 or dims[1] <= 4


def _images(tiled=False):
    for layout in MOVED.values():
        for i, dims in enumerate(ACTIVATIONS):
            dims = dims[:1] if layout.kind == "argument" else dims
            if not _held(layout, dims):
                continue
            # a buffer storage is always reached as its buffer (the engine's staged)
            for staged in (True,) if layout.storage.on_buffer else (False, True):
                for dt in ("f32", "f16"):
                    yield cl_plan.plan(MemoryDesc(dims), image_side(layout, MemoryDesc(dims).dims, dt),
                                       staged=staged, tiled=tiled)
                    yield cl_plan.plan(image_side(layout, MemoryDesc(dims, "f32").dims, dt),
                                       MemoryDesc(dims, "f32"), staged=staged, tiled=tiled)


@pytest.mark.parametrize("tiled", [False, True], ids=["direct", "tiled"])
def test_one_source_per_family(tiled):
    plans = list(_reorders(tiled)) + list(_images(tiled))
    seen = _sweep(plans)
    assert seen, "no generic kernel planned"
    several = {f: len(s) for f, s in seen.items() if len(s) > 1}
    assert not several, several
    if tiled:   # the tiled family sizes a generic tile by the structure: few more programs
        assert any(k.tiled for k in plans)
        direct = _sweep(list(_reorders()) + list(_images()))
        assert len(seen) <= 1.5 * len(direct), (len(seen), len(direct))


def test_few_families_over_many_shapes():
    # one conversion over 20 shapes: the vector width and the tiling axis may
    # vary with the dims, nothing else does
    plans = [cl_plan.plan(MemoryDesc(d), image_side(IMAGE_LAYOUTS["in_out_channel"], MemoryDesc(d).dims, "f32"), staged=True)
             for d in ACTIVATIONS]
    copies = [d for d, k in zip(ACTIVATIONS, plans) if isinstance(k, cl_plan.ByteCopy)]
    assert copies == [(1, 1, 1, 1)]       # one element and a zero tail: a byte copy
    plans = [k for k in plans if not isinstance(k, cl_plan.ByteCopy)]
    assert all(k.generic for k in plans)
    assert len(_sweep(plans)) <= 3
    assert len({k.args for k in plans}) == len(plans)   # the numbers differ


def test_the_engine_builds_each_family_once(cl_engine):
    programs.clear_cache()
    before = programs.STATS["builds"]
    families = set()
    layout = IMAGE_LAYOUTS["conv2d_filter"]
    for dims in ACTIVATIONS:
        x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
        src, dst = MemoryDesc(dims), MemoryDesc(dims, tag="nhwc")
        image = image_side(layout, dims, "f32")
        tiled = moves.family_of(cl_engine.device)[0]
        for k in (cl_plan.plan(src, dst, tiled=tiled),
                  cl_plan.plan(src, image, staged=cl_engine.staged(image), tiled=tiled)):
            families.add(k.family)
        cl_engine.convert(src, dst, x.reshape(-1))
        to_img(cl_engine, x.reshape(-1), layout, src, "f32")
    assert programs.STATS["builds"] - before <= len(families) < len(ACTIVATIONS)


def test_program_cache_is_bounded(cl_engine, monkeypatch):
    monkeypatch.setattr(programs.PROGRAMS, "size", 2)
    programs.clear_cache()
    for tag in ("nhwc", "chwn", "nChw8c", "nChw16c"):
        dims = (1, 16, 2, 2)
        cl_engine.convert(MemoryDesc(dims), MemoryDesc(dims, tag=tag), np.zeros(64, np.float32))
    assert programs.cached_count() <= 2


@pytest.mark.slow
def test_every_layout_over_20_dims_builds_one_program_per_family(cl_engine, monkeypatch):
    """The engine converts every named layout both ways (its own image access
    and dtypes f32, f16) over ENGINE_DIMS and reorder pairs of TAGS over
    ENGINE_PAIRS (all 20 dims and every pair in the thorough tier; fewer in
    ci, chosen so that families recur): it builds at most one program per
    family it met. The program cache has room for them all (the thorough
    tier's 271 families hold more than its 512 MiB budget on PoCL: what it
    gives up is built again, which tests/cross/test_caches.py holds)."""
    monkeypatch.setattr(programs.PROGRAMS, "budget", 1 << 40)
    programs.clear_cache()
    before = programs.STATS["builds"]
    families = set()
    tiled = moves.family_of(cl_engine.device)[0]
    for layout in MOVED.values():
        for dims in ENGINE_DIMS:
            dims = dims[:1] if layout.kind == "argument" else dims
            if not _held(layout, dims):
                continue
            src = MemoryDesc(dims)
            x = np.arange(src.span, dtype=np.float32)
            for dt in ("f32", "f16"):
                staged = cl_engine.staged(image_side(layout, src.dims, dt))
                families.add(cl_plan.plan(src, image_side(layout, src.dims, dt), staged=staged,
                                          tiled=tiled).family)
                families.add(cl_plan.plan(image_side(layout, src.dims, dt), src, staged=staged,
                                          tiled=tiled).family)
                img = to_img(cl_engine, x, layout, src, dt)
                from_img(cl_engine, img, layout, src)
    pairs, pair_dims = ENGINE_PAIRS
    for a, b in pairs:
        for dims in pair_dims:
            src, dst = MemoryDesc(dims, tag=a), MemoryDesc(dims, tag=b)
            families.add(cl_plan.plan(src, dst, tiled=tiled).family)
            cl_engine.convert(src, dst, np.zeros(src.span, np.float32))
    built = programs.STATS["builds"] - before
    assert built <= len(families), (built, len(families))


def _generic_over_calls(dims, calls, queue):
    """Whether each of ``calls`` calls of one move runs the generic program
    (an engine made now, with the environment's rule; the bake settled
    after each call)."""
    from runtime.opencl import baking
    eng = OpenCLEngine(queue=queue)
    src = MemoryDesc(dims)
    p = moves.move_plan(src, image_side(IMAGE_LAYOUTS["in_out_channel"], src.dims, "f32"),
                        eng.device, dense=True)
    found = []
    for _ in range(calls):
        found.append(p.kernel.generic)
        baking.settle()
    return found


def test_a_hot_shape_gets_its_baked_program(cl_engine, monkeypatch):
    """A shape of at least HOT_BYTES converted more than the engine's
    specialize count is baked from then on; a smaller one stays generic.
    The rule is the move plan's (``moves.bake_point``), read once per engine."""
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "5")
    monkeypatch.delenv("CLAYOUT_SPECIALIZE_BYTES", raising=False)
    moves.PLANS.clear()
    hot = _generic_over_calls((1, 64, 32, 33), 9, cl_engine.queue)        # 264 KiB
    assert MemoryDesc((1, 64, 32, 33)).size >= cl_plan.HOT_BYTES
    assert hot == [True] * 6 + [False] * 3
    assert all(_generic_over_calls((1, 64, 32, 31), 15, cl_engine.queue))   # 248 KiB


def test_specializing_by_use_can_be_turned_off(cl_engine, monkeypatch):
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "0")
    moves.PLANS.clear()
    assert all(_generic_over_calls((1, 64, 32, 33), 20, cl_engine.queue))
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "often")
    with pytest.raises(ClayoutError, match="CLAYOUT_SPECIALIZE_AFTER='often' is not a count"):
        _generic_over_calls((1, 64, 32, 35), 1, cl_engine.queue)


def test_the_baked_program_gives_the_same_bits(cl_engine, monkeypatch):
    """Calls before and after a shape turns hot return the same image."""
    monkeypatch.setenv("CLAYOUT_SPECIALIZE_AFTER", "2")      # read by the engine made next
    monkeypatch.delenv("CLAYOUT_SPECIALIZE_BYTES", raising=False)
    eng = OpenCLEngine(queue=cl_engine.queue)
    dims = (1, 61, 33, 35)                                       # C tail, 275 KiB
    x = np.random.default_rng(3).standard_normal(dims).astype(np.float32)
    src = MemoryDesc(dims)
    layout = IMAGE_LAYOUTS["in_out_height"]
    image = image_side(layout, src.dims, "f16")
    assert moves.move_plan(src, image, eng.device).generic
    images = [to_img(eng, x.reshape(-1), layout, src, "f16") for _ in range(4)]
    baking.settle()   # the baked program is built off the calling thread, then swapped in
    images += [to_img(eng, x.reshape(-1), layout, src, "f16")]
    assert not moves.move_plan(src, image, eng.device).generic
    assert all(np.array_equal(images[0].view(np.uint16), im.view(np.uint16)) for im in images)


@pytest.mark.parametrize("src, dst, copy", [
    (MemoryDesc((10,)), MemoryDesc((10,), tag="A4a"), (40, 48)),           # bias -> argument
    (MemoryDesc((2, 3, 8)), MemoryDesc((2, 3, 8), tag="abC4c"), (192, 192)),
    (MemoryDesc((2, 3, 5)), MemoryDesc((2, 3, 5), tag="abC4c"), None),     # row pitch 8, not 5
    (MemoryDesc((10,)), MemoryDesc((10,), "f16", tag="A4a"), None),        # a dtype conversion
    (MemoryDesc((2, 3, 4)), MemoryDesc((2, 3, 4), tag="acb"), None),       # a transpose
    (MemoryDesc((2, 3, 4), strides=(24, 8, 1)), MemoryDesc((2, 3, 4)), None),   # a gap
])
def test_a_conversion_that_moves_nothing_is_a_byte_copy(src, dst, copy):
    planned = cl_plan.plan(src, dst)
    got = (planned.count, planned.total) if isinstance(planned, cl_plan.ByteCopy) else None
    assert got == copy


def test_copies_build_no_program_and_give_the_reference_bits(cl_engine):
    """Biases onto argument images (a model has one per layer) and back: the
    vector plus a zero tail, with no program built."""
    programs.clear_cache()
    before = programs.STATS["builds"]
    layout = IMAGE_LAYOUTS["argument"]
    for w in (1, 4, 7, 16, 33):
        x = np.random.default_rng(w).standard_normal(w).astype(np.float32)
        x[0] = np.float32("nan")
        desc = MemoryDesc((w,))
        img = to_img(cl_engine, x, layout, desc, "f32")
        want = to_img(runtime.engine.get("reference"), x, layout, desc, "f32")
        assert np.array_equal(img.view(np.uint32), want.view(np.uint32))
        back = from_img(cl_engine, img, layout, desc)
        assert np.array_equal(back.view(np.uint32), x.view(np.uint32))
        mem = runtime.Memory.from_numpy(x, desc, engine=cl_engine)
        img_mem = runtime.to_image(mem, layout)
        assert np.array_equal(img_mem.to_numpy().view(np.uint32), want.view(np.uint32))
    assert programs.STATS["builds"] == before


def test_a_copy_needs_the_same_dims():
    """A 2-D activation's image has dims (N, C, 1, 1): never taken for a copy
    of the (N, C) source, even where the offsets would agree."""
    from runtime.opencl.plan import copy_kernel
    assert copy_kernel(MemoryDesc((1, 8)), MemoryDesc((1, 8, 1, 1))) is None
    assert copy_kernel(MemoryDesc((1, 8, 1, 1)), MemoryDesc((1, 8, 1, 1))) is not None
