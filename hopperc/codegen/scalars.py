"""Integer scalar expressions -> C++ (indices, loop bounds, conditions,
coordinates), and what the built-ins mean in the role where code runs."""
from __future__ import annotations

from dataclasses import dataclass, field

from hopperc.codegen import names
from hopperc.ir import nodes as ir
from hopperc.ir.scalars import holds_data


@dataclass
class RoleContext:
    """What builtins mean where the code runs: the role's first warp and threads;
    and the registers holding elements read before the loops around the code."""

    first_warp: int
    threads: int
    elements: dict[ir.TensorElement, str] = field(default_factory=dict)


def scalar(expr: ir.ScalarExpr, role: RoleContext) -> str:
    if isinstance(expr, ir.Scalar):
        match expr.kind:
            case ir.ScalarKind.CONST:
                return str(int(expr.value))
            case ir.ScalarKind.TILE:
                return names.grid_coordinate(expr.name)
            case ir.ScalarKind.BUILTIN:
                return _builtin(expr.name, role)
            case ir.ScalarKind.CARRIED:
                return names.carried(expr.name)
        return names.user(expr.name)
    if isinstance(expr, ir.TensorElement) and expr in role.elements:
        return role.elements[expr]
    if isinstance(expr, ir.TensorElement):
        indices = ", ".join(scalar(i, role) for i in expr.indices)
        return f"{names.element_reader(expr.tensor)}({indices})"
    if expr.op == "not":
        return f"!({scalar(expr.left, role)})"
    left, right = scalar(expr.left, role), scalar(expr.right, role)
    if expr.op in ("/", "%"):
        # C truncates toward zero; the language (and the simulator) round `/` up and
        # give `%` the divisor's sign. The plain forms agree where neither operand
        # can be negative, the exact helpers cost a few instructions elsewhere.
        if _never_negative(expr.left) and _never_negative(expr.right):
            return f"hk_cdiv({left}, {right})" if expr.op == "/" else f"({left} % {right})"
        return f"hk_{'cdiv' if expr.op == '/' else 'mod'}_signed({left}, {right})"
    if expr.op in ("min", "max"):
        return f"{expr.op}({left}, {right})"
    if expr.op == "//":  # operands are never negative: C++ truncation is floor
        return f"({left} / {right})"
    if expr.op in WRAPPING and (holds_data(expr.left) or holds_data(expr.right)):
        return f"{WRAPPING[expr.op]}({left}, {right})"
    op = {"and": "&&", "or": "||"}.get(expr.op, expr.op)
    return f"({left} {op} {right})"


# i32 + - * that wrap (two's complement) instead of overflowing, which C++ leaves
# undefined (the prelude's hk_wrap_*, computed in unsigned); ir.scalars.holds_data
# says where (the simulator wraps the same operations).
WRAPPING = {"+": "hk_wrap_add", "-": "hk_wrap_sub", "*": "hk_wrap_mul"}


_TRUTH_OPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "and", "or", "not"})
_NEVER_NEGATIVE_KINDS = frozenset({ir.ScalarKind.DIM, ir.ScalarKind.TILE, ir.ScalarKind.BUILTIN,
                                   ir.ScalarKind.CARRIED})


def _never_negative(expr: ir.ScalarExpr) -> bool:
    """Whether an integer expression is >= 0 for every input: dimensions, tile
    coordinates, thread built-ins and carried counters are; scalar parameters,
    tensor elements and loop variables (a loop may start below 0) may not be."""
    if isinstance(expr, ir.Scalar):
        if expr.kind is ir.ScalarKind.CONST:
            return expr.value >= 0
        return expr.kind in _NEVER_NEGATIVE_KINDS
    if isinstance(expr, ir.ScalarOp) and expr.op in _TRUTH_OPS:
        return True  # 0 or 1
    if isinstance(expr, ir.ScalarOp) and expr.op in ("+", "*", "/", "//", "%", "min"):
        return all(_never_negative(o) for o in ir.operands(expr))
    if isinstance(expr, ir.ScalarOp) and expr.op == "max":
        return any(_never_negative(o) for o in ir.operands(expr))
    return False


def _builtin(name: str, role: RoleContext) -> str:
    warp = f"(hk_warp - {role.first_warp})" if role.first_warp else "hk_warp"
    first_thread = role.first_warp * 32
    return {
        "warp": warp,
        "wg": f"({warp} / 4)",
        "lane": "(static_cast<int>(threadIdx.x) % 32)",
        "thread": f"(static_cast<int>(threadIdx.x) - {first_thread})" if first_thread
        else "static_cast<int>(threadIdx.x)",
        "block": "static_cast<int>(blockIdx.x)",
        "blocks": "static_cast<int>(gridDim.x)",
        "cluster": "static_cast<int>(hk_cluster_id())",
        "clusters": "static_cast<int>(hk_clusters())",
    }[name]


def local_thread(role: RoleContext) -> str:
    """This thread's index in its role (or the block)."""
    if role.first_warp:
        return f"(static_cast<int>(threadIdx.x) - {role.first_warp * 32})"
    return "static_cast<int>(threadIdx.x)"
