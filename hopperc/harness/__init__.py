"""GPU checks and benchmarks of whole kernels (`hopperc run`, `hopperc bench`):
random inputs, the reference, the cuBLAS baseline. Needs PyTorch."""
