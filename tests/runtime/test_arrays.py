"""Reading arguments through each interchange protocol without importing the
library they come from."""
import numpy as np
import pytest

from hopperc.ir.dtypes import DType
from hopperc.runtime import ArgumentError
from hopperc.runtime.arrays import device_tensor, read_dlpack
from tests.runtime.helpers import CudaArray, bf16


def test_cuda_array_interface_dense():
    t = device_tensor(CudaArray((3, 8), "<f4", 0x1000), "S", DType.F32, None)
    assert (t.address, t.shape, t.strides, t.itemsize, t.dtype) == (
        0x1000, (3, 8), (8, 1), 4, DType.F32)


def test_cuda_array_interface_byte_strides_become_element_strides():
    # A transposed f16[8, 3] view: 2-byte elements, byte strides (2, 16).
    t = device_tensor(CudaArray((8, 3), "<f2", strides=(2, 16)), "X", DType.F16, None)
    assert (t.strides, t.dtype) == ((1, 8), DType.F16)


def test_bf16_has_no_type_string_and_travels_as_raw_bytes():
    t = device_tensor(bf16((4, 4)), "A", DType.BF16, None)
    assert (t.dtype, t.itemsize, t.describe_dtype()) == (None, 2, "2-byte elements")


def test_unsupported_type_string():
    with pytest.raises(ArgumentError, match="A: element type '<c8'"):
        device_tensor(CudaArray((4,), "<c8"), "A", DType.F32, None)


def test_dlpack_of_a_cpu_array_is_read_and_refused():
    host = np.zeros((6, 10), dtype=np.float32)[:, ::2]  # strided view: strides (10, 2)
    device_type, t = read_dlpack(host, "X")
    assert device_type == 1  # kDLCPU
    assert (t.shape, t.strides, t.itemsize, t.dtype) == ((6, 5), (10, 2), 4, DType.F32)
    assert t.address == host.ctypes.data
    with pytest.raises(ArgumentError, match="X: the DLPack tensor is on device type 1, not CUDA"):
        device_tensor(host, "X", DType.F32, None)


def test_dlpack_integer_and_half_types():
    assert read_dlpack(np.zeros(3, np.int32), "I")[1].dtype is DType.I32
    assert read_dlpack(np.zeros(3, np.float16), "H")[1].dtype is DType.F16


def test_raw_pointer_takes_the_kernel_dtype_and_a_row_major_shape():
    t = device_tensor(0x2000, "C", DType.BF16, (4, 6))
    assert (t.address, t.shape, t.strides, t.itemsize, t.dtype) == (
        0x2000, (4, 6), (6, 1), 2, DType.BF16)


def test_raw_pointer_without_dimensions():
    with pytest.raises(ArgumentError, match="needs the dimensions of C"):
        device_tensor(0x2000, "C", DType.BF16, None)


@pytest.mark.parametrize("value, kind", [(True, "bool"), ([1, 2], "list"), (2.5, "float")])
def test_other_values_are_refused_by_name(value, kind):
    with pytest.raises(ArgumentError, match=f"A: expected .* got (a )?{kind}"):
        device_tensor(value, "A", DType.BF16, None)
