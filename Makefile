# clayout: set-up, demo, tests, benchmark.
#   make demo    .venv + package (+ Debian PoCL when root with apt), then the demo
#                (the bundled sample, plus PP-OCRv4 det from PyPI when reachable)
#   make test    same set-up plus oclgrind and gcc, then the test suite: the ci tier
#                (CLAYOUT_TEST_PROFILE=ci: each layout x dtype grid as a covering
#                set, 50 hypothesis examples a property), the 25 slowest tests listed
#   make test-thorough  the same with every case: the full grids and 120
#                examples a property (CLAYOUT_TEST_PROFILE=thorough)
#   make test-tiled  the ci tier with every OpenCL engine on the tiled kernel
#                family (CLAYOUT_OPENCL_TILED=1: what a GPU runs for moves that
#                transpose; CPU devices run the direct family by default)
#   make test-fast  the suite without the tests marked slow, for local work:
#                the dev tier (30 examples a property; ci where CI=true, or the
#                tier CLAYOUT_TEST_PROFILE names)
#   make bench   tools/bench.py
# The cases a tier leaves out are deselected, never skipped (tests/conftest.py).
# A second run is quick: apt runs only for missing packages and pip only when
# pyproject.toml is newer than .venv/.stamp. On x86-64 Linux the venv also gets
# Intel's OpenCL CPU runtime (clayout[intel-cpu]) beside Debian's PoCL: the
# device tests run on both (runtime/opencl/vendors.py makes the loader see it).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp
PYTEST_ARGS ?=

# PyPI's pocl-binary-distribution (pyopencl[pocl]) cannot build kernels on
# recent CPUs: OpenCL comes from Debian's packages only.
DEMO_DEBS := pocl-opencl-icd ocl-icd-libopencl1 clinfo
# the tests run the cpu engine's compiled moves (gcc builds them; its libasan and libubsan
# for the thorough tier's sanitizer sweep); users without a compiler get the numpy path;
# clang-15 (LLVM's NVPTX and AMDGCN backends) compiles the GPU plans' kernels for GPUs
TEST_DEBS := $(DEMO_DEBS) oclgrind gcc libc6-dev clang-15

# $(call debs,PACKAGES,WHAT-HAPPENS-WITHOUT-THEM): install the missing ones
# with apt when root, else say so in one line and go on. Debian's python3
# needs python3-venv for `python3 -m venv`.
define debs
	@missing=; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	case "$$(command -v $(PYTHON))" in \
	  /usr/bin/*) $(PYTHON) -c 'import ensurepip' 2>/dev/null || missing="$$missing python3-venv";; \
	esac; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "apt-get install$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	  apt-get -o DPkg::Lock::Timeout=600 install -y -qq$$missing >/dev/null; \
	else \
	  echo "clayout: not root or no apt-get, not installing$$missing: $(2)"; \
	fi
endef

.PHONY: setup setup-test deps deps-test venv demo test test-thorough test-tiled test-fast bench clean distclean

setup: deps venv
setup-test: deps-test venv

deps:
	$(call debs,$(DEMO_DEBS),without an OpenCL device clayout falls back to the CPU engine)

deps-test:
	$(call debs,$(TEST_DEBS),without an OpenCL device clayout falls back to the CPU engine; oclgrind tests are skipped; without gcc the cpu engine takes its numpy path and the compiled-path tests fail; without clang-15 the GPU compiler tests fail in CI)

venv: $(STAMP)

$(STAMP): pyproject.toml
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,model,plot,intel-cpu]'
	$(PY) -c "from runtime.opencl import vendors; print(vendors.prepare())"
	@touch $@

# The demo also converts a real export (PP-OCRv4 det, from PyPI's rapidocr-onnxruntime
# wheel) when PyPI is reachable, cached here; offline it says so and the bundled sample
# stays the demo.
CLAYOUT_CACHE ?= $(HOME)/.cache/clayout

demo: setup
	CLAYOUT_CACHE='$(CLAYOUT_CACHE)' $(PY) -m runtime demo --ppocr

# two pytest-xdist workers, each running whole test files (their OpenCL programs and PoCL
# kernel caches stay their own); TEST_WORKERS=0 runs the suite in one process
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: setup-test
	CLAYOUT_TEST_PROFILE=ci $(PY) -m pytest -q tests $(XDIST) --durations=25 $(PYTEST_ARGS)

test-thorough: setup-test
	CLAYOUT_TEST_PROFILE=thorough $(PY) -m pytest -q tests $(XDIST) --durations=25 $(PYTEST_ARGS)

test-tiled: setup-test
	CLAYOUT_OPENCL_TILED=1 CLAYOUT_TEST_PROFILE=ci $(PY) -m pytest -q tests $(PYTEST_ARGS)

test-fast: setup-test
	$(PY) -m pytest -q tests -m "not slow" $(PYTEST_ARGS)

bench: setup
	$(PY) tools/bench.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis .whl out
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
