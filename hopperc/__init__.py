"""hopperc: a compiler for NVIDIA Hopper kernels that writes all the synchronization."""
__version__ = "0.1.0"
