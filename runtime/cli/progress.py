"""A one-line progress bar on stderr, drawn only when stderr is a terminal.

A few lines of our own rather than a dependency: ``clayout model`` needs one
counter (tensors done, MB written, seconds, MB/s; for models of at least
BAR_BYTES only: a small one is done before a bar would help), and a pipe or
a log file must get none of it (no carriage returns in CI logs). Redrawn at
most ten times a second; cleared when done.

Example::

    >>> bar = Progress("clayout model", stream=io.StringIO())   # not a terminal: silent
    >>> bar(3, 10, 4096); bar.close()
"""
from __future__ import annotations

import sys
import time

BAR_BYTES = 256_000_000   # the bytes to write from which clayout model draws a bar


class Progress:
    """Call it with (done, total, nbytes); ``close()`` erases the line."""

    def __init__(self, label: str, stream=None, width: int = 24):
        self.label, self.width = label, width
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty())
        self.start = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int, nbytes: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        seconds = now - self.start
        rate = f", {nbytes / 1e6 / seconds:.0f} MB/s" if seconds > 0 else ""
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} tensors, "
                          f"{nbytes / 1e6:.1f} MB, {seconds:.1f} s{rate}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False
