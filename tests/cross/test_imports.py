"""The import structure of the runtime package.

- Every module imports on its own, in an interpreter where no other runtime
  module was imported first: once through a bare package (runtime/__init__.py
  not run, so the package's own imports cannot hide a missing one) and once
  the ordinary way.
- The imports between runtime's modules, read with ``ast`` from every
  runtime/**/*.py (top-level and inside functions; ``if TYPE_CHECKING:``
  blocks are never executed and left out), form no cycle; a cycle planted
  into the graph is found, so the check itself works.
- An import inside a function is there for an optional or heavy package
  only (OPTIONAL), directly or through a runtime module that imports one at
  its top, so that the cpu engine never needs them; every other import is at
  the top of its module.
- The house rules: pyopencl is imported in runtime/opencl/ only; nothing asks
  an engine what it is (``hasattr(engine, ...)``); no private name (``_x``)
  is imported from another module; no module is over 400 lines; and the
  graph has no cycle even with the ``if TYPE_CHECKING:`` imports counted.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from conftest import child_result, start_child

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/__init__.py", "runtime/__main__.py", "runtime/doors/__init__.py")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runtime"

# imported inside functions so that the cpu engine works without them
OPTIONAL = {"pyopencl", "mako", "onnx", "matplotlib", "safetensors", "torch", "onnxruntime",
            "PIL"}
# runtime modules a function may import although they need nothing of OPTIONAL
LAZY_ALLOWED: set = set()
# a script, not a module: importing it runs the command line
NOT_IMPORTED_ALONE = {"runtime.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGE_MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


# -- (a) each module alone ---------------------------------------------------------------
ALONE = r"""
import importlib, importlib.util, json, sys, traceback
root, optional, modules = sys.argv[1], set(sys.argv[2].split(",")), sys.argv[3:]
sys.path.insert(0, root)

def forget():
    for name in [n for n in sys.modules if n == "runtime" or n.startswith("runtime.")]:
        del sys.modules[name]

def bare_package():
    spec = importlib.util.spec_from_file_location(
        "runtime", f"{root}/runtime/__init__.py",
        submodule_search_locations=[f"{root}/runtime"])
    sys.modules["runtime"] = importlib.util.module_from_spec(spec)   # not executed

report = {"failed": [], "skipped": []}

def load(name, how):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in optional:
            report["skipped"].append(f"{name} ({how}): needs {exc.name}")
        else:
            report["failed"].append(f"{name} ({how}):\n{traceback.format_exc()}")
    except BaseException:
        report["failed"].append(f"{name} ({how}):\n{traceback.format_exc()}")

for name in modules:   # alone: the package's __init__ not run, nothing else imported before
    forget()
    bare_package()
    load(name, "bare package")
# the ordinary way: an import of any module runs the package's __init__ first, the same
# every time, so one pass after it imports each module as an import from outside would
# (cycles that need another first module are the static scan's: test_no_import_cycle)
forget()
for name in modules:
    load(name, "ordinary import")
print(json.dumps(report))
"""


def _start_alone() -> None:
    """The modules split between two interpreters that run side by side: each
    forgets every runtime module before each import, so which interpreter
    imports a module changes nothing."""
    names = sorted(set(PACKAGE_MODULES) - NOT_IMPORTED_ALONE)
    for k, part in enumerate((names[0::2], names[1::2])):
        start_child(("alone", k), [sys.executable, "-c", ALONE, str(ROOT),
                                   ",".join(sorted(OPTIONAL)), *part], cwd=ROOT)


def start_early(items):
    """The interpreters of test_each_module_imports_alone start as soon as the
    run's tests are known (tests/conftest.py), beside the rest of the suite."""
    if any(getattr(item, "originalname", "") == "test_each_module_imports_alone"
           for item in items):
        _start_alone()


def test_each_module_imports_alone():
    """Every module, both ways, in two interpreters (``_start_alone``)."""
    _start_alone()    # a no-op where start_early started them
    failed = []
    for k in (0, 1):
        done = child_result(("alone", k))
        assert done.returncode == 0, done.stderr
        failed += json.loads(done.stdout.strip().splitlines()[-1])["failed"]
    if failed:
        pytest.fail("\n".join(failed), pytrace=False)


