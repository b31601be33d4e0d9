"""The OpenCL implementations present, one device each: what the test
fixtures (tests/conftest.py) and the differential check's child
(tests/differential.py) run on. Imports nothing of the suite, so a child
process can use it without conftest's set-up."""
from __future__ import annotations


def implementations() -> list:
    """(id, device) of every OpenCL platform with a device that has image
    support, in the platforms' order: PoCL ("pocl"), Intel's CPU runtime
    ("intel"), any other by its name. Empty without pyopencl or a device."""
    try:
        import runtime.opencl  # noqa: F401  (first: it points the ICD loader at .venv's vendors)
        import pyopencl as cl
        platforms = cl.get_platforms()
    except Exception:  # noqa: BLE001 - no pyopencl, no ICD loader, no platform
        return []
    found = []
    for platform in platforms:
        try:
            device = next(d for d in platform.get_devices() if d.image_support)
        except (StopIteration, cl.Error):
            continue
        name = platform.name.lower()
        short = "pocl" if "portable" in name else "intel" if "intel" in name else \
            "".join(c for c in name if c.isalnum())[:12]
        found.append((short, device))
    return found
