"""Every memory access of a kernel, written by one emitter.

The render steps of a conversion (runtime/opencl/cell.py, render.py), a
frame (frame.py), an output (output.py) and an accessor (accessor.py) write
each global load and store, each local-memory access and each image read
and write through an :class:`Accesses`:

* with tracing off, it writes exactly the C those steps wrote before it
  existed (tests/opencl/test_trace_emitter.py holds the text of a corpus of
  kernels byte for byte);
* with tracing on, each access also records, into the log buffer the kernel
  takes last (``clayout_log``), its site (which access of the source), the
  work item and the element index (or the pixel) it touches; ``sites``
  says what each site is: the access model (runtime/opencl/access_model.py)
  runs a few work-groups of the traced kernel and reads the log.

>>> acc = Accesses(trace=False)
>>> acc.load("src", "i * 4", "f32"), acc.sites[0].kind, acc.sites[0].bytes
('src[i * 4]', 'load', 4)
>>> Accesses(trace=True).load("src", "i * 4", "f32")
'src[clayout_trace(clayout_log, 0u, i * 4)]'
"""
from __future__ import annotations

from dataclasses import dataclass

from ..algebra import dtypes
from ..algebra.dtypes_c import split_vector
from . import images

# The records one work item keeps (more are counted, not kept: the model
# says so); a record is three words: the site, the index's low and high words.
RECORDS = 512
REGION = 1 + 3 * RECORDS            # a work item's words in the log: its count, its records
PIXEL_BITS = 21                     # an image record packs x, y, z in 21 bits each
LOG = "clayout_log"

_HELPERS = f"""\
#ifndef CLAYOUT_TRACE
#define CLAYOUT_TRACE
// The access trace (runtime/opencl/trace.py): each work item of the group
// keeps its own records, (site, index low, index high), after its count.
static ulong clayout_trace(__global uint *log, uint site, ulong at)
{{
    const uint item = get_local_id(0) + get_local_size(0) *
                      (get_local_id(1) + get_local_size(1) * get_local_id(2));
    __global uint *mine = log + item * {REGION}u;
    const uint n = mine[0];
    if (n < {RECORDS}u) {{
        mine[1u + 3u * n] = site;
        mine[2u + 3u * n] = (uint)at;
        mine[3u + 3u * n] = (uint)(at >> 32);
    }}
    mine[0] = n + 1u;
    return at;
}}
static ulong clayout_pixel(uint x, uint y, uint z)
{{
    return (ulong)x | ((ulong)y << {PIXEL_BITS}) | ((ulong)z << {2 * PIXEL_BITS});
}}
static int clayout_trace_px1(__global uint *log, uint site, int p)
{{ clayout_trace(log, site, clayout_pixel(p, 0u, 0u)); return p; }}
static int2 clayout_trace_px2(__global uint *log, uint site, int2 p)
{{ clayout_trace(log, site, clayout_pixel(p.x, p.y, 0u)); return p; }}
static int4 clayout_trace_px4(__global uint *log, uint site, int4 p)
{{ clayout_trace(log, site, clayout_pixel(p.x, p.y, p.z)); return p; }}
#endif
"""


@dataclass(frozen=True)
class Site:
    """One memory access of a kernel's source. ``space``: global, local or
    image; ``item``: bytes of one element (of a pixel, for an image);
    ``count``: elements one work item moves there (a vector's width);
    ``shift``: elements past the recorded index where it starts (the second
    half of a split vector); ``align``: bytes the compiler may assume the
    address is aligned to (a vloadN/vstoreN on a scalar pointer: the
    element's, the spec's guarantee; an aligned vector type: its size);
    ``form``: the C it is written as."""
    id: int
    kind: str
    space: str
    name: str
    item: int
    count: int = 1
    shift: int = 0
    align: int = 0
    form: str = ""

    @property
    def bytes(self) -> int:
        """Bytes one work item moves at this site."""
        return self.item * self.count


