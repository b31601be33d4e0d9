"""The one exception type of clayout, and its warnings."""
import os
import sys
import warnings


class ClayoutError(ValueError):
    """Bad input or an impossible request.

    The message names what was wrong (the tag, dims, layout, limit, ...) and
    what would be allowed, so a caller can print it as one line.
    """


class BufferCopyWarning(UserWarning):
    """Memory.from_buffer copied the caller's buffer into a new image instead
    of viewing it (the message says why); given once per engine and reason."""


class FrameArgumentWarning(UserWarning):
    """from_frame's arguments look like another convention's (mean and std
    for pixels in 0..1 on 0..255 frames without scale=); the message names
    the fix."""


def warn(message: str, category: type[Warning]) -> None:
    """Warn with ``message``, attributed to the caller's own line: the
    first frame outside the runtime package (however deep the call)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame = frame.f_back
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"),
                           registry=frame.f_globals.setdefault("__warningregistry__", {}))
