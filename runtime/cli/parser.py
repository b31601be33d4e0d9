"""The ``clayout`` command line's parser (docs/cli.md): the top-level
options and one subcommand per command, each registered by the module that
runs it (its ``register(command)``); runtime/cli/main.py runs the command
it gives. The argument types are runtime/cli/args.py's."""
from __future__ import annotations

import argparse

from ..version import __version__
from . import bench, convert, demo, figure, frame, info, kernel, model_command, output, where
from .args import parse_dims, parse_size   # noqa: F401  (re-exported: tests and tools use them)
from .checks import PROG

# the order of `clayout --help`
COMMANDS = (convert, frame, output, model_command, info, figure, where, kernel, bench, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="clayout: tensors on OpenCL images and buffers, with a numpy "
        "fallback. Dims are logical and comma-separated (1,64,224,224).")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, func, help_text, **kw):
        p = sub.add_parser(name, help=help_text, description=help_text, **kw)
        p.set_defaults(func=func)
        return p

    for module in COMMANDS:
        module.register(command)
    return parser
