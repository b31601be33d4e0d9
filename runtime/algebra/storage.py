"""Storages: what kind of device memory an image layout places its pixels on.

A layout's tag orders the placed dims outer to inner; the storage says how
many coordinates its outer axes form (docs/storage.md):

* ``image2d``: a 2-D image; the first ``rows`` axes form y, the rest x;
* ``image2d_array`` / ``image3d``: an array of 2-D images / a 3-D image; the
  first ``layers`` axes form z (the layer), the next ``rows`` y, the rest x;
* ``image_buffer`` / ``buffer``: one linear pixel index x over all axes (an
  ``image1d_buffer_t`` over a buffer, or the buffer itself, read and written
  as pixels of 4 lanes).

Every storage's host form is the dense buffer of the image's desc, shaped
by its coordinates (outer first) and then the lane: (height, width, 4) for a
2-D image, (depth, height, width, 4) for an array or a 3-D image, (pixels,
4) for the buffers.

>>> STORAGES["image3d"].coords, STORAGES["buffer"].coords
(('x', 'y', 'z'), ('x',))
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ClayoutError


@dataclass(frozen=True)
class Storage:
    """One storage kind, as facts the code asks (never its name): its name,
    the coordinates of a pixel (x first), the OpenCL C type a kernel takes it
    as, whether its memory is a plain buffer of pixels underneath (kernels
    and copies then reach it as that buffer), the device limits that bound
    it, and where reads outside the tensor give zero in TFLite's kernels
    (documentation of the border rule); then what kernels and the device
    make of it:

    * ``image_object``: kernels read and write it as an OpenCL image type
      (read_image*/write_image*), not as a pointer;
    * ``sampled``: its reads take a sampler (not so for an image1d_buffer_t);
    * ``array``: an image array (its z is a layer, not a depth);
    * ``buffer_view``: kernels bind an image1d_buffer_t view of its buffer;
    * ``write_extension``: the extension a kernel writing it must enable;
    * ``views_buffer``: an image of it can be made over a caller's buffer
      (cl_khr_image2d_from_buffer: 2-D images only);
    * ``tiles``: an image over a limit is cut into tiles of this storage;
    * ``cl_object``: its OpenCL memory object type (CL_MEM_OBJECT_...), None
      for a plain buffer;
    * ``bound``: the ``Limits`` attribute that gives its most pixels along
      each coordinate (x first)."""
    name: str
    coords: tuple[str, ...]
    c_type: str
    on_buffer: bool
    limits: str
    border: str
    image_object: bool = True
    sampled: bool = True
    array: bool = False
    buffer_view: bool = False
    write_extension: str | None = None
    views_buffer: bool = False
    tiles: bool = False
    cl_object: str | None = None
    bound: str = "image2d"

    def __str__(self) -> str:
        return self.name

    @property
    def ndim(self) -> int:
        return len(self.coords)

    def pixel_args(self, coords, named, layout: str) -> dict:
        """{coordinate: value, "lane": value} from a pixel given positionally
        (the coordinates, then optionally the lane) or by name (x, y, z,
        lane; the lane defaults to 0)."""
        names = self.coords + ("lane",)
        unknown = set(named) - set(names)
        if unknown or len(coords) > len(names):
            raise ClayoutError(f"layout {layout!r} ({self.name}) takes a pixel as "
                               f"{', '.join(names)}; got {len(coords)} positional and "
                               f"{', '.join(sorted(named)) or 'no'} named coordinates")
        given = dict(zip(names, coords))
        for key, value in named.items():
            if key in given:
                raise ClayoutError(f"layout {layout!r}: pixel coordinate {key} given twice")
            given[key] = value
        given.setdefault("lane", 0)
        missing = [n for n in names if n not in given]
        if missing:
            raise ClayoutError(f"layout {layout!r} ({self.name}) needs {', '.join(missing)} "
                               "of the pixel")
        return given

    @property
    def host_form(self) -> str:
        """The axes of the host array: 'height, width', 'depth, height, width' or 'pixels'."""
        names = {"x": "pixels" if self.ndim == 1 else "width", "y": "height", "z": "depth"}
        return ", ".join(names[c] for c in reversed(self.coords))

    @property
    def extent_names(self) -> tuple[str, ...]:
        """What each coordinate's size is called, x first: width, height and
        layers or depth for the images, pixels for the buffer storages."""
        if self.ndim == 1:
            return ("pixels",)
        return ("width", "height", "layers" if self.array else "depth")[:self.ndim]

    @property
    def plain(self) -> bool:
        """True for the 2-D image, the storage messages leave unnamed."""
        return self.name == "image2d"

    @property
    def noun(self) -> str:
        """What messages call it: 'image' for a 2-D image, else its name."""
        return "image" if self.plain else self.name

    @property
    def layered(self) -> bool:
        """True for the storages with a z coordinate (array layer or depth)."""
        return len(self.coords) == 3


STORAGES = {s.name: s for s in (
    Storage("image2d", ("x", "y"), "image2d_t", False,
            "image2d_max_width x image2d_max_height", "x outside W, y outside H",
            views_buffer=True, tiles=True, cl_object="IMAGE2D", bound="image2d"),
    Storage("image2d_array", ("x", "y", "z"), "image2d_array_t", False,
            "image2d_max_width x image2d_max_height x image_max_array_size",
            "x outside W, y outside H", array=True, cl_object="IMAGE2D_ARRAY",
            bound="image2d_layers"),
    Storage("image3d", ("x", "y", "z"), "image3d_t", False,
            "image3d_max_width x image3d_max_height x image3d_max_depth",
            "x outside W, y outside H, z outside D",
            write_extension="cl_khr_3d_image_writes", cl_object="IMAGE3D", bound="image3d"),
    Storage("image_buffer", ("x",), "image1d_buffer_t", True,
            "image_max_buffer_size pixels (and max_mem_alloc_size bytes)",
            "a read at x = -1 gives 0", sampled=False, buffer_view=True,
            cl_object="IMAGE1D_BUFFER", bound="buffer_pixels"),
    Storage("buffer", ("x",), "__global", True, "max_mem_alloc_size bytes", "none",
            image_object=False, sampled=False, bound="alloc_pixels"),
)}


def size_text(shape, store: Storage) -> str:
    """An image's size as messages write it: '35x5' on a 2-D image, the
    storage named otherwise: '14x3x2 image3d'."""
    size = "x".join(map(str, shape))
    return size if store.plain else f"{size} {store.name}"


def image_text(image) -> str:
    """'image 35x5 RGBA', 'image3d 5x3x2 RGBA', 'buffer 30 RGBA': an
    ImageDesc's storage, size and channels, as messages write them."""
    return f"{image.storage.noun} {'x'.join(map(str, image.shape))} {image.channels}"


