"""The cpu engine's compiled moves: C rendered from templates/cpu_move.c.mako,
built by the system's C compiler into a shared library, loaded with ctypes.

Why this mechanism: a C compiler is on every machine that builds Python
packages (and on CI's), ctypes is in the standard library, and a ctypes call
releases the GIL, so the shared thread pool runs the moves in parallel. No
new dependency: where no compiler works, the numpy path does everything, and
``status()`` says why (``clayout devices`` prints it).

The library is built once per source and kept on disk, keyed (like the
OpenCL program cache) by the rendered source, the compiler's own version
line, the flags and the CPU's features (``-march=native`` code must not run
on another CPU): ``$CLAYOUT_CPU_CACHE``, else ``$XDG_CACHE_HOME/clayout/cpu``,
else ``~/.cache/clayout/cpu``. A build writes to a temporary name and renames,
so concurrent processes never load half a file.

``CLAYOUT_CPU=numpy`` forces the numpy path, ``compiled`` demands the
compiled one (an error where it cannot be built), unset or ``auto`` takes the
compiled path where it builds. ``CLAYOUT_CPU_CFLAGS`` adds compiler flags
(the tests build with sanitizers this way); ``CC`` names the compiler.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np

from .. import sources
from ..algebra import dtypes, dtypes_c
from ..algebra.frame_taps import WORD
from ..cache import memoized
from ..errors import ClayoutError

# the int64 words of a compiled frame's spec (runtime/cpu/frames.py writes them,
# templates/cpu_frame.c.mako reads them by these names)
FRAME_SPEC = ("kind", "bytes", "rgb0", "rgb1", "rgb2", "uoff", "voff", "channels",
              "source0", "source1", "source2", "dtype", "oc", "orow", "ocol", "zeros",
              "h", "w", "xmode", "parts")
# the dtype codes of read_output's rows (runtime/cpu/outputs.py passes them)
OUTPUT_DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "s32": 3, "s8": 4, "u8": 5}
MAX_AXES = 8              # axes of one box (the plan coalesces to far fewer)
# the box a compiled move reads, stated once: runtime/cpu/compiled.py packs it as this numpy
# dtype and templates/cpu_move.c.mako declares it as the C struct ``c_struct`` renders.
# tp, tq: the plane's transpose block sides; zq: the destination's zeroed tail; tw: rows of
# P a group (0: all); nt: stream whole lines past the caches; shape, ss, ds: the box's
# extents and its source and destination strides in bytes (axes past nd are 0)
BOX_FIELDS = (("nd", 1), ("tp", 1), ("tq", 1), ("zq", 1), ("tw", 1), ("nt", 1),
              ("shape", MAX_AXES), ("ss", MAX_AXES), ("ds", MAX_AXES))
BOX = np.dtype([(name, np.int64, (k,)) if k > 1 else (name, np.int64) for name, k in BOX_FIELDS])
CHOICES = ("auto", "compiled", "numpy")
FLAGS = ("-O3", "-std=c11", "-pthread", "-fPIC", "-shared", "-fsigned-char",
         "-ffp-contract=off", "-fno-fast-math")
NATIVE = ("-march=native",)     # dropped where the compiler refuses it
C_STORAGE = {"f32": "float", "f16": "ushort", "bf16": "ushort", "s32": "int", "s8": "char",
             "u8": "uchar"}
MOVE_TYPES = {1: "uint8_t", 2: "uint16_t", 3: "clayout_b3", 4: "uint32_t", 6: "clayout_b6",
              8: "uint64_t", 12: "clayout_b12", 16: "clayout_b16"}
BLOCKS = {4: ((16, "defined(__AVX512F__)"), (8, "defined(__AVX__)"), (4, "defined(__SSE2__)")),
          2: ((8, "defined(__SSE2__)"),), 1: ((8, "defined(__SSE2__)"),)}


@dataclass(frozen=True)
class Family:
    """One compiled function: a move of ``item``-byte elements (bits
    unchanged) or a conversion between two dtypes' storage types."""
    name: str
    summary: str
    src_type: str
    dst_type: str
    expr: str
    item: int
    move: bool
    blocks: tuple = ()


def c_struct(name: str, fields=BOX_FIELDS) -> str:
    """The C declaration of a record of int64 ``fields`` ((name, count) pairs)."""
    body = "".join(f"    int64_t {f}{f'[{k}]' if k > 1 else ''};\n" for f, k in fields)
    return f"typedef struct {{\n{body}}} {name};"


def move_name(item: int) -> str:
    return f"clayout_move_{item}"


def convert_name(src: str, dst: str) -> str:
    return f"clayout_convert_{src}_{dst}"


def families() -> tuple[Family, ...]:
    """Every function of the library: moves of 1 to 16 bytes, then every
    conversion between two different dtypes."""
    out = [Family(move_name(n), f"a copy of {n}-byte elements", t, t, "x", n, True,
                  BLOCKS.get(n, ())) for n, t in MOVE_TYPES.items()]
    for s in dtypes.NAMES:
        for d in dtypes.NAMES:
            if s != d:
                out.append(Family(convert_name(s, d), f"{s} -> {d} by the dtype rules",
                                  C_STORAGE[s], C_STORAGE[d], dtypes_c.convert_expr(s, d, "x"),
                                  dtypes.dtype(d).itemsize, False))
    return tuple(out)


