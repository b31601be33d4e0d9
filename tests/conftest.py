"""Shared test helpers: ``bits()`` (the one raw-bits view every test compares
with), ``to_img`` / ``from_img`` (one engine's conversion to and from an
image), ``run`` and ``run_sub`` (the clayout command in-process and as a
subprocess), and the OpenCL fixtures: the engine, and the rule that an OpenCL
test never skips in CI (CI=true has PoCL: no device there is a failure).

Tiers: ``CLAYOUT_TEST_PROFILE`` picks ``dev``, ``ci`` or ``thorough``
(default: ``ci`` when CI=true, else ``dev``). The profile is hypothesis's
settings profile of the same name (max_examples: ``dev`` 30, ``ci`` 50,
``thorough`` 120; tests/strategies.py scales ``SETTINGS``, ``FEW`` and
``scaled()`` from it) and says which cases run: a case marked ``thorough``
(``tiered()`` marks the cases of a full grid outside its covering set) is
deselected, not skipped, unless the profile is ``thorough``; the run's
summary says how many were. A few tests size a loop by ``THOROUGH`` (their
docstrings say what the smaller size still proves).

Checks that run in child processes of their own (``start_child``) are queued
as soon as the run's tests are known and run in the background, one at a
time, beside the rest of the suite; their test waits for them
(``child_result``), and a test marked ``alone`` pauses them while it runs."""
import hashlib
import importlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from implementations import implementations

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# the suite's import path for a test file run as a script (a child of its own): the
# repository, and tests/ (conftest, strategies, ...; the folders of test files are
# packages there: ``from opencl.test_accessor import ...``)
# (run with PYTHONSAFEPATH: the script's own folder, whose conftest is not the suite's,
# is not put first on the path)
SUITE_PATH = os.pathsep.join(map(str, [ROOT, TESTS]))

# -- tiers ----------------------------------------------------------------------------------
PROFILES = {"dev": 30, "ci": 50, "thorough": 120}   # hypothesis max_examples of each
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PROFILE = os.environ.get("CLAYOUT_TEST_PROFILE") or ("ci" if IN_CI else "dev")
if PROFILE not in PROFILES:
    raise pytest.UsageError(f"CLAYOUT_TEST_PROFILE={PROFILE!r}; allowed: {', '.join(PROFILES)}")
THOROUGH = PROFILE == "thorough"
for _name, _count in PROFILES.items():
    # derandomized in CI (as before tiers), and in the ci profile wherever it runs
    settings.register_profile(
        _name, max_examples=_count, deadline=None, derandomize=IN_CI or _name == "ci",
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much])
settings.load_profile(PROFILE)

# the cpu engine's compiled moves are built into a folder of this run's own (removed at
# its end), never into the user's cache; children inherit it, so the run builds them once
if not os.environ.get("CLAYOUT_CPU_CACHE"):
    os.environ["CLAYOUT_CPU_CACHE"] = tempfile.mkdtemp(prefix="clayout-cpu-moves-")
    _CPU_CACHE_MADE = os.environ["CLAYOUT_CPU_CACHE"]
else:
    _CPU_CACHE_MADE = None
CPU_PATHS = ("compiled", "numpy")

# pytest-xdist's workers (make test runs two): each builds its OpenCL programs into a PoCL
# kernel cache of its own, beside PoCL's default one (where a run without workers builds):
# $XDG_CACHE_HOME/pocl/kcache-clayout-gwN. PoCL's on-disk cache is not safe for two
# processes building the same kernels at once (pocl/pocl#430, #1480); a worker's cache
# is kept, so the next run on this machine finds its programs built.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and not os.environ.get("POCL_CACHE_DIR"):
    _XDG = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ["POCL_CACHE_DIR"] = os.path.join(_XDG, "pocl", f"kcache-clayout-{_WORKER}")


