"""Mutation testing of `hopperc check` (see engine.py)."""
