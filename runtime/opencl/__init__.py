"""The OpenCL engine: kernels planned by kernels.py and rendered from
templates/convert.cl.mako by render.py, built and cached per context
(programs.py), run by engine.py."""
