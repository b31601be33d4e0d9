"""Tests of the OpenCL engine (runtime/opencl/): kernels and their
families, storages, accessors, the device record and its memory, images
over host memory. They run on every OpenCL implementation the machine has
(``cl_engine``, tests/conftest.py; PoCL and Intel's CPU runtime in CI) and,
where the kernels are the subject, under oclgrind (``run_under_oclgrind``)."""
