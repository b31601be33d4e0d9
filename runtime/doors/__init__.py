"""The doors: every public conversion's arguments parsed, checked and
turned into a call (docs/architecture.md).

* ``parse``: ``parse_reorder``, ``parse_to_image``, ``parse_from_image``,
  ``parse_from_frame``: a door's arguments into one call, or one
  ClayoutError naming what was wrong;
* ``calls``: the call records, one frozen class per kind, each with
  ``apply()``;
* ``checks``: what every door checks alike (sides, ``out=``, a Memory's
  destination and engine, ``wait_for``, a host image's padding lanes);
* ``read_output``: the output door, its parse and its call;
* ``prepare``: prepared conversions, planned once and called with the data.

runtime/api.py is the public face: the doors users call.
"""
