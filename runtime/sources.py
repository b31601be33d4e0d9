"""The files kernels are rendered from, read once per process: the Mako
templates (``templates/``, installed as runtime.templates) and the OpenCL C
helpers every conversion and accessor shares (``cl_kernels/convert.cl``)."""
from __future__ import annotations

from importlib import resources

from mako.template import Template

from .cache import memoized


@memoized("kernel templates", "CLAYOUT_TEMPLATE_CACHE", 64)
def template(name: str) -> Template:
    """The Mako template ``name`` (e.g. "convert.cl.mako"); an undefined name
    in a render is an error, not an empty string."""
    text = resources.files("runtime.templates").joinpath(name).read_text()
    return Template(text, strict_undefined=True)


@memoized("OpenCL C helpers", "CLAYOUT_HELPERS_CACHE", 1)
def helpers() -> str:
    """The shared OpenCL C helpers (dtype conversions, magic division)."""
    return resources.files("runtime.cl_kernels").joinpath("convert.cl").read_text()