def storage_of(value, layout: str) -> Storage:
    """The Storage record a layout is given: the record itself, or its name."""
    if isinstance(value, Storage):
        return value
    if value not in STORAGES:
        raise ClayoutError(f"image layout {layout!r}: unknown storage {value!r}; "
                           f"storages: {', '.join(STORAGES)}")
    return STORAGES[value]


def storage(name: str) -> Storage:
    if name not in STORAGES:
        raise ClayoutError(f"unknown storage {name!r}; storages: {', '.join(STORAGES)}")
    return STORAGES[name]


# The OpenCL 1.2 minimums a device must offer (full profile): the limits a
# storage is weighed against when only a 2-D limit is known.
MIN_IMAGE3D = 2048
MIN_ARRAY_SIZE = 2048
MIN_IMAGE_BUFFER = 65536


@dataclass(frozen=True)
class Limits:
    """A device's limits for every storage: the 2-D image (width, height), the
    3-D image (width, height, depth), an array's layer count (its layers are
    2-D images), an image buffer's pixels, and one allocation's bytes (None:
    no limit). ``Limits.of(value)`` takes a Limits or a 2-D (width, height)
    limit; from the latter the other storages get the OpenCL 1.2 minimums
    (3-D and arrays no wider or taller than the 2-D limit)."""
    image2d: tuple[int, int]
    image3d: tuple[int, int, int]
    array_size: int
    image_buffer: int
    max_alloc: int | None = None

    @classmethod
    def of(cls, value, what: str = "max_image") -> Limits | None:
        """A caller's limit argument as Limits (None stays None): a Limits, or
        a 2-D (max width, max height) of positive pixel counts, from which
        the other storages get the OpenCL minimums; else one ClayoutError
        naming ``what``. The one conversion of a (width, height) to Limits."""
        if value is None or isinstance(value, Limits):
            return value
        try:
            w, h = (int(v) for v in value)
        except (TypeError, ValueError):
            raise ClayoutError(f"{what} {value!r}: expected (max width, max height) in pixels, "
                               "e.g. (16384, 16384), or a runtime.Limits") from None
        if w < 1 or h < 1:
            raise ClayoutError(f"{what} {value!r}: width and height must be at least 1")
        return cls((w, h), (min(w, MIN_IMAGE3D), min(h, MIN_IMAGE3D), MIN_IMAGE3D),
                   MIN_ARRAY_SIZE, MIN_IMAGE_BUFFER)

    def holds_2d(self, other: Limits) -> bool:
        """Whether ``other``'s 2-D image limit is within this one's."""
        return all(o <= b for o, b in zip(other.image2d, self.image2d))

    # -- the bounds a Storage names (its ``bound``), x first
    @property
    def image2d_layers(self) -> tuple[int, int, int]:
        return self.image2d + (self.array_size,)

    @property
    def buffer_pixels(self) -> tuple[int]:
        return (self.image_buffer,)

    @property
    def alloc_pixels(self) -> tuple[int]:
        """A plain buffer is bounded by its bytes alone (``refusal``): at most
        one pixel per 4 bytes."""
        return (self.max_alloc // 4 if self.max_alloc else 2 ** 62,)

    def bounds(self, store: Storage) -> tuple[int, ...]:
        """The most pixels along each coordinate of ``store`` (x first)."""
        return getattr(self, store.bound)

    def text(self, store: Storage) -> str:
        """The bound of ``store`` as messages write it: '8192x8192'; a plain
        buffer's is the max allocation ('max allocation 1048576 bytes', or
        'no limit' from an engine that gave none), and an image over a
        buffer's '65536 pixels, max allocation 1048576 bytes'."""
        alloc = f"max allocation {self.max_alloc} bytes" if self.max_alloc else None
        if not store.image_object:
            return alloc or "no limit"
        if store.on_buffer:
            return f"{self.bounds(store)[0]} pixels" + (f", {alloc}" if alloc else "")
        return "x".join(map(str, self.bounds(store)))

    def refusal(self, image) -> str | None:
        """Why the ImageDesc ``image`` does not fit these limits (naming the
        storage, its size and the limit), or None when it fits."""
        store = image.storage
        bounds = self.bounds(store)
        size = "x".join(map(str, image.shape))
        if any(n > b for n, b in zip(image.shape, bounds)):
            return f"needs a {size} {store.noun}, over the device limit {self.text(store)}"
        if self.max_alloc is not None and image.nbytes > self.max_alloc:
            return (f"needs a {size} {store.noun} of {image.nbytes} bytes, over the device's max "
                    f"allocation {self.max_alloc} bytes")
        return None


def check_layout(layout, parsed) -> None:
    """Refuse an ImageLayout whose fields do not make a placement: the tag
    (``parsed``) against the dims placed, the storage, the lanes and the
    axes that form y and z (one ClayoutError naming the layout and the rule)."""
    placed = len(layout.groups) if layout.groups else \
        layout.ndims + (layout.transform is not None and layout.transform.split is not None)
    if parsed.ndims != placed:
        raise ClayoutError(f"image layout {layout.name!r}: tag {layout.tag!r} has {parsed.ndims} "
                           f"dims but the layout places {placed}")
    if layout.lanes not in (0, 1, 4):
        raise ClayoutError(f"image layout {layout.name!r}: lanes must be 4 (RGBA), 1 (CL_R) "
                           f"or 0 (the innermost dim whole in one texel), got {layout.lanes}")
    if layout.lanes == 0 and parsed.blocks:
        raise ClayoutError(f"image layout {layout.name!r}: lanes 0 holds the innermost dim "
                           f"whole in a texel; tag {layout.tag!r} must have no block")
    st = layout.storage
    if st.on_buffer and (layout.rows or layout.layers or layout.lanes != 4):
        raise ClayoutError(f"image layout {layout.name!r}: a {st.name} is one pixel index "
                           "over every axis: rows and layers must be 0 and lanes 4")
    if not st.layered and layout.layers:
        raise ClayoutError(f"image layout {layout.name!r}: layers (the z axes) need an "
                           f"image2d_array or image3d storage, not {st.name}")
    if layout.lanes == 4 and (not parsed.blocks or parsed.blocks[-1][1] != 4):
        raise ClayoutError(f"image layout {layout.name!r}: tag {layout.tag!r} must end in an inner "
                           "block of 4 (the RGBA lane), e.g. 'acBd4b'")
    # lanes 0 holds the innermost dim whole in each texel: that axis forms no row or layer
    texel = layout.lanes == 0
    limit = parsed.ndims - texel
    why = (f"; with lanes 0 the innermost dim {layout.tag[-1]!r} is the texel, so y and z "
           f"take at most the other {limit} dim(s)") if texel else ""
    if not 0 <= layout.layers <= limit:
        raise ClayoutError(f"image layout {layout.name!r}: layers must be 0..{limit}, got "
                           f"{layout.layers}{why}")
    if not 0 <= layout.rows <= limit - layout.layers:
        with_layers = f" with layers {layout.layers} (rows + layers <= {limit})" \
            if layout.layers else ""
        raise ClayoutError(f"image layout {layout.name!r}: rows must be "
                           f"0..{limit - layout.layers}{with_layers}, got {layout.rows}{why}")
    if layout.volume is not None and layout.volume.ndims == layout.ndims:
        raise ClayoutError(f"image layout {layout.name!r}: its volume form must take "
                           "another number of dims")
