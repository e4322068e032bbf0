"""Which i32 statements and comparisons compute in 32-bit integers instead of f32.

Element-wise math runs in f32, which holds integers exactly only up to 2^24. A
statement whose target is i32 (a tile, a row vector, a store to an i32 tensor
or buffer) and whose value is made only of integer operations on integer
operands is computed in 32-bit integers instead, by the generated code and the
simulator alike, so indices and counts stay exact over the whole i32 range:
i32 tiles, row vectors, 1-D tensors and shared buffers, integer scalars,
whole-number literals, `row()` and `col()`, argmax's column and explicit
`i32(...)` casts (which round their f32 operand), combined by `+ - *`, unary
`-`, `abs`, `relu`, `max`, `min`, comparisons of two integer operands and
`where` (whose condition may be anything: an integer comparison is compared in
integers, anything else in f32). Anything else in the value (a division, a
function, an f32 operand) keeps the whole statement in f32, rounded once when
written, as before. In any statement, f32 ones too, a comparison of two such
integer operands (`BN * j + col() == t[:, None]`) compares ints: its 1 or 0 is
then an f32 like any other.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Mapping

from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir

INTEGER_OPS = frozenset({"+", "-", "*", "neg", "abs", "relu", "max", "min",
                         "==", "!=", "<", "<=", ">", ">=", "where"})
INT32_LIMIT = 2 ** 31


def integer_exact(expr: ir.TileExpr, kernel: ir.Kernel, tiles: Mapping[str, ir.TileDef]) -> bool:
    """Whether `expr` is made only of integer operations on integer operands."""
    match expr:
        case ir.TileRef(name=name) | ir.RowValues(name=name):
            return tiles[name].dtype is DType.I32
        case ir.GlobalVector(tensor=tensor):
            return kernel.tensor(tensor).dtype is DType.I32
        case ir.SharedRead(view=view):
            return kernel.buffer(view.buffer).dtype is DType.I32
        case ir.ScalarValue(expr=scalar):
            return _integer_scalar(scalar, kernel)
        case ir.Literal(value=value):
            return float(value).is_integer() and abs(value) < INT32_LIMIT
        case ir.RowReduce(op="argmax") | ir.ElementIndex():
            return True
        case ir.Convert(dtype=DType.I32):
            return True  # rounds its operand, as the f32 path does at a cast
        case ir.Elementwise(op="where", args=(_, *values)):
            return all(integer_exact(v, kernel, tiles) for v in values)
        case ir.Elementwise(op=op, args=args) if op in INTEGER_OPS:
            return all(integer_exact(a, kernel, tiles) for a in args)
    return False


def integer_test(kernel: ir.Kernel,
                 tiles: Mapping[str, ir.TileDef]) -> Callable[[ir.TileExpr], bool]:
    """`integer_exact` over one kernel's statements (`tiles`: its TileDefs by name),
    as the simulator and its numpy reference pass it to sim/tile_values.elementwise."""
    return partial(integer_exact, kernel=kernel, tiles=tiles)


def _integer_scalar(expr: ir.ScalarExpr, kernel: ir.Kernel) -> bool:
    match expr:
        case ir.Scalar(kind=ir.ScalarKind.PARAM, name=name):
            return next(s for s in kernel.scalars if s.name == name).dtype is DType.I32
        case ir.TensorElement(tensor=tensor):
            return kernel.tensor(tensor).dtype is DType.I32
        case ir.ScalarOp():
            return all(_integer_scalar(o, kernel) for o in ir.operands(expr))
    return True
