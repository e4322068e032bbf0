"""The CUDA driver, through cuda-python's bindings: one place that turns driver
results into exceptions and finds the device.

`cuda.bindings.driver` imports without a GPU; the driver library itself is
loaded on the first call, which raises cuda-pathfinder's DynamicLibNotFoundError
(a RuntimeError, not a CUresult) on a machine without one (TOOLCHAIN.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from cuda.bindings import driver
from cuda.pathfinder import DynamicLibNotFoundError

from hopperc.runtime.errors import CudaError, GpuUnavailable

# The cubins hopperc builds are sm_90a: they run on compute capability 9.0 only.
REQUIRED_CAPABILITY = (9, 0)


def call(function, *args):
    """Call a driver function; raise CudaError unless it returns CUDA_SUCCESS.
    Returns the results after the status (one value, a tuple, or None)."""
    try:
        status, *results = function(*args)
    except DynamicLibNotFoundError as exc:
        raise GpuUnavailable(f"no CUDA driver on this machine ({exc})") from None
    if status != driver.CUresult.CUDA_SUCCESS:
        raise CudaError(function.__name__, *_describe(status))
    if not results:
        return None
    return results[0] if len(results) == 1 else tuple(results)


def _describe(status) -> tuple[str, str]:
    err, name = driver.cuGetErrorName(status)
    err2, text = driver.cuGetErrorString(status)
    return (name.decode() if err == driver.CUresult.CUDA_SUCCESS else str(status),
            text.decode() if err2 == driver.CUresult.CUDA_SUCCESS else "no description")


@dataclass(frozen=True)
class Device:
    ordinal: int
    name: str
    capability: tuple[int, int]
    max_shared_bytes: int  # per block, with the opt-in attribute set
    sm_count: int


@lru_cache(maxsize=None)
def device(ordinal: int = 0) -> Device:
    """Initialize the driver, check the GPU, and make its primary context current
    (the context PyTorch and the CUDA runtime use, so their pointers are valid)."""
    call(driver.cuInit, 0)
    count = call(driver.cuDeviceGetCount)
    if count == 0:
        raise GpuUnavailable("the CUDA driver sees no GPU")
    if not 0 <= ordinal < count:
        raise GpuUnavailable(f"no GPU {ordinal}: the driver sees {count}")
    dev = call(driver.cuDeviceGet, ordinal)
    attr = driver.CUdevice_attribute
    capability = (call(driver.cuDeviceGetAttribute,
                       attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                  call(driver.cuDeviceGetAttribute,
                       attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    name = call(driver.cuDeviceGetName, 256, dev).split(b"\0", 1)[0].decode()
    if capability != REQUIRED_CAPABILITY:
        raise GpuUnavailable(f"GPU {ordinal} is {name} (sm_{capability[0]}{capability[1]}); "
                             "hopperc kernels are built for sm_90a (H100, H200)")
    make_current(ordinal)
    return Device(ordinal, name, capability,
                  call(driver.cuDeviceGetAttribute,
                       attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
                  call(driver.cuDeviceGetAttribute,
                       attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))


def gpu_available(ordinal: int = 0) -> bool:
    """Whether a Hopper GPU and its driver are usable (for skipping GPU tests)."""
    try:
        device(ordinal)
    except (GpuUnavailable, CudaError):
        return False
    return True


def driver_version() -> str:
    version = call(driver.cuDriverGetVersion)
    return f"{version // 1000}.{version % 1000 // 10}"


def make_current(ordinal: int) -> None:
    """Make the device's primary context current in the calling thread."""
    dev = call(driver.cuDeviceGet, ordinal)
    call(driver.cuCtxSetCurrent, call(driver.cuDevicePrimaryCtxRetain, dev))
