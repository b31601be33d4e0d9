"""The one exception type of clayout, and its one warning."""


class ClayoutError(ValueError):
    """Bad input or an impossible request.

    The message names what was wrong (the tag, dims, layout, limit, ...) and
    what would be allowed, so a caller can print it as one line.
    """


class BufferCopyWarning(UserWarning):
    """Memory.from_buffer copied the caller's buffer into a new image instead
    of viewing it (the message says why); given once per engine and reason."""