# -- (b) the static graph --------------------------------------------------------------------
def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _runtime_module(dotted: str) -> str | None:
    """The runtime module an absolute import of ``dotted`` loads last, or None."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in PACKAGE_MODULES:
            return ".".join(parts[:n])
    return None


def imports_of(name: str, path: Path, type_checking: bool = False) -> list[dict]:
    """Every import statement of one module that is executed at some point
    (``if TYPE_CHECKING:`` blocks are not), plus importlib.import_module calls
    with a literal name: the runtime module or third-party package it loads,
    and whether it sits in a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def add(target, node, in_function, runtime):
        found.append({"target": target, "runtime": runtime, "in_function": in_function,
                      "where": f"{path.relative_to(ROOT)}:{node.lineno}"})

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child) and not type_checking:
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[:len(package.split(".")) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module
                for alias in child.names:
                    sub = f"{source}.{alias.name}"
                    if sub in PACKAGE_MODULES:
                        add(sub, child, inner, True)
                        continue
                    private = alias.name.startswith("_") and not alias.name.endswith("__")
                    if private and _runtime_module(source):
                        found.append({"target": _runtime_module(source), "runtime": True,
                                      "in_function": inner, "private": alias.name,
                                      "where": f"{path.relative_to(ROOT)}:{child.lineno}"})
                    elif _runtime_module(source):
                        add(_runtime_module(source), child, inner, True)
                    else:
                        add(source.split(".")[0], child, inner, False)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    target = _runtime_module(alias.name)
                    add(target or alias.name.split(".")[0], child, inner, target is not None)
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr == "import_module" and child.args \
                    and isinstance(child.args[0], ast.Constant) \
                    and isinstance(child.args[0].value, str):
                target = _runtime_module(child.args[0].value)
                if target:
                    add(target, child, inner, True)
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


IMPORTS = {name: imports_of(name, path) for name, path in PACKAGE_MODULES.items()}


def find_cycle(graph: dict[str, list[dict]]) -> list[dict] | None:
    """The edges of one import cycle among runtime modules, or None."""
    state, stack = {}, []

    def walk(module):
        state[module] = "open"
        for edge in graph[module]:
            if not edge["runtime"]:
                continue
            stack.append(edge)
            if state.get(edge["target"]) == "open":
                start = next(i for i, e in enumerate(stack) if e["from"] == edge["target"])
                return stack[start:]
            if edge["target"] not in state:
                cycle = walk(edge["target"])
                if cycle:
                    return cycle
            stack.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = walk(module)
            if cycle:
                return cycle
    return None


def _edges(imports):
    return {name: [dict(edge, **{"from": name}) for edge in found]
            for name, found in imports.items()}


def describe(cycle: list[dict]) -> str:
    return "import cycle:\n" + "\n".join(
        f"  {e['from']} -> {e['target']} ({'in a function' if e['in_function'] else 'top'}, "
        f"{e['where']})" for e in cycle)


def test_no_import_cycle():
    cycle = find_cycle(_edges(IMPORTS))
    if cycle:
        pytest.fail(describe(cycle), pytrace=False)


def test_no_import_cycle_even_for_type_checking():
    with_types = {name: imports_of(name, path, type_checking=True)
                  for name, path in PACKAGE_MODULES.items()}
    cycle = find_cycle(_edges(with_types))
    if cycle:
        pytest.fail(describe(cycle), pytrace=False)


def test_pyopencl_only_in_the_opencl_engine():
    wrong = [e["where"] for name, found in IMPORTS.items() for e in found
             if e["target"] == "pyopencl" and not name.startswith("runtime.opencl")]
    assert not wrong, f"pyopencl imported outside runtime/opencl/: {wrong}"


def test_no_private_name_crosses_a_module():
    wrong = [f"{e['where']}: {e['private']} from {e['target']}" for found in IMPORTS.values()
             for e in found if "private" in e]
    assert not wrong, f"private names imported from other modules: {wrong}"


def test_nothing_asks_an_engine_what_it_is():
    wrong = [f"{path.relative_to(ROOT)}:{n}" for path in PACKAGE_MODULES.values()
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if "hasattr(engine" in line or "hasattr(eng," in line]
    assert not wrong, wrong


def test_every_module_is_under_400_lines():
    long = {str(path.relative_to(ROOT)): n for path in PACKAGE_MODULES.values()
            if (n := len(path.read_text().splitlines())) > 400}
    assert not long, long


def test_the_scan_finds_a_planted_cycle():
    # the check itself: a function-level import of runtime.api from runtime.algebra.desc
    # (api imports desc at its top) must be reported, with both edges
    planted = _edges(IMPORTS)
    planted["runtime.algebra.desc"].append({"from": "runtime.algebra.desc", "target": "runtime.api",
                                    "runtime": True, "in_function": True,
                                    "where": "runtime/algebra/desc.py:0"})
    cycle = find_cycle(planted)
    assert cycle is not None and {e["from"] for e in cycle} >= {"runtime.algebra.desc", "runtime.api"}


def _needs_optional() -> set[str]:
    """Runtime modules that import an OPTIONAL package at their top, directly
    or through runtime modules they import at their top."""
    heavy = {name for name, found in IMPORTS.items()
             if any(not e["runtime"] and not e["in_function"] and e["target"] in OPTIONAL
                    for e in found)}
    grew = True
    while grew:
        more = {name for name, found in IMPORTS.items()
                if any(e["runtime"] and not e["in_function"] and e["target"] in heavy
                       for e in found)}
        grew = not more <= heavy
        heavy |= more
    return heavy


def test_function_level_imports_are_for_optional_packages():
    heavy = _needs_optional()
    wrong = [f"{e['where']}: {e['target']}" for found in IMPORTS.values() for e in found
             if e["in_function"] and not (
                 (not e["runtime"] and e["target"] in OPTIONAL) or
                 (e["runtime"] and (e["target"] in heavy or e["target"] in LAZY_ALLOWED)))]
    if wrong:
        pytest.fail("imports inside functions of modules that are neither optional nor heavy; "
                    "move them to the top of the module:\n  " + "\n  ".join(wrong), pytrace=False)
