"""The kernels' index math and launch geometry, and the program cache."""
import itertools
import os
import sys

import numpy as np
import pytest

from runtime import IMAGE_LAYOUTS, MemoryDesc
from strategies import MOVED
from runtime.opencl import plan as cl_plan
from runtime.opencl import programs, render
from conftest import ROOT, child_dir, child_result, image_side, start_child

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/__init__.py", "runtime/opencl/cell.py", "runtime/opencl/plan.py",
           "runtime/opencl/render.py")

DIMS = {"activation": [(2, 5, 3, 3), (1, 17, 2, 5), (3, 4, 1, 1), (2, 3)],
        "filter": [(5, 3, 2, 3), (17, 1, 1, 1)], "depthwise": [(2, 5, 3, 3)],
        "argument": [(7,), (4,)]}


def _eval(expr: str, env) -> int:
    return eval(expr.replace("/", "//"), {}, env)   # non-negative C division


def _dims(layout):
    """The DIMS of the layout's kind it holds (a single texture: C <= 4)."""
    return [d for d in DIMS[layout.kind] if layout.lanes != 0 or d[1] <= 4]


# the layouts whose kernels write an image object (a buffer storage is written as its buffer)
IMAGES = sorted(n for n, lay in MOVED.items() if not lay.storage.on_buffer)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_c_pixel_mirrors_pixel(name):
    layout = IMAGE_LAYOUTS[name]
    for dims in _dims(layout):
        names = [f"v{i}" for i in range(len(dims))]
        exprs = layout.c_pixel(dims, names)
        for idx in itertools.product(*map(range, dims)):
            env = dict(zip(names, idx))
            assert tuple(_eval(e, env) for e in exprs) == layout.pixel(dims, idx)


def _declarations(c_lines: str):
    """(name, expression) of each ``const idx_t a = ..., b = ...;`` declaration,
    split at the commas outside parentheses."""
    for stmt in c_lines.replace("const idx_t", "").split(";"):
        depth, part = 0, ""
        for ch in stmt + ",":
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                if part.strip():
                    name, expr = part.split("=", 1)
                    yield name.strip(), expr.strip()
                part = ""
            else:
                part += ch


def _decoded_ids(k, count):
    """(g0, g1, g2) of work items 0..count-1 of a generic kernel: its id lines
    evaluated in Python with its argument values (and its magic divisions)."""
    lines = "const idx_t t = get_global_id(0), " + \
        k.source.split("const idx_t t = get_global_id(0), ")[1].split("if (t")[0]
    decls = [(n, e.replace("/", "//")) for n, e in _declarations(lines) if n != "t"]
    env = {f"n{i}": int(v) for i, v in enumerate(k.args)}
    env["clayout_div"] = lambda n, m, s: (n * m) >> s
    out = []
    for t in range(count):
        scope = dict(env, t=t)
        for name, expr in decls:
            scope[name] = eval(expr, {}, scope)  # noqa: S307 - our own generated C
        out.append((scope["g0"], scope["g1"], scope["g2"]))
    return out


