"""The simulation of the user's own arrays (`hopperc.simulate`, `hopperc sim
--inputs`): their shapes fix the dimensions, their values rounded to each
tensor's dtype are the inputs, and every tensor the kernel stores comes back
in its dtype, so a test compares the kernel's math with its own reference.

The simulator keeps every tensor as an f32 array holding values of the
tensor's dtype (`values.round_to`): a float array is rounded to the dtype as
the host would convert it (to f32 first, then to the nearest even value of the
dtype; fp8 saturates), an i32 tensor takes integers up to 2^24 in magnitude
(exact in f32), an i32 scalar any i32 (scalars stay Python integers); both are
checked as Python integers before any conversion. The stored tensors the user
does not pass start at zero, as `check`'s do (but for a tensor the kernel adds
into, which `check` fills with random values: pass its first values here).
"""
from __future__ import annotations

from typing import Mapping

import ml_dtypes
import numpy as np

from hopperc.diagnostics import CompileError
from hopperc.frontend.scope import did_you_mean
from hopperc.ir import nodes as ir
from hopperc.sim.problem import (Problem, check_launch, check_size, given_problem,
                                  stored_tensors)
from hopperc.sim.values import round_to

NUMPY_DTYPES = {ir.DType.F32: np.dtype(np.float32), ir.DType.BF16: np.dtype(ml_dtypes.bfloat16),
                ir.DType.F16: np.dtype(np.float16),
                ir.DType.E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
                ir.DType.E5M2: np.dtype(ml_dtypes.float8_e5m2), ir.DType.I32: np.dtype(np.int32)}
EXACT_INTEGERS = 2 ** 24  # i32 tensors live as f32 arrays: exact up to this magnitude
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
_ML_FLOATS = {np.dtype(t) for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                     ml_dtypes.float8_e5m2)}


def problem_from_arrays(kernel: ir.Kernel, inputs: Mapping[str, object],
                        shapes: Mapping[str, int] | None, file: str) -> Problem:
    """The problem of the user's tensors and scalar arguments (`inputs`, by name),
    every block of its grid; `shapes` sizes the dimensions no array has (only
    outputs left out carry them). Every mistake is a CompileError naming the
    tensor, at its declaration where it has one."""
    params = [t.name for t in kernel.tensors] + [s.name for s in kernel.scalars]
    for name in inputs:
        if name not in params:
            raise CompileError(kernel.span, f"the inputs have '{name}', which is no tensor or "
                                            f"scalar argument of kernel {kernel.name} (it has: "
                                            f"{', '.join(params)}){did_you_mean(name, params)}",
                               rule="input")
    stored = stored_tensors(kernel)
    for t in kernel.tensors:
        if t.name not in inputs and t.name not in stored:
            raise CompileError(t.span, f"no array for input tensor '{t.name}' "
                                       f"({describe(t)}): the kernel reads it", rule="input")
    for s in kernel.scalars:
        if s.name not in inputs:
            raise CompileError(s.span, f"no value for scalar argument '{s.name}' ({s.dtype})",
                               rule="input")
    arrays = {t.name: _array(t, inputs[t.name]) for t in kernel.tensors if t.name in inputs}
    dims = _dimensions(kernel, arrays, dict(shapes or {}), file)
    tensors = {t.name: arrays[t.name] if t.name in arrays else
               np.zeros(tuple(dims[d] if isinstance(d, str) else d for d in t.dims), np.float32)
               for t in kernel.tensors}
    scalars = {s.name: _scalar(s, inputs[s.name]) for s in kernel.scalars}
    check_launch(kernel, dims, {s.name: scalars[s.name] for s in kernel.scalars
                                if s.dtype is ir.DType.I32},
                 fix="give arrays of a shape it can launch")
    check_size(kernel, dims)
    return given_problem(kernel, dims, tensors, scalars)


def describe(tensor: ir.TensorParam) -> str:
    """`bf16[M, N]`, as declared."""
    return f"{tensor.dtype}[{', '.join(str(d) for d in tensor.dims)}]"


