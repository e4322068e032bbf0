"""Bounds on a loop variable from affine conditions (split_boundary_iterations):
an element-wise integer expression as an affine form over scalar leaves and the
element's row() and col(), and a bound `ceil((sum(c * leaf) + constant) /
divisor)` kept apart from its constant, so that of bounds that differ only in
their constant the deciding one is chosen at compile time."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from hopperc.ir import index_algebra
from hopperc.ir import nodes as ir
from hopperc.ir.rewrite import scalar_op


@dataclass(frozen=True)
class Bound:
    """ceil((sum(c * leaf) + constant) / divisor): a bound on the loop variable."""

    terms: tuple
    constant: int
    divisor: int

    @property
    def expr(self) -> ir.ScalarExpr:
        numerator = linear_sum(dict(self.terms), self.constant)
        return numerator if self.divisor == 1 else scalar_op("/", numerator,
                                                              ir.const(self.divisor))


def tightest(op: str, bounds: list[ir.ScalarExpr | Bound]) -> ir.ScalarExpr:
    """min or max of the bounds, of those that differ only in their constant
    (over their divisor) the one that decides it: ceil(x + c / d) grows with c / d."""
    kept: dict[tuple, Bound] = {}
    other: list[ir.ScalarExpr] = []
    pick = min if op == "min" else max
    for bound in bounds:
        if isinstance(bound, Bound):
            key = tuple(sorted(((repr(leaf), Fraction(c, bound.divisor))
                                for leaf, c in bound.terms)))
            kept[key] = bound if key not in kept else \
                pick(kept[key], bound, key=lambda b: Fraction(b.constant, b.divisor))
        else:
            other.append(bound)
    exprs = [*other, *(b.expr for b in kept.values())]
    out = exprs[0]
    for expr in exprs[1:]:
        out = scalar_op(op, out, expr)
    return out


def as_bound(expr: ir.ScalarExpr, step: int) -> Bound | ir.ScalarExpr:
    """`expr + step` (a loop bound, `n / d` or affine) as a Bound, or as it is."""
    divisor, numerator = 1, expr
    if isinstance(expr, ir.ScalarOp) and expr.op == "/" and isinstance(expr.right, ir.Scalar) \
            and expr.right.kind is ir.ScalarKind.CONST and expr.right.value > 0:
        divisor, numerator = int(expr.right.value), expr.left
    form = index_algebra.linear(numerator)
    if form is None:
        return scalar_op("+", expr, ir.const(step))
    return Bound(tuple(form[0].items()), form[1] + step * divisor, divisor)


def affine(expr: ir.TileExpr) -> index_algebra.Linear | None:
    """An element-wise integer expression as {leaf: coefficient}, constant; the
    leaves are scalar expressions and "row" / "col" (the element's indices)."""
    match expr:
        case ir.Literal(value=v):
            return ({}, int(v)) if math.isfinite(v) and float(v).is_integer() else None
        case ir.ScalarValue(expr=scalar):
            return index_algebra.linear(scalar)
        case ir.ElementIndex(axis=axis):
            return {axis: 1}, 0
        case ir.Elementwise(op="neg", args=(a,)):
            inner = affine(a)
            return inner and ({k: -c for k, c in inner[0].items()}, -inner[1])
        case ir.Elementwise(op="+" | "-" as op, args=(a, b)):
            left, right = affine(a), affine(b)
            if left is None or right is None:
                return None
            sign = 1 if op == "+" else -1
            terms = dict(left[0])
            for key, c in right[0].items():
                terms[key] = terms.get(key, 0) + sign * c
            return terms, left[1] + sign * right[1]
        case ir.Elementwise(op="*", args=(a, b)):
            left, right = affine(a), affine(b)
            if left is None or right is None or (left[0] and right[0]):
                return None
            scale, (terms, constant) = (left[1], right) if not left[0] else (right[1], left)
            return {k: c * scale for k, c in terms.items()}, constant * scale
    return None


def subexprs(expr: ir.ScalarExpr):
    yield expr
    for operand in ir.operands(expr):
        yield from subexprs(operand)


def linear_sum(terms: dict, constant: int) -> ir.ScalarExpr:
    """sum(c * leaf) + constant, the positive terms first."""
    out: ir.ScalarExpr | None = None
    for leaf, c in sorted(terms.items(), key=lambda item: item[1] < 0):
        term = leaf if abs(c) == 1 else scalar_op("*", ir.const(abs(c)), leaf)
        if out is None:
            out = term if c > 0 else scalar_op("-", ir.const(0), term)
        else:
            out = scalar_op("+" if c > 0 else "-", out, term)
    if out is None:
        return ir.const(constant)
    return scalar_op("+" if constant >= 0 else "-", out, ir.const(abs(constant)))
