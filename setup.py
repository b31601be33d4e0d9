# Only the package list lives here; all other metadata is in pyproject.toml.
# pyproject.toml cannot combine an automatic package search with the
# package-dir mapping of the top-level cl_kernels/ and templates/ folders,
# and a hand-written list would break whenever runtime/ gains a subpackage.
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["runtime", "runtime.*"])
    + ["runtime.cl_kernels", "runtime.templates"],
)
