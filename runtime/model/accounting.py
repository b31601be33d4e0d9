"""Every float constant of a model accounted for: what became of it.

A model's float constants are the file's own tensors of a float type (ONNX
initializers and ``Constant`` nodes, TFLite buffers; a TFLite integer tensor
with a scale counts too, its value being real), and the float tensors
folding makes from no float tensor (a ``ConstantOfShape``'s fill, a ``Cast``
of integers to float: their values are first float there), each counted once
by its elements; what folding makes from float constants is not counted again. After the plan,
each is exactly one of:

* **placed**: stored on an image (as a weight, or as a quantized weight's
  scale or zero point);
* **folded**: evaluated into other constants (runtime.model.onnx.fold, the
  TFLite reader's constant operators), each of which is stored, or is an
  integer tensor the model computes from it (a shape, an index: clayout
  stores float weights only); ``into`` names them;
* **kept**: stored as a plain buffer (the default for what no image takes);
* **dead**: no graph output needs it (the front end's liveness walk);
* **empty**: it has no element, so nothing can be lost.

Anything else would be a constant the model needs and the file lacks:
``clayout model`` refuses that before converting (runtime.model.plan), and
:func:`account` raises a ClayoutError naming each one, should one remain.
The manifest's ``accounting`` holds the totals, in elements; they add up to
the graph's float elements, and ``--verify`` checks that they do.

Example::

    >>> from runtime.model.graph import Constant
    >>> a = Constant("a", np.zeros(6, np.float32), "float32", (6,), "initializer")
    >>> b = Constant("b", np.zeros(2, np.float32), "float32", (2,), "initializer", live=False)
    >>> account([a, b], {"a": "image"}).totals()
    {'float_constants': 2, 'float_elements': 8, 'placed': 6, 'folded': 0, 'kept': 0, 'dead': 2, 'empty': 0}
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ClayoutError
from .graph import printable

FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")
FATES = ("placed", "folded", "kept", "dead", "empty")


@dataclass(frozen=True)
class Fate:
    """What became of one float constant of the model file."""
    name: str
    elements: int
    fate: str                     # one of FATES ("lost" only on the way to an error)
    into: tuple[str, ...] = ()    # folded: the tensors it was evaluated into
    why: str = ""                 # lost: why it would be


@dataclass(frozen=True)
class Accounting:
    """The fates of every float constant of a model, in graph order."""
    fates: tuple[Fate, ...]

    def totals(self) -> dict:
        """{"float_constants", "float_elements", and the elements of each fate}."""
        out = {"float_constants": len(self.fates),
               "float_elements": sum(f.elements for f in self.fates)}
        out.update({fate: sum(f.elements for f in self.fates if f.fate == fate)
                    for fate in FATES})
        return out

    def manifest(self) -> dict:
        """The manifest's ``accounting``: the totals, and the name of each
        constant by fate (a folded one with the tensors it went into)."""
        return {**self.totals(),
                "constants": [{"name": f.name, "elements": f.elements, "fate": f.fate}
                              | ({"into": list(f.into)} if f.into else {})
                              for f in self.fates]}


def _elements(c) -> int:
    return int(c.array.size) if c.array is not None else math.prod(c.shape)


def is_float_constant(c, by_name: dict) -> bool:
    """Whether ``c`` (a runtime.model.graph.Constant) is one of the model's
    own float constants: of a float type, and either the file's own tensor
    or made by folding from no float tensor (a ConstantOfShape's fill, a
    Cast of integers: its values are first float there). ``by_name``: every
    constant by name."""
    if c.dtype not in FLOAT_DTYPES or c.array is None:
        return False
    return not any(by_name[s].dtype in FLOAT_DTYPES for s in c.folded_from if s in by_name)


def account(constants, stored: dict, reasons: dict | None = None) -> Accounting:
    """The fate of each float constant of ``constants`` (runtime.model.graph
    records), given ``stored`` ({the name of a constant whose values are
    stored: "image" or "buffer"}); ``reasons`` ({name: why it has no
    image}) words the error for a constant that no fate takes."""
    by_name = {c.name: c for c in constants}
    fates, lost = [], []
    for c in constants:
        if not is_float_constant(c, by_name):
            continue
        n = _elements(c)
        into = _stored_products(c, by_name, stored)
        if c.name in stored:
            fate = Fate(c.name, n, "placed" if stored[c.name] == "image" else "kept")
        elif n == 0:
            fate = Fate(c.name, n, "empty")
        elif into:
            fate = Fate(c.name, n, "folded", tuple(into))
        elif not c.live:
            fate = Fate(c.name, n, "dead")
        else:
            fate = Fate(c.name, n, "lost", why=_why(c, by_name, reasons or {}))
            lost.append(fate)
        fates.append(fate)
    if lost:
        shown = "; ".join(f"{printable(f.name)!r} ({f.elements} elements): {f.why}"
                          for f in lost[:6])
        raise ClayoutError(f"{len(lost)} float constant(s) the model needs would not be in the "
                           f"file: {shown}" + (" ..." if len(lost) > 6 else "")
                           + "; drop --images-only to store them as plain buffers")
    return Accounting(tuple(fates))


def _stored_products(c, by_name: dict, stored: dict) -> list[str]:
    """The tensors folding made from ``c`` (through any number of folds)
    that are stored, or are live integer tensors (shapes, indices the model
    computes from it)."""
    found, seen, todo = [], set(), list(c.folded_into)
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        made = by_name.get(name)
        if made is None:
            continue
        if name in stored or (made.live and made.array is not None and made.uses and
                              np.dtype(made.array.dtype).kind in "iub"):
            found.append(name)
        else:
            todo.extend(made.folded_into)
    return found


def _why(c, by_name: dict, reasons: dict) -> str:
    """Why the live constant ``c`` is stored nowhere: its own reason, or that
    of the first live tensor folding made from it that an operator reads."""
    if c.uses:
        return f"{c.uses[0]}: {reasons.get(c.name, 'no image role')}"
    for name in c.folded_into:
        made = by_name.get(name)
        if made is not None and made.live:
            return f"folded into {printable(name)!r}, " + _why(made, by_name, reasons)
    return "needed by the graph, stored nowhere"
