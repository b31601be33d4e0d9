"""The test map: each test file declares the modules of runtime/ it holds up
(its ``MODULES``), and tests/README.md's table of which test files hold up
each module is made from those declarations.

Every test file declares at least one module, every module it names exists,
every module of runtime/ is named by some test file, and the README's table
is exactly the one the declarations make. After adding a module or a test
file, write its declaration, then ``python tests/cross/test_module_table.py
--write`` rewrites the table.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
ROW = re.compile(r"^\| `(runtime/[^`]*)` \| (.*) \|$")
HEADER = "| module | tests |\n|---|---|\n"

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/",)


def declared() -> dict[str, tuple[str, ...]]:
    """{test file: the modules its MODULES names}, read from the files' text."""
    found = {}
    for path in sorted(TESTS.glob("*/test_*.py")):
        names = ()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MODULES"
                                                    for t in node.targets):
                names = tuple(ast.literal_eval(node.value))
        found[path.relative_to(ROOT).as_posix()] = names
    return found


def table(declarations: dict) -> str:
    """The README's table: one row a module (the package as a whole first),
    its test files in their folders' order."""
    rows: dict[str, list[str]] = {}
    for test, modules in declarations.items():
        for module in modules:
            rows.setdefault(module, []).append(test)
    lines = [f"| `{module}` | " + ", ".join(f"`{t}`" for t in rows[module]) + " |"
             for module in sorted(rows, key=lambda m: (m != "runtime/", m))]
    return HEADER + "\n".join(lines) + "\n"


def readme_table() -> str:
    text = (TESTS / "README.md").read_text()
    start = text.index(HEADER)
    end = start + len(HEADER)
    lines = text[end:].splitlines()
    rows = [line for line in lines[:next((i for i, ln in enumerate(lines) if not ROW.match(ln)),
                                         len(lines))]]
    return HEADER + "\n".join(rows) + "\n"


def write() -> None:
    text = (TESTS / "README.md").read_text()
    old = readme_table()
    (TESTS / "README.md").write_text(text.replace(old, table(declared())))


def problems(found: dict, modules: set) -> list[str]:
    """What is wrong with the declarations ``found`` for the package's
    ``modules``: a file declaring nothing, a module named that does not
    exist, a module no file declares."""
    named = {m for names in found.values() for m in names}
    return ([f"{t} declares no module" for t, names in found.items() if not names]
            + [f"{m} is declared but does not exist" for m in sorted(named - modules)
               if m != "runtime/"]
            + [f"{m} is held up by no test file" for m in sorted(modules - named)])


def package_modules() -> set:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "runtime").rglob("*.py")}


def test_every_test_file_declares_what_it_holds_up():
    assert problems(declared(), package_modules()) == []


def test_the_readme_table_is_the_declarations():
    """The table shows what the test files declare, row for row (after a
    change: python tests/cross/test_module_table.py --write)."""
    assert readme_table() == table(declared())


def test_a_wrong_declaration_or_row_fails():
    """The checks can fail: a declaration of a module that is not there, a
    module no file declares any more, a row the declarations do not make."""
    found, modules = declared(), package_modules()
    gone = dict(found, **{"tests/cross/test_imports.py": ("runtime/nowhere.py",)})
    assert "runtime/nowhere.py is declared but does not exist" in problems(gone, modules)
    assert "runtime/__main__.py is held up by no test file" in problems(gone, modules)
    silent = dict(found, **{"tests/cross/test_imports.py": ()})
    assert "tests/cross/test_imports.py declares no module" in problems(silent, modules)
    assert table(gone) != readme_table()


def test_test_files_live_in_the_folders_of_the_house():
    """Test files sit in one folder each (each with its conftest); tests/
    itself holds only the shared helpers."""
    assert not list(TESTS.glob("test_*.py")), "a test file at tests/ itself"
    folders = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    assert folders == {"algebra", "cpu", "opencl", "model", "cli", "doors", "cross"}
    for folder in folders:
        assert (TESTS / folder / "conftest.py").is_file(), folder


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write()
