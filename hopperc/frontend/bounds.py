"""Ranges of index expressions, to refuse an index into a shared buffer's parts or
an mbarrier array that the compiler can prove leaves it.

A range is (low, high), both inclusive, None where unknown: constants, tile
constants, loop variables with constant bounds, `wg` and `lane`, and `+ - * / %`
of them. Values the compiler cannot bound (dimensions, parameters, grid
coordinates) are left to the simulator, which reports the access at its line.
"""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.ir import nodes as ir

Range = tuple[int | None, int | None]
UNKNOWN: Range = (None, None)
LANES: Range = (0, 31)


def loop_range(start: ir.ScalarExpr, stop: ir.ScalarExpr, ranges: dict[str, Range],
               warpgroups: int) -> Range | None:
    """The values of a loop variable, or None when the loop never runs."""
    low, _ = index_range(start, ranges, warpgroups)
    _, high = index_range(stop, ranges, warpgroups)
    if low is not None and high is not None and low >= high:
        return None
    return low, None if high is None else high - 1


def index_range(expr: ir.ScalarExpr, ranges: dict[str, Range | None], warpgroups: int) -> Range:
    """Bounds of `expr`; `ranges` gives the loop variables' (None: the loop never runs,
    so every value is allowed)."""
    if isinstance(expr, ir.Scalar):
        return _leaf(expr, ranges, warpgroups)
    if isinstance(expr, ir.TensorElement) or expr.right is None:
        return UNKNOWN
    left = index_range(expr.left, ranges, warpgroups)
    right = index_range(expr.right, ranges, warpgroups)
    return _combine(expr.op, left, right)


def _leaf(expr: ir.Scalar, ranges, warpgroups: int) -> Range:
    kind = expr.kind
    if kind is ir.ScalarKind.CONST:
        return int(expr.value), int(expr.value)
    if kind is ir.ScalarKind.LOOP:
        return ranges.get(expr.name, UNKNOWN) or UNKNOWN
    if kind is ir.ScalarKind.BUILTIN and expr.name == "wg" and warpgroups >= 1:
        return 0, warpgroups - 1
    if kind is ir.ScalarKind.BUILTIN and expr.name == "lane":
        return LANES
    if kind in (ir.ScalarKind.TILE, ir.ScalarKind.BUILTIN):
        return 0, None
    if kind is ir.ScalarKind.DIM:
        return 1, None
    return UNKNOWN


def _combine(op: str, left: Range, right: Range) -> Range:
    (a, b), (c, d) = left, right
    if op == "+":
        return _add(a, c), _add(b, d)
    if op == "-":
        return _sub(a, d), _sub(b, c)
    if op == "*" and None not in (a, b, c, d):
        products = (a * c, a * d, b * c, b * d)
        return min(products), max(products)
    if op == "*" and a is not None and c is not None and a >= 0 and c >= 0:
        return a * c, None
    if op in ("/", "//") and c is not None and c == d and c > 0:
        divide = (lambda x: -(-x // c)) if op == "/" else (lambda x: x // c)
        return (None if a is None else divide(a)), (None if b is None else divide(b))
    if op == "%" and c is not None and c == d and c > 0 and a is not None and a >= 0:
        return (a, b) if b is not None and b < c else (0, c - 1)
    return UNKNOWN


def _add(x: int | None, y: int | None) -> int | None:
    return None if x is None or y is None else x + y


def _sub(x: int | None, y: int | None) -> int | None:
    return None if x is None or y is None else x - y


def check_index(expr: ir.ScalarExpr, count: int, ranges, warpgroups: int, span: Span,
                what: str, entries: str) -> None:
    """Refuse an index of `what` (`count` `entries`) that can leave 0..count-1."""
    if any(r is None for r in _loops_in(expr, ranges)):
        return  # inside a loop that never runs
    low, high = index_range(expr, ranges, warpgroups)
    valid = f"{what} has {count} {entries}, indexed 0 to {count - 1}"
    if low is not None and low == high and not 0 <= low < count:
        raise CompileError(span, f"index {low} is out of range: {valid}")
    bad = low if low is not None and low < 0 else None
    if bad is None and high is not None and high >= count:
        bad = high
    if bad is not None:
        shown = f"{'?' if low is None else low} to {'?' if high is None else high}"
        raise CompileError(span, f"this index can be {bad} (it ranges over {shown}), out of "
                                 f"range: {valid}")


def _loops_in(expr: ir.ScalarExpr, ranges) -> list:
    if isinstance(expr, ir.Scalar):
        return [ranges.get(expr.name, UNKNOWN)] if expr.kind is ir.ScalarKind.LOOP else []
    return [r for operand in ir.operands(expr) for r in _loops_in(operand, ranges)]
