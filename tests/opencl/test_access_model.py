"""The access model (runtime/opencl/access_model.py, access.py) and the GPU
records it reads (runtime/opencl/gpus.py).

The arithmetic is held on hand-made requests whose figures are known (a warp
reading 32 consecutive floats moves 4 sectors; a float4 a lane stored as
four scalars uses a quarter of each sector it touches; 32 lanes on one bank
need 32 wavefronts). The records are the kernels' own: the model of a move
is the same on every OpenCL implementation that runs it.
"""
import numpy as np
import pytest

from runtime import ImageDesc, MemoryDesc, image_layout
from runtime.opencl import gpus
from runtime.opencl.access import model_move, model_output
from runtime.opencl.access_model import emitted_width, figures
from runtime.opencl.trace import PIXEL_BITS, Site
from runtime.opencl.trace_run import Group, Run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/opencl/access.py", "runtime/opencl/access_model.py",
           "runtime/opencl/gpus.py")

H100 = gpus.GPUS["h100"]


def _run(records, sites_of, weight=1, items=64):
    """A Run of one group from (item, site, index) records."""
    item, site, at = (np.array(c, np.int64) for c in zip(*records))
    return Run((items,), (items,), 1, (Group(0, weight, item, site, at, True),))


def test_a_warp_of_consecutive_elements_moves_whole_sectors():
    load = Site(0, "load", "global", "src", 4)
    f = figures(_run([(i, 0, i) for i in range(32)], None), (load,), H100)
    assert f.loads.efficiency == 1.0 and f.loads.sectors_per_request == 4.0
    assert f.active_lanes == 1.0 and f.stores.efficiency is None
    # a stride of 3 elements: 12 sectors for 128 bytes
    f = figures(_run([(i, 0, 3 * i) for i in range(32)], None), (load,), H100)
    assert f.loads.sectors_per_request == 12.0 and f.loads.efficiency == pytest.approx(1 / 3)


def test_an_element_aligned_vector_store_is_counted_as_a_compiler_splits_it():
    split = Site(0, "store", "global", "dst", 4, count=4, align=4, form="vstore4")
    whole = Site(0, "store", "global", "dst", 4, count=4, align=16)
    records = [(i, 0, 4 * i) for i in range(32)]
    f = figures(_run(records, None), (split,), H100)
    assert f.stores.efficiency == 1.0 and f.stores.efficiency_as_emitted == 0.25
    assert f.stores.requests == 1 and f.stores.requests_as_emitted == 4
    g = figures(_run(records, None), (whole,), H100)
    assert g.stores.efficiency_as_emitted == 1.0 and g.stores.requests_as_emitted == 1
    assert emitted_width(split, H100) == 4 and emitted_width(whole, H100) == 16
    wide = Site(0, "store", "global", "dst", 4, count=8, align=32)
    assert emitted_width(wide, H100) == 16     # no access wider than 16 bytes a lane


def test_lanes_requests_and_groups_are_counted_per_warp():
    """Two warps, one half active; each work item's k-th record at a site is
    the k-th request; the middle group weighs for the groups it stands for."""
    load = Site(0, "load", "global", "src", 4)
    records = [(i, 0, i) for i in range(16)] + [(32 + i, 0, 32 + i) for i in range(32)]
    records += [(32 + i, 0, 64 + i) for i in range(32)]          # warp 1, a second time
    f = figures(_run(records, None), (load,), H100)
    assert f.loads.requests == 3 and f.active_lanes == pytest.approx((16 + 64) / 96)
    assert f.loads.efficiency == pytest.approx((16 * 4 + 64 * 4) / (2 * 32 + 8 * 32))
    heavy = figures(_run(records, None, weight=10), (load,), H100)
    assert heavy.loads.requests == 30 and heavy.active_lanes == f.active_lanes


