"""The package list in pyproject.toml: every subpackage of runtime/ and the two
data packages, so a wheel carries the kernels and templates, and every file
of those two folders (the templates' plain C included) is package data."""
import tomllib
from fnmatch import fnmatch
from pathlib import Path

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/sources.py",)

ROOT = Path(__file__).resolve().parents[2]


def test_package_list_is_complete():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "runtime").rglob("__init__.py")}
    mapped = set(config["package-dir"])
    assert mapped == {"runtime.cl_kernels", "runtime.templates"}
    assert listed == on_disk | mapped, "pyproject.toml [tool.setuptools] packages is out of date"
    for package, folder in config["package-dir"].items():
        assert (ROOT / folder / "__init__.py").is_file(), package
    assert list((ROOT / "cl_kernels").glob("*.cl")) and list((ROOT / "templates").glob("*.mako"))


def test_every_kernel_and_template_file_is_package_data():
    """A file of cl_kernels/ or templates/ that no package-data pattern names
    would be missing from a wheel (templates/cpu_common.c is read beside the
    Mako templates when the cpu engine's library is rendered)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in config["package-dir"].items():
        patterns = config["package-data"][package]
        files = [p.name for p in (ROOT / folder).iterdir()
                 if p.is_file() and p.name != "__init__.py" and not p.name.endswith(".pyc")]
        missing = [f for f in files if not any(fnmatch(f, pat) for pat in patterns)]
        assert files and not missing, f"{folder}/: {missing} not in package-data {patterns}"
