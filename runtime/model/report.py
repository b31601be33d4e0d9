"""How a model's manifest is printed (runtime/model/manifest.py holds what
it records): the stored tensors as a table, names cut to the terminal's
width where the output is one; the summary line and its totals; the
accounting's and --verify's lines.
"""
from __future__ import annotations

import math
import shutil
import sys

from ..algebra.storage import size_text, storage
from .accounting import FATES as ACCOUNTED
from .graph import printable
from .manifest import MANIFEST_KEY
from .weights import COMPUTE_OPS


def table(manifest: dict, names_per_reason: int = 3, width: int | None = None) -> str:
    """The stored tensors as a text table; skipped tensors after it, one line
    per reason with the first few names (the manifest lists them all)."""
    head = ("name", "role", "layout", "dims", "image", "dtype", "bytes")
    rows = [head]
    for e in manifest["tensors"]:
        if e["layout"] == "buffer":
            layout, image = f"buffer {e['tag']}", "-"
        else:
            layout = e["layout"] + (f" (not {e['fallback_from']}: too big)"
                                    if "fallback_from" in e else "")
            image = size_text(e["size"], storage(e["storage"])) + (
                f" in {len(e['tiles'])} tiles" if "tiles" in e else "")
        rows.append((printable(e["name"]), e["role"] or "-", layout, ",".join(map(str, e["dims"])),
                     image, e["dtype"], str(e["bytes"])))
    lines = aligned(rows, width=width)
    groups: dict[str, list[dict]] = {}
    for s in manifest["skipped"]:
        groups.setdefault(s["reason"], []).append(s)
    for reason, group in groups.items():
        shown = ", ".join(_skipped_name(s) for s in group[:names_per_reason])
        more = f", ... ({len(group)} in all)" if len(group) > names_per_reason else ""
        lines.append(f"skipped {shown}{more}: {printable(reason)}")
    return "\n".join(lines)


def aligned(rows, free_last: bool = False, width: int | None = None) -> list[str]:
    """``rows`` (the header first) as lines of aligned columns, the header
    underlined and column 6 (bytes) right-aligned; a ``free_last`` column is
    a sentence, left to run on. Names (the first column) longer than the
    line has room for are cut in the middle ('model/bac…/conv1.weight'), to
    no fewer than 32 characters: to ``width``, else the terminal's where the
    output is one ($COLUMNS, else its size; a file or a pipe gets every name
    whole, and the manifest always has them)."""
    width = width or terminal_width()
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    fixed = widths[1:-1] if free_last else widths[1:]
    room = None if width is None else max(32, width - sum(fixed) - 2 * len(fixed))
    if room is not None and widths[0] > room:
        rows = [(_cut(r[0], room),) + tuple(r[1:]) for r in rows]
        widths[0] = room
    lines = ["  ".join(c.rjust(w) if i == 6 else c.ljust(w) for i, (c, w) in
                       enumerate(zip(r, widths))).rstrip() for r in rows]
    rule = widths[:-1] + [len(rows[0][-1])] if free_last else widths
    lines.insert(1, "  ".join("-" * w for w in rule))
    return lines


def terminal_width() -> int | None:
    """The terminal's width where stdout is one ($COLUMNS, else its size),
    else None: output to a file or a pipe is never cut."""
    isatty = getattr(sys.stdout, "isatty", None)
    return shutil.get_terminal_size().columns if isatty and isatty() else None


def _cut(name: str, room: int) -> str:
    """``name`` in at most ``room`` characters, its middle given up."""
    if len(name) <= room:
        return name
    head = (room - 1) // 2
    return name[:head] + "…" + name[len(name) - (room - 1 - head):]


def _skipped_name(s: dict) -> str:
    shape = ",".join(map(str, s["source_shape"])) or "scalar"
    return (f"{printable(s['name'])} ({s['source_dtype']} [{shape}], "
            f"{printable(s['consumer']) or 'unused'})")


def by_op(manifest: dict) -> dict[str, list[int]]:
    """{op kind: [placed on images, kept as buffers, skipped]} of the constants
    each kind of op reads (by each one's ``consumer``; a quantized weight's
    parameters, folded steps and unused constants are left out). The compute
    ops (runtime.model.weights.COMPUTE_OPS) come first, then the others, each in
    order of appearance."""
    counts: dict[str, list[int]] = {}
    for column, entries in ((0, manifest["tensors"]), (2, manifest["skipped"])):
        for e in entries:
            op = (e.get("consumer") or "").split(" ")[0]
            if not op or op == "(folded)" or e.get("param_of"):
                continue
            counts.setdefault(op, [0, 0, 0])[1 if e.get("layout") == "buffer" else column] += 1
    return dict(sorted(counts.items(), key=lambda kv: kv[0] not in COMPUTE_OPS))