class Accesses:
    """The emitter of one kernel's accesses (module docstring); ``sites``
    lists them in the order they were written."""

    def __init__(self, trace: bool = False):
        self.trace = bool(trace)
        self.sites: list[Site] = []

    # -- what a traced kernel and its functions add -------------------------------------------
    @property
    def param(self) -> str:
        """The log parameter, after a kernel's or a function's others."""
        return f", __global uint *{LOG}" if self.trace else ""

    @property
    def arg(self) -> str:
        """The log argument, after a call's others."""
        return f", {LOG}" if self.trace else ""

    @property
    def helpers(self) -> str:
        return _HELPERS if self.trace else ""

    def group_id(self) -> str:
        """A one-dimensional launch's group id; traced, from the global id, so
        the model may launch one group of it at an offset."""
        return "(get_global_id(0) / get_local_size(0))" if self.trace else "get_group_id(0)"

    # -- the accesses -----------------------------------------------------------------------
    def load(self, buf: str, index: str, dt) -> str:
        """``buf[index]``: one element of a __global (or __constant) buffer."""
        return self._element("global", buf, index, dt)

    def store(self, buf: str, index: str, dt, value: str) -> str:
        return self._element("global", buf, index, dt, value)

    def _element(self, space: str, array: str, index: str, dt, value: str | None = None) -> str:
        """One element of a buffer or a local array read (``value`` None) or
        written, through its access site."""
        kind, form = ("load", f"{array}[]") if value is None else ("store", f"{array}[] =")
        site = self._site(kind, space, array, dt, 1, form=form)
        at = f"{array}[{self._at(site, index)}]"
        return at if value is None else f"{at} = {value};"

    def vload_expr(self, dt, n: int, buf: str, index: str, shift: int = 0) -> str:
        """``vloadN(k, buf + (index))``: ``n`` elements of ``dt`` (k = shift / n)."""
        site = self._site("load", "global", buf, dt, n, shift=shift, form=f"vload{n}")
        return f"vload{n}({shift // n}, {buf} + ({self._at(site, index)}))"

    def vload(self, dt, n: int, buf: str, index: str) -> tuple[str, list[str]]:
        """The statement loading the ``n`` elements of ``dt`` at ``buf +
        index`` into ``r`` (or ``r0``, ``r1`` of n/2 each: wider than a
        builtin's vector may be), and each element's expression."""
        t = dtypes.dtype(dt).cl_scalar
        if not split_vector(dt, n):
            return (f"const {t}{n} r = {self.vload_expr(dt, n, buf, index)};",
                    [f"r.s{j:x}" for j in range(n)])
        w = n // 2
        return (f"const {t}{w} r0 = {self.vload_expr(dt, w, buf, index)}, "
                f"r1 = {self.vload_expr(dt, w, buf, index, shift=w)};",
                [f"r{j // w}.s{j % w:x}" for j in range(n)])

    def vstore(self, dt, values, buf: str, index: str) -> str:
        """A statement storing ``values`` (C expressions, one per element) as
        one vector of ``dt`` at ``buf + index``."""
        dt = dtypes.dtype(dt)
        t, n = dt.cl_scalar, len(values)
        if not split_vector(dt, n):
            site = self._site("store", "global", buf, dt, n, form=f"vstore{n}")
            return (f"vstore{n}(({t}{n})({', '.join(values)}), 0, "
                    f"{buf} + ({self._at(site, index)}));")
        w = n // 2
        first, second = (self._site("store", "global", buf, dt, w, shift=h * w,
                                    form=f"vstore{w}") for h in (0, 1))
        at = self._at(first, index)
        if self.trace:   # the second half's record, then the stores as untraced
            at = f"{at} + 0 * {self._at(second, index)}"
        return (f"{{ __global {t} *const clayout_at = {buf} + ({at}); "
                f"vstore{w}(({t}{w})({', '.join(values[:w])}), 0, clayout_at); "
                f"vstore{w}(({t}{w})({', '.join(values[w:])}), 1, clayout_at); }}")

    def read_image(self, image, function: str, name: str, sampler: str, coords) -> str:
        """The read_image* call of pixel ``coords`` of the ImageDesc ``image``."""
        site = self._site("load", "image", name, image.dtype, image.lanes, pixel=True,
                          form=function)
        return images.read(image, function, name, sampler, coords,
                           wrap=lambda c: self._pixel(site, image, c))

    def write_image(self, image, function: str, name: str, coords, value: str) -> str:
        """The write_image* statement of ``value`` at pixel ``coords``."""
        site = self._site("store", "image", name, image.dtype, image.lanes, pixel=True,
                          form=function)
        at = self._pixel(site, image, images.coord(image, coords))
        return f"{function}({name}, {at}, {value});"

    def local_load(self, array: str, slot: str, dt) -> str:
        return self._element("local", array, slot, dt)

    def local_store(self, array: str, slot: str, dt, value: str) -> str:
        return self._element("local", array, slot, dt, value)

    # -- the record of each ---------------------------------------------------------------
    def _site(self, kind, space, name, dt, count, shift=0, pixel=False, form="") -> Site:
        dt = dtypes.dtype(dt)
        item = dt.itemsize * (count if pixel else 1)
        site = Site(len(self.sites), kind, space, name, item, 1 if pixel else count, shift,
                    item if pixel else dt.itemsize, form)
        self.sites.append(site)
        return site

    def _at(self, site: Site, index: str) -> str:
        if not self.trace:
            return index
        return f"clayout_trace({LOG}, {site.id}u, {index})"

    def _pixel(self, site: Site, image, coord: str) -> str:
        if not self.trace:
            return coord
        return f"clayout_trace_px{_coord_width(image)}({LOG}, {site.id}u, {coord})"


def _coord_width(image) -> int:
    """1, 2 or 4: the int vector a coordinate of ``image`` is (images.coord)."""
    return {1: 1, 2: 2}.get(image.storage.ndim, 4)


def unpack_pixel(at: int) -> tuple[int, int, int]:
    """(x, y, z) of an image record's index (``clayout_pixel``)."""
    mask = (1 << PIXEL_BITS) - 1
    return at & mask, (at >> PIXEL_BITS) & mask, at >> (2 * PIXEL_BITS)
