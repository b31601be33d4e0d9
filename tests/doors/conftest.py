"""Tests of the public doors (runtime/api.py, runtime/doors/parse.py,
runtime/doors/calls.py, runtime/memory.py, runtime/doors/read_output.py): what each call
converts on every engine, and every refusal of bad input with the words it
says."""
