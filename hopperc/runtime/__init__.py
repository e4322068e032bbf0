"""Load hopperc cubins and launch them on a Hopper GPU through the CUDA driver
API (cuda-python). Needs no PyTorch; takes PyTorch tensors, any object with
`__cuda_array_interface__` or `__dlpack__`, and raw device pointers."""
from hopperc.runtime.arrays import DeviceTensor
from hopperc.runtime.driver_api import device, driver_version, gpu_available
from hopperc.runtime.errors import ArgumentError, CudaError, GpuUnavailable, MetadataError
from hopperc.runtime.kernel import Kernel, load
from hopperc.runtime.spec import LaunchSpec, parse_spec, read_spec

__all__ = [
    "ArgumentError", "CudaError", "DeviceTensor", "GpuUnavailable", "Kernel", "LaunchSpec",
    "MetadataError", "device", "driver_version", "gpu_available", "load", "parse_spec",
    "read_spec",
]
