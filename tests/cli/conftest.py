"""Tests of the ``clayout`` command line (runtime/cli/): each command's
output, its refusals in the options' words, files written whole or not at
all. ``run`` runs main() in-process, ``run_sub`` a subprocess (tests/conftest.py)."""
