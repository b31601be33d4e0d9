"""The cpu engine's compiled moves (runtime/cpu/native.py, compiled.py) and
the machine it reads (runtime/cpu/machine.py): the choice of path and the
reasons it gives, the library's disk cache, the checks before a call, and a
sweep under AddressSanitizer and UndefinedBehaviorSanitizer (thorough tier).
Bits are checked against the reference by test_cpu_vs_reference.py and
test_cpu_fastpath.py, on both paths."""
import multiprocessing
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ROOT, in_threads, run_sub, same_bits
from strategies import small_tiles
from runtime import ClayoutError, MemoryDesc, reorder
from runtime.cpu import compiled, machine, native
from runtime.cpu.engine import CpuEngine

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/desc.py", "runtime/cpu/__init__.py", "runtime/cpu/compiled.py",
           "runtime/cpu/engine.py", "runtime/cpu/geometry.py", "runtime/cpu/machine.py",
           "runtime/cpu/native.py")

COMPILED = CpuEngine("compiled")


@pytest.fixture
def fresh_library():
    """The library cache emptied before and after (a test changes what it would hold)."""
    native.library.cache.clear()
    yield
    native.library.cache.clear()


def test_ci_machine_builds_the_compiled_moves():
    """CI's machine has a C compiler: the default path is the compiled one
    and `clayout devices` says so, with the machine's caches."""
    lib = native.library("compiled")
    assert lib.dll is not None and os.path.isfile(lib.path)
    assert lib.path.startswith(os.environ["CLAYOUT_CPU_CACHE"])   # the run's own folder
    done = run_sub("devices", env={"CLAYOUT_CPU": None})
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("cpu: L1d ") and "core(s)" in lines[0]
    assert lines[1].startswith("cpu engine: compiled moves (")


def test_numpy_forced_and_a_bad_choice_refused(monkeypatch):
    monkeypatch.setenv("CLAYOUT_CPU", "numpy")
    assert native.status() == "numpy path (asked for)" == CpuEngine().status()
    dims = (1, 3, 5, 7)
    src, dst = MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc")
    assert CpuEngine().plan(src, dst).method != "compiled"
    monkeypatch.setenv("CLAYOUT_CPU", "fast")
    eng = CpuEngine()     # made (import runtime never fails on it), refused at every use
    for _ in range(2):
        with pytest.raises(ClayoutError, match=r"CLAYOUT_CPU='fast' is not one of auto, "
                                               r"compiled, numpy"):
            reorder(np.zeros(105, np.float32), src, dst, engine=eng)
    with pytest.raises(ClayoutError, match=r"cpu path 'fast' is not one of auto, compiled, "
                                           r"numpy"):
        CpuEngine("fast")


def test_without_a_compiler_numpy_says_why(monkeypatch, fresh_library):
    monkeypatch.setattr(native, "compiler", lambda: None)
    lib = native.library("auto")
    assert lib.dll is None and lib.reason == \
        "numpy path: no C compiler found (set CC, or install cc, gcc or clang)"
    with pytest.raises(ClayoutError, match="the compiled path was asked for, but no C "
                                           "compiler found"):
        native.library("compiled")


def test_a_failing_compiler_is_named(monkeypatch, tmp_path, fresh_library):
    cc = tmp_path / "broken-cc"
    cc.write_text("#!/bin/sh\necho 'broken-cc: no license' >&2\nexit 3\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("CLAYOUT_CPU_CACHE", str(tmp_path / "cache"))
    lib = native.library("auto")
    assert lib.dll is None
    assert lib.reason == f"numpy path: {cc} could not build the compiled moves: " \
                         "broken-cc: no license"


def test_built_once_and_keyed_by_flags(monkeypatch, tmp_path):
    """A second build of one source finds it on disk; other flags or another
    source make another file (a small source: the library itself is built
    once per run, by the other tests)."""
    monkeypatch.setenv("CLAYOUT_CPU_CACHE", str(tmp_path))
    cc = native.compiler()
    first, _ = native.build("int clayout_test_a(void) { return 1; }\n", cc)
    stamp = os.stat(first).st_mtime_ns
    assert native.build("int clayout_test_a(void) { return 1; }\n", cc)[0] == first
    assert os.stat(first).st_mtime_ns == stamp
    other, flags = native.build("int clayout_test_a(void) { return 1; }\n", cc,
                                ("-DCLAYOUT_UNUSED=1",))
    third, _ = native.build("int clayout_test_b(void) { return 2; }\n", cc)
    assert len({first, other, third}) == 3 and flags.endswith("-DCLAYOUT_UNUSED=1")
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p)
                                                  for p in (first, other, third))


