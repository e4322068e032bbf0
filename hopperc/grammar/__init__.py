"""The .hk grammar, shipped as package data (hopperc.grammar)."""
