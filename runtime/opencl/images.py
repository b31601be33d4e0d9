"""Image storage on an OpenCL device: every fact of how an ImageDesc becomes a
``cl.Image`` and how kernels and copies reach it, in one place.

* the format: CL_RGBA (4 lanes) or CL_R (1 lane) with the channel type of
  the image dtype (``image_format``);
* the object: ``create`` (refused first when over the device's limits);
* copies between the image and host arrays or buffers: ``origin`` and
  ``region`` (what ``cl.enqueue_copy`` takes);
* kernels: the parameter type (``param``) and the coordinate of a pixel
  (``coord``), which the renderer puts in the kernel's text.

A storage other than the 2-D image (a 3-D image, an image array) changes
these functions and ImageDesc's extent (runtime/algebra/layout.py).
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from ..algebra import dtypes
from ..algebra.catalog import check_fits

CHANNEL_TYPES = {"f32": "FLOAT", "f16": "HALF_FLOAT", "s32": "SIGNED_INT32",
                 "s8": "SIGNED_INT8", "u8": "UNSIGNED_INT8"}


def image_format(dtype, lanes: int) -> cl.ImageFormat:
    dt = dtypes.image_dtype(dtype)
    order = cl.channel_order.RGBA if lanes == 4 else cl.channel_order.R
    return cl.ImageFormat(order, getattr(cl.channel_type, CHANNEL_TYPES[dt.name]))


def create(context: cl.Context, image, limits, flags=cl.mem_flags.READ_WRITE,
           hostbuf: np.ndarray | None = None) -> cl.Image:
    """A device image for the ImageDesc ``image``; refused before allocation
    when over ``limits`` (the device's max width and height)."""
    check_fits(image, limits)
    fmt = image_format(image.dtype, image.lanes)
    if hostbuf is not None:
        return cl.create_image(context, flags | cl.mem_flags.COPY_HOST_PTR, fmt,
                               shape=(image.width, image.height), hostbuf=hostbuf)
    return cl.create_image(context, flags, fmt, shape=(image.width, image.height))


def matches(obj: cl.Image, image) -> str | None:
    """Why the caller's ``cl.Image`` cannot hold ``image``, or None when it can."""
    fmt = image_format(image.dtype, image.lanes)
    if (obj.width, obj.height) != (image.width, image.height) or obj.format != fmt:
        return (f"cl.Image {obj.width}x{obj.height} {obj.format} does not match layout "
                f"{image.layout.name!r} for dims {image.dims}: expected "
                f"{image.width}x{image.height} {fmt}")
    return None


def origin(image) -> tuple[int, ...]:
    return (0, 0)


def region(image) -> tuple[int, ...]:
    """The whole image, as enqueue_copy's ``region``."""
    return (image.width, image.height)


def param(name: str, access: str) -> str:
    """The kernel parameter of an image read (``access="read"``) or written."""
    return f"__{'read' if access == 'read' else 'write'}_only image2d_t {name}"


def coord(x: str, y: str) -> str:
    """The coordinate of pixel (x, y) as read_image*/write_image* take it."""
    return f"(int2)({x}, {y})"
