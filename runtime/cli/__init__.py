"""The ``clayout`` command line (docs/cli.md): the parser and the exit status
(main.py), one function per command (commands.py) and what is checked before
any work (checks.py); ``show`` (figure.py), ``where`` (where.py), the progress
bar (progress.py) and ``clayout demo`` (demo.py). Files are written whole or
not at all by runtime/fileio.py."""
from .main import main

__all__ = ["main"]
