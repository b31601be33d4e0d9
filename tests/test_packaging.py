"""The package list in pyproject.toml: every subpackage of runtime/ and the two
data packages, so a wheel carries the kernels and templates."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
