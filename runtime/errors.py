"""The one exception type of clayout."""


class ClayoutError(ValueError):
    """Bad input or an impossible request.

    The message names what was wrong (the tag, dims, layout, limit, ...) and
    what would be allowed, so a caller can print it as one line.
    """
