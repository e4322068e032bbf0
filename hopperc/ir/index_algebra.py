"""Integer index expressions compared symbolically, and boxes of global
tensors compared by them: whether two indices, or two boxes' coordinates, are
provably different where both are evaluated with the
same values of their variables. An expression is a sum of leaves times
constants; anything else (a product of two variables, a division, a `%`, a tensor's
element) is a leaf of its own. A carried register (a ring's stage or phase) is never
compared: it changes between the statements of one iteration.

Only a caller that knows both expressions are evaluated at one point may use
these (complete_bulk_stores renames a loop variable `i` to `i - 1` in what
flows to the next iteration); a `ScalarKind.CONST` comparison holds anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.ir import nodes as ir

Linear = tuple[dict, int]  # {leaf: coefficient}, constant


def linear(expr: ir.ScalarExpr) -> Linear | None:
    """`expr` as a sum of leaves times constants; None if it names a carried register."""
    if isinstance(expr, ir.Scalar):
        if expr.kind is ir.ScalarKind.CONST:
            return {}, int(expr.value)
        return None if expr.kind is ir.ScalarKind.CARRIED else ({expr: 1}, 0)
    if isinstance(expr, ir.ScalarOp) and expr.right is not None and expr.op in ("+", "-", "*"):
        left, right = linear(expr.left), linear(expr.right)
        if left is None or right is None:
            return None
        if expr.op == "*":
            if not left[0] or not right[0]:
                scale, (terms, const) = (left[1], right) if not left[0] else (right[1], left)
                return {k: v * scale for k, v in terms.items() if v * scale}, const * scale
        else:
            sign = 1 if expr.op == "+" else -1
            terms = dict(left[0])
            for leaf, coefficient in right[0].items():
                terms[leaf] = terms.get(leaf, 0) + sign * coefficient
            return {k: v for k, v in terms.items() if v}, left[1] + sign * right[1]
    return None if carries(expr) else ({expr: 1}, 0)


def difference(x: ir.ScalarExpr, y: ir.ScalarExpr) -> int | None:
    """x - y where it is the same constant for every value of the variables."""
    a, b = linear(x), linear(y)
    if a is None or b is None or a[0] != b[0]:
        return None
    return a[1] - b[1]


def differ(x: ir.ScalarExpr, y: ir.ScalarExpr) -> bool:
    """x != y for every value of the variables: a constant non-zero difference,
    or `a % m` and `b % m` with a - b a constant that m does not divide (equal
    remainders, floored or truncated, need a - b a multiple of m)."""
    d = difference(x, y)
    if d is not None:
        return d != 0
    if (isinstance(x, ir.ScalarOp) and isinstance(y, ir.ScalarOp) and x.op == y.op == "%"
            and x.right == y.right and isinstance(x.right, ir.Scalar)
            and x.right.kind is ir.ScalarKind.CONST and x.right.value > 0):
        d = difference(x.left, y.left)
        return d is not None and d % int(x.right.value) != 0
    return False


def carries(expr: ir.ScalarExpr) -> bool:
    """Whether `expr` names a carried register."""
    if isinstance(expr, ir.Scalar):
        return expr.kind is ir.ScalarKind.CARRIED
    return any(carries(operand) for operand in ir.operands(expr))


def substitute(expr: ir.ScalarExpr, kind: ir.ScalarKind, name: str,
               value: ir.ScalarExpr) -> ir.ScalarExpr:
    """`expr` with every scalar of `kind` named `name` replaced by `value`."""
    if isinstance(expr, ir.Scalar):
        return value if expr.kind is kind and expr.name == name else expr
    return ir.with_operands(expr, lambda operand: substitute(operand, kind, name, value))


def names(expr: ir.ScalarExpr, kind: ir.ScalarKind) -> set[str]:
    """The names of the scalars of `kind` in `expr`."""
    if isinstance(expr, ir.Scalar):
        return {expr.name} if expr.kind is kind else set()
    return set().union(*(names(operand, kind) for operand in ir.operands(expr)))


@dataclass(frozen=True)
class GlobalBox:
    """A box of a global tensor: element coordinates of its first element and
    its extents (None: anywhere in the tensor; an axis's extent None: anywhere
    along that axis, as a ragged copy's clipped one is taken)."""

    tensor: str
    coords: tuple[ir.ScalarExpr, ...]
    extents: tuple[int | None, ...] | None
    # Loop variables v (at most one) for which the box lies where `coords` say
    # or any number of iterations of v earlier (ir/iterations.py).
    older: tuple[str, ...] = ()


def copy_box(copy: ir.AsyncLoad | ir.AsyncStore) -> GlobalBox:
    """The box a TMA or bulk copy touches. A ragged copy's is taken as anywhere
    along its clipped axis: its START and END are whatever the kernel computes
    (group offsets), so no two of them are proven apart there."""
    extents: tuple[int | None, ...] = copy.box
    if copy.ragged is not None:
        extents = tuple(None if i == copy.ragged.dim else e for i, e in enumerate(copy.box))
    return GlobalBox(copy.tensor, copy.coords, extents)


def boxes_overlap(a: GlobalBox, b: GlobalBox, same_point: bool = False) -> bool:
    """Two boxes of one tensor are apart when, along some axis, one starts at
    least the other's extent after it (coordinates both constants, or
    `same_point` and a constant difference)."""
    if a.tensor != b.tensor:
        return False
    if a.extents is None or b.extents is None:
        return True
    for x, y, nx, ny in zip(a.coords, b.coords, a.extents, b.extents):
        if nx is None or ny is None:
            continue
        d = _constant(x) - _constant(y) if _constant(x) is not None and \
            _constant(y) is not None else (difference(x, y) if same_point else None)
        if d is None:
            continue
        # An older box of a moves x by -c per iteration of its loop (c the
        # variable's coefficient in x); of b, moves y so (d grows by c).
        drift = _drift(x, a.older) - _drift(y, b.older) if same_point else 0
        if (d >= ny and drift >= 0) or (-d >= nx and drift <= 0):
            return False
    return True


def _drift(expr: ir.ScalarExpr, older: tuple[str, ...]) -> int:
    """How `expr` moves per iteration back of the loop in `older`: minus its
    coefficient (0 where none)."""
    if not older:
        return 0
    form = linear(expr)
    return -form[0].get(ir.Scalar(ir.ScalarKind.LOOP, older[0]), 0) if form else 0


def _constant(expr: ir.ScalarExpr) -> int | None:
    if isinstance(expr, ir.Scalar) and expr.kind is ir.ScalarKind.CONST:
        return int(expr.value)
    return None
