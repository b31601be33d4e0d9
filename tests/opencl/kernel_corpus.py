"""A corpus of rendered kernels and the digest of each one's text.

``cases()`` renders many kernels (conversions of both families, baked and
generic, buffers and images both ways, staged and direct, dtype pairs, halos,
strided and aliased descs; frames; read_output's kernels; accessors) and
yields (name, source). tests/data/kernel_corpus.json keeps the sha256 of
each text: tests/opencl/test_trace_emitter.py renders them again and
compares, so a change to the render steps that changes any kernel's text
(the trace emitter with tracing off must change none) fails there.

A change that means to change kernels writes the file anew and says so in
its commit: ``python tests/opencl/kernel_corpus.py --write`` (from the
repository root, with the project's venv).
"""
from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve()
CORPUS = HERE.parents[1] / "data" / "kernel_corpus.json"

TAGS = ["nchw", "nhwc", "chwn", "nChw4c", "nChw8c", "nChw16c", "ABcd16b16a", "Acdb4a",
        "ABcd8b16a2b", "BAcd16a16b"]
DIMS = [(1, 3, 5, 7), (2, 17, 3, 4), (1, 64, 9, 40), (1, 33, 3, 3), (1, 3, 224, 224),
        (1, 64, 512, 512)]
IMAGES = ["in_out_channel", "in_out_height", "in_out_width", "conv2d_filter",
          "dw_conv2d_filter", "argument", "weight_height", "weight_width",
          "image_2d_weights_c4_fyx_b", "image_2d_weights_c1_b_fyx", "texture_2d"]


def _conversions():
    from runtime import ImageDesc, MemoryDesc, image_layout
    from runtime.opencl.plan import ByteCopy, plan

    def kernel(name, src, dst, **kw):
        k = plan(src, dst, **kw)
        if not isinstance(k, ByteCopy):
            yield name, k.source

    for a in TAGS:
        for b in TAGS:
            if a == b:
                continue
            for dims in DIMS[:4] + ([DIMS[4], DIMS[5]] if {a, b} <= {"nchw", "nhwc", "nChw16c"}
                                    else []):
                for bake in (True, False):
                    for tiled in (False, True):
                        yield from kernel(f"{a}->{b} {dims} bake={bake} tiled={tiled}",
                                          MemoryDesc(dims, tag=a), MemoryDesc(dims, tag=b),
                                          bake=bake, tiled=tiled)
    for dims in DIMS[:3]:
        n, c, h, w = dims
        for bake in (True, False):
            for tiled in (False, True):
                halo = MemoryDesc(dims, halo=((0, 1, 1, 0), (0, 2, 1, 0)), fill=1)
                yield from kernel(f"halo {dims} {bake} {tiled}", halo,
                                  MemoryDesc(dims, "f16", tag="nChw8c"), bake=bake, tiled=tiled)
                strided = MemoryDesc(dims, strides=(c * h * (w + 3), h * (w + 3), w + 3, 1))
                yield from kernel(f"strided {dims} {bake} {tiled}", strided,
                                  MemoryDesc(dims, "s8", tag="nhwc"), bake=bake, tiled=tiled)
                for s_dt, d_dt in (("f32", "f16"), ("u8", "f32"), ("bf16", "s32")):
                    yield from kernel(f"dtypes {s_dt}->{d_dt} {dims} {bake} {tiled}",
                                      MemoryDesc(dims, s_dt, tag="nchw"),
                                      MemoryDesc(dims, d_dt, tag="nhwc"), bake=bake, tiled=tiled)
            desc = MemoryDesc(dims, tag="nChw16c")
            yield from kernel(f"aliased {dims} {bake}", desc, desc, aliased=True, bake=bake)
    for name in IMAGES:
        layout = image_layout(name)
        shapes = ((1, 9, 3, 37), (5, 9, 3, 7), (1, 3, 224, 224), (1, 64, 512, 512),
                  (512, 512, 3, 3))
        for dims in dict.fromkeys(d[:1] if layout.kind == "argument" else d for d in shapes):
            for dt in ("f32", "f16"):
                try:
                    image = ImageDesc(layout, dims, dt)
                except Exception:   # a layout these dims cannot take
                    continue
                for tag in ("nchw", "nhwc"):
                    buf = MemoryDesc(image.dims, "f32", tag=tag if len(image.dims) == 4 else None)
                    for staged in (False, True):
                        for bake in (True, False):
                            for tiled in (False, True):
                                what = f"{name} {dims} {dt} {tag} {staged} {bake} {tiled}"
                                yield from kernel(f"to {what}", buf, image, staged=staged,
                                                  bake=bake, tiled=tiled)
                                yield from kernel(f"from {what}", image, buf, staged=staged,
                                                  bake=bake, tiled=tiled)


