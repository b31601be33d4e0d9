"""What the ``clayout`` command line checks before any work (runtime.cli,
its command modules): the dtype options of each command and the output's
extension (the refusal of an image with no elements is the doors', with the
command line's wording: runtime/doors/parse.py ``Wording``). Each failure is a
ClayoutError: one line, exit 1, nothing written."""
from __future__ import annotations

import os

from .. import model
from ..algebra import dtypes
from ..errors import ClayoutError

PROG = "clayout"
# the --dtype-like options of each command: what dtype each names
DTYPE_OPTIONS = {"to-image": {"dtype": "image"}, "from-image": {"dtype": "buffer"},
                 "reorder": {"dtype": "buffer"}, "model": {"dtype": "model"},
                 "kernel": {"dtype": "buffer", "dst_dtype": "buffer", "image_dtype": "image"}}
# what each command writes with -o: the extension its output must have
OUTPUT_KINDS = {"to-image": (".npy", "a .npy array"), "from-image": (".npy", "a .npy array"),
                "reorder": (".npy", "a .npy array"), "model": (".safetensors", "a safetensors file"),
                "demo": (".safetensors", "a safetensors file"), "show": (".png", "a PNG picture"),
                "frame": (".npy", "a .npy array")}


def check_dtype_options(args) -> None:
    """Every dtype option of the command names a dtype it allows (exit 1 with
    the allowed values, before any file is read); ``model --winograd`` names
    a Winograd engine or layout, and with it ``--dtype`` is f32 or f16."""
    if getattr(args, "winograd", None) is not None:
        model.winograd_layouts(args.winograd, getattr(args, "dtype", None))
    for name, kind in DTYPE_OPTIONS.get(args.command, {}).items():
        value = getattr(args, name, None)
        if value is None:
            continue
        option = "--" + name.replace("_", "-")
        try:
            if kind == "model":
                model.check_dtype(value)
            elif kind == "image":
                try:
                    dtypes.dtype(value)
                except ClayoutError:
                    raise ClayoutError(f"unsupported image dtype {value!r}; allowed: "
                                       f"{', '.join(dtypes.IMAGE_NAMES)}") from None
                dtypes.image_dtype(value)
            else:
                dtypes.dtype(value)
        except ClayoutError as exc:
            text = str(exc)
            raise ClayoutError(text if text.startswith(option) else f"{option}: {text}") from None


def check_output_kind(args) -> None:
    """The output's extension is the one of what the command writes: a name
    that says otherwise (``show -o x.jpg``, ``model -o w.npy``) is refused."""
    ext, what = OUTPUT_KINDS[args.command]
    path = args.output
    if path and not path.lower().endswith(ext):
        shown = os.path.splitext(path)[1] or "no extension"
        raise ClayoutError(f"cannot write {path}: {PROG} {args.command} writes {what}, but the "
                           f"name has {shown}; give a name ending in {ext}")
