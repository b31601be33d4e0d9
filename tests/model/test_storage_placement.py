"""Placement across storages (docs/storage.md): an activation too wide for
every 2-D image goes on an image array or a 3-D image where one fits, with
its reason; one over every limit is not placed and says why; `clayout info`
and `where` speak of the storage's coordinates."""
import pytest

import runtime
from runtime import ClayoutError, choose_layout, layout_choice
from runtime.algebra.storage import Limits
from runtime.cli.where import explain

from conftest import run

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/storage.py", "runtime/cli/where.py", "runtime/placement.py")

BIG = (1, 64, 512, 512)   # in_out_channel 8192x512, texture_2d 512x8192: over 2048x2048


def test_over_every_2d_image_goes_on_an_array_with_its_reason():
    choice = layout_choice("activation", BIG, limits=(2048, 2048))
    assert choice.fits and choice.layout.name == "tflite_texture_array"
    c = choice.chosen
    assert (c.storage.name, c.size, c.limit, c.padding) == ("image2d_array", (512, 512, 16),
                                                        (2048, 2048, 2048), 0)
    assert choice.reason == (
        "activation dims 1,64,512,512 f32: tflite_texture_array (512x512x16 image2d_array, "
        "0 padding lanes) fits the image2d_array limit 2048x2048x2048; chosen over "
        "tflite_texture_3d (0 padding lanes) of the same tier by least padding, then "
        "candidate order; rejected: over the image2d limit 2048x2048: in_out_channel 8192x512, "
        "texture_2d 512x8192, in_out_height 32768x128, in_out_width 8192x512")
    assert [r.why for r in choice.rejected][0] == \
        "needs a 8192x512 image, over the device limit 2048x2048"


def test_candidates_over_the_max_allocation_are_said_so_apart():
    """A candidate whose size fits its storage but whose bytes do not fit one
    allocation is over the max allocation, grouped apart from those over a size."""
    limits = Limits((2048, 2048), (2048, 2048, 2048), 2048, 65536, 1 << 20)
    choice = layout_choice("activation", BIG, limits=limits)
    assert not choice.fits
    assert [c.over_alloc for c in choice.rejected] == [False] * 4 + [True] * 2
    assert choice.reason == (
        "no activation layout fits for dims 1,64,512,512: over the image2d limit 2048x2048: "
        "in_out_channel 8192x512, texture_2d 512x8192, in_out_height 32768x128, in_out_width "
        "8192x512; over the max allocation 1048576 bytes: tflite_texture_array 512x512x16 "
        "image2d_array, tflite_texture_3d 512x512x16 image3d; in_out_channel is the one to "
        "split into tiles")


def test_a_device_with_few_layers_takes_the_3d_image():
    limits = Limits((2048, 2048), (2048, 2048, 2048), 8, 65536)   # arrays of at most 8 layers
    choice = layout_choice("activation", BIG, limits=limits)
    assert choice.layout.name == "tflite_texture_3d" and choice.limits is limits
    assert "tflite_texture_3d (512x512x16 image3d, 0 padding lanes) fits the image3d limit " \
        "2048x2048x2048" in choice.reason
    assert "over the image2d_array limit 2048x2048x8: tflite_texture_array 512x512x16 " \
        "image2d_array" in choice.reason
    assert choose_layout("activation", BIG, limits=limits).name == "tflite_texture_3d"


def test_over_every_limit_is_not_placed_and_says_why():
    dims = (1, 64, 5000, 5000)
    choice = layout_choice("activation", dims, limits=(2048, 2048))
    assert not choice.fits and choice.layout.name == "in_out_channel"
    assert choice.max_image == (2048, 2048)         # the tiles' size
    assert [c.name for c in choice.rejected] == [c.name for c in choice.candidates]
    assert "over the image2d_array limit 2048x2048x2048: tflite_texture_array 5000x5000x16 " \
        "image2d_array" in choice.reason
    assert "over the image3d limit 2048x2048x2048: tflite_texture_3d 5000x5000x16 image3d" \
        in choice.reason
    with pytest.raises(ClayoutError, match="in_out_channel is the one to split into tiles .*"
                                           "--max-image W,H` splits it"):
        choose_layout("activation", dims, limits=(2048, 2048))


