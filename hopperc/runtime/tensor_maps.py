"""TMA tensor maps: the arguments of cuTensorMapEncodeTiled from the kernel's
metadata and the actual tensor, checked against the rules the driver enforces
(so a bad tensor is a clear error, not CUDA_ERROR_INVALID_VALUE), then encoded.

TMA orders dimensions innermost first; the innermost one must be contiguous
(its stride is the element size and cannot be given), every other stride is
in bytes, a multiple of 16 and below 2^40 (`launch_rules`, which `bind` checks
for the shape first), and the base address is 16-byte aligned. A ragged
copy's map describes the overlapping view of `ragged_view` instead (two more
dimensions, the clipped one's extent 2^30).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from cuda.bindings import driver

from hopperc.runtime import driver_api, ragged_view
from hopperc.runtime.arrays import DeviceTensor
from hopperc.runtime.errors import ArgumentError
from hopperc.runtime.launch_rules import TMA_ALIGNMENT, extent_problem, stride_problem
from hopperc.runtime.spec import TensorMapSpec

TENSOR_MAP_BYTES = 128


@dataclass(frozen=True)
class TensorMapArgs:
    """cuTensorMapEncodeTiled's arguments, arrays innermost first."""

    data_type: str
    rank: int
    global_address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, for dimensions 1 .. rank-1
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str


def tensor_map_args(spec: TensorMapSpec, tensor: DeviceTensor) -> TensorMapArgs:
    name = spec.tensor
    rank = len(spec.box) - (0 if spec.ragged is None else ragged_view.EXTRA_DIMS)
    if len(tensor.shape) != rank:
        raise ArgumentError(f"{name}: the kernel reads it as a {rank}-d tensor, got "
                            f"{len(tensor.shape)}-d")
    size = tensor.itemsize
    if tensor.strides[-1] != 1 and tensor.shape[-1] > 1:
        raise ArgumentError(f"{name}: the innermost dimension must be contiguous for TMA "
                            f"(its stride is {tensor.strides[-1]} elements); pass a "
                            ".contiguous() copy")
    if tensor.address % TMA_ALIGNMENT:
        raise ArgumentError(f"{name}: its address {tensor.address:#x} is not {TMA_ALIGNMENT}-byte "
                            "aligned, as TMA needs")
    for axis, extent in enumerate(tensor.shape):
        problem = extent_problem(name, axis, extent)
        if problem:
            raise ArgumentError(problem)
    strides = []
    for axis in range(rank - 2, -1, -1):
        stride = tensor.strides[axis] * size
        inner = tensor.shape[axis + 1]
        dense = tensor.strides[axis] == inner * tensor.strides[axis + 1]
        problem = stride_problem(name, axis, stride, size, inner if dense else None)
        if problem:
            raise ArgumentError(problem)
        strides.append(stride)
    global_dim = tuple(reversed(tensor.shape))
    if spec.ragged is not None:
        shape = tuple(tensor.shape)
        outer_strides = tuple(s * size for s in tensor.strides)
        problem = ragged_view.view_problem(name, shape, outer_strides, spec.ragged)
        if problem:
            raise ArgumentError(problem)
        global_dim = tuple(reversed(ragged_view.view_dims(shape, spec.ragged)))
        strides = list(reversed(ragged_view.view_strides(outer_strides, spec.ragged)[:-1]))
    return TensorMapArgs(
        data_type=spec.data_type, rank=len(global_dim), global_address=tensor.address,
        global_dim=global_dim, global_strides=tuple(strides),
        box_dim=spec.box, element_strides=spec.element_strides, interleave=spec.interleave,
        swizzle=spec.swizzle, l2_promotion=spec.l2_promotion, oob_fill=spec.oob_fill)


def encode(args: TensorMapArgs) -> bytes:
    """The 128-byte CUtensorMap, as the kernel parameter takes it."""
    encoded = driver_api.call(
        driver.cuTensorMapEncodeTiled,
        getattr(driver.CUtensorMapDataType, args.data_type), args.rank, args.global_address,
        [driver.cuuint64_t(d) for d in args.global_dim],
        [driver.cuuint64_t(s) for s in args.global_strides],
        [driver.cuuint32_t(b) for b in args.box_dim],
        [driver.cuuint32_t(e) for e in args.element_strides],
        getattr(driver.CUtensorMapInterleave, args.interleave),
        getattr(driver.CUtensorMapSwizzle, args.swizzle),
        getattr(driver.CUtensorMapL2promotion, args.l2_promotion),
        getattr(driver.CUtensorMapFloatOOBfill, args.oob_fill))
    return ctypes.string_at(encoded.getPtr(), TENSOR_MAP_BYTES)
