"""The inference engines whose image layouts clayout names, and what each
calls them: one :class:`Peer` per engine (``clayout info --engine NAME``,
``choose_layout(..., layouts_of=NAME)``, docs/engine-layouts.md).

Each peer lists its own names for its layouts and the clayout layout each
is (several engines use MACE's layouts under other names: then the clayout
name is MACE's), where the fact was read, the image limits the engine
checks itself where they are tighter than a device's, and per role the
layouts it places tensors of that role in, in its order of preference.

>>> peer("tvm").layout_of("global.texture-weight")
'tvm_texture_weight'
>>> "depthwise" in peer("tinygrad").roles
False
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import ClayoutError
from .storage import Limits
from .tags import did_you_mean, close_names


@dataclass(frozen=True)
class Name:
    """One of an engine's layouts: its own name, clayout's, and what differs."""
    theirs: str
    layout: str
    note: str = ""


@dataclass(frozen=True)
class Peer:
    """An inference engine: its layouts by its own names, where they were
    read, the 2-D image limit (and array layers) it checks itself (None:
    the device's), and {role: layouts in its order of preference}."""
    name: str
    title: str
    source: str
    names: tuple[Name, ...]
    roles: dict = field(default_factory=dict)
    limit: tuple[int, int] | None = None
    layers: int | None = None
    notes: str = ""
    strict: bool = False    # the engine compares sizes with <: its limit itself is refused

    def layout_of(self, theirs: str) -> str:
        """The clayout layout of the engine's name ``theirs``."""
        for n in self.names:
            if n.theirs == theirs:
                return n.layout
        raise ClayoutError(f"{self.title} has no layout named {theirs!r}; its names: "
                           + ", ".join(n.theirs for n in self.names))

    @property
    def limits(self) -> Limits | None:
        """The limits the engine checks itself, as a storage.Limits (None: none)."""
        if self.limit is None:
            return None
        less = int(self.strict)
        base = Limits.of((self.limit[0] - less, self.limit[1] - less))
        return base if self.layers is None else replace(base, array_size=self.layers - less)


MACE_ROLES = {"activation": ("in_out_channel", "in_out_height", "in_out_width"),
              "filter": ("conv2d_filter", "weight_height", "weight_width"),
              "depthwise": ("dw_conv2d_filter",), "argument": ("argument",),
              "fc_weight": ("weight_width", "weight_height")}
MNN_ROLES = {"activation": ("in_out_channel",), "filter": ("conv2d_filter",),
             "depthwise": ("dw_conv2d_filter",), "argument": ("argument",)}
M1 = "multiplier 1 only"

PEERS = {p.name: p for p in (
    Peer("mace", "MACE (XiaoMi)", "mace/ops/common/buffer_type.h (BufferType), "
         "mace/ops/opencl/cl/buffer_to_image.cl", (
             Name("IN_OUT_CHANNEL", "in_out_channel"), Name("IN_OUT_HEIGHT", "in_out_height"),
             Name("IN_OUT_WIDTH", "in_out_width"), Name("CONV2D_FILTER", "conv2d_filter"),
             Name("DW_CONV2D_FILTER", "dw_conv2d_filter", M1),
             Name("ARGUMENT", "argument"), Name("WEIGHT_HEIGHT", "weight_height"),
             Name("WEIGHT_WIDTH", "weight_width"),
             Name("WINOGRAD_FILTER, F(2,3)", "winograd_2x3_mace"),
             Name("WINOGRAD_FILTER, F(4,3)", "winograd_4x3_mace")), MACE_ROLES),
    Peer("mnn", "MNN (Alibaba)", "source/backend/opencl/core/OpenCLRunningUtils.hpp "
         "(OpenCLBufferFormat), ImageBufferConvertor.cpp", (
             Name("NCHW_BUFFER / NHWC_BUFFER to its NC4HW4 image", "in_out_channel"),
             Name("CONV2D_FILTER", "conv2d_filter"), Name("DW_CONV2D_FILTER", "dw_conv2d_filter", M1),
             Name("ARGUMENT", "argument"), Name("Winograd F(2,3) weight", "winograd_2x3_mnn"),
             Name("Winograd F(2,5) weight", "winograd_2x5_mnn")), MNN_ROLES,
         notes="MNN's CONV2D1x1_OPT_FILTER has no clayout name"),
    Peer("tflite", "TFLite GPU delegate", "tensorflow/lite/delegates/gpu/common/task/"
         "tensor_desc.cc (TensorStorageType)", (
             Name("BUFFER", "tflite_buffer"), Name("IMAGE_BUFFER", "tflite_image_buffer"),
             Name("TEXTURE_2D", "tflite_texture_2d"),
             Name("PHWC4 texture", "texture_2d", "the same image as TEXTURE_2D"),
             Name("SINGLE_TEXTURE_2D", "tflite_single_texture_2d"),
             Name("TEXTURE_ARRAY", "tflite_texture_array"), Name("TEXTURE_3D", "tflite_texture_3d"),
             Name("Winograd 4x4 to 6x6 weights", "winograd_4x3_tflite")),
         {"activation": ("tflite_texture_2d", "tflite_texture_array", "tflite_texture_3d",
                         "tflite_image_buffer", "tflite_buffer")}),
    Peer("cldnn", "clDNN / OpenVINO GPU plugin", "clDNN's format::image_2d_weights_*", (
        Name("image_2d_weights_c4_fyx_b", "image_2d_weights_c4_fyx_b"),
        Name("image_2d_weights_c1_b_fyx", "image_2d_weights_c1_b_fyx"),
        Name("image_2d_weights_winograd_6x3_s1_fbxyb", "image_2d_weights_winograd_6x3_s1_fbxyb"),
        Name("image_2d_weights_winograd_6x3_s1_xfbyb", "image_2d_weights_winograd_6x3_s1_xfbyb")),
        {"filter": ("image_2d_weights_c4_fyx_b", "image_2d_weights_c1_b_fyx"),
         "fc_weight": ("image_2d_weights_c4_fyx_b", "image_2d_weights_c1_b_fyx")}),
    Peer("onednn", "oneDNN", "include/oneapi/dnnl/dnnl.h (format tags)", (), {},
         notes="oneDNN keeps tensors in buffers, never in images: its blocked formats "
         "(nChw16c, OIhw16i16o, ...) are clayout buffer tags (docs/formats.md), reordered "
         "bit for bit as oneDNN does"),
    Peer("tvm", "Apache TVM (Adreno textures)", "src/backend/opencl/runtime/texture.h "
         "(DefaultTextureLayoutSeparator, ApplyTexture2DFlattening; src/runtime/texture.h "
         "before 2026); the choice: src/relax/backend/adreno/annotate_custom_storage.cc "
         "(Scope)", (
             Name("global.texture-weight (an NCHW4c activation)",
                  "tvm_texture_weight_activation", "the separator after N: N rows"),
             Name("global.texture-nhwc (image array, since #18523)", "tvm_texture_nhwc_array"),
             Name("global.texture (image array, since #18523)", "tvm_texture_array"),
             Name("global.texture-weight", "tvm_texture_weight",
                  "since #18523 an image array of 1 layer, the same pixels"),
             Name("global.texture (2-D, before #18523)", "tvm_texture"),
             Name("global.texture-nhwc (2-D, before #18523)", "tvm_texture_nhwc")),
        {"activation": ("tvm_texture_weight_activation", "tvm_texture_nhwc_array",
                        "tvm_texture_array")},
        limit=(16384, 16384), layers=2048, strict=True,
        notes="relax's Scope() takes an NCHW4c activation (a0, a1, a2, a3, 4) as texture-weight "
        "when a0 < 16384 and a1*a2*a3 < 16384, else texture-nhwc when a0 < 2048, a1 < 16384 "
        "and a2*a3 < 16384, else texture when a0*a1 < 2048, a2 < 16384 and a3 < 16384, else a "
        "buffer; it keeps conv2d weights in buffers (\"No Texture for weights\"). 16384 and "
        "2048 are the opencl target's texture_spatial_limit and texture_depth_limit. Images "
        "sit on pooled buffers, the row pitch aligned to CL_DEVICE_IMAGE_PITCH_ALIGNMENT read "
        "as bytes (64 when the device says 0)"),
    Peer("tinygrad", "tinygrad (image mode)", "tinygrad/tensor.py Tensor.image_conv2d (the "
         "classic image mode, to Dec 2025); now tinygrad/mixin/op.py", (
             Name("image activation (N·H, W·C/4, 4)", "tinygrad_image"),
             Name("image conv weight", "tinygrad_conv_weight"),
             Name("image depthwise weight (O, 1, kH, kW)", "tinygrad_dw_weight",
                  "an alias of tvm_texture_weight: the same layout at I = 1")),
        {"activation": ("tinygrad_image",), "filter": ("tinygrad_conv_weight",),
         "fc_weight": ("tinygrad_conv_weight",)},
        limit=(16384, 16384), notes="the depthwise weight is a filter (O, 1, kH, kW): place "
        "it as a filter in tinygrad_dw_weight; the weight of a 1x1 input (cin_last: lanes "
        "along I) has no clayout name; today's tinygrad picks each image's shape in its "
        "code generator (width a multiple of the pitch alignment, at most 16384)"),
    Peer("acl", "Arm Compute Library", "src/core/CL/CLUtils.cpp (create_image2d_from_tensor), "
         "src/core/CL/CLHelpers.cpp (export_to_cl_image)", (
             Name("export_to_cl_image of an NHWC tensor", "acl_nhwc_image"),
             Name("export_to_cl_image of OHWI weights", "acl_ohwi_image")),
         {"activation": ("acl_nhwc_image",), "filter": ("acl_ohwi_image",),
          "fc_weight": ("acl_ohwi_image",)},
         notes="only for C (or I) a multiple of 4, f32 or f16; the image views the tensor's "
         "own buffer, its right padding extended to a multiple of the device's pitch "
         "alignment (in pixels)"),
    Peer("ort", "ONNX Runtime OpenCL EP", "onnxruntime/core/providers/opencl/opencl_utils.h "
         "(Image2DDesc; a development branch)", (
             Name("PackFromTensorNCHW", "in_out_channel"),
             Name("PackFromTensorNCHWc", "in_out_channel", "the 5-D NCHW4c form"),
             Name("PackFromConv2DWeight", "conv2d_filter"),
             Name("PackFromDepthwiseConv2DWeight", "dw_conv2d_filter", M1)),
         {"activation": ("in_out_channel",), "filter": ("conv2d_filter",),
          "depthwise": ("dw_conv2d_filter",)},
         notes="MACE's layouts under other names; its 1-D tensors are 1024-pixel-wide images, "
         "not MACE's argument; ORT leaves padding lanes undefined (clayout writes 0)"),
    Peer("tnn", "TNN (Tencent)", "source/tnn/device/opencl/opencl_utils.h (OpenCLBufferFormat), "
         "cl/buffer_to_image.cl", (
             Name("NCHW_BUFFER to DATA_FORMAT_NHC4W4", "in_out_channel"),
             Name("CONV2D_FILTER", "conv2d_filter"), Name("DW_CONV2D_FILTER", "dw_conv2d_filter", M1),
             Name("ARGUMENT", "argument")), MNN_ROLES,
         notes="TNN's DATA_FORMAT_CNH4 and LSTM formats have no clayout name"),
    Peer("paddle", "Paddle-Lite", "lite/backends/opencl/cl_image_converter.h", (
        Name("CLImageConverterDefault", "in_out_channel"),
        Name("CLImageConverterNormal", "in_out_channel"),
        Name("CLImageConverterFolder (rank 1)", "argument"),
        Name("CLImageConverterNBlock", "conv2d_filter",
             "Paddle-Lite's image is 4·⌈I/4⌉ wide: clayout's, then zero columns"),
        Name("CLImageConverterDWFilter", "dw_conv2d_filter", M1)), MNN_ROLES,
        notes="NBlockGroup, N2Block, NWBlock, DWBlock and WinoTransWeight have no clayout name"),
)}


def peer(name: str) -> Peer:
    """The engine ``name`` (lower case: tvm, mace, ...), or a ClayoutError listing them."""
    if isinstance(name, str) and name in PEERS:
        return PEERS[name]
    near = close_names(str(name).lower(), PEERS)
    hint = f" ({did_you_mean(near)})" if near else ""
    raise ClayoutError(f"unknown engine {name!r}{hint}; engines whose layouts clayout names: "
                       f"{', '.join(PEERS)}")


def candidates(name: str, role: str) -> tuple[str, ...]:
    """The layouts engine ``name`` places a tensor of ``role`` in, in its
    order; a ClayoutError when it has none for that role."""
    p = peer(name)
    found = p.roles.get(role, ())
    if not found:
        has = ", ".join(r for r, names in p.roles.items() if names) or "none"
        raise ClayoutError(f"{p.title} names no image layout for role {role!r}"
                           + (f" ({p.notes})" if p.notes else "") + f"; its roles: {has}")
    return found
