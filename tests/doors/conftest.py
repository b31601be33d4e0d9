"""Tests of the public doors (runtime/api.py, runtime/call.py,
runtime/calls.py, runtime/memory.py, runtime/outputs.py): what each call
converts on every engine, and every refusal of bad input with the words it
says."""
