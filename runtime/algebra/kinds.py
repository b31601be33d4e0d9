"""Kinds: what a layout's logical dims are (activation N,C,H,W; filter O,I,H,W;
depthwise M,I,H,W; argument W; volume N,C,D,H,W), their names and the plain
tag an input comes in by default.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """What a layout's logical dims are: their names in order and the plain
    tag an input comes in by default."""
    name: str
    dims: str                  # "N,C,H,W"
    default_tag: str
    two_d: str = ""            # the 2-D form accepted (activations: "N,C" is N,C,1,1)

    @property
    def text(self) -> str:
        """'N,C,H,W (or N,C)': the dims as messages and ``clayout info`` write them."""
        return f"{self.dims} (or {self.two_d})" if self.two_d else self.dims


KINDS = {k.name: k for k in (
    Kind("activation", "N,C,H,W", "nchw", two_d="N,C"),
    Kind("filter", "O,I,H,W", "oihw"),
    Kind("depthwise", "M,I,H,W", "mihw"),
    Kind("argument", "W", "x"),
    Kind("volume", "N,C,D,H,W", "ncdhw"),
)}