def _frames():
    from runtime import ImageDesc, MemoryDesc, image_layout
    from runtime.algebra.frame import frame_side
    from runtime.opencl.plan import frame_kernel
    frames = {
        "nv21 720p->320 bilinear": ((1080, 1280), "nv21", dict(size=(320, 320))),
        "rgb crop nearest": ((480, 640, 3), "rgb", dict(size=(224, 224), crop=(10, 20, 300, 200),
                                                       resize="nearest", mean=0.5, std=0.25)),
        "bgra letterbox area": ((480, 640, 4), "bgra", dict(size=(160, 160), fit="letterbox",
                                                           resize="area", order="bgr")),
        "gray copy": ((64, 96), "gray", dict()),
        "i420 antialias": ((96, 128), "i420", dict(size=(40, 30), antialias=True)),
    }
    for name, (shape, fmt, kw) in frames.items():
        with warnings.catch_warnings():   # mean and std in 0..1 on purpose: numbers in the text
            warnings.simplefilter("ignore")
            plan = frame_side(shape, fmt, **kw)
        dims = plan.dims
        targets = {"nchw": MemoryDesc(dims, tag="nchw"), "nhwc f16": MemoryDesc(dims, "f16",
                                                                                 tag="nhwc")}
        if dims[1] <= 4:
            targets["in_out_channel"] = ImageDesc(image_layout("in_out_channel"), dims)
        for tname, dst in targets.items():
            for bake in (True, False):
                staged_ways = (False, True) if dst.is_image else (False,)
                for staged in staged_ways:
                    k = frame_kernel(plan, dst, staged, bake)
                    yield f"frame {name} ({tname} bake={bake} staged={staged})", k.source


def _outputs():
    from runtime import ImageDesc, MemoryDesc, image_layout
    from runtime.algebra.output import output_rule
    from runtime.opencl.output import render
    sides = {"ioc": ImageDesc(image_layout("in_out_channel"), (1, 21, 16, 16), "f16"),
             "nchw": MemoryDesc((2, 10, 4, 4), "f32"),
             "nhwc s8": MemoryDesc((1, 12, 5, 5), "s8", tag="nhwc")}
    rules = {"tensor": dict(), "softmax": dict(activation="softmax"),
             "argmax": dict(argmax=True), "threshold": dict(threshold=0.5, top_k=10),
             "sigmoid nhwc": dict(activation="sigmoid", dst="nhwc")}
    for sname, side in sides.items():
        for rname, kw in rules.items():
            deq = dict(dequantize=(0.5, 3)) if side.dtype.name == "s8" else {}
            rule = output_rule(side.dims, side.dtype.name, **deq, **kw)
            for bake in (False, True):
                yield f"output {sname} {rname} bake={bake}", render(side, rule, bake).source


def _accessors():
    from runtime import MemoryDesc
    from runtime.opencl.accessor import accessor
    for what, side in (("in_out_channel", ("in_out_channel", (1, 6, 2, 3))),
                       ("conv2d_filter", ("conv2d_filter", (8, 5, 3, 3))),
                       ("nChw16c", MemoryDesc((1, 20, 3, 3), tag="nChw16c")),
                       ("nhwc halo", MemoryDesc((1, 5, 3, 3), tag="nhwc",
                                                halo=((0, 0, 1, 1), (0, 0, 1, 1)))),
                       ("texture_2d", ("texture_2d", (1, 8, 4, 4)))):
        for access in ("read", "write"):
            for generic in (False, True):
                if isinstance(side, tuple):
                    acc = accessor(side[0], side[1], access=access, generic=generic)
                else:
                    acc = accessor(side, access=access, generic=generic)
                yield f"accessor {what} ({access} generic={generic})", acc.source


def cases():
    """(name, kernel source) of every kernel of the corpus, in a fixed order."""
    yield from _conversions()
    yield from _frames()
    yield from _outputs()
    yield from _accessors()


def group_of(name: str) -> str:
    """A case's group: its name up to the first ' (' (the move or layout, without dims)."""
    return name.split(" (")[0]


def digests() -> dict[str, str]:
    """{group: sha256 of its cases' names and texts}: one line per move, layout, frame,
    output rule or accessor, so the file stays small and a failure names the group."""
    seen, out = set(), {}
    for name, text in cases():
        assert name not in seen, name
        seen.add(name)
        h = out.setdefault(group_of(name), hashlib.sha256())
        h.update(f"{name}\n{text}\n".encode())
    return {g: h.hexdigest()[:32] for g, h in out.items()}


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/opencl/kernel_corpus.py --write")
    found = digests()
    CORPUS.write_text(json.dumps(found, indent=0, sort_keys=True) + "\n")
    print(f"{len(found)} groups of kernels -> {CORPUS}")