@pytest.fixture(scope="module", params=CPU_PATHS)
def cpu_path(request):
    """The cpu engine's path for a module's tests, in turn: its compiled
    moves (CI's machine has a C compiler: a failed build fails the test),
    then numpy. The default cpu engine (engine="cpu") is, meanwhile, one on
    that path (runtime.cpu.engine.CpuEngine(path=...)), and CLAYOUT_CPU says
    the same to a child process. Plans are cached per path."""
    from runtime.cpu import engine as cpu_engine
    with pytest.MonkeyPatch.context() as m:
        m.setattr(cpu_engine, "ENGINE", cpu_engine.CpuEngine(request.param))
        m.setenv("CLAYOUT_CPU", request.param)
        yield request.param


def tiered(cases, covered, ids=None) -> list:
    """``cases`` as pytest.param values (a tuple case is unpacked into the
    parameters), those outside the covering set (``covered(case)`` false)
    marked ``thorough``: the full grid runs in the thorough tier, the
    covering set in every tier."""
    return [pytest.param(*(case if isinstance(case, tuple) else (case,)),
                         id=None if ids is None else ids(case),
                         marks=() if covered(case) else pytest.mark.thorough)
            for case in cases]


def pytest_configure(config):
    config.addinivalue_line("markers", "thorough: a case outside its test's covering set; runs "
                            "only with CLAYOUT_TEST_PROFILE=thorough (make test-thorough)")
    config.addinivalue_line("markers", "alone: no background child process runs beside this "
                            "test (tests/conftest.py, start_child)")


_DESELECTED = []


def _second_implementation_repeat(item, seen: set) -> bool:
    """A case on an OpenCL implementation other than the first (Intel's CPU
    runtime beside PoCL), or through staged image access, whose test
    function already has one that way."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    impl = params.get("cl_engine")
    other = impl is not None and IMPLEMENTATIONS and impl != IMPLEMENTATIONS[0][0]
    staged = params.get("cl_image_engine") == "staged"
    if not (other or staged):
        return False
    key = (item.module.__name__ if item.module else "", item.originalname, impl, staged)
    if key in seen:
        return True
    seen.add(key)
    return False


def pytest_collection_modifyitems(config, items):
    """Outside the thorough tier, deselect (not skip) the cases marked
    ``thorough``, and on the second OpenCL implementation (and through
    staged image access) every case of a test but its first: each test runs
    there, every case runs on the first implementation (PoCL) with direct
    access, and the thorough tier runs every case every way."""
    if THOROUGH:
        return
    seen: set = set()
    gone = [item for item in items if item.get_closest_marker("thorough") is not None
            or _second_implementation_repeat(item, seen)]
    if gone:
        dropped = set(map(id, gone))
        items[:] = [item for item in items if id(item) not in dropped]
        config.hook.pytest_deselected(items=gone)
        _DESELECTED.extend(gone)


# -- checks that run in child processes, in the background ----------------------------------
# Under pytest-xdist the first worker (gw0) runs every child, the others wait for the
# results in the shared folder below (made by the main process, inherited by the workers):
# children start as soon as the run's tests are known, whichever worker runs their test.
RUNS_CHILDREN = _WORKER in (None, "gw0")
if not _WORKER and not os.environ.get("CLAYOUT_TEST_CHILDREN"):
    os.environ["CLAYOUT_TEST_CHILDREN"] = tempfile.mkdtemp(prefix="clayout-tests-")
    _CHILDREN_MADE = os.environ["CLAYOUT_TEST_CHILDREN"]
else:
    _CHILDREN_MADE = None
CHILDREN_FOLDER = Path(os.environ.get("CLAYOUT_TEST_CHILDREN") or tempfile.mkdtemp())


class _Child:
    """One queued child process: its command, where its output and exit
    status go (files named by its key, in the shared folder), and an event
    set once it has finished (or was killed)."""

    def __init__(self, key, argv, env, cwd, timeout: float):
        self.argv, self.env, self.cwd, self.timeout = argv, env, cwd, timeout
        stem = CHILDREN_FOLDER / hashlib.sha1(repr(key).encode()).hexdigest()[:16]
        self.out, self.err = stem.with_suffix(".out"), stem.with_suffix(".err")
        self.status = stem.with_suffix(".status")   # written last: "rc N", "timeout", "error X"
        self.proc: subprocess.Popen | None = None
        self.done = threading.Event()


_CHILDREN: dict = {}     # key: _Child
_QUEUE: queue.Queue = queue.Queue()
# held by the runner while it starts a child, and by a test marked ``alone`` while it runs
_MACHINE = threading.Lock()
_FOLDER: list = []       # the temporary folder of their files, made on first use


def _run_children() -> None:
    """The background runner: one child at a time, in the order they were
    queued, so that they take one core and leave the suite the other."""
    while (child := _QUEUE.get()) is not None:
        try:
            with _MACHINE, open(child.out, "w") as o, open(child.err, "w") as e:
                child.proc = subprocess.Popen(child.argv, env=child.env, cwd=child.cwd,
                                              stdout=o, stderr=e)
            try:
                status = f"rc {child.proc.wait(timeout=child.timeout)}"
            except subprocess.TimeoutExpired:
                status = "timeout"
                child.proc.kill()
                child.proc.wait()
        except Exception as exc:  # noqa: BLE001 - its test reports it
            status = f"error {exc!r}"
        tmp = child.status.with_suffix(".tmp")
        tmp.write_text(status)
        tmp.replace(child.status)
        child.done.set()


def _folder() -> Path:
    """The children's temporary folder (removed at the end of the run), and
    their runner, both made on first use."""
    if not _FOLDER:
        _FOLDER.append(Path(tempfile.mkdtemp(prefix="clayout-tests-")))
        threading.Thread(target=_run_children, name="clayout test children", daemon=True).start()
    return _FOLDER[0]


def child_dir(name: str) -> Path:
    """A folder of its own for a child's files (removed at the end of the run)."""
    path = _folder() / name
    path.mkdir(exist_ok=True)
    return path


