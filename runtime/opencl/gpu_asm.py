"""What a GPU compiler makes of a kernel's global memory accesses.

Two witnesses beside the access model (runtime/opencl/access_model.py),
both reading assembly: LLVM's GPU backends here (``compile_for``: Debian's
clang-15 compiles OpenCL C for NVPTX, what NVIDIA's driver JIT-compiles,
and for AMDGCN) and, where a GPU is lent, the program binary its driver
returns (PTX on NVIDIA: tools/gpu_check.py). ``global_accesses`` counts
the global loads and stores of a listing by their width in bytes.

clang has no OpenCL builtins library here (no libclc), so ``PRELUDE``
defines vloadN/vstoreN as libclc does: through a pointer aligned to the
element only, the spec's guarantee, which is what lets a compiler split a
vector into scalars; ``ALIGNED`` defines them with the vector's own
alignment (what a compiler would emit could it prove that). A kernel none
of whose vectors is split compiles to the same accesses under both.

>>> global_accesses("  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];\\n  st.global.f32 [%rd2], %f1;")
{'load': {16: 1}, 'store': {4: 1}}
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

TARGETS = {
    "nvptx": ("-target", "nvptx64-nvidia-nvcl"),
    "amdgcn": ("-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib"),
}
CLANG = "clang-15"
_TYPES = ("float", "ushort", "short", "int", "uint", "char", "uchar")
_SPACES = ("__global", "__private", "__local")


def _prelude(align: str) -> str:
    """vloadN/vstoreN for every type, width and address space, the pointer
    aligned to ``align`` ("sizeof(T)": the element, libclc's; "vector": the
    vector's own)."""
    lines = ["// vloadN/vstoreN " + ("as libclc defines them: a pointer aligned to the element"
                                     if align == "element" else "with the vector's alignment")]
    for t in _TYPES:
        for n in (2, 4, 8, 16):
            a = f"sizeof({t})" if align == "element" else f"sizeof({t}{n})"
            for space in _SPACES:
                u = f"clayout_{t}{n}_{space.strip('_')}"
                lines.append(f"typedef {t}{n} __attribute__((aligned({a}))) {u};")
                lines.append(f"__attribute__((overloadable)) static inline {t}{n} "
                             f"clayout_vload{n}(size_t i, const {space} {t} *p) "
                             f"{{ return *(const {space} {u} *)(p + i * {n}); }}")
                lines.append(f"__attribute__((overloadable)) static inline void "
                             f"clayout_vstore{n}({t}{n} v, size_t i, {space} {t} *p) "
                             f"{{ *({space} {u} *)(p + i * {n}) = v; }}")
    lines += [f"#define vload{n} clayout_vload{n}\n#define vstore{n} clayout_vstore{n}"
              for n in (2, 4, 8, 16)]
    return "\n".join(lines) + "\n"


PRELUDE = _prelude("element")
ALIGNED = _prelude("vector")


def available() -> str | None:
    """None where clang-15 compiles for both targets here, else why not."""
    if shutil.which(CLANG) is None:
        return f"{CLANG} is not installed (Debian: apt-get install clang-15)"
    return None


def compile_for(source: str, target: str, prelude: str = PRELUDE) -> str:
    """The assembly (PTX or AMDGCN) clang-15 -O3 makes of ``source`` for ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cl"
        path.write_text(prelude + source)
        out = Path(tmp) / "kernel.s"
        done = subprocess.run([CLANG, "-x", "cl", "-cl-std=CL1.2", "-Xclang",
                               "-finclude-default-header", "-O3", "-S", *TARGETS[target],
                               str(path), "-o", str(out)], capture_output=True, text=True,
                              timeout=120)
        if done.returncode:
            raise RuntimeError(f"{CLANG} for {target} failed: {done.stderr[-2000:]}")
        return out.read_text()


_PTX = re.compile(r"^\s*(?:@%p\d+\s+)?(ld|st)\.global(?:\.nc)?(?:\.v(\d))?\.[a-z]+(\d+)\s", re.M)
_AMD = re.compile(r"^\s*(?:global|flat|buffer)_(load|store)_(dwordx(\d)|dword|short|ushort|"
                  r"sshort|byte|ubyte|sbyte|b128|b96|b64|b32|b16|b8)\b", re.M)
_AMD_BYTES = {"dword": 4, "short": 2, "ushort": 2, "sshort": 2, "byte": 1, "ubyte": 1,
              "sbyte": 1, "b128": 16, "b96": 12, "b64": 8, "b32": 4, "b16": 2, "b8": 1}


def global_accesses(listing: str) -> dict:
    """{"load": {bytes: count}, "store": {bytes: count}} of the global
    memory instructions in a PTX or AMDGCN listing."""
    out = {"load": {}, "store": {}}

    def add(kind, width):
        out[kind][width] = out[kind].get(width, 0) + 1
    for op, vec, bits in _PTX.findall(listing):
        add("load" if op == "ld" else "store", int(vec or 1) * int(bits) // 8)
    for op, what, words in _AMD.findall(listing):
        add(op, 4 * int(words) if words else _AMD_BYTES[what])
    return out
