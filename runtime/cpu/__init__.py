"""The cpu engine: numpy (engine.py), each reorder planned once (plan.py, with
the method of each box pair chosen in methods.py) and run over a shared pool
(copy.py, rows.py, blocked.py), cut to the cache sizes of geometry.py."""
