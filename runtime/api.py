"""The public conversions: reorder, to_image, from_image, from_frame (docs/engines.md).

These are the doors. Each parses its arguments once (runtime/doors/parse.py) into
a frozen call of its kind (runtime/doors/calls.py: the two sides, the engine, the
input as the engine takes it, ``out`` checked, the tiles planned), which
checks the input fully (dtype, shape, size, dims, layout, image limits,
``out``) before any work; the call's ``apply()`` runs it on one engine
(host arrays) or on runtime.memory (Memory objects, which stay on their
engine). A call on a contiguous host array keeps its parse as a prepared
call under the signature of its arguments (runtime/doors/prepared_call.py): the
next call with the same kinds of arguments skips the parse. Every door
takes ``wait=False`` (a ``Pending``) and ``wait_for=`` (device events).
"""
from __future__ import annotations

import numpy as np  # noqa: F401  (the doctests use np)

from . import engine as engines
from .algebra import dtypes
from .algebra.desc import MemoryDesc
from .errors import ClayoutError
from .doors.checks import host_out
from .doors.parse import parse_from_frame, parse_from_image, parse_reorder, parse_to_image
from .doors.prepared_call import SIGNATURES, keep, signature
from .engine import image_pitch


def _run(key, what: str, data, out, wait, wait_for, parse, padding=None):
    """A door's call: its kept Prepared where ``key`` has one, else
    ``parse()`` (the full checks), kept for the next call; the result, or
    with ``wait=False`` a Pending of it."""
    prep = SIGNATURES.peek(key) if key is not None else None
    if prep is not None:
        return prep(data, out, wait, wait_for)
    if wait is not True and wait is not False:
        raise ClayoutError(f"{what}: wait={wait!r}; allowed: True or False")
    call = parse()
    keep(key, what, call, data, padding(call) if padding is not None else None)
    return call.apply(wait)


def reorder(data, src_desc: MemoryDesc, dst_desc: MemoryDesc, engine=None, out=None,
            wait_for=None, wait=True):
    """Reorder ``data`` (physical, in ``src_desc``) into ``dst_desc``; returns
    dst's 1-D physical array (dtype from ``dst_desc``). ``data`` is 1-D (the
    physical elements in order) or, for a dense plain desc, its physical
    shape; a shape that only matches in size is refused. ``out``: a writable,
    C-contiguous array of that shape and dtype to write it into (its old
    contents do not matter: padding and gaps come out zero as in a new array);
    it is returned.

    With a ``runtime.Memory`` as ``data`` the conversion stays on its device
    and returns a Memory: ``dst_desc`` is a MemoryDesc (a new Memory) or a
    Memory to write into, and ``src_desc`` may be None (the Memory's own desc
    is used; a different one is refused). It is enqueued, not waited for:
    the returned Memory's ``event`` is its last command's (None on a host
    engine). ``engine`` names another OpenCL engine on the Memory's context
    to run it on that engine's queue.

    ``wait_for``: device events (pyopencl Events: your kernels', a Memory's
    ``event``) the call waits for before it touches its inputs and outputs;
    on an out-of-order queue they, and the events clayout records on the
    memory it touches, are the whole order (docs/engines.md, "Inside an
    engine"). Every door takes it. A call on host arrays has consumed them
    when it returns: the caller may overwrite or free its input at once.

    >>> src = MemoryDesc((1, 3, 2, 2), tag="nchw")
    >>> reorder(np.arange(12, dtype=np.float32), src, MemoryDesc((1, 3, 2, 2), tag="nhwc"))[:6]
    array([0., 4., 8., 1., 5., 9.], dtype=float32)
    >>> frame = np.empty(12, np.float32)     # reused call after call: no new array
    >>> reorder(np.arange(12, dtype=np.float32), src, MemoryDesc((1, 3, 2, 2), tag="nhwc"),
    ...         out=frame) is frame
    True
    """
    key = signature("reorder", data, (src_desc, dst_desc, engine, type(out)))
    return _run(key, "reorder", data, out, wait, wait_for,
                lambda: parse_reorder(data, src_desc, dst_desc, engine, out, wait_for))


