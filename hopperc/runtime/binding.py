"""A kernel call's arguments, matched to the kernel: tensors, runtime
dimensions, scalars, then the grid. Everything is checked before anything is
encoded or launched, with the tensor's name in every message."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from hopperc.runtime import driver_api
from hopperc.runtime.arrays import DeviceTensor, contiguous_strides, device_tensor
from hopperc.runtime.errors import ArgumentError
from hopperc.runtime.launch_rules import INT_MAX, GridShape, TensorShape, illegal_shape
from hopperc.runtime.spec import LaunchSpec, TensorSpec


@dataclass(frozen=True)
class BoundCall:
    tensors: dict[str, DeviceTensor]
    dims: dict[str, int]
    scalars: dict[str, float | int]
    grid: tuple[int, int, int]

    @property
    def empty(self) -> bool:
        return 0 in self.grid


def bind(spec: LaunchSpec, args: Sequence[Any], kwargs: Mapping[str, Any],
         device: int | None = None) -> BoundCall:
    """Match positional arguments (tensors, then scalars, in signature order)
    and keyword arguments (tensors, scalars, dimensions) to `spec`."""
    order = [t.name for t in spec.tensors] + [s.name for s in spec.scalars]
    if len(args) > len(order):
        raise ArgumentError(f"{spec.kernel} takes {len(order)} positional arguments "
                            f"({', '.join(order)}), got {len(args)}")
    given = dict(zip(order, args))
    for key, value in kwargs.items():
        if key not in order and key not in spec.dim_names:
            known = ", ".join(order + list(spec.dim_names))
            raise ArgumentError(f"{spec.kernel} has no argument {key!r} (it takes {known})")
        if key in given:
            raise ArgumentError(f"{spec.kernel}: {key} given twice")
        given[key] = value
    missing = [name for name in order if name not in given]
    if missing:
        raise ArgumentError(f"{spec.kernel}: missing {', '.join(missing)}")

    dims = {name: _dim(name, given[name]) for name in spec.dim_names if name in given}
    tensors: dict[str, DeviceTensor] = {}
    pointers = [t for t in spec.tensors if isinstance(given[t.name], int)
                and not isinstance(given[t.name], bool)]
    for t in spec.tensors:
        if t not in pointers:
            tensors[t.name] = _tensor(t, device_tensor(given[t.name], t.name, t.dtype, None),
                                      dims, device)
    for t in pointers:
        unknown = [d for d in t.dims if isinstance(d, str) and d not in dims]
        if unknown:
            raise ArgumentError(f"{t.name}: a raw pointer needs {', '.join(unknown)} given as "
                                "keyword arguments")
        shape = tuple(dims[d] if isinstance(d, str) else d for d in t.dims)
        tensors[t.name] = device_tensor(given[t.name], t.name, t.dtype, shape)
    absent = [d for d in spec.dim_names if d not in dims]
    if absent:
        raise ArgumentError(f"{spec.kernel}: no tensor gives {', '.join(absent)}; pass it as a "
                            "keyword argument")
    scalars = {s.name: _scalar(s.name, s.ctype, given[s.name]) for s in spec.scalars}
    # a persistent kernel takes one block per SM of the device it runs on
    sms = driver_api.device(device).sm_count if spec.persistent and device is not None else None
    # A tensor with strides of its own (a view of a wider matrix) is checked on
    # them when its tensor map is encoded; a dense one here, by its shape.
    dense = {name for name, t in tensors.items() if _dense(t)}
    ints = {name: value for name, value in scalars.items() if isinstance(value, int)}
    problem = illegal_shape(launch_tensors(spec, dense), launch_grid(spec), spec.cluster,
                            spec.persistent, dims, ints)
    if problem:  # a tensor's problem names it; the grid's, the kernel
        raise ArgumentError(problem.message if problem.tensor else
                            f"{spec.kernel}: {problem.message}")
    return BoundCall(tensors, dims, scalars, spec.grid_dims(dims, sms, ints))


def launch_tensors(spec: LaunchSpec, dense: set[str]) -> list[TensorShape]:
    """The kernel's tensors; those copied by TMA and laid out densely checked by shape."""
    mapped = {m.tensor for m in spec.tensor_maps} & dense
    return [TensorShape(t.name, t.dtype.nbytes, t.dims, t.name in mapped) for t in spec.tensors]


def _dense(tensor: DeviceTensor) -> bool:
    return all(got == want for got, want, extent in zip(
        tensor.strides, contiguous_strides(tensor.shape), tensor.shape) if extent > 1)


def launch_grid(spec: LaunchSpec) -> list[GridShape]:
    return [GridShape(axis, g.tiles) for axis, g in enumerate(spec.grid)]


def _dim(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT_MAX:
        raise ArgumentError(f"dimension {name} must be an integer in 0 .. {INT_MAX}, "
                            f"got {value!r}")
    return value


def _tensor(spec: TensorSpec, tensor: DeviceTensor, dims: dict[str, int],
            device: int | None) -> DeviceTensor:
    name = spec.name
    if len(tensor.shape) != len(spec.dims):
        raise ArgumentError(f"{name}: expected {len(spec.dims)} dimensions "
                            f"[{', '.join(map(str, spec.dims))}], got shape {list(tensor.shape)}")
    for axis, (want, got) in enumerate(zip(spec.dims, tensor.shape)):
        if isinstance(want, int):
            if got != want:
                raise ArgumentError(f"{name}: dimension {axis} must be {want}, got {got}")
        elif dims.setdefault(want, _dim(want, got)) != got:
            raise ArgumentError(f"{name}: dimension {axis} is {want} = {dims[want]} elsewhere, "
                                f"got {got}")
    if tensor.dtype is not None and tensor.dtype is not spec.dtype or \
            tensor.itemsize != spec.dtype.nbytes:
        raise ArgumentError(f"{name}: expected {spec.dtype.text} elements, got "
                            f"{tensor.describe_dtype()}")
    if device is not None and tensor.device is not None and tensor.device != device:
        raise ArgumentError(f"{name}: the tensor is on GPU {tensor.device}, the kernel on "
                            f"GPU {device}")
    return tensor


def _scalar(name: str, ctype: str | None, value: Any) -> float | int:
    if ctype == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentError(f"{name}: expected a number, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > INT_MAX:
        raise ArgumentError(f"{name}: expected a 32-bit integer, got {value!r}")
    return value


def check_pointer_tensor(tensor: DeviceTensor, name: str) -> None:
    """Tensors the kernel indexes through a plain pointer must be dense and
    aligned to their element size."""
    dense = contiguous_strides(tensor.shape)
    if any(got != want for got, want, extent in zip(tensor.strides, dense, tensor.shape)
           if extent > 1):
        raise ArgumentError(f"{name}: the kernel indexes it as a dense row-major array; pass a "
                            ".contiguous() copy")
    if tensor.address % tensor.itemsize:
        raise ArgumentError(f"{name}: its address {tensor.address:#x} is not aligned to its "
                            f"{tensor.itemsize}-byte elements")
