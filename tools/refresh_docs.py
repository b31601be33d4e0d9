#!/usr/bin/env python3
"""Rewrite the outputs shown in the ```console blocks of docs/*.md.

Each block lists ``$ clayout ...`` (or ``$ python -c '...'`` set-up) lines
followed by what they print and, when not 0, ``[exit N]``. This script runs
every command exactly as tests/cross/test_docs.py does (in one fresh folder per
document, COLUMNS=80) and writes the real output back, so that a changed
message is one command away from a green docs test:

    python tools/refresh_docs.py            # rewrite docs/*.md in place
    python tools/refresh_docs.py --check    # exit 1 if any block would change
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


def run(command: str) -> tuple[str, int]:
    """Output (stdout then stderr) and exit status of one console line."""
    from runtime import cli
    argv = shlex.split(command)
    if argv[0] == "python":
        exec(argv[2], {"np": np})
        return "", 0
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv[1:])
    return out.getvalue() + err.getvalue(), code


def refresh_block(body: str) -> str:
    commands = [c.partition("\n")[0] for c in re.split(r"^\$ ", body, flags=re.M)[1:]]
    text = []
    for command in commands:
        output, code = run(command)
        text.append(f"$ {command}\n{output}" + (f"[exit {code}]\n" if code else ""))
    return "".join(text)


def refresh(path: Path) -> str:
    text = path.read_text()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            return FENCE.sub(lambda m: "```console\n" + refresh_block(m.group(1)) + "```", text)
        finally:
            os.chdir(cwd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report documents that differ")
    args = ap.parse_args(argv)
    os.environ["COLUMNS"] = "80"
    os.environ.pop("CLAYOUT_ENGINE", None)
    os.environ.pop("CLAYOUT_DEBUG", None)
    changed = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        new = refresh(path)
        if new != path.read_text():
            changed.append(path.name)
            if not args.check:
                path.write_text(new)
    verb = "differ" if args.check else "rewritten"
    print(f"{verb}: {', '.join(changed)}" if changed else "all console blocks up to date")
    return 1 if changed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