def test_engine_storage_limits_come_first():
    class Device(runtime.cpu.engine.CpuEngine):
        limits = Limits((2048, 2048), (2048, 2048, 2048), 8, 65536)
    assert choose_layout("activation", BIG, engine=Device()).name == "tflite_texture_3d"

    class TwoD(runtime.cpu.engine.CpuEngine):   # the OpenCL 1.2 minimums beside 2048x2048
        limits = Limits.of((2048, 2048))
    assert choose_layout("activation", BIG, engine=TwoD()).name == "tflite_texture_array"


def test_fitting_2d_tensors_keep_their_layouts():
    assert choose_layout("activation", (1, 64, 224, 224)).name == "in_out_channel"
    assert choose_layout("activation", (4, 64, 224, 224), limits=(2048, 4096)).name == \
        "texture_2d"
    reason = layout_choice("fc_weight", (4096, 1000, 1, 1), limits=(2048, 2048)).reason
    assert reason.endswith("fits 2048x2048; rejected (over the limit): weight_width 250x4096, "
                           "image_2d_weights_c4_fyx_b 250x4096, image_2d_weights_c1_b_fyx "
                           "4096x1000")


def test_5d_activations_skip_the_layouts_without_a_5d_form():
    choice = layout_choice("activation", (1, 8, 2, 3, 4), limits=(4, 4))
    assert choice.layout.name == "tflite_texture_array" and choice.chosen.size == (4, 3, 4)
    assert [n for n, _ in choice.skipped] == ["in_out_height", "in_out_width"]
    assert choice.reason.endswith("not candidates for these dims (no form for them): "
                                  "in_out_height, in_out_width")


# -- the command line ---------------------------------------------------------------------
def test_info_any_lists_each_candidate_against_its_storage_limit(capsys):
    code, out, err = run(capsys, "info", "any", "--role", "activation", "--dims",
                         "1,64,512,512", "--max-image", "2048,2048")
    assert code == 0, err
    assert "layout any chose tflite_texture_array" in err
    lines = out.splitlines()
    assert lines[0] == "layout    tflite_texture_array (activation: N,C,H,W (or N,C))"
    assert "tiles     2048x2048: only 2-D images are split; this image2d_array fits its " \
        "limit 2048x2048x2048" in lines
    got = [line.split() for line in lines if line.startswith("candidate")]
    assert got == [
        ["candidate", "in_out_channel", "image2d", "8192x512", "limit", "2048x2048", "over"],
        ["candidate", "texture_2d", "image2d", "512x8192", "limit", "2048x2048", "over"],
        ["candidate", "in_out_height", "image2d", "32768x128", "limit", "2048x2048", "over"],
        ["candidate", "in_out_width", "image2d", "8192x512", "limit", "2048x2048", "over"],
        ["candidate", "tflite_texture_array", "image2d_array", "512x512x16", "limit",
         "2048x2048x2048", "fits", "(chosen)"],
        ["candidate", "tflite_texture_3d", "image3d", "512x512x16", "limit", "2048x2048x2048",
         "fits"]]


def test_info_of_a_3d_layout(capsys):
    code, out, err = run(capsys, "info", "tflite_texture_3d", "--dims", "1,6,3,5")
    assert code == 0, err
    assert out == """\
layout    tflite_texture_3d (activation: N,C,H,W (or N,C))
tag       Bcda4b, rows 1: z = B; y = c; x = d,a; lane = 4b
storage   image3d (image3d_t): pixel (x, y, z); reads as zero (TFLite GPU's kernels): x outside W, y outside H, z outside D
lanes     4 (RGBA, CL_RGBA)
dims      1,6,3,5
image     5 x 3 x 2 pixels (width x height x depth)
array     (2, 3, 5, 4) (host array: z, y, x, lane)
pixel     x=w*N+n, y=h, z=s (5-D: z=d*S+s)
elements  90 logical, 120 image lanes (30 padding)
bytes     f32 480, f16 240, s32 480, s8 120, u8 120
limit     8192x8192 (image3d 2048x2048x2048): fits
limit     16384x16384 (image3d 2048x2048x2048): fits
"""


