"""The reference engine: every element evaluated by the formulas, slowly and
independently of the fast paths (engine.py: the buffer walk; formulas.py:
each named layout's own pixel formula)."""
