"""oneDNN's reorder primitive as a peer in the benchmark, through ctypes.

The library is ``libdnnl.so.3`` from the PyPI wheel ``onednn-cpu-gomp==2023.2.0``
(oneDNN 3.2, CPU, GNU OpenMP): the wheel is fetched with ``pip download
--no-deps`` into ``~/.cache/clayout/bench`` (or ``$CLAYOUT_BENCH_CACHE``) and
only that file is unzipped; the package is never imported or installed.
``load()`` returns a ``OneDNN`` handle, or one line saying why oneDNN is
unavailable. ``OneDNN.reorder(dims, src_tag, dst_tag, src, dst)`` returns a
callable that runs one f32 reorder from numpy array ``src`` into ``dst`` (the
memories sit on the arrays' own buffers) and waits for it; oneDNN objects live
until the handle is collected. Enum values are those of oneDNN v3.2's headers.
``python tools/bench_onednn.py`` checks it against the cpu engine and times it.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
import time
import weakref
import zipfile
from dataclasses import dataclass
from typing import Callable

import numpy as np

from runtime import ClayoutError
from runtime.cli.demo import fetch_from_wheel

WHEEL, WHEEL_VERSION = "onednn-cpu-gomp", "2023.2.0"
LIBRARY = "libdnnl.so.3"
MEMBER = f"onednn_cpu_gomp-{WHEEL_VERSION}.data/data/lib/{LIBRARY}"

F32, CPU, STREAM_DEFAULT = 3, 1, 1          # dnnl_f32, dnnl_cpu, dnnl_stream_default_flags
ARG_SRC, ARG_DST = 1, 17                    # DNNL_ARG_SRC, DNNL_ARG_DST
TAGS = {"a": 2, "ab": 3, "abc": 4, "abcd": 5, "abcde": 6, "nc": 3, "ncw": 4,  # dnnl_format_tag_t
        "nwc": 15, "nchw": 5, "oihw": 5, "nhwc": 22, "acdb": 22, "ohwi": 22, "hwio": 28,
        "nChw16c": 78, "aBcd16b": 78, "nChw8c": 102, "aBcd8b": 102,
        "OIhw16o16i": 75, "OIhw16i16o": 79}
STATUS = ("success", "out_of_memory", "invalid_arguments", "unimplemented",  # dnnl_status_t
          "last_impl_reached", "runtime_error", "not_required")

P, INT, PP = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)
ARGTYPES = {  # from dnnl.h / dnnl_common.h; all but the last two return dnnl_status_t
    "dnnl_engine_create": [PP, INT, ctypes.c_size_t],
    "dnnl_stream_create": [PP, P, ctypes.c_uint],
    "dnnl_memory_desc_create_with_tag": [PP, INT, ctypes.POINTER(ctypes.c_int64), INT, INT],
    "dnnl_memory_create": [PP, P, P, P],
    "dnnl_reorder_primitive_desc_create": [PP, P, P, P, P, P],
    "dnnl_primitive_create": [PP, P],
    "dnnl_primitive_execute": [P, P, INT, P],
    "dnnl_stream_wait": [P],
    **{f"dnnl_{kind}_destroy": [P] for kind in
       ("memory", "primitive", "primitive_desc", "memory_desc", "stream", "engine")},
    "dnnl_memory_desc_get_size": [P],   # size_t
    "dnnl_version": [],                 # const dnnl_version_t *
}


class ExecArg(ctypes.Structure):    # dnnl_exec_arg_t
    _fields_ = [("arg", INT), ("memory", P)]


def open_library(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    for name, argtypes in ARGTYPES.items():
        getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, INT
    lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
    lib.dnnl_version.restype = ctypes.POINTER(INT * 3)   # major, minor, patch lead the struct
    return lib


def omp_threads() -> int:
    try:  # the libgomp libdnnl loaded
        return int(ctypes.CDLL("libgomp.so.1").omp_get_max_threads())
    except (OSError, AttributeError):
        return int(os.environ.get("OMP_NUM_THREADS", "") or os.cpu_count() or 1)


def release(lib: ctypes.CDLL, owned: list) -> None:
    """Destroy oneDNN objects, newest first (memories before the engine)."""
    for name, handle in reversed(owned):
        getattr(lib, name)(handle)
    owned.clear()


class OneDNN:
    """One CPU engine and stream of libdnnl, and the reorders built on them."""

    def __init__(self, path: str):
        self.path = path
        self.lib = open_library(path)
        self.version = ".".join(map(str, self.lib.dnnl_version().contents))
        self.threads = omp_threads()
        self.owned: list[tuple[str, P]] = []   # (destroy function, handle)
        self.primitives: dict[tuple, tuple[P, P, P]] = {}
        weakref.finalize(self, release, self.lib, self.owned)
        self.engine = self.create("dnnl_engine_create", "dnnl_engine_destroy", CPU, 0)
        self.stream = self.create("dnnl_stream_create", "dnnl_stream_destroy",
                                  self.engine, STREAM_DEFAULT)

    def call(self, name: str, *args) -> None:
        status = getattr(self.lib, name)(*args)
        if status:
            what = STATUS[status] if status < len(STATUS) else str(status)
            raise RuntimeError(f"oneDNN {name} failed: dnnl_{what}")

    def create(self, name: str, destroy: str, *args) -> P:
        """Call a dnnl_*_create whose first argument is the object it makes."""
        out = P()
        self.call(name, ctypes.byref(out), *args)
        self.owned.append((destroy, out))
        return out

    def desc(self, dims: tuple[int, ...], tag: str) -> P:
        if tag not in TAGS:
            raise ValueError(f"no oneDNN format tag for {tag!r}; known: {', '.join(TAGS)}")
        c_dims = (ctypes.c_int64 * len(dims))(*dims)
        return self.create("dnnl_memory_desc_create_with_tag", "dnnl_memory_desc_destroy",
                           len(dims), c_dims, F32, TAGS[tag])

    def primitive(self, dims: tuple[int, ...], src_tag: str, dst_tag: str) -> tuple[P, P, P]:
        """(src desc, dst desc, reorder primitive), built once per case."""
        key = (tuple(dims), src_tag, dst_tag)
        if key not in self.primitives:
            src_md, dst_md = self.desc(dims, src_tag), self.desc(dims, dst_tag)
            pd = self.create("dnnl_reorder_primitive_desc_create",
                             "dnnl_primitive_desc_destroy",
                             src_md, self.engine, dst_md, self.engine, None)
            prim = self.create("dnnl_primitive_create", "dnnl_primitive_destroy", pd)
            self.primitives[key] = (src_md, dst_md, prim)
        return self.primitives[key]

    def memory(self, md: P, array: np.ndarray, role: str) -> P:
        if array.dtype != np.float32 or array.ndim != 1 or not array.flags.c_contiguous:
            raise ValueError(f"{role} must be a 1-D contiguous float32 array")
        need = self.lib.dnnl_memory_desc_get_size(md)
        if array.nbytes < need:
            raise ValueError(f"{role} has {array.nbytes} bytes, oneDNN needs {need}")
        return self.create("dnnl_memory_create", "dnnl_memory_destroy", md, self.engine,
                           P(array.ctypes.data))

    def reorder(self, dims: tuple[int, ...], src_tag: str, dst_tag: str,
                src: np.ndarray, dst: np.ndarray) -> Reorder:
        """A callable running the reorder src_tag -> dst_tag from ``src`` into
        ``dst`` (f32, 1-D, at least the descs' sizes) and waiting for it."""
        src_md, dst_md, prim = self.primitive(dims, src_tag, dst_tag)
        args = (ExecArg * 2)(ExecArg(ARG_SRC, self.memory(src_md, src, "src")),
                             ExecArg(ARG_DST, self.memory(dst_md, dst, "dst")))
        return Reorder(self, prim, args, (src, dst))


@dataclass(frozen=True)
class Reorder:
    """One reorder bound to its arrays; holds the handle and arrays alive."""
    dnnl: OneDNN
    primitive: P
    args: ctypes.Array
    arrays: tuple[np.ndarray, np.ndarray]

    def __call__(self) -> None:
        self.dnnl.call("dnnl_primitive_execute", self.primitive, self.dnnl.stream, 2, self.args)
        self.dnnl.call("dnnl_stream_wait", self.dnnl.stream)


def load() -> OneDNN | str:
    """A OneDNN handle, or one line saying why oneDNN is unavailable."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return f"oneDNN: skipped, the wheel is for x86_64 Linux (this is " \
               f"{sys.platform} {platform.machine()})"
    cache = os.environ.get("CLAYOUT_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "clayout", "bench")
    try:
        path = fetch_from_wheel(cache, WHEEL, WHEEL_VERSION, {LIBRARY: MEMBER})[LIBRARY]
        return OneDNN(path)
    except (ClayoutError, OSError, KeyError, AttributeError, RuntimeError,
            zipfile.BadZipFile) as e:
        return f"oneDNN: unavailable ({type(e).__name__}: {str(e).splitlines()[0]})"


def median_ms(fn: Callable[[], None], repeat: int = 10) -> float:
    fn(), fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def main() -> None:
    """Check oneDNN against the cpu engine bit for bit, then time it beside
    ours and np.copyto of the destination's bytes (the copy limit)."""
    from runtime.algebra.desc import MemoryDesc
    from runtime.cpu import engine as cpu
    dnnl = load()
    if isinstance(dnnl, str):
        sys.exit(dnnl)
    print(f"oneDNN {dnnl.version} ({dnnl.path}), {dnnl.threads} OpenMP threads")
    rows = ["| case | size | oneDNN ms | ours ms | copy ms | oneDNN % of limit | ours % of limit |",
            "|---|---|---|---|---|---|---|"]
    for dims in ((1, 3, 5, 7), (1, 64, 224, 224), (1, 64, 512, 512)):
        size = "x".join(map(str, dims))
        for s, d in (("nchw", "nhwc"), ("nchw", "nChw16c"), ("nhwc", "nchw"), ("nChw16c", "nchw")):
            src, dst = MemoryDesc(dims, tag=s), MemoryDesc(dims, tag=d)
            x = np.random.default_rng(0).standard_normal(src.span).astype(np.float32)
            ref = cpu.reorder(x, src, dst)
            out = np.full(dst.span, np.nan, dtype=np.float32)   # padding must become 0
            run = dnnl.reorder(dims, s, d, x, out)
            run()
            same = np.array_equal(ref.view(np.uint32), out.view(np.uint32))
            print(f"{size:>12} {s:>8} -> {d:<8} bit-identical: {same}")
            if dims[1] == 64:
                copy = np.empty_like(ref)
                ms = (median_ms(run), median_ms(lambda: cpu.reorder(x, src, dst, out=out)),
                      median_ms(lambda: np.copyto(copy, ref)))
                rows.append(f"| {s}->{d} | {size} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f} "
                            f"| {100 * ms[2] / ms[0]:.0f}% | {100 * ms[2] / ms[1]:.0f}% |")
    print("\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
