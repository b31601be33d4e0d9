"""The OpenCL engine (runtime/opencl/engine.py): kernels planned for two sides
(plan.py), rendered from templates/convert.cl.mako in steps (launch.py,
cell.py, render.py, with the dtype snippets of dtypes_c.py and the image
facts of images.py), built and cached per context (programs.py); Memory
storage on the device (storage.py), tiles (tiles.py), and the choice of device (device.py); which implementations the ICD loader sees (vendors.py)."""
from . import vendors

vendors.use()   # before anything here asks pyopencl for a platform (runtime/opencl/vendors.py)
