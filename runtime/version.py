"""clayout's version, from one source of truth: ``pyproject.toml``.

An installed clayout (a wheel, or ``pip install -e .``) reads it from the
distribution's metadata, which pip wrote from ``pyproject.toml``; a source
checkout run without installing (``PYTHONPATH=. python -m runtime``) reads
``pyproject.toml`` itself.

    >>> import runtime
    >>> runtime.__version__                                         # doctest: +SKIP
    '0.1.0'
"""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "clayout"


def from_pyproject(path: Path) -> str | None:
    """The ``version`` of the ``[project]`` table of ``path``, or None."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = project and re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M)
    return found.group(1) if found else None


def version() -> str:
    """The installed distribution's version, else the source checkout's."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    return from_pyproject(Path(__file__).resolve().parents[1] / "pyproject.toml") or "unknown"


__version__ = version()
