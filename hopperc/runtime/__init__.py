"""Load hopperc cubins and launch them on a Hopper GPU through the CUDA driver
API (cuda-python). Needs no PyTorch; takes PyTorch tensors, any object with
`__cuda_array_interface__` or `__dlpack__`, and raw device pointers.

The names below load on first use, so that `hopperc.runtime.launch_rules` (the
legal launch shape, which the simulator shares) imports without the driver."""
from importlib import import_module

_HOME = {
    "DeviceTensor": "arrays", "device": "driver_api", "driver_version": "driver_api",
    "gpu_available": "driver_api", "ArgumentError": "errors", "CudaError": "errors",
    "GpuUnavailable": "errors", "MetadataError": "errors", "Kernel": "kernel", "load": "kernel",
    "LaunchSpec": "spec", "parse_spec": "spec", "read_spec": "spec",
}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'hopperc.runtime' has no attribute {name!r}")
    return getattr(import_module(f"hopperc.runtime.{_HOME[name]}"), name)