@pytest.mark.parametrize("name", IMAGES)
def test_image_launch_stays_inside_the_image(name, monkeypatch):
    """oclgrind does not see an image write past the row end (it wraps), so the
    geometry is checked here: work item (x, y, z) writes pixel (x, y) of
    layer z and the kernel returns for ids outside width x height x depth."""
    monkeypatch.delenv("CLAYOUT_SPECIALIZE_BYTES", raising=False)
    layout = IMAGE_LAYOUTS[name]
    for dims in _dims(layout):
        side = image_side(layout, MemoryDesc(dims).dims, "f32")
        k = cl_plan.plan(MemoryDesc(dims), side)
        width, height, depth = side.extent
        assert k.dst_image and k.sizes == (width, height, depth)
        # generic: one work item per pixel in one dimension; the first three
        # arguments are the pixel count (the guard), the width and width x height
        # (x = t % width, y = t / width % height, z = t / (width x height))
        assert k.generic and "if (t >= n0)" in k.source
        total = width * height * depth
        assert int(k.args[0]) == total
        g = _decoded_ids(k, total + k.local[0])
        assert all(g[t] == (t % width, t // width % height, t // (width * height))
                   for t in range(total))
        assert ("(int4)(g0, g1, g2, 0)" if side.storage.layered else "(int2)(g0, g1)") \
            in k.source
        assert k.local == (render.GENERIC_LOCAL,) and k.launch[0] >= width * height
        assert k.launch[0] % k.local[0] == 0


@pytest.mark.parametrize("name", IMAGES)
def test_baked_image_guard_is_the_image(name):
    layout = IMAGE_LAYOUTS[name]
    for dims in _dims(layout):
        side = image_side(layout, MemoryDesc(dims).dims, "f32")
        k = cl_plan.plan(MemoryDesc(dims), side, bake=True)   # every number baked
        width, height, depth = side.extent
        assert not k.generic and k.args == ()
        assert f"if (g0 >= {width} || g1 >= {height} || g2 >= {depth})" in k.source


def test_one_template_for_every_kind():
    reorder = cl_plan.plan(MemoryDesc((2, 8, 3, 3)), MemoryDesc((2, 8, 3, 3), tag="nhwc")).source
    to_image = cl_plan.plan(MemoryDesc((2, 5, 3, 3)),
                            image_side("in_out_channel", (2, 5, 3, 3), "f16")).source
    from_image = cl_plan.plan(image_side("texture_2d", (2, 5, 3, 3), "s8"),
                              MemoryDesc((2, 5, 3, 3), "s8")).source
    for src in (reorder, to_image, from_image):
        assert "__kernel void clayout_convert(" in src
    assert "write_imagef" in to_image and "clayout_f32_to_f16" in to_image
    assert "read_imagei" in from_image
    assert "vstore" in reorder


def test_vector_loads_where_contiguous():
    """16 elements a work item; a 64-byte vector moves as two 32-byte halves."""
    f32 = cl_plan.plan(MemoryDesc((1, 32, 4, 4), tag="nhwc"),
                       MemoryDesc((1, 32, 4, 4), tag="nChw16c")).source
    assert "const float8 r0 = vload8(0, src + (" in f32 and "vload16" not in f32
    assert "vstore8((float8)(v8, v9, v10, v11, v12, v13, v14, v15), 1, clayout_at);" in f32
    f16 = cl_plan.plan(MemoryDesc((1, 32, 4, 4), "f16", tag="nhwc"),
                       MemoryDesc((1, 32, 4, 4), "f16", tag="nChw16c")).source
    assert "vload16(0, src + (" in f16 and "vstore16((ushort16)(" in f16


QUIET_BUILDS = """
import warnings
import numpy as np
import pyopencl as cl
warnings.simplefilter("error", cl.CompilerWarning)
from runtime import MemoryDesc, reorder, to_image
from runtime.algebra import dtypes
dims = (1, 32, 3, 5)
for dt in ("f32", "s32", "f16", "u8"):
    x = np.arange(480).astype(dtypes.dtype(dt).np)
    for a, b in (("nhwc", "nChw16c"), ("nchw", "nhwc"), ("nChw16c", "nchw")):
        reorder(x, MemoryDesc(dims, dt, tag=a), MemoryDesc(dims, dt, tag=b), engine="opencl")
    if dt != "u8":
        to_image(x.reshape(dims), "in_out_channel", engine="opencl")
print("built quietly")
"""


def _start_quiet() -> None:
    """The child of the test below, in empty caches of its own."""
    folder = child_dir("quiet")
    (folder / "pocl").mkdir(exist_ok=True)
    env = dict(os.environ, POCL_CACHE_DIR=str(folder / "pocl"),
               XDG_CACHE_HOME=str(folder / "cache"), PYTHONPATH=str(ROOT))
    start_child("quiet builds", [sys.executable, "-c", QUIET_BUILDS], env=env)


def start_early(items):
    """The test below's child is queued as soon as the run's tests are known
    (tests/conftest.py) and runs in the background; the test waits for it."""
    if any(getattr(item, "originalname", "") == "test_programs_build_without_compiler_output"
           for item in items):
        _start_quiet()


def test_programs_build_without_compiler_output(cl_engine):
    """A first build (empty PoCL and pyopencl caches) of kernels with 16-wide
    loads and stores of 1-, 2- and 4-byte types says nothing: no vector over
    32 bytes meets a builtin (PoCL warns of an ABI change without AVX-512)."""
    _start_quiet()    # a no-op where start_early queued it
    done = child_result("quiet builds")
    assert done.returncode == 0 and done.stdout.strip() == "built quietly", done.stderr
    assert done.stderr == ""


def test_program_cache(cl_engine):
    src, dst = MemoryDesc((1, 3, 2, 5)), MemoryDesc((1, 3, 2, 5), tag="nhwc")
    x = np.arange(30, dtype=np.float32)
    cl_engine.convert(src, dst, x)
    before = dict(programs.STATS)
    for _ in range(3):
        cl_engine.convert(src, dst, x)
    assert programs.STATS["builds"] == before["builds"]
    assert programs.STATS["hits"] == before["hits"] + 3
    programs.clear_cache()
    assert programs.cached_count() == 0
    cl_engine.convert(src, dst, x)
    assert programs.STATS["builds"] == before["builds"] + 1
