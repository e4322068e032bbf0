"""Scalar expressions of the kernel IR: constants, dimensions, parameters, tile
coordinates, loop variables, builtins, carried registers, their arithmetic and
tensor elements. Re-exported by `hopperc.ir.nodes` (one namespace for the IR);
the other node modules import them from here."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ScalarKind(Enum):
    CONST = "const"
    DIM = "dim"
    PARAM = "param"
    TILE = "tile"  # block coordinate along a grid axis
    LOOP = "loop"
    # warp, lane, thread, wg (relative to the running role); block and blocks, the
    # block's index and the grid's blocks, which only the compiler names (persistent tiles)
    BUILTIN = "builtin"
    CARRIED = "carried"  # a register the compiler carries: a phase bit, a stage counter


@dataclass(frozen=True)
class Scalar:
    kind: ScalarKind
    name: str = ""
    value: int | float = 0


@dataclass(frozen=True)
class ScalarOp:
    """Integer or boolean arithmetic; `/` rounds up (tile counts: `K / BK` counts
    the last partial tile), `//` rounds down (stage and phase arithmetic)."""

    op: str
    left: "ScalarExpr"
    right: "ScalarExpr | None" = None


@dataclass(frozen=True)
class TensorElement:
    """Element `indices` (one integer index per dimension) of global tensor `tensor`
    (i32, or f32 in element-wise math), read by every thread that evaluates it
    (`ld.global.nc`); an index outside [0, dim) reads 0. The kernel never stores
    the tensor, so the value is the same wherever and whenever it is read: the
    analyses treat it as an opaque value of its indices, equal only to a
    structurally equal TensorElement."""

    tensor: str
    indices: tuple["ScalarExpr", ...]


ScalarExpr = Scalar | ScalarOp | TensorElement


def operands(expr: ScalarExpr) -> tuple[ScalarExpr, ...]:
    """The sub-expressions an expression evaluates: an operation's operands, an
    element's indices; none for a leaf."""
    if isinstance(expr, ScalarOp):
        return (expr.left,) if expr.right is None else (expr.left, expr.right)
    if isinstance(expr, TensorElement):
        return expr.indices
    return ()


def with_operands(expr: ScalarExpr, operand) -> ScalarExpr:
    """`expr` with `operand` applied to each of its operands (a leaf as it is)."""
    if isinstance(expr, ScalarOp):
        return ScalarOp(expr.op, operand(expr.left),
                        None if expr.right is None else operand(expr.right))
    if isinstance(expr, TensorElement):
        return TensorElement(expr.tensor, tuple(operand(i) for i in expr.indices))
    return expr


# The i32 + - * that wrap (two's complement): those where data takes part
# (holds_data). The generated code computes them with the prelude's hk_wrap_*
# (codegen/scalars.py), the simulator with sim/scalars.wrap_i32.
WRAPPING_OPS = frozenset({"+", "-", "*"})


def holds_data(expr: ScalarExpr) -> bool:
    """Whether an integer expression reads a scalar parameter or a tensor element:
    data, any i32, where a sum may wrap. Dimensions, coordinates, loop variables
    and built-ins are the launch's own sizes and the indices within them, which
    the plain int arithmetic keeps (and NVRTC optimizes); grid and launch sizes
    are counted in 64 bits on the host and by a ragged walk (ir/raster.py)."""
    if isinstance(expr, TensorElement):
        return True
    if isinstance(expr, Scalar):
        return expr.kind is ScalarKind.PARAM
    return any(holds_data(o) for o in operands(expr))


def const(value: int) -> Scalar:
    return Scalar(ScalarKind.CONST, value=value)
