"""The cpu engine's compiled library: C rendered from templates/cpu_common.c (what
every family shares) and the templates cpu_move.c.mako, cpu_frame.c.mako and
cpu_output.c.mako, built by the system's C compiler into a shared library,
loaded with ctypes. ``EXPORTS`` states its interface once: every function
Python calls, with its C types.

Why this mechanism: a C compiler is on every machine that builds Python
packages (and on CI's), ctypes is in the standard library, and a ctypes call
releases the GIL, so the engine's one worker pool (runtime/cpu/pool.py) runs
the library's parts in parallel. No new dependency: where no compiler works,
the numpy path does everything, and the engine's ``status()`` says why
(``clayout devices`` prints it).

The library is built once per source and kept on disk, keyed (like the
OpenCL program cache) by the rendered source, the compiler's own version
line, the flags and the CPU's features (``-march=native`` code must not run
on another CPU): ``$CLAYOUT_CPU_CACHE``, else ``$XDG_CACHE_HOME/clayout/cpu``,
else ``~/.cache/clayout/cpu``. A build writes to a temporary name and renames,
so concurrent processes never load half a file.

Each cpu engine has a path (runtime/cpu/engine.py ``CpuEngine(path=...)``):
``numpy`` forces the numpy path, ``compiled`` demands the compiled one (an
error where it cannot be built), ``auto`` takes the compiled path where it
builds. ``CLAYOUT_CPU`` gives the path of an engine made without one (the
default engine's), read once, when the engine is made. ``CLAYOUT_CPU_CFLAGS``
adds compiler flags (the tests build with sanitizers this way); ``CC`` names
the compiler.
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
from ..settings import env_choice

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
MOVE_TYPES = {1: "uint8_t", 2: "uint16_t", 3: "clayout_b3", 4: "uint32_t", 6: "clayout_b6",
              8: "uint64_t", 12: "clayout_b12", 16: "clayout_b16"}
BLOCKS = {4: ((16, "defined(__AVX512F__)"), (8, "defined(__AVX__)"), (4, "defined(__SSE2__)")),
          2: ((8, "defined(__SSE2__)"),), 1: ((8, "defined(__SSE2__)"),)}
_P, _I, _W = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
# the library's interface, stated once: name -> (result, argument types). Every family
# (``families``) is also f(source address, destination address, packed box) -> void.
# The worker pool's side (runtime/cpu/pool.py): clayout_parallel(part function, source,
# destination, parts, int64 words a part, parts, threads) runs a job's parts; a pool thread
# calls clayout_serve(posted word, spin ns); SERVING counts those in it (an int64 variable).
# clayout_frame(frame, taps, out, spec, threads) -> 0, or -1 where memory could not be had
# (runtime/cpu/frames.py); clayout_output(rows, dtype, act, row count, C, scale, zero, arg,
# values, bands, threads) -> the same (runtime/cpu/outputs.py); clayout_cpu_built() -> what
# the build holds (``clayout devices``).
EXPORTS = {
    "clayout_parallel": (None, (_P, _P, _P, ctypes.c_char_p, _I, _I, _I)),
    "clayout_serve": (None, (_P, _I)),
    "clayout_frame": (_W, (_P, _P, _P, _P, _I)),
    "clayout_output": (_W, (_P, _I, _I, _I, _I, _P, _P, _P, _P, _I, _I)),
    "clayout_cpu_built": (ctypes.c_char_p, ()),
}
SERVING = "clayout_serving"
FAMILY_TYPES = (None, (_P, _P, ctypes.c_char_p))


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
                                  dtypes.dtype(s).cl_scalar, dtypes.dtype(d).cl_scalar, dtypes_c.convert_expr(s, d, "x"),
                                  dtypes.dtype(d).itemsize, False))
    return tuple(out)


def render() -> str:
    """The library's C: what every family shares (templates/cpu_common.c, plain C),
    the moves (templates/cpu_move.c.mako), then the frames (the #defines of
    templates/cpu_frame.c.mako, then templates/cpu_frame.c, plain C) and
    read_output's rows (templates/cpu_output.c.mako), which use the moves'
    conversions."""
    moves = sources.template("cpu_move.c.mako").render(
        families=families(), helpers=sources.helpers(), box=c_struct("clayout_box"),
        built=f"{platform.machine()} {platform.system()}")
    frames = sources.template("cpu_frame.c.mako").render(
        words=WORD, spec={name: i for i, name in enumerate(FRAME_SPEC)})
    outputs = sources.template("cpu_output.c.mako").render(dtypes=OUTPUT_DTYPES)
    return "\n".join((sources.text("cpu_common.c"), moves, frames, sources.text("cpu_frame.c"),
                      outputs))


def choice() -> str:
    """CLAYOUT_CPU's value, checked: the path of an engine made without one."""
    return env_choice("CLAYOUT_CPU", "auto", CHOICES)


def checked(path) -> str:
    """``path`` when it is one of CHOICES, else a ClayoutError naming them."""
    if path not in CHOICES:
        raise ClayoutError(f"cpu path {path!r} is not one of {', '.join(CHOICES)}")
    return path


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
    what a cpu engine on it uses and why."""
    dll: object
    path: str
    reason: str

    def function(self, name: str):
        """The library's function ``name`` with its C types: a family's
        (``families``), or one of EXPORTS."""
        fn = getattr(self.dll, name)
        if fn.argtypes is None:
            fn.restype, fn.argtypes = EXPORTS.get(name, FAMILY_TYPES)
        return fn

    @property
    def serving(self) -> ctypes.c_int64:
        """The library's count of pool threads serving its jobs (SERVING)."""
        return ctypes.c_int64.in_dll(self.dll, SERVING)


@memoized("compiled cpu moves", "CLAYOUT_CPU_LIBRARY_CACHE", 4)
def library(wanted: str) -> Library:
    """The library of path ``wanted`` (CHOICES), built or loaded once per process."""
    if checked(wanted) == "numpy":
        return Library(None, "", "numpy path (asked for)")
    cc = compiler()
    try:
        if cc is None:
            raise ClayoutError("no C compiler found (set CC, or install cc, gcc or clang)")
        path, flags = build(render(), cc, tuple(os.environ.get("CLAYOUT_CPU_CFLAGS", "").split()))
        dll = ctypes.CDLL(path)
    except (ClayoutError, OSError, subprocess.SubprocessError) as exc:
        if wanted == "compiled":
            raise ClayoutError(f"the compiled path was asked for, but {exc}") from None
        return Library(None, "", f"numpy path: {exc}")
    built = Library(dll, path, "").function("clayout_cpu_built")().decode()
    return Library(dll, path, f"compiled moves ({os.path.basename(cc[0])} {flags}; {built})")


def status(path: str | None = None) -> str:
    """What a cpu engine on ``path`` (None: CLAYOUT_CPU's, the default engine's)
    uses and why, in one line."""
    try:
        return library(choice() if path is None else path).reason
    except ClayoutError as exc:
        return str(exc)
