"""The cpu engine (engine.py): each reorder planned once (plan.py), each box
pair made by the compiled moves where a C compiler builds them (compiled.py,
native.py) or by numpy (methods.py picks the method; copy.py, rows.py,
blocked.py run it), both on one worker pool (pool.py), cut to the machine's
caches (machine.py, geometry.py)."""
