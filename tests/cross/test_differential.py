"""The differential check in the suite (tests/differential.py): random valid
conversions from a seed (plain, blocked, strided and halo buffers, named and
custom image layouts on every storage, Winograd layouts, every dtype pair,
views of every kind as input, ``out=``; read_output's results of random and
saturating outputs: tests/differential_outputs.py) on every engine this machine has:
reference, cpu (compiled and numpy), and each OpenCL implementation with its
default, direct and discrete-memory paths. Every answer must be the
reference's bits, or the same refusal; any disagreement is a bug.

It runs in a child process in the background (tests/conftest.py,
start_child), so that a crash in a compiled move or a device's runtime is a
failure naming the case it happened in, not the end of the test run. The ci
tier runs a covering set (every family several times); the thorough tier
many more cases. CLAYOUT_DIFFERENTIAL_SEED runs another seed."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conftest import IMPLEMENTATIONS, IN_CI, THOROUGH, child_result, start_child
import differential

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/", "runtime/doors/prepare.py")

HERE = Path(__file__).resolve().parents[1]   # tests/, where differential.py is
SEED = int(os.environ.get("CLAYOUT_DIFFERENTIAL_SEED", "38"))
COUNT = 500 if THOROUGH else 70


def _start() -> None:
    start_child("differential", [sys.executable, str(HERE / "differential.py"), "--seed",
                                 str(SEED), "--count", str(COUNT)],
                env=dict(os.environ, PYTHONFAULTHANDLER="1"), cwd=str(HERE),
                timeout=1800 if THOROUGH else 600)


def start_early(items):
    """The child starts as soon as the run's tests are known (tests/conftest.py)."""
    if any(getattr(item, "originalname", "") == "test_every_engine_gives_one_answer"
           for item in items):
        _start()


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_every_engine_gives_one_answer():
    _start()   # a no-op where start_early queued it
    done = child_result("differential")
    lines = _lines(done.stdout)
    started = [line for line in lines if "start" in line]
    if done.returncode != 0:
        where = started[-1]["case"] if started else "(before the first case)"
        raise AssertionError(f"the differential child died (exit {done.returncode}) in case "
                             f"{where}; reproduce: python tests/differential.py --seed {SEED} "
                             f"--case {started[-1]['start'] if started else 0}\n"
                             f"{done.stderr[-4000:]}")
    assert "Warning" not in done.stderr, done.stderr[-2000:]   # nothing leaks to stderr
    engines = lines[0]["engines"]
    assert {"reference", "cpu-compiled", "cpu-numpy"} <= set(engines)
    for short, _ in IMPLEMENTATIONS:   # every OpenCL implementation, three ways
        assert {f"opencl-{short}", f"opencl-{short}-direct",
                f"opencl-{short}-discrete"} <= set(engines), engines
    if IN_CI:
        assert any(name.startswith("opencl-") for name in engines), engines
    cases = {line["start"]: json.loads(line["case"]) for line in started}
    results = [line for line in lines if "answers" in line]
    assert len(results) == COUNT
    bad = [(line["index"], line["bad"]) for line in results if line["bad"]]
    assert not bad, "\n".join(
        f"case {i} {json.dumps(cases[i])}: {'; '.join(b[:3])}\n  reproduce: python "
        f"tests/differential.py --seed {SEED} --case {i}" for i, b in bad[:10])
    # the check can fail: every family converted something (not only refusals)
    converted = {cases[line["index"]]["family"] for line in results
                 if line["answers"]["reference"].startswith("bits")}
    assert converted == set(differential.FAMILIES), converted


def test_the_cases_are_drawn_from_the_seed_alone():
    """A case is reproduced from (seed, index), whatever ran before it."""
    assert differential.draw(5, 17) == differential.draw(5, 17)
    assert [differential.draw(5, i).family for i in range(len(differential.FAMILIES))] == \
        list(differential.FAMILIES)
    assert differential.draw(5, 17) != differential.draw(6, 17)
