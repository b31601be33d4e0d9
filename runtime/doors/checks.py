"""What every door checks and builds alike (runtime/doors/parse.py parses each
door with these): the sides of a host call, one object per (dims, dtype,
tag) or (layout, dims, dtype); a call on a Memory; a destination Memory
checked against the side asked; and the command line's refusal of an
image with no elements.
"""
from __future__ import annotations

import numpy as np

from .. import engine as engines
from ..algebra import dtypes
from ..algebra.checks import as_ints
from ..algebra.desc import MemoryDesc
from ..algebra.hostarray import first_nonzero, nonzero_padding
from ..algebra.layout import ImageDesc
from ..cache import LRU
from .calls import MemoryCall, MemoryFrameCall
from ..errors import ClayoutError, warn
from ..memory import Memory

# The two sides of a call on host arrays, one object per (dims, dtype, tag) or
# (layout, dims, dtype): a frame converted call after call builds no desc and
# re-derives none of a desc's numbers (1x3x224x224 to_image: 120 -> 60 us a call).
SIDES = LRU("host call sides", "CLAYOUT_SIDES_CACHE", 1024)


def memory_call(mem: Memory, target, engine, frame=None, wait_for=None,
                what: str = "conversion") -> MemoryCall:
    """A call on a Memory: ``target`` a side (a new Memory) or a Memory to
    write into, on the same device (context) as ``mem``; it runs on
    ``engine`` where one is named (another queue on mem's context: ordered
    after mem's commands by their events), else on mem's own. With
    ``frame`` (a FramePlan), ``mem`` holds that frame's bytes."""
    runner = runner_of(mem, engine)
    out = target if isinstance(target, Memory) else None
    if out is not None and out.engine.domain != mem.engine.domain:
        raise ClayoutError(f"destination {out!r} and source {mem!r} are on different engines")
    dst = out.side if out is not None else target
    wait = wait_list(wait_for, what)
    if frame is not None:
        return MemoryFrameCall(frame, dst, mem, out, runner, wait)
    return MemoryCall(mem.side, dst, mem, out, runner, wait)


def runner_of(mem: Memory, engine):
    """The engine a call on ``mem`` runs on: ``engine`` where named (None
    and 'auto': mem's own), which must reach mem's storage (the same
    device context), or one ClayoutError."""
    if engine is None or engine == "auto" or engine is mem.engine:
        return mem.engine
    runner = engines.get(engine)
    if runner.domain != mem.engine.domain:
        raise ClayoutError(f"{mem!r} lives on engine {mem.engine.name}; it cannot be converted "
                           f"on engine {runner.name} (use to_numpy() or a Memory on that "
                           "engine; an OpenCL engine on the same context runs it on its queue)")
    return runner


def wait_list(wait_for, what: str) -> tuple:
    """``wait_for`` as a tuple of device events (pyopencl Events: a
    command's, ``Memory.event``, ``Pending.event``), or one ClayoutError;
    None: nothing to wait for."""
    if wait_for is None:
        return ()
    found = (wait_for,) if engines.is_device_object(wait_for) else wait_for
    try:
        found = tuple(found)
    except TypeError:
        raise ClayoutError(f"{what}: wait_for={wait_for!r}; allowed: a list of pyopencl "
                           "Events (or one), or None") from None
    for event in found:
        if not (engines.is_device_object(event) and hasattr(event, "wait")):
            raise ClayoutError(f"{what}: wait_for holds {event!r}; allowed: pyopencl Events "
                               "(a command's, Memory.event, Pending.event)")
    return found


def tagged(dims, dtype, tag) -> MemoryDesc:
    """MemoryDesc(dims, dtype, tag=tag), the same object for the same arguments."""
    dims = (dims,) if isinstance(dims, int) else as_ints(dims, "dims")
    return SIDES.get(("desc", dims, dtypes.dtype(dtype), tag),
                     lambda: MemoryDesc(dims, dtype, tag=tag))


def image_side(layout, dims, dtype="f32") -> ImageDesc:
    """ImageDesc(layout, dims, dtype), the same object for the same arguments:
    every image side a door builds comes from here."""
    dims = as_ints(dims, "dims")
    return SIDES.get(("image", layout, dims, dtypes.image_dtype(dtype)),
                     lambda: ImageDesc(layout, dims, dtype))


def held(data) -> bool:
    """True when ``data`` already has one of clayout's dtypes (any byte order)."""
    try:
        dtypes.of_array(np.asarray(data))
        return True
    except ClayoutError:
        return False


def check_out_side(out: Memory, want, dtype, what: str) -> None:
    """Refuse a destination Memory that is not the side the call asks for
    (layout, dims and, where the call names it, dtype): a conversion writes
    what its arguments say, never whatever the destination happens to hold."""
    got = out.side
    same = got.is_image == want.is_image and got.dims == want.dims and \
        (not want.is_image or got.layout == want.layout) and \
        (dtype is None or got.dtype == want.dtype)
    if not same:
        asked = want.describe() if dtype is not None else \
            f"{want.layout.name} dims={want.dims}" if want.is_image else want.describe()
        raise ClayoutError(f"{what}: out= holds {got.describe()} but the call asks for "
                           f"{asked}; pass a Memory of that side, or leave out= to get a new one")


