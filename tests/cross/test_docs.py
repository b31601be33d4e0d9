"""Every worked value in docs/ is executed here.

- ```python blocks with ``>>>`` prompts run as one doctest per document (the
  blocks of a document share their names, top to bottom);
- ```console blocks run each ``$ clayout ...`` line through the CLI in a
  fresh folder and compare its output and exit status with what the block
  shows (``[exit N]`` after the output, 0 when absent);
- the README links every document, and every picture a document shows exists.
"""
import doctest
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from runtime import cli

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/",)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DOCUMENTS = ("layouts.md", "formats.md", "dtypes.md", "engines.md", "cli.md", "architecture.md",
             "kernels.md", "winograd.md", "storage.md", "frames.md", "engine-layouts.md", "outputs.md", "model.md",
             "performance.md", "decisions.md")
# pages whose examples are console transcripts (cli.md; model.md's command is run in
# cli.md and by tests/test_model_*.py) or measured tables (performance.md)
NO_PYTHON = ("cli.md", "model.md", "performance.md")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(name: str, kind: str) -> list[tuple[int, str]]:
    """(line number, body) of every fenced block of ``kind`` in docs/name."""
    text = (DOCS / name).read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(2))
            for m in FENCE.finditer(text) if m.group(1) == kind]


def test_every_document_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for name in DOCUMENTS:
        assert (DOCS / name).is_file(), name
        assert f"(docs/{name})" in readme, f"README does not link docs/{name}"


def test_pictures_exist():
    text = (DOCS / "layouts.md").read_text()
    shown = re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", text)
    from runtime.algebra.catalog import NAMED
    assert sorted(shown) == sorted(f"img/{name}.png" for name in NAMED)
    for path in shown:
        assert (DOCS / path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path


def test_the_layout_summary_is_the_catalog():
    """docs/layouts.md's summary table has one row per catalog row, with its
    kind, tag, rows, lanes and image size (runtime/algebra/catalog.py)."""
    from runtime.algebra.catalog import LAYOUTS
    text = (DOCS / "layouts.md").read_text()
    table = text[text.index("## Summary"):].split("\n\n")[1]
    shown = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    want = [[f"[`{r.name}`](#{r.name})", r.layout.kind, r.layout.tag, str(r.layout.rows),
             str(r.layout.lanes), r.size] for r in LAYOUTS]
    got = [[cells[0], cells[1], cells[2].split("`")[1], cells[3], cells[4], cells[5]]
           for cells in shown]
    assert got == want


@pytest.mark.parametrize("name", DOCUMENTS)
def test_python_examples(name, tmp_path, monkeypatch):
    found = [(line, body) for line, body in blocks(name, "python") if ">>>" in body]
    if name not in NO_PYTHON:
        assert found, f"docs/{name} has no executed example"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLAYOUT_ENGINE", raising=False)
    parser = doctest.DocTestParser()
    examples = []
    for line, body in found:
        test = parser.get_doctest(body, {}, name, str(DOCS / name), line - 1)
        for ex in test.examples:
            ex.lineno += line - 1
        examples += test.examples
    test = doctest.DocTest(examples, {"np": np}, name, str(DOCS / name), 0, None)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    assert runner.tries == len(examples)


def console_commands(body: str):
    """(command line, expected output, expected exit status) of a console block."""
    chunks = re.split(r"^\$ ", body, flags=re.M)[1:]
    for chunk in chunks:
        command, _, output = chunk.partition("\n")
        status = 0
        match = re.search(r"^\[exit (\d+)\]\n?\Z", output, re.M)
        if match:
            status, output = int(match.group(1)), output[:match.start()]
        yield command, output, status


def run_console(command: str, capsys) -> tuple[str, int]:
    argv = shlex.split(command)
    if argv[0] == "python":    # a set-up line: python -c '...'
        assert argv[1] == "-c"
        exec(argv[2], {"np": np})
        return "", 0
    assert argv[0] == "clayout", command
    code = cli.main(argv[1:])
    out, err = capsys.readouterr()
    return out + err, code


@pytest.mark.parametrize("name", DOCUMENTS)
def test_console_examples(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLAYOUT_ENGINE", raising=False)
    monkeypatch.delenv("CLAYOUT_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "80")   # argparse wraps its usage lines to the terminal
    for line, body in blocks(name, "console"):
        for command, want, status in console_commands(body):
            got, code = run_console(command, capsys)
            where = f"docs/{name}:{line}: $ {command}"
            assert code == status, f"{where}: exit {code}, expected {status}\n{got}"
            assert got == want, f"{where}\n--- got\n{got}--- docs\n{want}"
