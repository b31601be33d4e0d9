"""Checks across the whole house: every engine against the reference
(cpu, OpenCL, the edge sweep, the random differential check), threads
against a single-threaded run, oclgrind, the docs' and README's blocks
executed, the house rules, each module importing alone, the caches, the
packaging and the module table of tests/README.md."""
