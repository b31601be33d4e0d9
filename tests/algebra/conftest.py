"""Tests of the layout algebra (runtime/algebra/): descs and tags, dtypes,
storages, image layouts and their formulas, peers' layouts, frame sampling.
Engine-free where they can be; where a test also converts, it does so on
every engine through the suite's fixtures (tests/conftest.py: cl_engine,
to_img, from_img)."""