def to_image(array, layout, src=None, dtype=None, engine=None, dims=None, out=None,
             max_image=None, row_pitch=None, wait_for=None, wait=True):
    """Place a tensor onto an image; returns (height, width, 4), or
    (height, width) for one-channel layouts, of the image dtype.
    With ``max_image=(W, H)`` (or a runtime.Limits) an image over that limit comes as a tuple of
    tiles instead (the rule: runtime.algebra.tiles), which from_image accepts.
    With ``row_pitch=BYTES`` (a layout on image2d storage) each row is
    ``BYTES`` long: (height, BYTES // pixel_bytes[, 4]), the columns past the
    width zero, so that ``.tobytes()`` is an image over a pitched buffer
    (``out``: an array of that shape; docs/engines.md, "Row pitch").

    ``src`` is the tag of ``array`` (default nchw / oihw / mihw / x by the
    layout's kind); a plain-tagged array comes in its physical shape, a
    blocked one 1-D with ``dims`` (an N-D array must be exactly the physical
    shape of ``src`` at ``dims``). ``dtype`` is the image's (default: the
    array's). ``engine`` as in reorder; ``out`` as in reorder (the image's
    shape and dtype). A buffer ``runtime.Memory`` as ``array`` gives an image
    Memory on the same engine (``out``: an image Memory of that layout, dims
    and, where ``dtype`` is given, that dtype, to write into).
    """
    key = signature("to_image", array, (layout, src, dtype, engine, dims, type(out), max_image,
                                        row_pitch))
    return _run(key, "to_image", array, out, wait, wait_for,
                lambda: parse_to_image(array, layout, src, dtype, engine, dims, out, max_image,
                                       row_pitch, wait_for))


def from_image(image, layout, dims, dst=None, dtype=None, engine=None, out=None,
               check_padding=True, row_pitch=None, wait_for=None, wait=True):
    """Read a tensor back from an image array (height, width, 4) (or
    (height, width)); returns the buffer in tag ``dst`` (default nchw /
    oihw / ...), in its physical shape when plain, else 1-D; ``dtype`` is the
    buffer's (default: the image's); ``out`` as in reorder (the returned
    shape and dtype). A tuple of tiles from ``to_image(..., max_image=...)``
    is accepted in place of the image.

    ``check_padding`` (default True): refuse a host image whose padding
    lanes are not all zero. Every image clayout writes holds 0 there, so a
    non-zero padding lane means ``dims`` are not the dims the image was
    written for (dims 1x5x2x3 read an image of 1x6x2x3 whose sixth channel
    sits in a padding lane of theirs). Pass False for an image another
    engine wrote with garbage in its tails. Only the tails are read. A
    Memory carries its own dims and is not checked.

    ``row_pitch=BYTES``: ``image`` is the pitched form ``to_image(...,
    row_pitch=BYTES)`` gives, (height, BYTES // pixel_bytes[, 4]), or 1-D of
    as many elements (the device buffer's contents in the image's dtype);
    the columns past the width are not read.
    """
    key = signature("from_image", image, (layout, dims, dst, dtype, engine, type(out),
                                          check_padding, row_pitch))
    return _run(key, "from_image", image, out, wait, wait_for,
                lambda: parse_from_image(image, layout, dims, dst, dtype, engine, out,
                                         check_padding, row_pitch, wait_for),
                padding=(lambda call: call.src if check_padding and
                         call.src.memory.has_padding else None))