def start_child(key, argv, env=None, cwd=None, timeout: float = 300) -> None:
    """Queue ``argv`` (unless ``key`` already is) for the background runner,
    its output into files that ``child_result(key)`` reads: for a test whose
    check runs in child processes of its own (tests/cross/test_caches.py,
    tests/cross/test_imports.py, tests/opencl/test_opencl_kernels.py). A child's PoCL
    kernel cache is the children's own (unless ``env`` names one): PoCL's
    on-disk cache is not safe for two processes building the same kernels
    at once (pocl/pocl#430, #1480; a build in the suite crashed in PoCL
    while a child built the same kernels), and the children run one at a
    time. On a pytest-xdist worker other than the first the child is only
    noted: the first worker runs it."""
    if key in _CHILDREN:
        return
    env = dict(os.environ if env is None else env)
    if env.get("POCL_CACHE_DIR") in (None, os.environ.get("POCL_CACHE_DIR")):   # the suite's
        env["POCL_CACHE_DIR"] = str(child_dir("pocl-cache"))
    _CHILDREN[key] = _Child(key, argv, env, cwd, timeout)
    if RUNS_CHILDREN:
        _QUEUE.put(_CHILDREN[key])


def child_result(key) -> subprocess.CompletedProcess:
    """The child ``key`` once it has finished, with its stdout and stderr as
    text (the test fails where it ran over its timeout)."""
    child = _CHILDREN[key]
    if RUNS_CHILDREN:
        child.done.wait()
    else:   # the first worker runs it: wait for its status file (its queue may be long)
        end = time.monotonic() + 1800
        while not child.status.exists():
            if time.monotonic() > end:
                pytest.fail(f"the child {key} did not finish on the worker running children")
            time.sleep(0.2)
    status = child.status.read_text()
    if status.startswith("error"):
        pytest.fail(f"the child {key} could not be started: {status[6:]}")
    if status == "timeout":
        pytest.fail(f"the child {key} ran over {child.timeout} s and was killed")
    return subprocess.CompletedProcess(child.argv, int(status.split()[1]),
                                       child.out.read_text(), child.err.read_text())


@pytest.fixture(autouse=True)
def _fresh_settings():
    """clayout reads the settings a call needs once per process
    (runtime/settings.py): each test starts from the environment as it is."""
    from runtime import settings
    settings.refresh()
    yield


