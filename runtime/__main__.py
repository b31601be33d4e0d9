"""``python -m runtime``: the clayout command line (runtime.cli)."""
import sys

from .cli import main

sys.exit(main())
