"""Which OpenCL implementations the ICD loader finds: the system's (Debian's
PoCL in /etc/OpenCL/vendors) and, where ``make`` installed it into the
virtual environment, Intel's CPU runtime from PyPI (``clayout[intel-cpu]``:
intel-opencl-rt).

The wheel's own ICD file names a path that does not exist
(``/opt/anaconda1anaconda2anaconda3/lib/libintelocl.so``), so the loader
never finds it. ``vendors.prepare()`` (run by ``make``) writes
``<venv>/etc/OpenCL/vendors`` with a corrected ``intel-cpu.icd`` beside copies
of the system's ICD files, and a marker file. When that marker is there and
``OCL_ICD_VENDORS`` is not set, importing runtime.opencl points the loader at
that folder (:func:`use`), so both implementations are listed without the
user exporting anything; a set ``OCL_ICD_VENDORS`` always wins. A driver
installed on the system later is seen once ``make`` runs again.

``PYOPENCL_CTX`` chooses among the devices (``clayout devices`` lists them).

Example::

    $ python -c "from runtime.opencl import vendors; print(vendors.prepare())"
    .venv/etc/OpenCL/vendors: intel-cpu.icd -> .venv/lib/libintelocl.so, pocl.icd
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

SYSTEM = "/etc/OpenCL/vendors"
MARKER = "clayout-vendors.txt"
INTEL = "libintelocl.so"
BROKEN = ("intel-fpga_emu.icd",)   # the wheel's FPGA emulator: its path does not exist either


def folder(prefix: str = sys.prefix) -> str:
    """The virtual environment's vendors folder."""
    return os.path.join(prefix, "etc", "OpenCL", "vendors")


def prepare(prefix: str = sys.prefix, system: str = SYSTEM) -> str:
    """Write the vendors folder of ``prefix`` (see the module docstring) when
    Intel's runtime is installed there; what was done, in one line."""
    lib = os.path.join(prefix, "lib", INTEL)
    if not os.path.isfile(lib):
        return f"no {INTEL} in {prefix}/lib: only the system's OpenCL implementations"
    where = folder(prefix)
    os.makedirs(where, exist_ok=True)
    for name in BROKEN:
        path = os.path.join(where, name)
        if os.path.exists(path):
            os.remove(path)
    with open(os.path.join(where, "intel-cpu.icd"), "w") as f:
        f.write(lib + "\n")
    copied = []
    for icd in sorted(glob.glob(os.path.join(system, "*.icd"))):
        shutil.copyfile(icd, os.path.join(where, os.path.basename(icd)))
        copied.append(os.path.basename(icd))
    with open(os.path.join(where, MARKER), "w") as f:
        f.write("written by runtime.opencl.vendors.prepare() (clayout's make): intel-cpu.icd "
                f"names {lib}; the other .icd files are copies of {system}\n")
    return f"{where}: intel-cpu.icd -> {lib}" + "".join(f", {n}" for n in copied)


def use(prefix: str = sys.prefix) -> str | None:
    """Point the ICD loader at the virtual environment's vendors folder when
    ``make`` wrote it and ``OCL_ICD_VENDORS`` is unset; the folder, or None."""
    where = folder(prefix)
    if "OCL_ICD_VENDORS" in os.environ or not os.path.isfile(os.path.join(where, MARKER)):
        return None
    os.environ["OCL_ICD_VENDORS"] = where
    return where
