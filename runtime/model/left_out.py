"""What an images-only file would leave out, every one of it named.

By default ``clayout model`` writes everything the model needs: a weight on
its image where a role's layout takes it, and a plain buffer otherwise (a
scalar of an ``Add``, a ``Clip`` bound, a ``Resize``'s scales, an LSTM's W,
a weight no layout fits with ``--no-tiles``). ``--images-only``
(``Options(keep_buffers=False)``) asks for images alone, and a model that
needs a constant no image takes then fails with :class:`LeftOut`: the
message names every such constant (never "... and 20 more"), and
:attr:`LeftOut.lines` gives them one per line for the command line to print.

Example::

    >>> from runtime.model.tensor import Tensor
    >>> from runtime.model.weights import Weight
    >>> w = Weight(Tensor("k", (), "float32", "initializer", "Mul m input 1"))
    >>> LeftOut([(w, "scalar constant: pass it as a kernel argument")]).lines
    ["'k' () (Mul m input 1): scalar constant: pass it as a kernel argument"]
"""
from __future__ import annotations

from ..errors import ClayoutError
from .graph import printable


def _named(w) -> str:
    return f"{printable(w.name)!r} {w.tensor.shape} ({printable(w.tensor.consumer)})"


class LeftOut(ClayoutError):
    """``--images-only`` and constants the model needs that no image takes:
    ``lines`` names each (name, shape, the operator reading it, why), in
    graph order; the message holds them all, grouped by reason, on one line."""

    def __init__(self, unplaced):
        self.lines = [f"{_named(w)}: {printable(why)}" for w, why in unplaced]
        self.count = len(unplaced)
        groups: dict[str, list] = {}
        for w, why in unplaced:
            groups.setdefault(why, []).append(w)
        shown = "; ".join(", ".join(_named(w) for w in ws) + f": {printable(why)}"
                          for why, ws in groups.items())
        self.hint = self._hint(any(w.role is not None for w, _ in unplaced))
        super().__init__(f"--images-only: {self.count} constant(s) the model needs cannot go "
                         f"on an image: {shown}; {self.hint}")

    @staticmethod
    def _hint(oversize: bool) -> str:
        return ("raise --max-image, drop --no-tiles to split the weights over it into tiles, "
                "or drop --images-only to store them as plain buffers (the default)"
                if oversize else "drop --images-only to store them as plain buffers (the "
                "default: every constant the model needs is then in the file)")

    def short(self, listed_where: str = "listed above, one per line") -> str:
        """The error's one line without the names (the command prints them
        one per line first, ``listed_where`` says so)."""
        return (f"--images-only: {self.count} constant(s) the model needs cannot go on an "
                f"image ({listed_where}); {self.hint}")
