"""The graph record every model front end fills, and what a role is.

A front end reads one model format and returns its constants: one
:class:`Constant` per constant tensor (its host array, dtype, shape, where it
came from), each with the :class:`Use` records of the operators that read it.
:mod:`runtime.model.onnx.constants` fills them from an ONNX model,
:mod:`runtime.model.tflite.constants` from a TensorFlow Lite flatbuffer. Everything
after (roles, quantized weights, placement, the manifest) reads only these
records, so both formats take one code path.

A :class:`ConstantRole` is what one use makes of a constant: its role (filter,
depthwise, fc_weight, argument), clayout's logical dims, and the ``steps``
(numpy reshapes and transposes, in order) from the stored tensor to the
logical one. Each front end has its table of roles
(:func:`runtime.model.onnx.roles.role_of` for ONNX,
:func:`runtime.model.tflite.roles.role_of` for TFLite); the per-channel vector
rule both share is :func:`argument_role`.

Example::

    >>> argument_role("Add", 1, (1, 8, 1, 1), elementwise=True, source="ONNX").dims
    (8,)
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field

import numpy as np

from . import quantization
from .tensor import Reshape

FORMATS = ("onnx", "tflite")


def printable(name: str) -> str:
    """``name`` safe to print: control and other invisible characters escaped
    (``'w\\x1b[2J'`` prints as ``w\\x1b[2J``, not as a terminal command)."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


@dataclass
class GraphIndex:
    """Which node makes and which nodes read each value of one ONNX graph,
    for patterns around a node (runtime.model.quantization.traced_scale)."""
    producers: dict = field(default_factory=dict)    # value -> (NodeProto, label)
    consumers: dict = field(default_factory=dict)    # value -> [(NodeProto, label), ...]
    names: ChainMap | None = None                    # visible name -> qualified constant name
    found: dict | None = None                        # qualified name -> Constant

    def constant(self, name: str):
        """The Constant a node input ``name`` reads, or None."""
        qualified = self.names.get(name) if name and self.names is not None else None
        return self.found.get(qualified) if qualified else None


@dataclass
class Use:
    """One operator input that reads a constant."""
    op: str
    node: str          # the operator's label: an ONNX node's qualified name, a TFLite "#12"
    index: int
    proto: object = None   # the operator record (its attributes or options decide some roles)
    graph: object = None   # ONNX: the GraphIndex of its graph; TFLite: the Subgraph record
    front: str = "onnx"    # the front end that made it: "onnx" or "tflite"
    note: str = ""         # what the front end says of the operator (every input constant,
    #                        but not an op it evaluates)

    def __str__(self) -> str:
        return f"{self.op} {self.node} input {self.index}"


@dataclass
class Constant:
    """A constant tensor: its qualified name, host data and where it came from."""
    name: str
    array: np.ndarray | None       # None for tensors clayout cannot read (strings, sparse)
    dtype: str                     # its numpy dtype name ("float32"), or what it is ("string")
    shape: tuple[int, ...]
    origin: str                    # "initializer", "Constant node c0 -> Cast k", "buffer 5"
    uses: list[Use] = field(default_factory=list)
    folded_into: list[str] = field(default_factory=list)   # names made from it by folding
    quant: quantization.QuantSource | None = None   # dequantized: its integers and parameters
    folded_from: tuple[str, ...] = ()   # made by folding: the constants it was made from
    live: bool = True              # some graph output needs it (the front end's liveness walk)


@dataclass(frozen=True)
class ConstantRole:
    """What one use of a constant makes of it: its role (None: none), the
    logical dims, the steps from the stored tensor and those in words, the
    stored tensor's layout in the format's own letters ("OHWI"); or why it
    has no role."""
    role: str | None = None
    dims: tuple[int, ...] = ()
    steps: tuple = ()
    mapping: str = ""
    reason: str = ""
    source_layout: str = ""


def argument_role(op: str, index: int, shape: tuple, elementwise: bool,
                  source: str) -> ConstantRole:
    """A per-channel vector input (a bias, a scale, a PRelu slope): an
    ``argument`` image of its one non-unit dim; a scalar of an ``elementwise``
    op is a kernel argument, anything larger no vector. ``source`` names the
    format in the mapping ("ONNX", "TFLite")."""
    big = [d for d in shape if d != 1]
    if not big and elementwise:             # broadcast to every element, not one per channel
        return ConstantRole(reason="scalar constant: pass it as a kernel argument")
    if len(big) > 1:
        return ConstantRole(reason=f"{op} input {index} of shape {tuple(shape)} is not a per-channel "
                    "vector")
    length = big[0] if big else 1           # a bias of one output channel is still a vector
    return ConstantRole("argument", (length,), (Reshape((length,)),),
                "as stored" if len(shape) == 1 else f"{source} {tuple(shape)} flattened")
