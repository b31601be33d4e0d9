"""The ``clayout`` command line (docs/cli.md); also ``python -m runtime``.

Dims are always logical and comma-separated (``1,64,224,224``). A plain-tagged
``.npy`` input comes in its physical shape (an nhwc array has shape
(N, H, W, C)), a blocked one 1-D with ``--dims``. Exit status: 0 on success,
2 on a usage error (argparse), 1 on any other failure, with one line
``clayout: error: ...`` on stderr and no traceback (``CLAYOUT_DEBUG=1`` shows
it). Outputs are written to a temporary file in the same folder and renamed
into place, so a failure never leaves a half-written file. This module runs
the command runtime/cli/parser.py parses; each command runs in
its command module (runtime/cli/convert.py and its siblings).

Example::

    clayout to-image x.npy -o img.npy --layout in_out_channel --src nhwc
    clayout info conv2d_filter --dims 64,3,3,3
    clayout info any --role fc_weight --dims 4096,1000,1,1 --max-image 2048,2048
    clayout info --engine tvm
    clayout where in_out_channel --dims 1,17,5,7 --pixel 30,2,1
"""
from __future__ import annotations

import os
import signal
import sys

from .. import engine as engines
from .. import fileio, settings
from ..errors import ClayoutError
from .checks import PROG, check_dtype_options
from .parser import build_parser


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds like KeyboardInterrupt (so every
    temporary file is removed on the way out) and exits with 128 + signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    for name in _Signals.NAMES:   # once: a second signal must not cut the clean-up short
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise Terminated(signum)


class _Signals:
    """SIGTERM and SIGHUP raise Terminated while a command runs (the main
    thread only; the old handlers come back afterwards)."""

    NAMES = ("SIGTERM", "SIGHUP")

    def __enter__(self):
        self.saved = {}
        for name in self.NAMES:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            try:
                self.saved[signum] = signal.signal(signum, _raise_terminated)
            except ValueError:   # not the main thread: leave signals alone
                break
        return self

    def __exit__(self, *exc):
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)
        return False


def resolve_auto(args) -> None:
    """The engine 'auto' (--engine auto, or $CLAYOUT_ENGINE=auto without
    --engine) is chosen once, before the command runs
    (runtime.engine.auto_fallback); when it falls back to cpu, one line
    ``clayout: note: engine auto fell back to cpu: WHY`` on stderr says why
    (a PYOPENCL_CTX that names no device, no OpenCL platform, ...). ``demo``
    prints its choice itself."""
    if args.command == "demo" or not hasattr(args, "engine"):
        return
    name = args.engine if args.engine is not None else os.environ.get("CLAYOUT_ENGINE")
    if name != "auto":
        return
    why = engines.auto_fallback()
    args.engine = engines.get("cpu" if why is not None else "opencl")
    if why is not None:
        print(f"{PROG}: note: engine auto fell back to cpu: {why}", file=sys.stderr)


def one_line(exc: BaseException) -> str:
    """The one line ``clayout: error: ...`` says for ``exc`` (no traceback)."""
    if isinstance(exc, MemoryError):
        text = ("out of memory" + (f": {exc}" if str(exc) else "") +
                "; check the input's dims and sizes")
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    elif isinstance(exc, ClayoutError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__


def main(argv=None) -> int:
    """Run one clayout command; returns the exit status: 0, 1 (any failure),
    2 (usage), 130 (Ctrl-C), 128 + signal (SIGTERM 143, SIGHUP 129)."""
    settings.refresh()   # each command reads the environment as it is now
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "bench":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    if args.command == "bench":
        args.rest = argv[argv.index("bench") + 1:]
    fileio.COMMITTED.clear()
    try:
        with _Signals():
            check_dtype_options(args)
            resolve_auto(args)
            return int(args.func(args) or 0)
    except BrokenPipeError:  # `clayout info ... | head`: the reader left; stay quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:
        name = signal.Signals(exc.signum).name
        done = (f"after writing {', '.join(fileio.COMMITTED)}" if fileio.COMMITTED else
                "nothing was written")
        print(f"{PROG}: error: stopped by {name}; {done}", file=sys.stderr)
        return 128 + exc.signum
    except Exception as exc:  # one line, no traceback: every failure is the user's to read
        if os.environ.get("CLAYOUT_DEBUG"):
            raise
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
