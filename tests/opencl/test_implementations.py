"""Every OpenCL implementation present: how the ICD loader finds Intel's CPU
runtime in the virtual environment (runtime/opencl/vendors.py), what
``clayout devices`` says of each, and quiet builds on each (a driver's build
log only with CLAYOUT_DEBUG=1). The device tests themselves run once per
implementation through the ``cl_engine`` fixture (tests/conftest.py).
"""
import os
import warnings

import numpy as np

import runtime
from tests.conftest import IMPLEMENTATIONS, needs, run

from runtime.opencl import vendors

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/vendors.py",)


def test_prepare_writes_a_corrected_icd_beside_the_systems(tmp_path):
    prefix, system = tmp_path / "venv", tmp_path / "system"
    (prefix / "lib").mkdir(parents=True)
    system.mkdir()
    (system / "pocl.icd").write_text("libpocl.so.2\n")
    assert vendors.prepare(str(prefix), str(system)).startswith("no libintelocl.so in ")
    assert not (prefix / "etc").exists()
    (prefix / "lib" / "libintelocl.so").write_bytes(b"")
    where = prefix / "etc" / "OpenCL" / "vendors"
    where.mkdir(parents=True)
    (where / "intel-cpu.icd").write_text("/opt/anaconda1anaconda2anaconda3/lib/libintelocl.so\n")
    (where / "intel-fpga_emu.icd").write_text("/opt/anaconda1anaconda2anaconda3/lib/x.so\n")
    said = vendors.prepare(str(prefix), str(system))
    assert said == f"{where}: intel-cpu.icd -> {prefix / 'lib' / 'libintelocl.so'}, pocl.icd"
    assert sorted(os.listdir(where)) == ["clayout-vendors.txt", "intel-cpu.icd", "pocl.icd"]
    assert (where / "intel-cpu.icd").read_text() == f"{prefix / 'lib' / 'libintelocl.so'}\n"
    assert (where / "pocl.icd").read_text() == "libpocl.so.2\n"


def test_use_points_the_loader_only_at_a_folder_make_wrote(tmp_path, monkeypatch):
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    assert vendors.use(str(tmp_path)) is None and "OCL_ICD_VENDORS" not in os.environ
    where = tmp_path / "etc" / "OpenCL" / "vendors"
    where.mkdir(parents=True)
    (where / vendors.MARKER).write_text("x")
    assert vendors.use(str(tmp_path)) == str(where) == os.environ["OCL_ICD_VENDORS"]
    monkeypatch.setenv("OCL_ICD_VENDORS", "/somewhere/else")   # the user's choice wins
    assert vendors.use(str(tmp_path)) is None and os.environ["OCL_ICD_VENDORS"] == "/somewhere/else"


def test_devices_lists_each_implementation_and_how_to_choose(capsys):
    code, out, err = run(capsys, "devices")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(lines) >= len(IMPLEMENTATIONS) >= 1
    assert all("images over buffers " in line for line in lines)
    if len(lines) > 1:
        assert "choose one with PYOPENCL_CTX=P:D" in out


def test_builds_are_quiet_and_the_log_is_there_with_debug(cl_engine, capfd, monkeypatch):
    """A new program on each implementation: no CompilerWarning reaches the
    caller; CLAYOUT_DEBUG=1 prints the driver's log (Intel's runtime has one
    on every build, PoCL none) on stderr."""
    from runtime.opencl import programs
    cl = needs("pyopencl")
    x = np.arange(2 * 7 * 3 * 5, dtype=np.float32).reshape(2, 7, 3, 5)
    for debug in (False, True):
        programs.clear_cache()
        if debug:
            monkeypatch.setenv("CLAYOUT_DEBUG", "1")
        with warnings.catch_warnings():
            warnings.simplefilter("error", cl.CompilerWarning)
            image = runtime.to_image(x, "tinygrad_conv_weight", engine=cl_engine)
        assert np.array_equal(image, runtime.to_image(x, "tinygrad_conv_weight"))
        err = capfd.readouterr().err
        if not debug:
            assert err == ""
        elif "Intel" in cl_engine.device.platform:
            assert err.startswith("clayout: OpenCL build log: ")