@pytest.fixture
def monkeypatch(monkeypatch):
    """pytest's monkeypatch, whose environment changes clayout sees at once
    (its settings refreshed after each setenv / delenv, and after the undo)."""
    from runtime import settings
    setenv, delenv = monkeypatch.setenv, monkeypatch.delenv

    def set_and_refresh(*args, **kwargs):
        setenv(*args, **kwargs)
        settings.refresh()

    def del_and_refresh(*args, **kwargs):
        delenv(*args, **kwargs)
        settings.refresh()
    monkeypatch.setenv, monkeypatch.delenv = set_and_refresh, del_and_refresh
    yield monkeypatch
    monkeypatch.undo()
    settings.refresh()


@pytest.fixture(autouse=True)
def _alone(request):
    """A test marked ``alone`` runs while no background child does: the one
    running is stopped (SIGSTOP) until the test is done, and none starts
    meanwhile. For a test whose subject is a timing window that another
    process competing for the CPU would shift. It must not wait for a child."""
    if request.node.get_closest_marker("alone") is None or not hasattr(signal, "SIGSTOP"):
        yield
        return
    with _MACHINE:
        running = [c.proc for c in _CHILDREN.values()
                   if c.proc is not None and c.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            for proc in running:
                proc.send_signal(signal.SIGCONT)


def pytest_collection_finish(session):
    """A test module's ``start_early(items)`` gets its selected tests as soon
    as the run's tests are known: a test whose check runs in child processes
    queues them there (``start_child``), so that they run in the background,
    one at a time on another core, beside the rest of the suite instead of
    holding it up when the test comes; the test then waits for its own and
    checks what they printed."""
    if session.config.option.collectonly:
        return
    modules = {}
    for item in session.items:
        module = getattr(item, "module", None)
        if hasattr(module, "start_early"):
            modules.setdefault(module, []).append(item)
    for module, items in modules.items():
        module.start_early(items)


def pytest_sessionfinish(session):
    """Stop the runner and any child still running; remove their output. The
    first of pytest-xdist's workers first lets its queued children finish:
    another worker's test may be waiting for one."""
    if _WORKER and RUNS_CHILDREN:
        for child in list(_CHILDREN.values()):
            child.done.wait(child.timeout + 60)
    _QUEUE.put(None)
    for child in _CHILDREN.values():
        if child.proc is not None and child.proc.poll() is None:
            child.proc.kill()
            child.proc.wait()
    for folder in _FOLDER + [f for f in (_CPU_CACHE_MADE, _CHILDREN_MADE) if f]:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        f"clayout test profile {PROFILE} (hypothesis max_examples {PROFILES[PROFILE]}): "
        + ("every case selected" if THOROUGH else
           f"{len(_DESELECTED)} thorough-tier cases deselected "
           "(CLAYOUT_TEST_PROFILE=thorough runs them)"))


BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a) -> np.ndarray:
    """Raw bits of an array (NaN == NaN, -0.0 != 0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(BITS[a.dtype.itemsize])


def same_bits(a, b) -> bool:
    """Same shape, dtype and raw bits (NaN == NaN, -0.0 != 0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


def in_threads(work, n: int = 8) -> None:
    """``work(t)`` for t in range(n), on n threads released together; an
    exception in any of them fails the calling test, naming them all."""
    errors, start = [], threading.Barrier(n)

    def run(t):
        start.wait()
        try:
            work(t)
        except Exception as exc:  # noqa: BLE001 - reported below, with its thread
            errors.append((t, exc))
    threads = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def image_side(layout, dims, dtype="f32"):
    """The ImageDesc of ``layout`` (a name or an ImageLayout) at ``dims``."""
    from runtime import ImageDesc, image_layout
    return ImageDesc(image_layout(layout), dims, dtype)


def to_img(engine, data, layout, src, dtype):
    """``engine``'s image of ``data`` held in the MemoryDesc ``src``."""
    return engine.convert(src, image_side(layout, src.dims, dtype), data)


def from_img(engine, image, layout, dst):
    """``engine``'s buffer in the MemoryDesc ``dst`` read from ``image`` (1-D)."""
    from runtime.algebra import dtypes
    side = image_side(layout, dst.dims, dtypes.of_array(np.asarray(image)))
    return engine.convert(side, dst, image)


def run(capsys, *argv):
    """main() in-process: (exit code, stdout, stderr)."""
    from runtime import cli
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_sub(*argv, cwd=None, env=None, timeout=60):
    """``python -m runtime ARGV`` as a subprocess (CompletedProcess, text);
    ``env``: variables to set, or to remove where the value is None
    (CLAYOUT_DEBUG is removed unless given)."""
    full = dict(os.environ, PYTHONPATH=str(ROOT))
    full.pop("CLAYOUT_DEBUG", None)
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return subprocess.run([sys.executable, "-m", "runtime", *map(str, argv)], capture_output=True,
                          text=True, cwd=cwd, env=full, timeout=timeout)


def with_facts(monkeypatch, engine, **facts):
    """``engine`` (an OpenCL engine) as a device with other facts for the
    time of the test (its limits, its alignments: a stand-in of a device
    this machine does not have): its Device record replaced
    (runtime.opencl.device.Device) and a DeviceMemory over it."""
    import dataclasses
    from runtime.opencl.memory import DeviceMemory
    device = dataclasses.replace(engine.device, **facts)
    monkeypatch.setattr(engine, "device", device)
    monkeypatch.setattr(engine, "memory", DeviceMemory(device))
    return engine


# the optional packages tests use, and the extra of pyproject.toml that installs each
EXTRAS = {"onnx": "model", "safetensors": "model", "onnxruntime": "test", "cv2": "test",
          "PIL": "image", "matplotlib": "plot", "tflite": "test", "ai_edge_litert": "test", "flatbuffers": "test",
          "pyopencl": "the base install", "tests": "a source checkout"}


def needs(name: str):
    """The module ``name`` (an optional package, or a test helper that
    imports one): skipped where it is missing, outside CI; a failure in CI,
    where `make test` installs every extra. At a module's top it skips or
    fails the whole file."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        top = name.split(".")[0]
        extra = EXTRAS.get(top, "test")
        how = extra if " " in extra else f"pip install 'clayout[{extra}]'"
        message = f"{name} is not available ({exc}): {how}"
        if IN_CI:
            pytest.fail(f"{message} (CI=true: every extra is installed)", pytrace=False)
        pytest.skip(message, allow_module_level=True)


def require(what: str, ok: bool, why: str = "") -> None:
    """Skip without ``what`` outside CI; fail in CI."""
    if ok:
        return
    message = f"{what} is not available{': ' + why if why else ''}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: OpenCL tests must run)")
    pytest.skip(message)


OCLGRIND_ICD = Path("/usr/lib/oclgrind/liboclgrind-rt-icd.so")


def run_under_oclgrind(script: str, tmp_path: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``python script child`` on oclgrind's platform alone (an ICD file in
    a temporary OCL_ICD_VENDORS folder), with data-race checks, and assert
    that it exits 0 with '0 mismatches' printed and that oclgrind reported
    nothing; the finished process, for further checks.
    (OCLGRIND_UNINITIALIZED is not used: oclgrind 21.10's plugin aborts on
    LLVM 15's `freeze` instruction and flags image reads as uninitialized.)"""
    require("oclgrind", OCLGRIND_ICD.exists() and shutil.which("oclgrind") is not None,
            "apt-get install oclgrind")
    (tmp_path / "oclgrind.icd").write_text(f"{OCLGRIND_ICD}\n")
    log = tmp_path / "oclgrind.log"
    env = dict(os.environ, OCL_ICD_VENDORS=str(tmp_path), OCLGRIND_DATA_RACES="1",
               OCLGRIND_LOG=str(log), PYTHONPATH=SUITE_PATH, PYTHONSAFEPATH="1")
    env.pop("PYOPENCL_CTX", None)
    env.pop("PYOPENCL_TEST", None)
    proc = subprocess.run([sys.executable, script, "child"], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    report = log.read_text() if log.exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + report
    assert "0 mismatches" in proc.stdout, proc.stdout
    assert not report.strip(), "oclgrind reported:\n" + report[:4000]
    for word in ("Invalid read", "Invalid write", "data race", "FATAL", "Uninitialized"):
        assert word not in proc.stderr, proc.stderr[:4000]
    return proc


def opencl_implementations() -> list:
    """(id, device) of every OpenCL implementation present with image
    support (tests/implementations.py), the default engine's first. Empty
    without pyopencl or a device."""
    found = implementations()
    if not found:
        return []
    try:
        from runtime.opencl import engine
        first = engine.default().device if engine.available() else None
    except Exception:  # noqa: BLE001 - the fixture says why
        first = None
    found.sort(key=lambda item: item[1] != first)
    return found


IMPLEMENTATIONS = opencl_implementations()


def pytest_generate_tests(metafunc):
    """Every test that takes ``cl_engine`` (itself or through another
    fixture) runs once per OpenCL implementation present."""
    if "cl_engine" in metafunc.fixturenames and len(IMPLEMENTATIONS) > 1:
        metafunc.parametrize("cl_engine", [i for i, _ in IMPLEMENTATIONS], indirect=True,
                             scope="session")


@pytest.fixture(scope="session")
def default_cl_engine():
    """The default OpenCL engine (``engine="opencl"``) alone, for a test of
    the default itself (its device's limits and alignments)."""
    try:
        from runtime.opencl import engine
        ok = engine.available()
    except ImportError as exc:
        require("an OpenCL device", False, str(exc))
    require("an OpenCL device with image support", ok, engine.why_not())
    return engine.default()


@pytest.fixture(scope="session")
def cl_engine(request, default_cl_engine):
    """The OpenCL engine, once per implementation present (PoCL, Intel's CPU
    runtime: pytest_generate_tests) for a test that takes it; the first is the
    default engine (``engine="opencl"``), the others engines on their own
    device. Asked for by name inside a test (getfixturevalue), the default."""
    chosen = getattr(request, "param", None)
    if not IMPLEMENTATIONS or chosen in (None, IMPLEMENTATIONS[0][0]):
        return default_cl_engine
    import pyopencl as cl
    from runtime.opencl import contexts, engine
    device = dict(IMPLEMENTATIONS)[chosen]
    # the context held while the engine takes it from the queue: Intel's CPU
    # runtime frees a context whose last reference goes, though a queue is on it
    context = cl.Context([device])
    made = engine.OpenCLEngine(queue=cl.CommandQueue(context))
    contexts.register(made)   # the engine Memory objects on its context find, as the default's
    return made


@pytest.fixture(scope="session", params=["direct", "staged"])
def cl_image_engine(request, cl_engine):
    """The engine once per way of reaching images: write_imagef/read_imagef
    kernels (what GPUs use) and buffer kernels plus a buffer<->image copy
    (what CPU devices use), so CI on PoCL checks both."""
    from runtime.opencl.engine import OpenCLEngine
    return OpenCLEngine(queue=cl_engine.queue, image_access=request.param)


def cache_folder() -> str:
    """Where the tests keep what they fetch: $CLAYOUT_TEST_CACHE or ~/.cache/clayout-test."""
    return os.environ.get("CLAYOUT_TEST_CACHE") or \
        os.path.join(os.path.expanduser("~"), ".cache", "clayout-test")


def fetched(what: str, fetch):
    """``fetch(cache)``, or the test fails saying what it downloads and where
    (CI reaches PyPI, so a failed download fails instead of skipping)."""
    cache = cache_folder()
    try:
        return fetch(cache)
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is the message
        pytest.fail(f"cannot fetch {what} ({exc}); these tests download it from PyPI into "
                    f"{cache} (set CLAYOUT_TEST_CACHE to use another folder)", pytrace=False)


@pytest.fixture(scope="session")
def ppocr():
    """The PP-OCRv4 det and rec models, from the pinned PyPI wheel of
    rapidocr-onnxruntime 1.4.4 (fetched once; the package is never installed
    or imported)."""
    from runtime.cli.demo import fetch_ppocr
    paths = fetched("the PP-OCRv4 models (rapidocr-onnxruntime==1.4.4)", fetch_ppocr)
    return {"det": paths["ch_PP-OCRv4_det_infer.onnx"],
            "rec": paths["ch_PP-OCRv4_rec_infer.onnx"]}

