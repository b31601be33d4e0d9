"""The files kernels are rendered from, read once per process: the Mako
templates (``templates/``, installed as runtime.templates) and the OpenCL C
helpers every conversion and accessor shares (``cl_kernels/convert.cl``);
and the plain C beside the templates that the cpu engine's library puts
before its rendered part (``text``: read when that library is rendered, once
per build)."""
from __future__ import annotations

from importlib import resources

from .cache import memoized


@memoized("kernel templates", "CLAYOUT_TEMPLATE_CACHE", 64)
def template(name: str):
    """The Mako template ``name`` (e.g. "convert.cl.mako"); an undefined name
    in a render is an error, not an empty string. Mako (and the pygments it
    loads for its tracebacks, where installed) is imported on the first
    render, not with the package: most commands render nothing."""
    from mako.template import Template
    return Template(text(name), strict_undefined=True)


def text(name: str) -> str:
    """The plain file ``name`` of the templates folder (no Mako: it is used as it is)."""
    return resources.files("runtime.templates").joinpath(name).read_text()


@memoized("OpenCL C helpers", "CLAYOUT_HELPERS_CACHE", 1)
def helpers() -> str:
    """The shared OpenCL C helpers (dtype conversions, magic division)."""
    return resources.files("runtime.cl_kernels").joinpath("convert.cl").read_text()