def test_info_of_a_buffer_and_a_single_texture(capsys):
    code, out, _ = run(capsys, "info", "tflite_buffer", "--dims", "1,6,3,5")
    assert code == 0
    assert "image     30 pixels (one index x)" in out and "array     (30, 4)" in out
    assert "tag       Bcda4b: x = B,c,d,a; lane = 4b" in out
    code, out, _ = run(capsys, "info", "tflite_single_texture_2d", "--dims", "1,2,3,5")
    assert code == 0
    assert "lanes     2 (RG, CL_RG): lanes 0, the innermost dim whole in one texel" in out
    assert "array     (3, 5, 2)" in out and "texel = b whole" in out


def test_where_on_a_3d_image(capsys):
    code, out, err = run(capsys, "where", "tflite_texture_3d", "--dims", "1,6,3,5",
                         "--index", "0,5,2,3")
    assert code == 0, err
    assert out.splitlines() == [
        "layout    tflite_texture_3d, dims 1,6,3,5: image3d 5x3x2, 4 lanes",
        "pixel     x=3 y=2 z=1 lane=1",
        "index     n=0 c=5 h=2 w=3  (0,5,2,3)",
        "formula   x = w*N+n = 3*1+0 = 3, y = h = 2, z = s = 1",
        "tag       Bcda4b: offset ((z*3 + y)*5 + x)*4 + lane = ((1*3 + 2)*5 + 3)*4 + 1 = 113 = "
        "B 1, c 2, d 3, a 0, 4b 1"]
    code, back, _ = run(capsys, "where", "tflite_texture_3d", "--dims", "1,6,3,5",
                        "--pixel", "3,2,1,1")
    assert code == 0 and "index     n=0 c=5 h=2 w=3  (0,5,2,3)" in back
    code, _, err = run(capsys, "where", "tflite_texture_3d", "--dims", "1,6,3,5",
                       "--pixel", "3,2,1,3")
    assert code == 0
    code, _, err = run(capsys, "where", "tflite_texture_3d", "--dims", "1,6,3,5", "--pixel", "3")
    assert code == 1 and "a pixel is X,Y,Z or X,Y,Z,LANE" in err


def test_where_on_a_buffer_a_single_texture_and_5d(capsys):
    lines = explain("tflite_buffer", (1, 6, 3, 5), pixel=(28, 1),
                    formula=runtime.algebra.catalog.ROW["tflite_buffer"].formula)
    assert lines[1:3] == ["pixel     x=28 lane=1", "index     n=0 c=5 h=2 w=3  (0,5,2,3)"]
    assert lines[3] == "formula   x = ((s*H+h)*W+w)*N+n = ((1*3+2)*5+3)*1+0 = 28"
    padding = explain("tflite_buffer", (1, 6, 3, 5), pixel=(28, 2))
    assert padding[2] == "index     padding: c=6 is in the tail of C=6 (padded to 8)"
    single = explain("tflite_single_texture_2d", (1, 3, 3, 5), index=(0, 2, 1, 4))
    assert single[0].endswith("3 lanes (RGB, the innermost dim whole)")
    assert single[1] == "pixel     x=4 y=1 lane=2"
    five = explain("tflite_texture_3d", (1, 6, 2, 3, 5), index=(0, 5, 1, 2, 3),
                   formula=runtime.algebra.catalog.ROW["tflite_texture_3d"].formula)
    assert five[1] == "pixel     x=3 y=2 z=3 lane=1"
    assert five[3] == "formula   (5-D) z = d*S+s = 1*2+1 = 3"


def test_to_image_any_writes_the_array(tmp_path, capsys):
    import numpy as np
    x = np.arange(1 * 8 * 4 * 4, dtype=np.float32).reshape(1, 8, 4, 4)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(capsys, "to-image", tmp_path / "x.npy", "-o", tmp_path / "img.npy",
                         "--layout", "any", "--role", "activation", "--max-image", "4,4")
    assert code == 0, err
    assert "layout any chose tflite_texture_array" in err
    assert "tflite_texture_array image2d_array 4x4x2 RGBA f32, array (2, 4, 4, 4)" in out
    img = np.load(tmp_path / "img.npy")
    assert (img == runtime.to_image(x, "tflite_texture_array")).all()
    code, _, err = run(capsys, "to-image", tmp_path / "x.npy", "-o", tmp_path / "big.npy",
                       "--layout", "tflite_texture_3d", "--max-image", "2,2")
    assert code == 1 and "needs a 4x4x2 image3d, over the device limit 2x2x2048" in err
