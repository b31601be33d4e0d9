"""``clayout bench``: a thin door to tools/bench.py of a source checkout
(the benchmarks live with the project's tools, not in the package)."""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from ..errors import ClayoutError


def register(command) -> None:
    p = command("bench", cmd_bench, "run the benchmark (tools/bench.py of a source checkout); "
                "arguments pass through", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)


def bench_script() -> Path | None:
    """tools/bench.py of the source checkout this package runs from, or None
    (an installed wheel carries no tools/)."""
    script = Path(__file__).resolve().parents[2] / "tools" / "bench.py"
    return script if script.is_file() else None


def cmd_bench(args) -> int:
    """A thin door to tools/bench.py: the benchmarks live with the project's
    tools, not in the package."""
    script = bench_script()
    if script is None:
        raise ClayoutError("clayout bench runs tools/bench.py of a source checkout of clayout; "
                           "this installed build has none (clone the repository and run "
                           "`python tools/bench.py`)")
    sys.path.insert(0, str(script.parent))
    try:
        saved, sys.argv = sys.argv, [str(script), *args.rest]
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            sys.argv = saved
    finally:
        sys.path.remove(str(script.parent))
    return 0
