"""LLVM's GPU backends as a second witness beside the access model
(runtime/opencl/gpu_asm.py): every kernel the H100 record's plans render
for the bench's moves, compiled by clang-15 for NVPTX (what NVIDIA's driver
JIT-compiles) and AMDGCN (gfx90a), keeps each vector access of its source
whole: its global loads and stores are the same whether vloadN/vstoreN may
assume only the element's alignment (as libclc, and the spec) or the
vector's. The witness can fail: the direct family's vstore8 of a move a CPU
device runs is split into scalars on NVPTX.
"""
import pytest

from conftest import require
from runtime import ImageDesc, MemoryDesc, image_layout
from runtime.opencl import gpu_asm, gpus
from runtime.opencl.moves import move_plan
from runtime.opencl.plan import plan

from opencl.test_gpu_goals import MOVES, SIZES, _cases

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/gpu_asm.py",)

H100 = gpus.GPUS["h100"]


def _kernel(base, move, size, bake):
    src_tag, dst = MOVES[move]
    dims = SIZES[size]
    src = MemoryDesc(dims, tag=src_tag)
    target = ImageDesc(image_layout(dst[6:]), dims) if dst.startswith("image:") else \
        MemoryDesc(dims, tag=dst)
    p = move_plan(src, target, gpus.device(H100, base))
    return plan(src, target, staged=p.through_buffers, bake=bake, tiled=p.tiled)


@pytest.fixture(scope="module")
def clang():
    why = gpu_asm.available()
    require("clang-15 (LLVM's NVPTX and AMDGCN backends)", why is None, why or "")


def _counts(source, target):
    return (gpu_asm.global_accesses(gpu_asm.compile_for(source, target, gpu_asm.PRELUDE)),
            gpu_asm.global_accesses(gpu_asm.compile_for(source, target, gpu_asm.ALIGNED)))


@pytest.mark.parametrize("target", sorted(gpu_asm.TARGETS))
@pytest.mark.parametrize("move", list(MOVES))
def test_no_vector_of_the_h100_plans_is_split(clang, default_cl_engine, move, target):
    found = {}
    for m, size, bake in _cases():
        if m != move:
            continue
        k = _kernel(default_cl_engine.device, move, size, bake)
        spec, aligned = _counts(k.source, target)
        assert spec == aligned, (f"{move} {size} {'baked' if bake else 'generic'} on {target}: "
                                 f"element-aligned {spec}, vector-aligned {aligned}")
        assert spec["load"] and (spec["store"] or k.dst_image), spec
        found[(size, bake)] = spec
    assert found


def test_the_witness_sees_a_split_vector(clang, default_cl_engine):
    """The direct family (a CPU device's) stores nChw8c in vectors of 8: on
    NVPTX element-aligned they become scalars; AMDGCN keeps dwordx4 either
    way; the H100 record's plan of the same move stores elements."""
    src, dst = MemoryDesc((1, 64, 9, 40), tag="nChw16c"), MemoryDesc((1, 64, 9, 40), tag="nChw8c")
    direct = plan(src, dst, bake=True, tiled=False)
    assert "vstore8" in direct.source
    spec, aligned = _counts(direct.source, "nvptx")
    assert spec["store"] == {4: 8} and aligned["store"] == {16: 2}, (spec, aligned)
    spec, aligned = _counts(direct.source, "amdgcn")
    assert spec == aligned
    p = move_plan(src, dst, gpus.device(H100, default_cl_engine.device))
    spec, aligned = _counts(p.kernel.source, "nvptx")
    assert spec == aligned and spec["store"] == {4: 1}
