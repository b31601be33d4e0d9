"""The one emitter of every access (runtime/opencl/trace.py) and the traced
run (runtime/opencl/trace_run.py).

With tracing off the emitter writes exactly the kernels the render steps
wrote before it (a corpus of ~4900 kernels, their texts' digests kept in
tests/data/kernel_corpus.json: tests/opencl/kernel_corpus.py). With tracing
on, a kernel run group by group records every element it loads and stores
exactly where the reference's offsets put them, and still writes the
reference's bits.
"""
import json

import numpy as np
import pytest

from runtime import ImageDesc, MemoryDesc, image_layout
from runtime import engine as engines
from runtime.opencl import trace, trace_run
from runtime.opencl.plan import plan
from runtime.opencl.trace import Accesses, unpack_pixel
from strategies import assert_same_bits, fill

from opencl import kernel_corpus

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/trace.py", "runtime/opencl/trace_run.py")

REF = engines.get("reference")


def test_tracing_off_writes_the_corpus_byte_for_byte():
    stored = json.loads(kernel_corpus.CORPUS.read_text())
    found = kernel_corpus.digests()
    changed = sorted(g for g in stored if found.get(g) != stored[g])
    assert not changed and set(found) == set(stored), (
        f"kernels whose text changed: {changed[:12]} ({len(changed)} groups); a change meant "
        "to change kernels writes the corpus anew: python tests/opencl/kernel_corpus.py --write")


def test_the_emitter_writes_each_form():
    off, on = Accesses(), Accesses(trace=True)
    assert off.vload("f32", 4, "src", "i")[0] == "const float4 r = vload4(0, src + (i));"
    assert on.vload("f32", 4, "src", "i")[0] == \
        "const float4 r = vload4(0, src + (clayout_trace(clayout_log, 0u, i)));"
    # a vector wider than a builtin takes: two halves, two sites, the second at n/2
    text, lanes = on.vload("f32", 16, "src", "i")
    assert "vload8(1, src + (clayout_trace(clayout_log, 2u, i)))" in text and lanes[9] == "r1.s1"
    assert [s.shift for s in on.sites[1:]] == [0, 8]
    assert off.param == off.arg == off.helpers == "" and off.group_id() == "get_group_id(0)"
    assert "clayout_trace" in on.helpers and on.param == ", __global uint *clayout_log"
    site = off.sites[0]
    assert (site.kind, site.space, site.item, site.count, site.align) == ("load", "global", 4, 4, 4)
    assert unpack_pixel((5 << 42) | (7 << 21) | 3) == (3, 7, 5)


def _traced_run(engine, src, dst, **kw):
    """Every group of the traced kernel of src -> dst (at most three), the
    destination read back, and the kernel."""
    k = plan(src, dst, trace=True, **kw)
    counts = [g // lo for g, lo in zip(k.launch, k.local)]
    assert np.prod(counts) <= 3, counts   # chosen_groups then traces every group
    args = trace_run.move_args(engine.device, k, src, dst)
    import pyopencl as cl
    x = fill(src.dtype.name, src.span, 3)
    cl.enqueue_copy(engine.queue, args[0], x)
    run = trace_run.run(engine.device, k.source, "clayout_convert", k.launch, k.local, args)
    return k, run, args, x


def _records(k, run, kind):
    """Every element index the records of ``kind`` (load or store) cover."""
    out = []
    for g in run.traced:
        for s, at in zip(g.site.tolist(), g.at.tolist()):
            site = k.sites[s]
            if site.kind == kind and site.space == "global":
                out.extend(range(at + site.shift, at + site.shift + site.count))
    return np.array(out, np.int64)


@pytest.mark.parametrize("tiled", [False, True], ids=["direct", "tiled"])
@pytest.mark.parametrize("bake", [True, False], ids=["baked", "generic"])
def test_a_traced_move_records_every_element_where_the_offsets_put_it(cl_engine, tiled, bake):
    dims = (1, 16, 3, 12)
    src, dst = MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc")
    k, run, args, x = _traced_run(cl_engine, src, dst, bake=bake, tiled=tiled)
    assert k.tiled == tiled and all(g.kept_all for g in run.traced)
    stored = np.sort(_records(k, run, "store"))
    loaded = np.unique(_records(k, run, "load"))
    # every destination element once, every source element read
    assert np.array_equal(stored, np.arange(dst.span)), (stored[:20], dst.span)
    assert np.array_equal(loaded, np.arange(src.span))
    out = np.empty(dst.span, np.float32)
    import pyopencl as cl
    cl.enqueue_copy(cl_engine.queue, out, args[1])
    assert_same_bits(out, REF.convert(src, dst, x))


def test_a_traced_image_write_records_every_pixel_once(cl_engine):
    dims = (1, 8, 3, 5)
    src = MemoryDesc(dims, tag="nchw")
    image = ImageDesc(image_layout("in_out_channel"), dims)
    k, run, _, _ = _traced_run(cl_engine, src, image, bake=True)
    writes = [(x, y) for g in run.traced for s, at in zip(g.site, g.at)
              if k.sites[s].space == "image" for x, y, _ in [unpack_pixel(int(at))]]
    assert sorted(writes) == [(x, y) for x in range(image.width) for y in range(image.height)]


def test_the_log_keeps_its_records_and_counts_the_rest():
    """A work item with more records than the log keeps is counted, not
    written past its region."""
    host = np.zeros((2, trace.REGION), np.uint32)
    host[0, 0] = trace.RECORDS + 5
    host[1, 0] = 2
    host[1, 1:7] = [3, 10, 0, 4, 11, 1]
    group = trace_run._group(0, 1, host)
    assert not group.kept_all
    assert len(group.item) == trace.RECORDS + 2
    assert group.at[-1] == 11 + (1 << 32) and group.site[-1] == 4
    assert trace_run.chosen_groups(7) == [(0, 1), (3, 5), (6, 1)]
    assert trace_run.chosen_groups(2) == [(0, 1), (1, 1)]
