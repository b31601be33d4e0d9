"""Facts of the house that a reader relies on: a storage is asked by its
fields (runtime/algebra/storage.py), never by comparing its name."""
import ast
from pathlib import Path

from runtime.algebra.storage import STORAGES

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/cache.py", "runtime/cli/info.py")

ROOT = Path(__file__).resolve().parents[2] / "runtime"


def _names_compared(tree) -> list[int]:
    """Lines where a storage's name (a ``.name`` or ``.storage`` attribute)
    is compared with the name of a storage, or with a tuple of them."""
    def storage_literal(node) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in STORAGES
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(storage_literal(e) for e in node.elts)
        return False

    def named(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ("name", "storage")

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(storage_literal(s) for s in sides) and any(named(s) for s in sides):
                lines.append(node.lineno)
    return lines


def test_no_storage_name_is_compared_outside_storage_py():
    found = {}
    for path in ROOT.rglob("*.py"):
        if path.name == "storage.py" and path.parent.name == "algebra":
            continue
        lines = _names_compared(ast.parse(path.read_text()))
        if lines:
            found[str(path.relative_to(ROOT.parent))] = lines
    assert not found, f"storage names compared (ask a Storage field instead): {found}"


def test_the_check_finds_a_comparison():
    tree = ast.parse('if side.storage.name == "image2d":\n    pass\n'
                     'ok = image.storage.name in ("image2d", "image3d")\n')
    assert _names_compared(tree) == [1, 3]


def test_memory_knows_nothing_of_opencl():
    tree = ast.parse((ROOT / "memory.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = [a.name for n in imports for a in n.names] + \
        [n.module or "" for n in imports if isinstance(n, ast.ImportFrom)]
    assert not any("pyopencl" in m or "opencl" in m for m in modules), modules
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "__new__"]
    assert not calls, "a Memory is made by __init__ alone"


def test_every_cache_is_in_the_registry_listed_by_the_cli_and_the_docs(capsys):
    """No function keeps results outside runtime.cache (functools' caches
    held ~9 more), `clayout caches` lists every registered one, and the
    docs' Caches table names each."""
    import re
    from runtime import cache
    from runtime.cli.info import load_every_module
    for path in ROOT.rglob("*.py"):
        assert "lru_cache" not in path.read_text(), f"{path}: use runtime.cache.memoized"
    assert not load_every_module()
    from conftest import run
    code, out, _ = run(capsys, "caches")
    assert code == 0
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if " caches; " in line)
    listed = {line.split("  ")[0] for line in lines[2:end]}
    assert all(line.startswith("device memory pool") for line in lines[end + 1:]), lines[end:]
    assert listed == set(cache.REGISTRY) and len(listed) >= 15
    docs = (ROOT.parent / "docs" / "engines.md").read_text()
    assert set(re.findall(r"^\| `([^`]+)` \|", docs, re.M)) >= listed


def test_kernel_bake_asks_the_plan_and_changes_no_setting(capsys, monkeypatch):
    """`clayout kernel --bake` once wrote CLAYOUT_SPECIALIZE_BYTES=0 into the
    process's environment; now the plan takes bake=True and says what it chose."""
    import os
    from conftest import run
    monkeypatch.delenv("CLAYOUT_SPECIALIZE_BYTES", raising=False)
    code, out, _ = run(capsys, "kernel", "--dims", "1,6,2,3", "--src", "nhwc",
                       "--layout", "in_out_channel", "--bake")
    assert code == 0 and "CLAYOUT_SPECIALIZE_BYTES" not in os.environ
    assert out.splitlines()[-1].startswith("// plan: baked")
    code, out, _ = run(capsys, "kernel", "--dims", "1,6,2,3", "--src", "nhwc",
                       "--layout", "in_out_channel")
    assert out.splitlines()[-1].startswith("// plan: generic")


def test_every_optional_package_goes_through_needs():
    """A test that needs an optional package asks conftest.needs for it
    first (skipped where it is missing, a failure in CI), never
    pytest.importorskip (a skip in CI too) nor a bare import (an error)."""
    import re
    from conftest import EXTRAS
    tests = Path(__file__).resolve().parents[1]
    optional = "|".join(n for n in EXTRAS if n not in ("pyopencl", "tests"))
    bare = re.compile(rf"^\s*(?:import|from) ({optional})\b")
    wrong = []
    for path in sorted(tests.rglob("*.py")):
        text = path.read_text()
        if "importorskip(" in text and path.name != "test_house.py":
            wrong.append(f"{path.name}: pytest.importorskip")
        for n, line in enumerate(text.splitlines(), 1):
            m = bare.match(line)
            if m and f'needs("{m.group(1)}' not in text.split(line, 1)[0]:
                wrong.append(f"{path.name}:{n}: {line.strip()}")
    assert not wrong, wrong


# -- the words of docs/architecture.md ----------------------------------------------------------
def _classes() -> dict[str, list[tuple[str, ast.ClassDef]]]:
    """{class name: [(module path, its definition)]} of the whole package."""
    found: dict = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append((path.relative_to(ROOT).as_posix(), node))
    return found


def glossary_problems(text: str, classes: dict) -> list[str]:
    """What docs/architecture.md's "Words" table names that the code does not
    have: a module (its "where" column), a class (a `CamelCase` name), a
    member (`Class.member`)."""
    import re
    table = text[text.index("## Words"):]
    table = table[:table.index("\n\n", table.index("| word |"))]
    wrong = []
    for row in table.splitlines()[2:]:
        if not row.startswith("| ") or row.startswith("|---"):
            continue
        *_, means, where = [c.strip() for c in row.strip("|").split("|")]
        for module in re.findall(r"`([\w/]+\.py)`", where):
            if not (ROOT / module).is_file():
                wrong.append(f"module {module}")
        for name, member in re.findall(r"`([A-Z][A-Za-z0-9]+)(?:\.(\w+))?(?:\(\))?`", means):
            if name not in classes:
                wrong.append(f"class {name}")
            elif member and not any(member in _members(cls) for _, cls in classes[name]):
                wrong.append(f"member {name}.{member}")
    return wrong


def _members(cls: ast.ClassDef) -> set:
    """A class's members: its methods and properties, its fields, what its
    methods set on ``self``."""
    names = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
            names |= {t.attr for t in ast.walk(node) if isinstance(t, ast.Attribute) and
                      isinstance(t.value, ast.Name) and t.value.id == "self" and
                      isinstance(t.ctx, ast.Store)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_one_class_one_name():
    """No two classes of the package share a name (Tensor, Options, Role and
    Axis each named two things)."""
    twice = {name: [p for p, _ in where] for name, where in _classes().items()
             if len(where) > 1}
    assert twice == {}


def test_the_words_name_what_the_code_has():
    text = (ROOT.parent / "docs" / "architecture.md").read_text()
    classes = _classes()
    assert glossary_problems(text, classes) == []
    words = text[text.index("## Words"):]   # the checks can fail: three names broken
    broken = words.replace("`algebra/side.py`", "`algebra/sides.py`", 1).replace(
        "`SampleAxis`", "`FrameAxis`", 1).replace("`ImageDesc.stored`", "`ImageDesc.placement`", 1)
    assert sorted(glossary_problems(broken, classes)) == [
        "class FrameAxis", "member ImageDesc.placement", "module algebra/sides.py"]
