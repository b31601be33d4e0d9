"""Tests of the cpu engine (runtime/cpu/): its compiled moves and numpy
path against each other and the reference, its frames, its path chosen
once and its one worker pool. ``cpu_path`` (tests/conftest.py) runs a
module's tests on each path in turn."""