def test_a_call_checks_the_buffers():
    dims = (1, 64, 40, 40)
    src, dst = MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc")
    (c,) = COMPILED.plan(src, dst).copies
    assert c.method == "compiled" and len(c.native.parts) >= 1
    x = np.zeros(src.span, np.float32)
    with pytest.raises(ValueError, match=r"destination buffer \(float32, 409596 bytes\) does "
                                         r"not hold the compiled copy's 409600 bytes"):
        compiled.run(c, x, np.empty(dst.span - 1, np.float32))
    with pytest.raises(ValueError, match="source buffer"):
        compiled.run(c, x.view(np.uint8), np.empty(dst.span, np.float32))


def _conversions(seed: int):
    """Conversions whose compiled copies have several parts (tiles made small)."""
    rng = np.random.default_rng(seed)
    out = []
    for src_tag, dst_tag, dt in (("nchw", "nhwc", "f32"), ("nhwc", "nChw16c", "f16"),
                                 ("nChw16c", "nchw", "f32"), ("nchw", "nChw8c", "s8")):
        dims = (2, 21, 9, 13)
        src, dst = MemoryDesc(dims, dt, tag=src_tag), MemoryDesc(dims, "f32", tag=dst_tag)
        x = (rng.standard_normal(src.span) * 50).astype(src.dtype.np)
        out.append(reorder(x, src, dst, engine=COMPILED))
    return out


def test_many_threads_share_the_workers():
    """Eight threads converting at once (the pool's threads take parts of
    some copies, the callers run the others' alone) give the single-threaded
    bits."""
    with small_tiles(small=1 << 8, tile=1 << 7):
        dims = (2, 21, 9, 13)
        assert len(COMPILED.plan(MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc"))
                   .copies[0].native.parts) > 1
        want = {k: _conversions(k) for k in range(16)}
        got = {}

        def work(t):
            for k in range(t, 16, 8):
                got[k] = _conversions(k)
        in_threads(work, 8)
    assert all(same_bits(a, b) for k in want for a, b in zip(got[k], want[k]))


def _in_child(queue):
    with small_tiles(small=1 << 8, tile=1 << 7):
        queue.put([a.tobytes() for a in _conversions(3)])


def test_a_forked_child_starts_its_own_workers():
    """The parent's pool threads do not cross a fork: a child converting with
    several parts gets the parent's bits (and does not wait forever)."""
    with small_tiles(small=1 << 8, tile=1 << 7):
        want = [a.tobytes() for a in _conversions(3)]   # the workers now exist
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and got == want


def test_machine_read_from_sysfs(tmp_path):
    root = tmp_path / "cache"
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "2048K"), ("3", "Unified", "30M")]):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("coherency_line_size", "64")):
            (d / name).write_text(value + "\n")
    assert machine.from_sysfs(str(root)) == {"l1d": 48 << 10, "l2": 2 << 20, "l3": 30 << 20,
                                             "line": 64}
    assert machine.from_sysfs(str(tmp_path / "missing")) == {}
    assert [machine.parse_size(s) for s in ("1G", "512", "0K", "x", "")] == \
        [1 << 30, 512, None, None, None]
    m = machine.machine()
    assert m.cores >= 1 and m.l1d_bytes >= 4096 and m.l2_bytes >= m.l1d_bytes


SWEEP = textwrap.dedent("""
    import numpy as np
    from runtime import engine
    from runtime.algebra.desc import MemoryDesc
    from runtime.cpu import engine as cpu, geometry
    geometry.SMALL_BYTES = 256          # parts and threads on small boxes too
    REF = engine.get("reference")
    names = ("f32", "f16", "bf16", "s32", "s8", "u8")
    n = 0
    for dims in [(1, 3, 5, 7), (2, 17, 3, 9), (1, 20, 8, 8), (1, 32, 4, 8)]:
        for a, b in [("nchw", "nhwc"), ("nhwc", "nChw16c"), ("nChw8c", "nchw"), ("nchw", "nChw16c"),
                     ("nchw", "nChw4c")]:
            for s in names:
                for d in names:
                    src, dst = MemoryDesc(dims, s, tag=a), MemoryDesc(dims, d, tag=b)
                    x = (np.random.default_rng(n).standard_normal(src.span) * 300)
                    x = x.astype(np.float32).astype(src.dtype.np)
                    got = cpu.reorder(x, src, dst)
                    want = REF.convert(src, dst, x)
                    assert np.array_equal(got.view(dst.dtype.bits), want.view(dst.dtype.bits)), \\
                        (dims, a, b, s, d)
                    n += 1
    print("swept", n)
""")

