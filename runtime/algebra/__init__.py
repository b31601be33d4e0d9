"""The layout algebra, the ground everything stands on: tags (tags.py) and
data types (dtypes.py) -> MemoryDesc (desc.py, ops.py) -> where an image's
elements lie (pixels.py) -> image layouts and ImageDesc (layout.py), the
named ones (catalog.py) -> the C index emitter (c_index.py); a
conversion's two sides and its stages (conversion.py, transform.py); tiles
of an image over a limit (tiles.py); host arrays (hostarray.py). Frozen
data and pure functions: no engine, no device."""
