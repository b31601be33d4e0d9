"""The access model's table for the bench's moves on a GPU record (the
figures tests/opencl/test_gpu_goals.py holds, and docs/performance.md
prints), with LLVM's global loads and stores of each kernel (NVPTX,
AMDGCN; runtime/opencl/gpu_asm.py) where clang-15 is installed:

    python tools/gpu_model_table.py [--gpu h100] [--no-compilers]
"""
from __future__ import annotations

import argparse
import sys

from runtime import ImageDesc, MemoryDesc, image_layout
from runtime.opencl import gpus
from runtime.opencl.access import model_move
from runtime.opencl.engine import default

from gpu_check import FILTER, MOVES, SIZES  # noqa: E402  (the moves a lent GPU times)


def cases():
    for name, src_tag, dst in MOVES:
        for dims in ((FILTER,) if name.startswith("OIHW") else SIZES):
            for bake in (True, False):
                src = MemoryDesc(dims, tag=src_tag)
                target = ImageDesc(image_layout(dst[6:]), dims) if dst.startswith("image:") \
                    else MemoryDesc(dims, tag=dst)
                yield name, src, target, bake


def _n(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def _asm(counts) -> str:
    def one(kind):
        return "+".join(f"{n}x{w}" for w, n in sorted(counts[kind].items())) or "0"
    return f"{one('load')} / {one('store')}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_model_table", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--no-compilers", action="store_true")
    args = ap.parse_args(argv)
    record, base = gpus.gpu(args.gpu), default().device
    compilers = None
    if not args.no_compilers:
        try:
            from runtime.opencl import gpu_asm
            compilers = gpu_asm if gpu_asm.available() is None else None
        except ImportError:
            compilers = None
    print(f"| move | size | program | family | loads | stores as written / emitted | lanes | "
          f"local wavefronts | waves | image rows x pixels a warp |"
          + (" NVPTX loads / stores (count x bytes) | AMDGCN |" if compilers else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if compilers else ""))
    for name, src, dst, bake in cases():
        m = model_move(src, dst, record, base, bake=bake)
        f = m.figures
        image = f"{_n(f.image_rows_per_warp, 1)} x {_n(f.image_pixels_per_warp, 0)}" \
            if f.image_rows_per_warp is not None else "-"
        stores = f"{_n(f.stores.efficiency)} / {_n(f.stores.efficiency_as_emitted)}" \
            if f.stores.efficiency is not None else "-"
        row = (f"| {name} | {'x'.join(map(str, src.dims))} | {'baked' if bake else 'generic'} | "
               f"{m.family} | {_n(f.loads.efficiency)} | {stores} | {_n(f.active_lanes)} | "
               f"{_n(f.local_wavefronts_per_request)} | {_n(f.waves)} | {image} |")
        if compilers:
            row += "".join(f" {_asm(compilers.global_accesses(compilers.compile_for(m.kernel.source, t)))} |"
                           for t in ("nvptx", "amdgcn"))
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
