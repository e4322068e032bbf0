"""Kernel parameters in the form cuLaunchKernelEx takes them: an array of
pointers, one per parameter in the kernel's order, each to the bytes of its
value (a 128-byte CUtensorMap, a device address, a 32-bit int or float)."""
from __future__ import annotations

import ctypes

from hopperc.runtime.binding import BoundCall
from hopperc.runtime.spec import LaunchSpec
from hopperc.runtime.tensor_maps import TENSOR_MAP_BYTES


class TensorMapParam(ctypes.Structure):
    """`const __grid_constant__ CUtensorMap`: 128 opaque bytes."""

    _fields_ = [("bytes", ctypes.c_uint8 * TENSOR_MAP_BYTES)]


class ParamBuffer:
    """The parameter values and the pointer array; keep it alive until the
    launch call has returned (the driver copies the values at launch)."""

    def __init__(self, values: list[ctypes._SimpleCData | ctypes.Structure]):
        self.values = values
        self.pointers = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.addressof(v) for v in values])

    @property
    def address(self) -> int:
        return ctypes.addressof(self.pointers)


def pack(spec: LaunchSpec, call: BoundCall, tensor_maps: dict[str, bytes]) -> ParamBuffer:
    """`tensor_maps` holds the encoded map of each tensor-map parameter."""
    values: list = []
    for p in spec.params:
        if p.kind == "tensor_map":
            values.append(TensorMapParam.from_buffer_copy(tensor_maps[p.name]))
        elif p.kind == "pointer":
            values.append(ctypes.c_uint64(call.tensors[p.tensor].address))
        elif p.kind == "dim":
            values.append(ctypes.c_int32(call.dims[p.name]))
        elif p.ctype == "float":
            values.append(ctypes.c_float(call.scalars[p.name]))
        else:
            values.append(ctypes.c_int32(call.scalars[p.name]))
    return ParamBuffer(values)
