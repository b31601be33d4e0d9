"""The table of tests/README.md: which test files hold up each module.

Every module of runtime/ has a row, every test file a row names exists, and
every test file is named in some row: a newcomer changing a module finds its
tests there, and a module or test file added without a row fails here.
"""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
ROW = re.compile(r"^\| `(runtime/[^`]*)` \| (.*) \|$")


def table() -> dict[str, list[str]]:
    rows = {}
    for line in (TESTS / "README.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} has two rows"
            rows[m.group(1)] = re.findall(r"`(tests/[^`]+)`", m.group(2))
    return rows


def test_every_module_has_its_tests_and_every_test_file_a_module():
    rows = table()
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "runtime").rglob("*.py")}
    assert modules - set(rows) == set(), "modules without a row in tests/README.md"
    assert set(rows) - modules - {"runtime/"} == set(), "rows of modules that are gone"
    named = {t for files in rows.values() for t in files}
    assert all(files for files in rows.values()), [m for m, f in rows.items() if not f]
    assert {t for t in named if not (ROOT / t).is_file()} == set(), "test files that are gone"
    files = {p.relative_to(ROOT).as_posix() for p in TESTS.glob("*/test_*.py")}
    assert files - named == set(), "test files no row names"


def test_test_files_live_in_the_folders_of_the_house():
    """Test files sit in one folder each (each with its conftest); tests/
    itself holds only the shared helpers."""
    assert not list(TESTS.glob("test_*.py")), "a test file at tests/ itself"
    folders = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    assert folders == {"algebra", "cpu", "opencl", "model", "cli", "doors", "cross"}
    for folder in folders:
        assert (TESTS / folder / "conftest.py").is_file(), folder