def buffer_kinds(manifest: dict, shown: int = 4) -> str:
    """Why the manifest's buffers are buffers, counted by kind, most first:
    "201 scalars, 6 Resize inputs" ('' without buffers). A buffer is a
    weight over every layout's limit with --no-tiles (it has a role), a
    compute op's weight no layout takes ("LSTM weights"), a one-element
    constant ("scalars"), or another op's input ("Resize inputs")."""
    counts: dict[str, int] = {}
    for e in manifest["tensors"]:
        if e["layout"] != "buffer":
            continue
        op = (e.get("consumer") or "").split(" ")[0] or "unused"
        if e.get("role") is not None:
            kind = ("weight", " over --max-image (--no-tiles)")
        elif op in COMPUTE_OPS:
            kind = (f"{op} weight", "")
        elif math.prod(e["dims"]) == 1:
            kind = ("scalar", "")
        else:
            kind = (f"{op} input", "")
        counts[kind] = counts.get(kind, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    parts = [f"{n} {noun}{'s' * (n > 1)}{tail}" for (noun, tail), n in ranked[:shown]]
    if len(ranked) > shown:
        parts.append(f"{sum(n for _, n in ranked[shown:])} others")
    return ", ".join(parts)


def summary(manifest: dict, output: str) -> str:
    """One line: what was written, and its :func:`totals`."""
    return f"wrote {printable(output)}: {totals(manifest)}"


def totals(manifest: dict) -> str:
    """What the manifest stores, counted, and per op kind what became of the
    constants it reads (placed/buffers/skipped): the summary line's words
    after 'wrote OUT:', which ``--dry-run`` prints too."""
    images = [e for e in manifest["tensors"] if e["layout"] != "buffer"]
    buffers = len(manifest["tensors"]) - len(images)
    total = sum(e["bytes"] for e in manifest["tensors"])
    kinds = ", ".join(sorted({e["dtype"] for e in manifest["tensors"]},
                             key=lambda d: (d != manifest["dtype"], d)))
    tiled = [e for e in images if "tiles" in e]
    notes = [f"{len(tiled)} in {sum(len(e['tiles']) for e in tiled)} tiles"] if tiled else []
    winograd = sum("transform" in e for e in images)
    if winograd:
        notes.append(f"{winograd} Winograd")
    split = f" ({', '.join(notes)})" if notes else ""
    ops = ", ".join(f"{op} {'/'.join(map(str, n))}"
                    for op, n in by_op(manifest).items())
    why = buffer_kinds(manifest)
    why = f"; the buffers hold what no image layout takes: {why}" if why else ""
    return (f"{len(images)} images{split}, {buffers} buffers "
            f"({total} bytes of {kinds or manifest['dtype']}), {len(manifest['skipped'])} "
            f"skipped{why}; by op (placed/buffers/skipped): {ops or 'none'}; "
            f"manifest in metadata key {MANIFEST_KEY!r}; engine {manifest['engine']}")


def memory_line(estimate: dict, here: bool = False) -> str:
    """``--dry-run``'s line on the peak memory the conversion will take
    (runtime.model.stream.peak_estimate): what converting adds to the process
    that has read the model (the same for every run of the same model and
    options), and with ``here`` the whole, as this process measures it (a
    terminal's reader wants the number; a log keeps the line the same)."""
    def mib(n: int) -> str:
        return f"{n / 2**20:.1f} MiB"
    more = estimate["largest"] + estimate["writing"] + estimate["ahead"]
    line = (f"peak memory: reading the model, then {mib(more)} more to convert "
            f"({mib(estimate['largest'])} for the tensor being converted: read from the file, "
            f"moved, placed; {mib(estimate['writing'])} for the image being written; "
            f"{mib(estimate['ahead'])} for the tensor read ahead); {mib(estimate['held'])} of "
            "the model's constants stay in memory")
    return line + (f"; about {estimate['total'] / 2**20:.0f} MiB in all here" if here else "")


def accounting_line(manifest: dict) -> str:
    """The accounting's line (runtime.model.accounting), from the manifest."""
    a = manifest.get("accounting")
    if not a:
        return ""
    parts = ", ".join(f"{a[fate]} {fate}" for fate in ACCOUNTED if a[fate] or fate != "empty")
    return (f"accounted for: {a['float_elements']} float elements in {a['float_constants']} "
            f"constants = {parts}")


def verified_line(manifest: dict, verified: int) -> str:
    """What --verify compared: the ONNX weights, for quantized ones the rule or
    q, and Winograd images within their transform's bound."""
    winograd = sum("transform" in e for e in manifest["tensors"])
    tensors = [e for e in manifest["tensors"] if "transform" not in e]
    folded, kept, params = (sum(key in e for e in tensors)
                            for key in ("dequantized", "quantization", "param_of"))
    exact = verified - winograd
    fmt = {"tflite": "TFLite"}.get(manifest.get("source_format"), "ONNX")
    dequantize = "DEQUANTIZE" if fmt == "TFLite" else "DequantizeLinear"
    if any(str(e["dequantized"].get("node", "")).startswith("Mul ") for e in tensors
           if "dequantized" in e):   # int8 weights stored as Mul(Cast(q), scale)
        dequantize += " or Cast -> Mul"
    parts = [(exact - folded - kept - params, f"to their {fmt} weights"),
             (folded, f"to (q - zero_point) * scale of their {dequantize}"),
             (kept, "to their integers q"),
             (params, "scales and zero points to their " + (
                 "TFLite quantization parameters" if fmt == "TFLite" else "ONNX constants"))]
    shown = ", ".join(f"{count} {what}" for count, what in parts if count)
    if winograd:   # Winograd images read back within a bound, the others bit for bit
        return (f"verified {verified} tensors: {winograd} Winograd filter image(s) read back "
                "to their weights within their transform's inverse_bound"
                + (f"; bit for bit: {shown}" if exact else ""))
    if not folded + kept + params:
        return f"verified {verified} tensors: each reads back to its {fmt} weight bit for bit"
    return f"verified {verified} tensors, bit for bit: {shown}"
