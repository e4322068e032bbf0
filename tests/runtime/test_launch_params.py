"""The parameter array and launch configuration handed to cuLaunchKernelEx."""
import ctypes

import pytest
from cuda.bindings import driver

from hopperc.runtime import GpuUnavailable, gpu_available
from hopperc.runtime.binding import bind
from hopperc.runtime.kernel import launch_config, stream_handle
from hopperc.runtime.params import pack
from hopperc.runtime.spec import LaunchSpec
from tests.runtime.helpers import SCALED_COPY, CudaArray, bf16, sample_spec, text_spec


def read(address: int, ctype):
    return ctype.from_address(address).value


def test_parameters_in_kernel_order():
    # scale_rows(tmap_X, S, tmap_Y, M, N): map, pointer, map, int, int.
    spec = sample_spec("scale_rows")
    call = bind(spec, (bf16((100, 64), 0x10000), CudaArray((100,), "<f4", 0x20000),
                       bf16((100, 64), 0x30000)), {})
    maps = {"tmap_X": bytes(range(128)), "tmap_Y": bytes(range(128, 256))}
    params = pack(spec, call, maps)
    pointers = [params.pointers[i] for i in range(5)]
    assert ctypes.string_at(pointers[0], 128) == maps["tmap_X"]
    assert read(pointers[1], ctypes.c_uint64) == 0x20000
    assert ctypes.string_at(pointers[2], 128) == maps["tmap_Y"]
    assert (read(pointers[3], ctypes.c_int32), read(pointers[4], ctypes.c_int32)) == (100, 64)
    assert params.address == ctypes.addressof(params.pointers)


def test_scalar_parameters_are_32_bit():
    spec = text_spec(SCALED_COPY)
    call = bind(spec, (bf16((64, 64)), bf16((64, 64)), 0.5, -7), {})
    params = pack(spec, call, {"tmap_X": bytes(128), "tmap_Y": bytes(128)})
    assert read(params.pointers[4], ctypes.c_float) == 0.5
    assert read(params.pointers[5], ctypes.c_int32) == -7


def test_launch_config_without_cluster():
    spec = sample_spec("gemm_bf16")
    config = launch_config(spec, (8, 2, 1), stream_handle(None))
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (8, 2, 1)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ) == (384, 1, 1)
    assert config.sharedMemBytes == spec.dynamic_shared_bytes
    assert config.numAttrs == 0 and int(config.hStream) == 0


def test_launch_config_with_cluster():
    spec = LaunchSpec(**{**sample_spec("tma_copy").__dict__, "cluster": (2, 1, 1)})
    config = launch_config(spec, (4, 2, 1), stream_handle(7))
    assert config.numAttrs == 1
    attr = config.attrs[0]
    assert attr.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z) == (2, 1, 1)
    assert int(config.hStream) == 7


def test_grid_must_be_whole_clusters():
    spec = LaunchSpec(**{**sample_spec("tma_copy").__dict__, "cluster": (2, 1, 1)})
    with pytest.raises(ValueError, match="grid x extent 3 is not a multiple of the cluster's 2"):
        bind(spec, (bf16((192, 64)), bf16((192, 64))), {})


class TorchLikeStream:
    cuda_stream = 0x55


class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x66)


@pytest.mark.parametrize("stream, handle", [
    (None, 0), (0x44, 0x44), (TorchLikeStream(), 0x55), (ProtocolStream(), 0x66),
    (driver.CUstream(0x77), 0x77)])
def test_streams(stream, handle):
    assert int(stream_handle(stream)) == handle


def test_stream_of_another_kind():
    with pytest.raises(TypeError, match="stream: expected"):
        stream_handle("default")


@pytest.mark.skipif(gpu_available(), reason="checks the no-driver path")
def test_launch_reaches_the_driver_with_well_typed_arguments():
    from hopperc.runtime import driver_api
    spec = sample_spec("gemm_bf16")
    call = bind(spec, (bf16((256, 64)), bf16((256, 64)), bf16((256, 256))), {})
    params = pack(spec, call, {m.param: bytes(128) for m in spec.tensor_maps})
    config = launch_config(spec, call.grid, stream_handle(None))
    with pytest.raises(GpuUnavailable, match="no CUDA driver"):
        driver_api.call(driver.cuLaunchKernelEx, config, driver.CUfunction(), params.address, 0)