def from_frame(frame, layout, *, format, size=None, crop=None, fit="stretch", fill=0,
               resize="bilinear", mean=0.0, std=1.0, order="rgb", yuv=None, dtype="f32",
               engine=None, out=None, antialias=False, scale=1.0, wait_for=None, wait=True):
    """A camera frame as a model input of dims (1, C, H, W) in ``layout``,
    in one conversion (docs/frames.md): colour (YUV to RGB by ``yuv``,
    BT.601 limited range by default, or the packed channels), ``crop`` =
    (x, y, w, h), resize to ``size`` = (W, H) (``fit`` "stretch" or
    "letterbox" with ``fill`` in pixel units, 0..255; ``resize``
    "bilinear", "nearest" or "area", as OpenCV's INTER_LINEAR /
    INTER_NEAREST / INTER_AREA; ``antialias=True`` widens bilinear when
    shrinking, as PIL and torchvision), normalize (p·scale - mean) / std per
    output channel in ``order`` "rgb" or "bgr" (torchvision's convention:
    ``scale=1/255`` with its mean and std), then placed in ``layout`` (an
    activation image layout, or a buffer tag such as 'nchw') as ``dtype``.
    C is 3 (1 for ``gray``).

    ``frame``: a u8 array, (h, w, 3) for ``rgb``/``bgr``, (h, w, 4) for
    ``rgba``/``bgra`` (alpha dropped), (h, w) for ``gray``, (h*3/2, w) for
    ``nv12``/``nv21``/``i420``; or a u8 buffer Memory of that shape (the
    result is then a Memory on its engine; ``out`` a Memory of the result).
    Returns what ``to_image`` returns for the layout (a buffer tag: its
    physical shape, (1, C, H, W) for nchw); ``out`` as in ``to_image``.

    >>> nv21 = np.full((6, 4), 128, np.uint8)          # a 4x4 grey NV21 frame
    >>> img = from_frame(nv21, "in_out_channel", format="nv21", engine="cpu")
    >>> img.shape, round(float(img[0, 0, 0]), 3)       # 1220542/2**20 * (128 - 16)
    ((4, 4, 4), 130.366)
    """
    key = signature("from_frame", frame, (layout, format, size, crop, fit, fill, resize,
                                          _frozen(mean), _frozen(std), order, yuv, dtype,
                                          engine, type(out), antialias, scale))
    return _run(key, "from_frame", frame, out, wait, wait_for,
                lambda: parse_from_frame(frame, layout, format=format, size=size, crop=crop,
                                         fit=fit, fill=fill, resize=resize, mean=mean,
                                         std=std, order=order, yuv=yuv, dtype=dtype,
                                         engine=engine, out=out, antialias=antialias,
                                         scale=scale, wait_for=wait_for))


def _frozen(value):
    """A mean or std as a signature part: a list as a tuple (its values)."""
    return tuple(value) if isinstance(value, list) else value


__all__ = ["reorder", "to_image", "from_image", "from_frame", "host_out", "image_pitch"]


def empty_pinned(shape, dtype="f32", engine=None) -> np.ndarray:
    """An uninitialized host array of ``shape`` and ``dtype`` (a clayout
    dtype name or a numpy dtype) in memory the device transfers at its full
    rate: on an OpenCL engine, memory the driver allocates and pins
    (CL_MEM_ALLOC_HOST_PTR, mapped once), which a conversion from or into it
    moves without staging (CuPy's ``cupyx.empty_pinned``). ``engine``: an
    OpenCL engine, or None for the default one where a device exists; on a
    host engine (cpu, reference), or with no device, a plain numpy array.
    The memory is freed when the array and every view of it are gone;
    allocate once and reuse (docs/engines.md, "Pinned host arrays").

    >>> a = empty_pinned((2, 3), "f32")
    >>> a.shape, a.dtype
    ((2, 3), dtype('float32'))
    """
    dt = dtypes.dtype(dtype).np if isinstance(dtype, str) else np.dtype(dtype)
    if engine is None:
        engine = "opencl" if engines.opencl_available() else "cpu"
    return engines.get(engine).empty_pinned(shape, dt)

