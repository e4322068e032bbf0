"""An i32 statement's value in 32-bit integers (ir/integer_exprs.py), as the C++
of codegen/integers.py computes it: int64 arrays wrapped to i32 after each
operation (the hardware's adds and multiplies wrap past 2^31), exact over the
whole i32 range where the f32 path is exact only below 2^24."""
from __future__ import annotations

from typing import Callable

import numpy as np

from hopperc.ir import nodes as ir

_COMPARISONS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
                ">": np.greater, ">=": np.greater_equal}
_OPERATIONS = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "neg": np.negative, "abs": np.abs,
    "relu": lambda x: np.maximum(x, 0), "max": np.maximum, "min": np.minimum,
    **{op: (lambda f: lambda a, b: f(a, b).astype(np.int64))(f) for op, f in _COMPARISONS.items()},
}


def integer_values(expr: ir.TileExpr, leaf: Callable[[ir.TileExpr], object],
                   float_value: Callable[[ir.TileExpr], np.ndarray],
                   integer: Callable[[ir.ScalarExpr], int],
                   exact: Callable[[ir.TileExpr], bool]) -> np.ndarray:
    """`expr` (integer_exact) from its operands (`leaf`: i32 tiles and vectors
    held as f64, which are exact; argmax's columns), its scalars (`integer`) and
    the f32 values (`float_value`) of where's conditions and of what `i32(...)`
    rounds."""
    def value(e: ir.TileExpr):
        match e:
            case ir.ScalarValue(expr=scalar):
                return np.int64(integer(scalar))
            case ir.Literal(value=v):
                return np.int64(v)
            case ir.Convert(operand=operand) if exact(operand):
                return value(operand)
            case ir.Convert(operand=operand):
                return np.asarray(np.rint(np.clip(float_value(operand), -2.0 ** 31,
                                                  2.0 ** 31 - 128)), dtype=np.int64)
            case ir.Elementwise(op="where", args=(cond, a, b)):
                test = value(cond) if exact(cond) else float_value(cond)
                return np.where(test != 0, value(a), value(b))
            case ir.Elementwise(op=op, args=args):
                return _wrap(_OPERATIONS[op](*[value(a) for a in args]))
        return np.asarray(leaf(e), dtype=np.int64)
    return value(expr)


def _wrap(values) -> np.ndarray:
    """int64 values as the i32 they wrap to."""
    return (np.asarray(values, dtype=np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31
