"""The CUDA C++ templates, shipped as package data (hopperc.templates)."""