def test_local_memory_wavefronts_count_the_busiest_bank():
    local = Site(0, "load", "local", "tile", 4)
    same_bank = figures(_run([(i, 0, 32 * i) for i in range(32)], None), (local,), H100)
    padded = figures(_run([(i, 0, 33 * i) for i in range(32)], None), (local,), H100)
    broadcast = figures(_run([(i, 0, 5) for i in range(32)], None), (local,), H100)
    two_way = figures(_run([(i, 0, 2 * i) for i in range(32)], None), (local,), H100)
    assert [x.local_wavefronts_per_request for x in (same_bank, padded, broadcast, two_way)] \
        == [32, 1, 1, 2]


def test_image_writes_are_rows_and_pixels_of_a_warp():
    write = Site(0, "store", "image", "dst", 16)
    records = [(i, 0, (i % 16) | ((i // 16) << PIXEL_BITS)) for i in range(32)]
    f = figures(_run(records, None), (write,), H100)
    assert (f.image_rows_per_warp, f.image_pixels_per_warp) == (2, 32)


def test_occupancy_and_waves_follow_the_record():
    # 256 work items and 16.5 KiB of tile: 8 groups an SM by threads (2048), 2048/2048
    assert H100.resident_groups(256, 16896) == 8 and H100.occupancy(256, 16896) == 1.0
    assert H100.waves(4096, 256, 16896) == pytest.approx(4096 / (8 * 132))
    # 48 KiB a group: 4 groups of 49 KiB fit in 228 KiB; 1024 items: 2 by threads
    assert H100.resident_groups(1024, 48 << 10) == 2
    assert H100.resident_groups(128, 48 << 10) == 4 and H100.occupancy(128, 48 << 10) == 0.25
    assert gpus.gpu("H200").bandwidth > H100.bandwidth
    with pytest.raises(Exception, match="records: h100, h200, gpu"):
        gpus.gpu("a100")


def test_a_record_plans_as_a_gpu_does(cl_engine):
    from runtime.opencl.moves import family_of, move_plan
    device = gpus.device(H100, cl_engine.device)
    assert family_of(device)[0] and device.kind == "gpu" and not device.host_in_place
    dims = (1, 64, 9, 40)
    image = ImageDesc(image_layout("in_out_channel"), dims)
    p = move_plan(MemoryDesc(dims, tag="nhwc"), image, device)
    assert p.access == "direct" and p.tiled and p.kernel.tiled


def test_the_model_is_the_same_on_every_implementation(cl_engine):
    """The records are the kernel's addresses: any OpenCL implementation
    gives the same figures (PoCL and Intel's runtime in CI)."""
    dims = (1, 16, 9, 40)
    m = model_move(MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc"), H100,
                   cl_engine.device, bake=True)
    assert m.family == "tiled" and m.figures.complete
    assert m.figures.summary() == _model_on_first_implementation(dims)


_FIRST = {}


def _model_on_first_implementation(dims):
    from runtime.opencl.engine import default
    if dims not in _FIRST:
        _FIRST[dims] = model_move(MemoryDesc(dims, tag="nchw"), MemoryDesc(dims, tag="nhwc"),
                                  H100, default().device, bake=True).figures.summary()
    return _FIRST[dims]


def test_frames_and_outputs_are_modelled(cl_engine):
    from runtime.algebra.frame import frame_side
    from runtime.algebra.output import output_rule
    frame = frame_side((96, 128), "nv21", size=(64, 48))
    m = model_move(frame, ImageDesc(image_layout("in_out_channel"), frame.dims), H100,
                   cl_engine.device)
    f = m.figures
    assert f.loads.requests > 0 and f.image_rows_per_warp is not None and f.complete
    side = ImageDesc(image_layout("in_out_channel"), (1, 21, 16, 16), "f16")
    o = model_output(side, output_rule(side.dims, "f16", argmax=True), H100,
                     cl_engine.device).figures
    from runtime.opencl import gpus, output as cl_output
    group = cl_output.local_size(gpus.device(H100, cl_engine.device))   # the engine's groups
    assert o.stores.efficiency == 1.0 and o.local_size == (group, 1)
