"""One parsed call: what a public door (``reorder``, ``to_image``,
``from_image``, and the CLI commands on top of them) was asked, checked
once and frozen, so that nothing below the door parses or re-derives it.

parse -> plan -> apply, as in einops: ``parse_reorder``, ``parse_to_image``,
``parse_from_image`` and ``parse_from_frame`` turn a door's arguments into
one call of runtime/doors/calls.py (the two sides, the engine, the input as the
engine takes it, ``out`` checked, the tiles planned where there are some) or
one ClayoutError naming what was wrong; the call's ``apply()`` converts it.
Every check of docs/engines.md "What each door checks" lives here, the
command line's own refusals included (``Wording``: its names for things).

>>> c = parse_to_image(np.zeros((1, 6, 2, 3), np.float32), "in_out_channel")
>>> type(c).__name__, c.src.describe(), c.dst.describe()
('ToImageCall', 'f32 1x6x2x3 abcd', 'in_out_channel 1x6x2x3 f32 (image 6x2 RGBA)')
>>> c.apply().shape
(2, 6, 4)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import engine as engines
from ..algebra import dtypes
from ..algebra.catalog import check_fits, image_layout
from ..algebra.checks import as_ints
from ..algebra.desc import MemoryDesc
from ..algebra.frame import frame_side, frame_target
from ..algebra.hostarray import dims_from_shape, host_input, physical_shape
from ..algebra.layout import ImageDesc, ImageLayout
from ..algebra.storage import Limits
from ..algebra.tiles import plan_of, tile_plan
from .calls import Call, FrameCall, FromImageCall, FromTilesCall, HostFrameIntoMemoryCall, \
    ReorderCall, ToImageCall, ToTilesCall
from .checks import SIDES, check_out_side, check_padding_lanes, checked_image, held, \
    host_out, image_side, memory_call, memory_out, refuse_empty, runner_of, tagged, wait_list
from ..errors import ClayoutError
from ..algebra.pitch import pitch_pixels, pitched_shape, unpitched
from ..limits import check_host_bytes
from ..memory import Memory

@dataclass(frozen=True)
class Wording:
    """How a door names things in its messages, and the refusals only the
    command line makes: ``what`` the input (the CLI gives its file),
    ``hint`` the option that gives dims, ``no_padding_check`` the one that
    reads an image with garbage in its padding lanes, ``empty_images`` False to refuse a
    tensor with no elements headed for an image (the CLI writes files an
    OpenCL engine reads back; OpenCL cannot create an empty image)."""
    what: str | None = None
    hint: str = "dims="
    empty_images: bool = True
    no_padding_check: str = "check_padding=False"


API = Wording()


# -- reorder --------------------------------------------------------------------------------
def parse_reorder(data, src_desc, dst_desc, engine=None, out=None, wait_for=None,
                  wording: Wording = API) -> Call:
    """``wording``: how messages name things (the CLI's file)."""
    what = wording.what or "reorder input"
    if isinstance(data, Memory):
        into = memory_out(out, dst_desc, "reorder", "dst_desc")
        if data.is_image:
            raise ClayoutError(f"reorder takes a buffer Memory; {data!r} is an image: use "
                               "from_image")
        if src_desc is not None and src_desc != data.desc:
            raise ClayoutError(f"reorder of a Memory in {data.desc.describe()}: src_desc "
                               f"{src_desc.describe()} does not describe it; pass None or its desc")
        if into is not None:
            if isinstance(dst_desc, MemoryDesc) and dst_desc != into.desc:
                raise ClayoutError(f"reorder: dst_desc {dst_desc.describe()} is not out='s "
                                   f"{into.desc.describe()}; pass None or out's desc")
            return memory_call(data, into, engine, wait_for=wait_for, what="reorder")
        if not isinstance(dst_desc, MemoryDesc):
            raise ClayoutError("reorder of a Memory takes a MemoryDesc as dst_desc (a new "
                               "Memory) or a buffer Memory as out=, got "
                               f"{type(dst_desc).__name__}")
        return memory_call(data, dst_desc, engine, wait_for=wait_for, what="reorder")
    if not isinstance(src_desc, MemoryDesc) or not isinstance(dst_desc, MemoryDesc):
        raise ClayoutError("reorder takes MemoryDesc objects for src_desc and dst_desc")
    if src_desc.dims != dst_desc.dims:
        raise ClayoutError(f"reorder from {src_desc.describe()} to {dst_desc.describe()}: "
                           "dims differ; use desc.reshape() for a logical reshape")
    if not held(data):   # float64, int64, a list: rounded once, straight to dst's dtype
        data = dtypes.host_array(data, dst_desc.dtype, what)
        src_desc = src_desc.with_dtype(dst_desc.dtype)
    eng = engines.get(engine)
    flat, src_desc = host_input(data, src_desc, what, eng.reads_views)
    if out is not None:   # (overlap with the caller's elements, not the window around a view)
        host_out(out, (dst_desc.span,), dst_desc.dtype, np.asarray(data), "reorder")
    else:
        check_host_bytes(dst_desc.span_bytes,
                         f"reorder output {dst_desc.describe()}")
    return ReorderCall(src_desc, dst_desc, eng, flat, out, wait_for=wait_list(wait_for, "reorder"))


# -- to_image -------------------------------------------------------------------------------
def parse_to_image(array, layout, src=None, dtype=None, engine=None, dims=None, out=None,
                   max_image=None, row_pitch=None, wait_for=None, wording: Wording = API,
                   choose=None):
    """``wording``: how messages name things (the CLI's file and options);
    ``choose``: with it, the layout is chosen from the input's dims and
    dtype, ``choose(dims, dtype) -> (layout, max_image)`` (the CLI's 'any')."""
    what = wording.what or "to_image input"
    layout = image_layout(layout)   # with ``choose``: the role's stand-in until dims are known
    if isinstance(array, Memory):
        if max_image is not None or row_pitch is not None:
            raise ClayoutError("max_image= goes with a host array; a Memory image is one image"
                               if row_pitch is None else "to_image of a Memory: row_pitch= goes "
                               "with a host array; a Memory image is one image (an image over a "
                               "pitched cl.Buffer: Memory.from_buffer(..., row_pitch=))")
        if array.is_image:
            raise ClayoutError(f"to_image takes a buffer Memory; {array!r} is an image")
        if out is not None and not isinstance(out, Memory):
            raise ClayoutError(f"to_image of a Memory: out= takes an image Memory, got "
                               f"{type(out).__name__}; a numpy out= goes with a host array "
                               "input")
        image = ImageDesc(layout, array.dims, dtype or array.dtype)
        if out is not None:
            check_out_side(out, image, dtype, "to_image")
        return memory_call(array, out if out is not None else image, engine,
                           wait_for=wait_for, what="to_image")
    if isinstance(out, Memory):
        raise ClayoutError("to_image: an image Memory as out= goes with a Memory input; "
                           "a host array input takes a numpy array as out=")
    arr = dtypes.host_array(array, dtypes.image_dtype(dtype) if dtype is not None else None,
                            what)  # other numeric types: rounded once to the image's
    src_dt = dtypes.of_array(arr)
    ndim = arr.ndim if dims is None else len(dims)
    tag = src or layout.default_tag(ndim)
    dims = dims if dims is not None else dims_from_shape(arr.shape, tag, wording.hint)
    if choose is not None:
        layout, max_image = choose(as_ints(dims, "dims"), dtype or src_dt)
    desc = tagged(dims, src_dt, tag)
    image = image_side(layout, desc.dims, dtype if dtype is not None else src_dt)
    if not wording.empty_images:
        refuse_empty(image, what)
    limits = Limits.of(max_image)
    if limits is not None and not image.storage.tiles:   # not cut: must fit the limits
        check_fits(image, limits)
        limits = None
    pitch = None if row_pitch is None else pitch_pixels(image, row_pitch, "to_image")
    shape = image.array_shape if pitch is None else pitched_shape(image, pitch)
    if out is None:   # before the input's size: dims this large are the first thing wrong
        check_host_bytes(math.prod(shape) * image.dtype.itemsize,
                         f"the {layout.name} image of dims {desc.dims}")
    eng = engines.get(engine)
    flat, desc = host_input(arr, desc, what, eng.reads_views)
    if limits is not None:
        if out is not None or pitch is not None:
            raise ClayoutError(f"to_image: {'out' if pitch is None else 'row_pitch'}= and "
                               "max_image= do not go together (tiles are new arrays); pass "
                               "one of them")
        plan = tile_plan(image, limits)
        if eng.limits is not None and not eng.limits.holds_2d(plan.limits):
            (w, h), (mw, mh) = eng.limits.image2d, plan.max_image
            raise ClayoutError(f"max_image {mw}x{mh} is over the device's image limit {w}x{h}; "
                               "give at most that")
        if plan.split:
            return ToTilesCall(desc, image, eng, flat, wait_for=wait_list(wait_for, "to_image"),
                               tiles=plan)
    else:
        check_fits(image, eng.limits)
    if out is not None:
        host_out(out, shape, image.dtype, arr, "to_image")
    return ToImageCall(desc, image, eng, flat, out, wait_for=wait_list(wait_for, "to_image"),
                       pitch=pitch)


# -- from_image -----------------------------------------------------------------------------
def parse_from_image(image, layout, dims, dst=None, dtype=None, engine=None, out=None,
                     check_padding=True, row_pitch=None, wait_for=None,
                     wording: Wording = API, tiles=None):
    """``tiles``: the TilePlan the tuple ``image`` was cut by, where the
    caller planned it (the CLI, to find the files); else read from the
    tiles' shapes."""
    what = wording.what or "from_image input"
    layout = image_layout(layout)
    if isinstance(image, Memory):
        into = memory_out(out, dst, "from_image", "dst")
        if into is not None:
            dst = into
        if row_pitch is not None:
            raise ClayoutError("from_image of a Memory: row_pitch= goes with a pitched host "
                               "array; a Memory is read as the image it holds (a pitched "
                               "cl.Buffer: Memory.from_buffer(..., row_pitch=))")
        return _from_image_memory(image, layout, dims, dst, dtype, engine, wait_for)
    eng = engines.get(engine)
    if isinstance(image, tuple):
        if out is not None or row_pitch is not None:
            raise ClayoutError(f"from_image: {'out' if row_pitch is None else 'row_pitch'}= "
                               "goes with one image array, not a tuple of tiles")
        plan = plan_of(layout, dims, image) if tiles is None else tiles
        if tiles is not None:
            plan.check(image)
        if plan.split:
            dims = as_ints(dims, "dims")
            side = image_side(layout, dims, dtypes.of_array(image[0]))
            if check_padding:
                check_padding_lanes(plan.join(image), side, "from_image",
                                    wording.no_padding_check)
            desc = MemoryDesc(dims, dtype if dtype is not None else side.dtype,
                              tag=dst or layout.default_tag(len(dims)))
            return FromTilesCall(side, desc, eng, image, None, physical_shape(desc),
                                 wait_list(wait_for, "from_image"), tiles=plan)
        image = image[0]   # within the limit: the one tile is the image
    arr = np.asarray(image)
    if not held(arr) and dtype is not None:  # a float64 image: rounded once to the output's
        arr = dtypes.host_array(arr, dtypes.image_dtype(dtype), what)
    source = arr   # out= may not overlap what the caller gave
    # a view of an image (a crop, a strided or misaligned array): copied once, contiguous
    arr = np.require(dtypes.native(arr), requirements=("C", "A"))
    img_dt = dtypes.image_dtype(dtypes.of_array(arr))
    dims = as_ints(dims, "dims")
    side = image_side(layout, dims, img_dt)
    if not wording.empty_images:
        refuse_empty(side, what)
    if row_pitch is not None:   # the pitched host form: the first width columns of each row
        arr = unpitched(arr, side, pitch_pixels(side, row_pitch, "from_image"), "from_image")
    checked_image(arr, side, "from_image", check_padding, wording.no_padding_check)
    desc = tagged(dims, dtype if dtype is not None else side.dtype,
                  dst or layout.default_tag(len(dims)))
    shape = physical_shape(desc)
    if out is None:
        check_host_bytes(desc.span_bytes, f"from_image output {desc.describe()}")
    else:
        host_out(out, shape, desc.dtype, source, "from_image")
    return FromImageCall(side, desc, eng, arr, out, shape, wait_list(wait_for, "from_image"))


def _from_image_memory(mem: Memory, layout, dims, dst, dtype, engine, wait_for) -> Call:
    """An image Memory read back into a buffer: ``dst`` is a tag (default by
    the layout's kind), a MemoryDesc, or a Memory to write into."""
    dims = as_ints(dims, "dims")
    if not mem.is_image or mem.layout.name != layout.name or \
            layout.logical_dims(dims) != mem.dims:
        raise ClayoutError(f"{mem!r} is not an image of layout {layout.name!r} with dims "
                           f"{tuple(dims)}")
    if isinstance(dst, (Memory, MemoryDesc)):
        held = dst.side if isinstance(dst, Memory) else dst
        if dtype is not None and dtypes.dtype(dtype) != held.dtype:
            raise ClayoutError(f"from_image of a Memory: dtype={dtypes.dtype(dtype).name} but "
                               f"dst holds {held.dtype.name}; leave dtype out or pass a dst of "
                               "that dtype")
        return memory_call(mem, dst, engine, wait_for=wait_for, what="from_image")
    tag = dst or layout.default_tag(len(dims))
    return memory_call(mem, MemoryDesc(dims, dtype or mem.dtype.name, tag=tag), engine,
                       wait_for=wait_for, what="from_image")


# -- from_frame -----------------------------------------------------------------------------
def parse_from_frame(frame, layout, *, format, size=None, crop=None, fit="stretch", fill=0,
                     resize="bilinear", mean=0.0, std=1.0, order="rgb", yuv=None,
                     dtype="f32", engine=None, out=None, antialias=False, scale=1.0,
                     wait_for=None, wording: Wording = API) -> Call:
    """``wording``: how messages name things (the CLI's file). A host
    frame with a Memory as ``out`` is uploaded to out's engine when the
    call runs (consumed when it returns)."""
    what = wording.what or "from_frame"
    on_memory = isinstance(frame, Memory)
    if on_memory:
        if frame.is_image or frame.dtype.name != "u8":
            raise ClayoutError(f"from_frame takes a u8 buffer Memory holding the frame's bytes; "
                               f"got {frame!r}")
        shape = frame.dims
    else:
        arr = np.asarray(frame)
        if arr.dtype != np.uint8:
            raise ClayoutError(f"{what}: a frame is a u8 array (numpy uint8), got {arr.dtype}; "
                               "camera and decoded frames are 8 bits a channel")
        shape = arr.shape
    plan = frame_side(shape, format, size=size, crop=crop, fit=fit, fill=fill, resize=resize,
                      mean=mean, std=std, order=order, yuv=yuv, antialias=antialias,
                      scale=scale)
    target = frame_target(layout, dtype)
    dst = image_side(target, plan.dims, dtype) if isinstance(target, ImageLayout) else \
        tagged(plan.dims, dtype, target)
    if on_memory or isinstance(out, Memory):
        if on_memory and frame.desc != MemoryDesc(shape, "u8"):
            raise ClayoutError(f"from_frame: {frame!r} is not a dense row-major u8 buffer of the "
                               f"frame's shape {shape}; make it Memory(MemoryDesc({shape}, 'u8'))")
        if out is not None and not isinstance(out, Memory):
            raise ClayoutError("from_frame of a Memory: out= takes a Memory of the result; "
                               f"got {type(out).__name__}")
        if out is not None:
            check_out_side(out, dst, dtype, "from_frame")
        if on_memory:
            return memory_call(frame, out if out is not None else dst, engine, plan, wait_for,
                               "from_frame")
        return HostFrameIntoMemoryCall(plan, dst, arr, out, runner_of(out, engine),
                                       wait_list(wait_for, "from_frame"),
                                       frame=tagged(shape, "u8", None))
    eng = engines.get(engine)
    shape = dst.array_shape if dst.is_image else physical_shape(dst)
    if dst.is_image:
        check_fits(dst, eng.limits)
    if out is None:
        check_host_bytes(dst.memory.span_bytes, f"from_frame output {dst.describe()}")
    else:
        host_out(out, shape, dst.dtype, arr, "from_frame")
    return FrameCall(plan, dst, eng, arr, out, shape, wait_list(wait_for, "from_frame"))


__all__ = ["Wording", "parse_reorder", "parse_to_image", "parse_from_image",
           "parse_from_frame", "image_side", "refuse_empty", "SIDES"]
