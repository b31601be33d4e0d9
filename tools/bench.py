#!/usr/bin/env python3
"""Benchmark of clayout's conversions: see runtime/bench.py (also `clayout bench`)."""
import sys

from runtime.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