OUT_OF_BOUNDS = textwrap.dedent("""
    import numpy as np
    from runtime.algebra.desc import MemoryDesc
    from runtime.cpu.engine import CpuEngine
    dims = (1, 16, 8, 8)
    eng = CpuEngine("compiled")
    (c,) = eng.plan(MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc")).copies
    fn = eng.library.function(c.native.function)
    x, out = np.zeros(1024, np.float32), np.zeros(1000, np.float32)   # 24 short
    part = c.native.parts[0]
    fn(x.ctypes.data + part.src_offset, out.ctypes.data + part.dst_offset, part.box)
""")


def _sanitized(script: str, tmp_path) -> subprocess.CompletedProcess:
    libs = [subprocess.run(["gcc", f"-print-file-name={n}"], capture_output=True,
                           text=True).stdout.strip() for n in ("libasan.so", "libubsan.so")]
    assert all(os.path.isabs(p) and os.path.exists(p) for p in libs), libs
    env = dict(os.environ, PYTHONPATH=str(ROOT), LD_PRELOAD=" ".join(libs),
               ASAN_OPTIONS="detect_leaks=0", CLAYOUT_CPU="compiled",
               CLAYOUT_CPU_CACHE=str(tmp_path / "sanitized"),
               CLAYOUT_CPU_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all "
                                  "-fno-omit-frame-pointer")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)


@pytest.mark.thorough
def test_sanitizers_find_nothing_in_a_sweep(tmp_path):
    """Every dtype pair over blocked, plain and tail shapes, built with ASan
    and UBSan: the reference's bits, and not one report."""
    done = _sanitized(SWEEP, tmp_path)
    assert done.returncode == 0 and "swept 720" in done.stdout, done.stderr[-3000:]
    assert "runtime error" not in done.stderr and "Sanitizer" not in done.stderr


@pytest.mark.thorough
def test_sanitizers_catch_a_write_past_the_end(tmp_path):
    """The witness that the sweep's silence means something: the same build
    reports a call given a destination 24 elements short."""
    done = _sanitized(OUT_OF_BOUNDS, tmp_path)
    assert done.returncode != 0 and "ERROR: AddressSanitizer" in done.stderr, done.stderr[-2000:]
    assert "clayout_move_4" in done.stderr     # found in the compiled move itself


def test_the_box_is_stated_once():
    """The box a compiled move reads is declared in Python (native.BOX_FIELDS);
    the library's C declares it from there and reads it by field name, and
    _pack writes those fields."""
    from runtime.cpu import compiled, native
    source = native.render()
    assert native.c_struct("clayout_box") in source
    assert "const clayout_box *box = (const clayout_box *)words;" in source
    assert "box[" not in source.split("clayout_box;", 1)[1]      # no word arithmetic on it
    packed = np.frombuffer(compiled._pack((2, 3, 4), (48, 16, 4), (4, 8, 24), 4, 8, 1, 2, 1),
                           native.BOX)[0]
    assert packed["nd"] == 3 and packed["tq"] == 8 and packed["nt"] == 1
    assert packed["shape"].tolist() == [2, 3, 4, 0, 0, 0, 0, 0]
    assert packed["ds"][:3].tolist() == [4, 8, 24]
    assert compiled.BOX_WORDS * 8 == native.BOX.itemsize


def test_the_library_interface_is_stated_once():
    """Every function the library exports (a definition that is not static)
    is a family or one of native.EXPORTS, whose C types ctypes is given; the
    plain C (templates/cpu_common.c) comes first and holds nothing rendered."""
    source = native.render()
    exported = set(re.findall(r"^(?!static)(?:const )?\w+ \*?(clayout_\w+)\(", source, re.M))
    families = {f.name for f in native.families()}
    assert exported == families | set(native.EXPORTS)
    lib = COMPILED.library
    for name in native.EXPORTS:
        assert (lib.function(name).restype, lib.function(name).argtypes) == native.EXPORTS[name]
    common = (ROOT / "templates" / "cpu_common.c").read_text()
    assert source.startswith(common) and "${" not in common and "\n%" not in common
