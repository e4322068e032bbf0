"""Kernel arguments as device memory: PyTorch tensors, any object with
`__cuda_array_interface__` or `__dlpack__`, and raw device pointers, all read
into one `DeviceTensor` without importing the library they come from."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from hopperc.ir.dtypes import DType
from hopperc.runtime.errors import ArgumentError

_TORCH_DTYPES = {
    "torch.bfloat16": DType.BF16, "torch.float16": DType.F16, "torch.float32": DType.F32,
    "torch.int32": DType.I32, "torch.float8_e4m3fn": DType.E4M3,
    "torch.float8_e5m2": DType.E5M2,
}
# __cuda_array_interface__ type strings (numpy's); bf16 has none of its own.
_TYPESTRS = {"<f2": DType.F16, "<f4": DType.F32, "<i4": DType.I32}
# DLPack (type code, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4.
_DLPACK_DTYPES = {(2, 16): DType.F16, (2, 32): DType.F32, (0, 32): DType.I32,
                  (4, 16): DType.BF16}
DLPACK_CUDA = 2  # kDLCUDA; kDLCPU is 1


@dataclass(frozen=True)
class DeviceTensor:
    """A strided array in device memory. `dtype` is None for raw bytes whose
    element type the source does not say (uint8 for fp8, say)."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    itemsize: int
    dtype: DType | None
    device: int | None  # the GPU ordinal, where the source says
    source: str  # what it came from, for messages

    def describe_dtype(self) -> str:
        return self.dtype.text if self.dtype else f"{self.itemsize}-byte elements"


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def device_tensor(value, name: str, dtype: DType, shape: tuple[int, ...] | None) -> DeviceTensor:
    """Read `value` as tensor `name` of the kernel. A raw pointer (int) takes
    the kernel's dtype and `shape` (row-major; None when unknown); a
    DeviceTensor describes strided memory at a raw pointer."""
    if isinstance(value, DeviceTensor):
        return value
    if isinstance(value, bool):
        raise ArgumentError(f"{name}: expected a tensor or a device pointer, got a bool")
    if isinstance(value, int):
        if shape is None:
            raise ArgumentError(f"{name}: a raw pointer needs the dimensions of {name} given "
                                "as keyword arguments")
        return DeviceTensor(value, shape, contiguous_strides(shape), dtype.nbytes, dtype, None,
                            "pointer")
    if _is_torch(value):
        return _from_torch(value, name)
    if hasattr(value, "__cuda_array_interface__"):
        return _from_cuda_array_interface(value.__cuda_array_interface__, name)
    if hasattr(value, "__dlpack__"):
        return _from_dlpack(value, name)
    raise ArgumentError(f"{name}: expected a CUDA tensor (PyTorch, __cuda_array_interface__ "
                        f"or DLPack) or a device pointer, got {type(value).__name__}")


def _is_torch(value) -> bool:
    return all(hasattr(value, a) for a in ("data_ptr", "stride", "element_size", "is_cuda"))


def _from_torch(t, name: str) -> DeviceTensor:
    if not t.is_cuda:
        raise ArgumentError(f"{name}: the tensor is on {t.device}, not a CUDA device")
    dtype = _TORCH_DTYPES.get(str(t.dtype))
    if dtype is None and t.element_size() != 1:
        raise ArgumentError(f"{name}: {t.dtype} is not an element type hopperc kernels take")
    return DeviceTensor(t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.element_size(),
                        dtype, t.device.index, "torch")


def _from_cuda_array_interface(cai: dict, name: str) -> DeviceTensor:
    shape = tuple(int(d) for d in cai["shape"])
    typestr = cai["typestr"]
    itemsize = int(typestr[2:])
    if typestr[1] not in "fiuV" or itemsize not in (1, 2, 4):
        raise ArgumentError(f"{name}: element type {typestr!r} is not one hopperc kernels take")
    strides = cai.get("strides")
    if strides is None:
        elements = contiguous_strides(shape)
    else:
        if any(s % itemsize for s in strides):
            raise ArgumentError(f"{name}: byte strides {tuple(strides)} are not whole elements")
        elements = tuple(int(s) // itemsize for s in strides)
    return DeviceTensor(int(cai["data"][0]), shape, elements, itemsize, _TYPESTRS.get(typestr),
                        None, "__cuda_array_interface__")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(value, name: str) -> DeviceTensor:
    device_type, tensor = read_dlpack(value, name)
    if device_type != DLPACK_CUDA:
        raise ArgumentError(f"{name}: the DLPack tensor is on device type {device_type}, "
                            f"not CUDA ({DLPACK_CUDA})")
    return tensor


def read_dlpack(value, name: str) -> tuple[int, DeviceTensor]:
    """The DLPack device type and the tensor of `value.__dlpack__()`, an
    unversioned `dltensor` capsule (it opens with the DLTensor). The capsule is
    not consumed: it frees its tensor when collected, and `value` keeps the
    memory alive for the call."""
    capsule = value.__dlpack__()
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = (contiguous_strides(shape) if not tensor.strides else
               tuple(tensor.strides[i] for i in range(tensor.ndim)))
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if lanes != 1 or bits not in (8, 16, 32):
        raise ArgumentError(f"{name}: DLPack type (code {code}, {bits} bits, {lanes} lanes) is "
                            "not one hopperc kernels take")
    return tensor.device.device_type, DeviceTensor(
        (tensor.data or 0) + tensor.byte_offset, shape, strides, bits // 8,
        _DLPACK_DTYPES.get((code, bits)), tensor.device.device_id, "DLPack")
