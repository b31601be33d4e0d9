"""Every constant tensor of an ONNX model, wherever the exporter put it.

Exporters store weights in several ways: graph initializers (PyTorch), ``Constant``
nodes (Paddle, tf2onnx, older PyTorch), constants reached through a chain of
``Identity``/``Cast``/``Reshape``/``Flatten``/``Squeeze``/``Unsqueeze``/``Transpose``
nodes, tensors inside the subgraphs of ``If``/``Loop``/``Scan``, and external
data files. :func:`read_constants` finds all of them and folds the chains on the
host with numpy (exact: they only move or cast elements), so the weight a
``Conv`` reads is the folded tensor under the name the ``Conv`` uses. A
``DequantizeLinear`` of constants (a QDQ model's weight) folds the same way, by
the rule of :mod:`runtime.model.quantization`, and the folded constant keeps its integer
tensor and parameters (``Constant.quant``).

Subgraph tensors get qualified names: ``<node>/<attribute>/<tensor>``, for
example ``cond/then_branch/w`` (an unnamed node is ``<op>#<position>``).

Every tensor is read with its size checked before anything is allocated: raw or
external data whose byte count differs from what the dims say is an error naming
the tensor, its dims and both byte counts. External data must lie inside the
model's folder.

Example::

    >>> model = load("model.onnx")                                  # doctest: +SKIP
    >>> [(t.name, t.array.shape, t.origin) for t in read_constants(model, "model.onnx")]
    [('conv.w', (8, 3, 3, 3), 'Constant node c0'), ...]             # doctest: +SKIP
"""
from __future__ import annotations

import os
from collections import ChainMap
from dataclasses import dataclass, field

import numpy as np

from .. import quantization
from ...errors import ClayoutError
from ..graph import Constant, GraphIndex, Use, printable
from .fold import FOLDED_OPS, MOVES, cast_type, evaluate, foldable
from ..tensor_data import values
from .reader import attr, tensor_array

# -- walking the graphs ----------------------------------------------------------------
@dataclass
class _Node:
    """One node, for the liveness walk: the ids of the values it reads and
    makes (a value's id is its graph's prefix and its name), and its
    subgraphs as (nodes, output ids)."""
    inputs: list[str]
    outputs: list[str]
    graphs: list = field(default_factory=list)


# the inputs of a folded op that hold the data (the others are shapes, indices, axes)
DATA_INPUTS = {"Concat": None, "Add": None, "Sub": None, "Mul": None, "Div": None}


