"""The OpenCL engine: kernels rendered from templates/convert.cl.mako (see
kernels.py), built and cached per context (programs.py), run by engine.py."""
