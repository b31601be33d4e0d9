"""Zero-copy import: a user's cl.Buffer viewed as an image (stub; filled in by the storage work)."""
from __future__ import annotations


class SharedStorage:
    """Methods of the opencl engine that view a caller's memory without a copy."""