class _Reader:
    def __init__(self, where: str, folder: str, opset: int):
        self.where, self.folder, self.opset = where, folder, opset
        self.found: dict[str, Constant] = {}

    def add(self, local: dict, name: str, qualified: str, array, dtype, shape, origin: str):
        if name in local or qualified in self.found:
            first = self.found.get(local.get(name, qualified))
            raise ClayoutError(
                f"{self.where}: tensor name {printable(qualified)!r} is defined twice "
                f"({printable(first.origin) if first else 'a node output'} and "
                f"{printable(origin)}); ONNX names must "
                "be unique, so clayout cannot tell which one a node reads")
        local[name] = qualified
        self.found[qualified] = Constant(qualified, array, dtype, tuple(shape), origin)
        return self.found[qualified]

    def tensor(self, local, prefix, proto, origin, name=None):
        array = tensor_array(proto, self.where, self.folder)
        dtype = array.dtype.name if array is not None else "string"
        name = proto.name if name is None else name
        self.add(local, name, prefix + name, array, dtype, proto.dims, origin)

    def constant_node(self, local, prefix, node, label):
        import onnx.helper
        out = node.output[0] if node.output else ""
        origin = f"Constant node {label}"
        for a in node.attribute:
            if a.name == "value":
                return self.tensor(local, prefix, a.t, origin, name=out)
            if a.name in ("value_float", "value_floats", "value_int", "value_ints"):
                value = onnx.helper.get_attribute_value(a)
                kind = np.float32 if "float" in a.name else np.int64
                array = np.asarray(value, dtype=kind)
                return self.add(local, out, prefix + out, array, array.dtype.name, array.shape,
                                origin)
            if a.name in ("sparse_value", "value_string", "value_strings"):
                dims = a.sparse_tensor.dims if a.name == "sparse_value" else ()
                return self.add(local, out, prefix + out, None, a.name, dims, origin)
        raise ClayoutError(f"{self.where}: Constant node {printable(label)!r} has no value")

    def fold(self, node, label: str, sources, data) -> list:
        """[(array, QuantSource or None), ...] of the outputs of a FOLDED_OPS
        node of constants."""
        if node.op_type == "DequantizeLinear":
            zero = data[2] if len(data) > 2 else None
            names = [s.name if s is not None else "" for s in sources] + [""]
            try:
                return [quantization.fold_dequantize(
                    data[0], data[1], zero, int(attr(node, "axis", 1)),
                    int(attr(node, "block_size", 0)), f"DequantizeLinear {printable(label)!r}",
                    names[:3])]
            except ClayoutError as exc:
                raise ClayoutError(f"{self.where}: {exc}") from None
        try:
            arrays = evaluate(node, data, self.opset)
            quant = sources[0].quant if sources[0] is not None else None
            if quant is not None and node.op_type in MOVES:
                to = cast_type(node) if node.op_type == "Cast" else None
                quant = quantization.follow(
                    node.op_type, quant, lambda a: evaluate(node, [a] + data[1:], self.opset)[0],
                    to)
            elif quant is not None:   # a selection or arithmetic: its parameters no longer hold
                quant = None
            elif node.op_type == "Mul":   # Mul(Cast(q), scale): quantized without a DequantizeLinear
                quant = self.scaled(sources, arrays[0], f"Mul {printable(label)}")
        except ClayoutError as exc:
            shown = ", ".join(repr(printable(s.name)) for s in sources if s is not None)
            raise ClayoutError(f"{self.where}: {node.op_type} {printable(label)!r} of the "
                               f"constants {shown}: {exc}") from None
        return [(a, quant) for a in arrays]

    def scaled(self, sources, value, node: str):
        """The QuantSource of ``Mul(Cast(q), scale)`` (either order) of an
        integer constant q and a float scale, or None."""
        if len(sources) != 2 or any(s is None or s.array is None for s in sources):
            return None
        value = values(value)
        for cast, scale in (sources, sources[::-1]):
            q = self.found.get(cast.folded_from[0]) if len(cast.folded_from) == 1 else None
            if q is not None and q.array is not None and \
                    cast.origin.rsplit(" -> ", 1)[-1].startswith("Cast "):
                found = quantization.scaled_integers(values(q.array), q.name,
                                                     values(scale.array), scale.name, value, node)
                if found is not None:
                    return found
        return None

    def graph(self, graph, prefix: str, scope: dict, ids: ChainMap) -> tuple[list, list]:
        """Read one graph's constants (and its subgraphs'); (its nodes for the
        liveness walk, its outputs' ids). ``scope``: the outer constants
        visible here; ``ids``: every outer value's id."""
        local: dict[str, str] = {}
        ids = ids.new_child()
        nodes: list[_Node] = []
        index = GraphIndex(names=ChainMap(local, scope), found=self.found)
        for init in graph.initializer:
            self.tensor(local, prefix, init, "initializer" if not prefix else
                        f"initializer of {prefix[:-1]}")
            ids[init.name] = prefix + init.name
        for inp in graph.input:     # a subgraph input (a Loop counter, ...) hides an outer name
            if inp.name not in local and inp.name in scope:
                local[inp.name] = ""
            if inp.name not in local or local[inp.name] == "":
                ids[inp.name] = prefix + inp.name
        for position, node in enumerate(graph.node):
            label = prefix + (node.name or f"{node.op_type}#{position}")
            visible = {**scope, **local}
            reads = [ids.get(name, "?" + name) for name in node.input if name]
            if node.op_type == "Constant":
                self.constant_node(local, prefix, node, label)
                ids.update((out, prefix + out) for out in node.output if out)
                continue
            sources = [self.found.get(visible.get(name, "")) if name else None
                       for name in node.input]
            data = [s.array if s is not None else None for s in sources]
            for out in node.output:
                if out:
                    index.producers[out] = (node, label)
            for name in node.input:
                if name:
                    index.consumers.setdefault(name, []).append((node, label))
            record = _Node(reads, [prefix + out for out in node.output if out])
            nodes.append(record)
            if foldable(node, data):   # evaluated: a large tensor's values read now
                self.made(node, label, prefix, local, sources, [values(d) for d in data])
                ids.update((out, prefix + out) for out in node.output if out)
                continue
            note = "" if not data or any(d is None for d in data) or \
                node.op_type in ("If", "Loop", "Scan") else \
                (f"every input of {node.op_type} {printable(label)} is a constant, but clayout "
                 f"does not evaluate {node.op_type} (it evaluates {', '.join(FOLDED_OPS)})")
            for position_in, source in enumerate(sources):
                if source is not None:
                    source.uses.append(Use(node.op_type, label, position_in, node, index,
                                           note=note))
            for a in node.attribute:
                if a.type == a.GRAPH:
                    record.graphs.append(self.graph(a.g, f"{label}/{a.name}/", visible, ids))
                for i, g in enumerate(a.graphs):
                    record.graphs.append(self.graph(g, f"{label}/{a.name}{i}/", visible, ids))
            for out in node.output:      # a node output shadows an outer constant of that name
                if out and out in visible and out not in local:
                    local[out] = ""
                if out:
                    ids[out] = prefix + out
        return nodes, [ids.get(out.name, "?" + out.name) for out in graph.output]

    def made(self, node, label: str, prefix: str, local: dict, sources, data) -> None:
        """The constants a folded node makes, each listed in its sources' ``folded_into``."""
        data_inputs = DATA_INPUTS.get(node.op_type, (0,))
        chosen = [s for i, s in enumerate(sources) if s is not None and
                  (data_inputs is None or i in data_inputs)]
        if len(chosen) == 1:
            origin = f"{chosen[0].origin} -> {node.op_type} {label}"
        else:
            origin = f"{node.op_type} {label} of " + ", ".join(s.name for s in chosen)
        outputs = self.fold(node, label, sources, data)
        for out, (array, quant) in zip(node.output, outputs):
            if not out:
                continue
            made = self.add(local, out, prefix + out, array, array.dtype.name, array.shape,
                            origin)
            made.quant = quant
            made.folded_from = tuple(s.name for s in sources if s is not None)
            for s in sources:
                if s is not None and made.name not in s.folded_into:
                    s.folded_into.append(made.name)


def _live(nodes, needed: set) -> None:
    """Add to ``needed`` every value the nodes need for what is in it already:
    a node one of whose outputs is needed needs its inputs, and its
    subgraphs' outputs (and so what they read, outer values included)."""
    for node in reversed(nodes):
        if any(out in needed for out in node.outputs):
            needed.update(node.inputs)
            for sub_nodes, sub_outputs in node.graphs:
                needed.update(sub_outputs)
                _live(sub_nodes, needed)


def opset_of(model) -> int:
    """The version of the default ONNX operator set the model imports."""
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")),
                13)


def read_constants(model, path: str) -> list[Constant]:
    """Every constant tensor of ``model`` (loaded from ``path``), in graph
    order, with the nodes that read it and whether any graph output needs it
    (``live``). What folding made is listed after its sources, each of which
    names it in ``folded_into``."""
    reader = _Reader(path, os.path.dirname(os.path.abspath(path)), opset_of(model))
    nodes, outputs = reader.graph(model.graph, "", {}, ChainMap())
    needed = set(outputs)
    _live(nodes, needed)
    for c in reader.found.values():
        c.live = c.name in needed
    return list(reader.found.values())