def memory_out(out, legacy, what: str, legacy_name: str):
    """The Memory a call on a Memory writes into, or None (a new one):
    ``out`` as every door names it, or the older keyword ``legacy_name``
    (reorder's dst_desc, from_image's dst) holding a Memory, accepted with a
    DeprecationWarning that names out=."""
    if out is not None and not isinstance(out, Memory):
        raise ClayoutError(f"{what} of a Memory: out= takes a Memory to write into (a numpy "
                           f"out= goes with a host array input); got {type(out).__name__}")
    if isinstance(legacy, Memory):
        if out is not None:
            raise ClayoutError(f"{what}: out= and {legacy_name}= both hold a Memory to write "
                               "into; pass it once, as out=")
        warn(f"{what}: a destination Memory goes in out= ({legacy_name}= a Memory is still "
             "taken, and will not be in a later release)", DeprecationWarning)
        return legacy
    return out


def refuse_empty(image: ImageDesc, what: str) -> None:
    """Refuse a tensor with a zero dim headed for an image (the command
    line's rule: OpenCL cannot create an image 0 pixels wide, high or deep,
    nor a buffer of 0 bytes). The size named is the image's, one number per
    coordinate of its storage."""
    if 0 not in image.dims:
        return
    store = image.storage
    size = "x".join(map(str, image.shape)) + (" pixels" if store.ndim == 1 else "")
    names, noun = store.extent_names, "an image" if store.plain else f"an {store.name}"
    why = (f"{noun} with a {', '.join(names[:-1])} or {names[-1]} of 0" if store.ndim > 1
           else f"{noun} of 0 pixels" if store.image_object else "a buffer of 0 bytes")
    if 0 not in image.shape:   # a single texture of C = 0: pixels with no channel
        size, why = f"{size} of 0 lanes", f"an {store.name} with 0 channels"
    raise ClayoutError(f"{what}: dims {','.join(map(str, image.dims))} hold no elements, and "
                       f"the {image.layout.name} {store.noun} would be {size}: OpenCL cannot "
                       f"create {why}; nothing written")


def checked_image(arr: np.ndarray, side: ImageDesc, what: str, check_padding: bool = True,
                  escape: str = "check_padding=False") -> np.ndarray:
    """The host image array ``arr`` as ``side``'s, checked as every door that
    reads a host image checks it (from_image, read_output): exactly the
    image's host shape, and, with ``check_padding``, every padding lane 0
    (a non-zero one means the dims are not the ones the image was written for;
    ``escape`` names the way out the message offers)."""
    if arr.shape != side.array_shape:
        raise ClayoutError(f"image of shape {arr.shape} does not match layout "
                           f"{side.layout.name!r} for dims {side.dims}: expected "
                           f"{side.array_shape} ({side.storage.host_form}[, lanes])")
    if check_padding:
        check_padding_lanes(arr, side, what, escape)
    return arr


def check_padding_lanes(arr: np.ndarray, side: ImageDesc, what: str,
                        escape: str = "check_padding=False", tails=None) -> None:
    """Refuse an image array whose padding lanes under ``side`` are not zero
    (``tails``: the padding's views, planned: hostarray.padding_tails)."""
    off = nonzero_padding(arr, side.memory) if tails is None else first_nonzero(arr, tails)
    if off is None:
        return
    *coords, lane = side.at_offset(off)
    at = ", ".join(f"{n}={c}" for n, c in zip(side.storage.coords, coords))
    raise ClayoutError(
        f"{what}: the image is not {side.layout.name} of dims {side.dims}: its padding "
        f"lane at {at} lane {lane} holds a non-zero value (clayout writes 0 in every padding "
        f"lane); check dims (an image of other dims can have the same size), or pass "
        f"{escape} for an image another engine wrote with garbage in its tails")


def host_out(out, shape, dtype: dtypes.DType, source: np.ndarray, what: str) -> np.ndarray:
    """``out`` when a result of ``shape`` and ``dtype`` can be written into it
    in place: a writable, C-contiguous numpy array of exactly that shape and
    dtype, not overlapping ``source`` (the engines read the input while they
    write the output). ``what`` names the call in the message."""
    def want() -> str:   # the message, made only for a refusal (a call's cost counts)
        return (f"a writable, C-contiguous {dtype.name} ({dtype.np}) numpy array of shape "
                f"{tuple(shape)}")
    if not isinstance(out, np.ndarray):
        raise ClayoutError(f"{what}: out= must be {want()}; got {type(out).__name__}")
    flags = out.flags
    if out.shape != tuple(shape) or out.dtype != dtype.np or not flags.c_contiguous \
            or not flags.writeable:
        wrong = [f"shape {out.shape}"] if out.shape != tuple(shape) else []
        wrong += [f"dtype {out.dtype}"] if out.dtype != dtype.np else []
        wrong += [] if flags.c_contiguous else ["a layout that is not C-contiguous"]
        wrong += [] if flags.writeable else ["read-only"]
        raise ClayoutError(f"{what}: out= must be {want()}; got one with {', '.join(wrong)}")
    if np.may_share_memory(out, source):
        raise ClayoutError(f"{what}: out= overlaps the input; a conversion does not run in "
                           "place (pass a separate array)")
    return out