def in_dtypes(kernel: ir.Kernel, stored: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The simulator's f32 arrays of tensors, each in its dtype (bf16 and fp8 as
    ml_dtypes arrays: the values are exact there)."""
    out = {}
    for name, values in stored.items():
        dtype = kernel.tensor(name).dtype
        out[name] = (np.rint(values) if dtype is ir.DType.I32 else values).astype(
            NUMPY_DTYPES[dtype])
    return out


def _array(tensor: ir.TensorParam, value: object) -> np.ndarray:
    """The user's array of `tensor` as the simulator's f32 values of its dtype."""
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - whatever the object, the user's mistake
        raise _error(tensor, f"is not an array ({type(value).__name__}: {exc})") from None
    want = NUMPY_DTYPES[tensor.dtype]
    if array.dtype.kind == "V" and not array.dtype.fields and array.dtype != want \
            and array.dtype.itemsize == want.itemsize and want in _ML_FLOATS:
        array = array.view(want)  # what np.savez writes for an ml_dtypes array: its bits
    if tensor.dtype is ir.DType.I32 and array.dtype.kind not in "iu":
        raise _error(tensor, f"holds integers: pass an integer array, not {array.dtype}")
    if tensor.dtype is not ir.DType.I32 and array.dtype.kind != "f" \
            and array.dtype not in _ML_FLOATS:
        raise _error(tensor, f"holds floating-point values: pass a float array (rounded to "
                             f"{tensor.dtype}), not {array.dtype}")
    if array.ndim != len(tensor.dims):
        raise _error(tensor, f"has {len(tensor.dims)} dimension"
                             f"{'s' * (len(tensor.dims) != 1)}, but its array has shape "
                             f"{array.shape}")
    for axis, (dim, size) in enumerate(zip(tensor.dims, array.shape)):
        if isinstance(dim, int) and size != dim:
            raise _error(tensor, f"has {dim} elements along axis {axis}, but its array has "
                                 f"shape {array.shape}")
    if tensor.dtype is ir.DType.I32:
        _check_integers(tensor, array)
        return array.astype(np.float32)
    return round_to(tensor.dtype, np.array(array, dtype=np.float32))


def _check_integers(tensor: ir.TensorParam, array: np.ndarray) -> None:
    """The values of an integer array fit i32 and are exact in the simulator's
    f32, compared as Python integers: the array's own min and max are exact in
    its dtype, where a conversion (to int64, to f32) or np.abs could wrap."""
    if array.size == 0:
        return
    for value in (int(array.min()), int(array.max())):
        if not I32_MIN <= value <= I32_MAX:
            raise _error(tensor, f"holds {value}, which is not an i32 (from {I32_MIN} to "
                                 f"{I32_MAX})")
        if abs(value) > EXACT_INTEGERS:
            raise _error(tensor, f"holds {value}: the simulator keeps i32 tensors exact up "
                                 f"to {EXACT_INTEGERS} in magnitude")


def _dimensions(kernel: ir.Kernel, arrays: dict[str, np.ndarray], shapes: dict[str, int],
                file: str) -> dict[str, int]:
    """Each named dimension's size, from the arrays that have it (all agreeing)
    and `shapes` (which must agree with them)."""
    names = list(dict.fromkeys(d for t in kernel.tensors for d in t.dims if isinstance(d, str)))
    for name, size in shapes.items():
        if name not in names:
            raise CompileError(None, f"--shape: the kernel has no dimension '{name}' (it has: "
                                     f"{', '.join(names) or 'none'})", file=file, rule="input")
        if size < 1:
            raise CompileError(None, f"--shape: {name} must be positive, not {size}", file=file,
                               rule="input")
    dims: dict[str, int] = {}
    fixed_by: dict[str, str] = {}
    for t in kernel.tensors:
        if t.name not in arrays:
            continue
        shape = arrays[t.name].shape
        for dim, size in zip(t.dims, shape):
            if not isinstance(dim, str):
                continue
            if size < 1:
                raise _error(t, f"has no elements along {dim} (shape {shape}): every "
                                "dimension is at least 1")
            if dims.get(dim, size) != size:
                raise _error(t, f"has {dim} = {size} (shape {shape}), but {fixed_by[dim]}")
            if shapes.get(dim, size) != size:
                raise _error(t, f"has {dim} = {size} (shape {shape}), but the shape given "
                                f"says {dim}={shapes[dim]}")
            if dim not in dims:
                dims[dim] = size
                fixed_by[dim] = f"'{t.name}' has {dim} = {size} (shape {shape})"
    for name in names:
        if name in dims:
            continue
        if name not in shapes:
            holders = ", ".join(f"'{t.name}' ({describe(t)})" for t in kernel.tensors
                                if name in t.dims)
            raise CompileError(kernel.span, f"no array fixes dimension {name}: pass one for "
                                            f"{holders}, or give its size as a shape "
                                            f"({name}=...)", rule="input")
        dims[name] = shapes[name]
    return {name: dims[name] for name in names}


def _scalar(param: ir.ScalarParam, value: object) -> float | int:
    array = np.asarray(value)
    if array.shape != ():
        raise CompileError(param.span, f"scalar argument '{param.name}' ({param.dtype}) takes "
                                       f"one number, not an array of shape {array.shape}",
                           rule="input")
    if param.dtype is ir.DType.I32:
        if array.dtype.kind not in "iu" or not I32_MIN <= int(array) <= I32_MAX:
            raise CompileError(param.span, f"scalar argument '{param.name}' is i32: pass an "
                                           f"integer of 32 bits, not {value!r}", rule="input")
        return int(array)
    if array.dtype.kind not in "fiu" and array.dtype not in _ML_FLOATS:
        raise CompileError(param.span, f"scalar argument '{param.name}' is {param.dtype}: "
                                       f"pass a number, not {value!r}", rule="input")
    return float(round_to(param.dtype, float(array)))


def _error(tensor: ir.TensorParam, what: str) -> CompileError:
    return CompileError(tensor.span, f"tensor '{tensor.name}' ({describe(tensor)}) {what}",
                        rule="input")
