"""A loaded kernel: its cubin in the device's primary context, called with
tensors like a Python function."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from cuda.bindings import driver

from hopperc.runtime import driver_api
from hopperc.runtime.binding import BoundCall, bind, check_pointer_tensor
from hopperc.runtime.errors import GpuUnavailable, MetadataError
from hopperc.runtime.params import ParamBuffer, pack
from hopperc.runtime.spec import LaunchSpec, parse_spec, read_spec
from hopperc.runtime.tensor_maps import encode, tensor_map_args

SUPPORTED_ARCHS = ("sm_90a",)


def load(cubin: str | Path, metadata: str | Path | None = None, device: int = 0) -> "Kernel":
    """Load NAME.cubin built by `hopperc build`, with NAME.json beside it."""
    image, spec = read_pair(Path(cubin), Path(metadata or Path(cubin).with_suffix(".json")))
    return Kernel(image, spec, device)


def read_pair(cubin: Path, metadata: Path) -> tuple[bytes, LaunchSpec]:
    """The cubin and its launch metadata, both of one build: `hopperc build`
    renames the pair into place under an exclusive lock of their directory, and
    they are read under a shared one (a pair read while a build replaced it
    would be refused as apart)."""
    with _shared_lock(cubin.parent):
        try:
            image = cubin.read_bytes()
        except OSError as exc:
            raise MetadataError(f"{cubin}: cannot read the cubin ({exc.strerror})") from None
        spec = read_spec(metadata)
        check_pair(image, cubin, metadata)
    return image, spec


@contextmanager
def _shared_lock(directory: Path):
    """A shared advisory lock on `directory` (one only: nothing waits while
    holding it). One that cannot be taken (a missing directory, a file system
    without locks) is done without, as before builds locked."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        fd = None
    try:
        if fd is not None:
            with suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing releases the lock


def check_pair(image: bytes, cubin: Path, metadata: Path) -> None:
    """Refuse metadata whose `cubin_sha256` names another cubin than `image`: a
    build killed between its renames (or a copy of one file) left them apart,
    and launching with another kernel's parameters would misread its memory.
    Metadata without the field (written by hand, or by an older hopperc) is
    taken as it is."""
    try:
        expected = json.loads(metadata.read_bytes()).get("cubin_sha256")
    except (OSError, ValueError, AttributeError):
        return  # replaced since read_spec read it: nothing to compare
    actual = hashlib.sha256(image).hexdigest()
    if isinstance(expected, str) and expected != actual:
        raise MetadataError(
            f"{metadata} describes another cubin than {cubin} (its cubin_sha256 is "
            f"{expected[:16]}..., the cubin's {actual[:16]}...): a build was interrupted or "
            f"one of the two files was replaced; rebuild with `hopperc build`")


def stream_handle(stream: Any) -> driver.CUstream:
    """A CUstream from None (the legacy default stream), an int handle, a
    CUstream, a PyTorch stream (`cuda_stream`) or a `__cuda_stream__` object."""
    if stream is None:
        return driver.CUstream(0)
    if isinstance(stream, driver.CUstream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return driver.CUstream(int(stream.__cuda_stream__()[1]))
    if hasattr(stream, "cuda_stream"):
        return driver.CUstream(int(stream.cuda_stream))
    if isinstance(stream, int) and not isinstance(stream, bool):
        return driver.CUstream(stream)
    raise TypeError(f"stream: expected None, an int handle or a CUDA stream object, got "
                    f"{type(stream).__name__}")


def launch_config(spec: LaunchSpec, grid: tuple[int, int, int],
                  stream: driver.CUstream) -> driver.CUlaunchConfig:
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = spec.block
    config.sharedMemBytes = spec.dynamic_shared_bytes
    config.hStream = stream
    if spec.cluster != (1, 1, 1):
        cluster = driver.CUlaunchAttribute()
        cluster.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        dim = cluster.value.clusterDim
        dim.x, dim.y, dim.z = spec.cluster
        config.attrs = [cluster]
    config.numAttrs = int(spec.cluster != (1, 1, 1))
    return config


def prepare(spec: LaunchSpec, call: BoundCall) -> ParamBuffer:
    """Check the layout of every tensor, encode the tensor maps, pack the parameters."""
    for p in spec.params:
        if p.kind == "pointer":
            check_pointer_tensor(call.tensors[p.tensor], p.tensor)
    args = {m.param: tensor_map_args(m, call.tensors[m.tensor]) for m in spec.tensor_maps}
    return pack(spec, call, {param: encode(a) for param, a in args.items()})


class Kernel:
    """`kernel(A, B, C, stream=None)`: tensors then scalars in signature order,
    or by name; runtime dimensions come from the tensors (or by name, for raw
    pointers). Launches asynchronously on `stream`."""

    def __init__(self, cubin: bytes, spec: LaunchSpec | dict, device: int = 0):
        self.spec = spec if isinstance(spec, LaunchSpec) else parse_spec(spec)
        if self.spec.arch not in SUPPORTED_ARCHS:
            raise MetadataError(f"{self.spec.kernel}: built for {self.spec.arch}; this runtime "
                                f"launches {', '.join(SUPPORTED_ARCHS)}")
        self.device = driver_api.device(device)
        if self.spec.dynamic_shared_bytes > self.device.max_shared_bytes:
            raise GpuUnavailable(f"{self.spec.kernel} needs {self.spec.dynamic_shared_bytes} "
                                 f"bytes of shared memory per block; {self.device.name} has "
                                 f"{self.device.max_shared_bytes}")
        driver_api.make_current(device)
        self._module = driver_api.call(driver.cuModuleLoadData, cubin)
        self.function = driver_api.call(driver.cuModuleGetFunction, self._module,
                                         self.spec.symbol.encode())
        driver_api.call(driver.cuFuncSetAttribute, self.function,
                        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        self.spec.dynamic_shared_bytes)

    @property
    def name(self) -> str:
        return self.spec.kernel

    def bind(self, *args, **kwargs) -> BoundCall:
        """Check a call's arguments without launching."""
        return bind(self.spec, args, kwargs, self.device.ordinal)

    def prepare(self, *args, stream: Any = None, **kwargs) -> "Launch":
        """Check the arguments and encode everything once; the result launches
        the same call each time it is called (for benchmarks)."""
        call = self.bind(*args, **kwargs)
        params = None if call.empty else prepare(self.spec, call)
        return Launch(self, call.grid, params,
                      launch_config(self.spec, call.grid, stream_handle(stream)))

    def __call__(self, *args, stream: Any = None, **kwargs) -> None:
        self.prepare(*args, stream=stream, **kwargs)()

    def __repr__(self) -> str:
        return f"<hopperc.runtime.Kernel {self.name} on GPU {self.device.ordinal}>"


class Launch:
    """One prepared call of a kernel; the tensors must stay alive while it is used."""

    def __init__(self, kernel: Kernel, grid: tuple[int, int, int], params: ParamBuffer | None,
                 config: driver.CUlaunchConfig):
        self.kernel = kernel
        self.grid = grid
        self.params = params
        self.config = config

    def __call__(self) -> None:
        if self.params is None:  # an empty grid: nothing to compute
            return
        driver_api.make_current(self.kernel.device.ordinal)
        driver_api.call(driver.cuLaunchKernelEx, self.config, self.kernel.function,
                        self.params.address, 0)