def render() -> str:
    """The library's C: the moves (templates/cpu_move.c.mako), then the frames
    (templates/cpu_frame.c.mako) and read_output's rows (templates/cpu_output.c.mako),
    which use the moves' workers and conversions."""
    moves = sources.template("cpu_move.c.mako").render(
        families=families(), helpers=sources.helpers(), box=c_struct("clayout_box"),
        built=f"{platform.machine()} {platform.system()}")
    frames = sources.template("cpu_frame.c.mako").render(
        words=WORD, spec={name: i for i, name in enumerate(FRAME_SPEC)})
    outputs = sources.template("cpu_output.c.mako").render(dtypes=OUTPUT_DTYPES)
    return moves + "\n" + frames + "\n" + outputs


def choice() -> str:
    """CLAYOUT_CPU's value, checked."""
    value = os.environ.get("CLAYOUT_CPU", "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ClayoutError(f"CLAYOUT_CPU={os.environ['CLAYOUT_CPU']!r} is not one of "
                           f"{', '.join(CHOICES)}")
    return value


def compiler() -> list[str] | None:
    """The C compiler command: $CC (may hold flags), else cc, gcc or clang on PATH."""
    env = os.environ.get("CC", "").split()
    if env and shutil.which(env[0]):
        return env
    found = next((shutil.which(c) for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    return [found] if found else None


def cache_dir() -> str:
    base = os.environ.get("CLAYOUT_CPU_CACHE")
    if base:
        return base
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "clayout", "cpu")


def cpu_features() -> str:
    """What -march=native code depends on: the CPU's flags line (Linux), else
    the machine and processor names."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def build(source: str, cc: list[str], extra: tuple[str, ...] = ()) -> tuple[str, str]:
    """(path of the shared library, flags used) for ``source``: from the disk
    cache, else compiled into it. A ClayoutError says why a build failed."""
    version = _run(cc + ["--version"]).stdout.splitlines()[:1]
    features, folder, last = cpu_features(), cache_dir(), ""
    for native in (NATIVE, ()):
        flags = FLAGS + native + extra
        key = hashlib.sha256("\0".join([source, " ".join(cc), *version, " ".join(flags),
                                        features]).encode()).hexdigest()[:24]
        path = os.path.join(folder, f"clayout-cpu-{key}.so")
        if os.path.isfile(path):
            return path, " ".join(flags)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise ClayoutError(f"cannot create the compiled-move cache {folder}: {exc}") from None
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            c_file, so = os.path.join(tmp, "move.c"), os.path.join(tmp, "move.so")
            with open(c_file, "w") as f:
                f.write(source)
            done = _run(cc + list(flags) + ["-o", so, c_file, "-lm"])
            if done.returncode == 0:
                os.replace(so, path)
                return path, " ".join(flags)
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            last = lines[0] if lines else f"exit {done.returncode}"
    raise ClayoutError(f"{' '.join(cc)} could not build the compiled moves: {last}")


@dataclass(frozen=True)
class Library:
    """The loaded library (``dll`` None where there is none) and, in words,
    what the cpu engine uses and why."""
    dll: object
    path: str
    reason: str

    def function(self, name: str):
        """The family ``name``: f(src address, dst address, packed box)."""
        fn = getattr(self.dll, name)
        fn.restype, fn.argtypes = None, (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)
        return fn

    @property
    def parallel(self):
        """clayout_parallel(family address, src, dst, parts, words per part,
        parts, threads, spin ns): a copy's parts on the library's workers."""
        fn = self.dll.clayout_parallel
        if fn.argtypes is None:
            fn.restype = None
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                           ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
        return fn

    @property
    def frame(self):
        """clayout_frame(frame, taps, out, spec, threads, spin ns): a frame's
        stages into ``out`` (runtime/cpu/frames.py); 0, or -1 where memory
        could not be had."""
        fn = self.dll.clayout_frame
        if fn.argtypes is None:
            fn.restype = ctypes.c_int
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int64, ctypes.c_int64)
        return fn


    @property
    def output(self):
        """clayout_output(src, dtype, act, rows, C, scale, zero, arg, values, parts,
        threads, spin ns): read_output's rows (runtime/cpu/outputs.py); 0, or -1
        where memory could not be had."""
        fn = self.dll.clayout_output
        if fn.argtypes is None:
            fn.restype = ctypes.c_int
            fn.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
        return fn


@memoized("compiled cpu moves", "CLAYOUT_CPU_LIBRARY_CACHE", 4)
def library(wanted: str) -> Library:
    """The library for CLAYOUT_CPU=``wanted``, built or loaded once per process."""
    if wanted == "numpy":
        return Library(None, "", "numpy path (CLAYOUT_CPU=numpy)")
    cc = compiler()
    try:
        if cc is None:
            raise ClayoutError("no C compiler found (set CC, or install cc, gcc or clang)")
        path, flags = build(render(), cc, tuple(os.environ.get("CLAYOUT_CPU_CFLAGS", "").split()))
        dll = ctypes.CDLL(path)
    except (ClayoutError, OSError, subprocess.SubprocessError) as exc:
        if wanted == "compiled":
            raise ClayoutError(f"CLAYOUT_CPU=compiled, but {exc}") from None
        return Library(None, "", f"numpy path: {exc}")
    built = ctypes.CFUNCTYPE(ctypes.c_char_p)(("clayout_cpu_built", dll))().decode()
    return Library(dll, path, f"compiled moves ({os.path.basename(cc[0])} {flags}; {built})")


def current() -> Library:
    """The library the engine uses now (CLAYOUT_CPU read on every call)."""
    return library(choice())


def status() -> str:
    """What the cpu engine uses and why, in one line."""
    try:
        return current().reason
    except ClayoutError as exc:
        return str(exc)
