"""clayout's version: one source of truth (pyproject.toml), read by
``runtime.__version__`` and printed by ``clayout --version``."""
from importlib import metadata

import runtime
from runtime.version import from_pyproject

from conftest import ROOT, run, run_sub

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/version.py",)


def test_version_is_pyproject_s():
    want = from_pyproject(ROOT / "pyproject.toml")
    assert want and want[0].isdigit()
    assert runtime.__version__ == want == metadata.version("clayout")


def test_cli_version(capsys):
    assert run(capsys, "--version") == (0, f"clayout {runtime.__version__}\n", "")
    done = run_sub("--version")
    assert (done.returncode, done.stdout) == (0, f"clayout {runtime.__version__}\n")


def test_from_pyproject_reads_the_project_table_only(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.other]\nversion = "9.9"\n\n[project]\nname = "x"\nversion = "1.2.3"\n')
    assert from_pyproject(path) == "1.2.3"
    path.write_text('[tool.other]\nversion = "9.9"\n')
    assert from_pyproject(path) is None
    assert from_pyproject(tmp_path / "missing.toml") is None
