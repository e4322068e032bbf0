"""The typed AST of a `.hk` file: frozen dataclasses, each with its source span.

The AST mirrors the text; names are not resolved and sizes are not evaluated
here (that is `semantic`'s job), so the AST can be printed back faithfully.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass

from hopperc.diagnostics import Span


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True)
class FloatLit:
    value: float
    span: Span


@dataclass(frozen=True)
class Name:
    id: str
    span: Span


@dataclass(frozen=True)
class Attribute:
    value: "Expr"
    attr: str
    span: Span


@dataclass(frozen=True)
class FullSlice:
    """`:` in a subscript."""

    span: Span


@dataclass(frozen=True)
class NewAxis:
    """`None` in a subscript: a broadcast axis."""

    span: Span


@dataclass(frozen=True)
class RangeSlice:
    """`start : stop` in a subscript (columns of a register tile)."""

    start: "Expr"
    stop: "Expr"
    span: Span


@dataclass(frozen=True)
class Subscript:
    value: "Expr"
    indices: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True)
class Transpose:
    value: "Expr"
    span: Span


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * / % @
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True)
class Neg:
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Compare:
    op: str  # one of == != < <= > >=
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True)
class Not:
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Cast:
    dtype: str
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Expr", ...]
    span: Span


Expr = (IntLit | FloatLit | Name | Attribute | FullSlice | RangeSlice | NewAxis | Subscript
        | Transpose
        | BinOp | Neg | Compare | BoolOp | Not | Cast | Call)


# ---------------------------------------------------------------- statements
@dataclass(frozen=True)
class Block:
    stmts: tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True)
class SharedDecl:
    name: str
    dtype: str
    shape: tuple[Expr, ...]
    stages: Expr | None
    swizzle: str | None
    span: Span
    reuses: Name | None = None  # placed in this earlier buffer's memory


@dataclass(frozen=True)
class MBarrierDecl:
    name: str
    count: Expr
    span: Span


@dataclass(frozen=True)
class Role:
    name: str
    unit: str  # "warp" | "warps" | "warpgroup"
    count: int
    regs: int | None
    body: Block
    span: Span


@dataclass(frozen=True)
class For:
    var: str
    start: Expr
    stop: Expr
    body: Block
    span: Span
    turns: bool = False  # the role's warpgroups take turns issuing its products


@dataclass(frozen=True)
class If:
    cond: Expr
    then: Block
    orelse: Block | None
    span: Span


@dataclass(frozen=True)
class Copy:
    """`tma DST <- SRC` or `bulk DST <- SRC`, optionally `via BARRIER` (manual sync);
    `tma T[...] += SRC` (`reduce_add`) adds the tile into global memory."""

    engine: str  # "tma" | "bulk"
    dst: Expr
    src: Expr
    via: Expr | None
    span: Span
    reduce_add: bool = False


@dataclass(frozen=True)
class TileDecl:
    """`name: dtype[shape] = init`: a register tile (or vector) of the running threads."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    init: Expr
    span: Span


@dataclass(frozen=True)
class ScalarDecl:
    """`name: i32 = value` / `name: f32 = value`: an immutable scalar, its expression
    substituted wherever the name is used after it in its block."""

    name: str
    dtype: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class Assign:
    target: Expr
    op: str  # "=" | "+="
    value: Expr
    span: Span


@dataclass(frozen=True)
class Elect:
    body: Block
    span: Span


@dataclass(frozen=True)
class Manual:
    body: Block
    span: Span


@dataclass(frozen=True)
class SyncStmt:
    """A synchronization primitive written by hand (manual code only)."""

    op: str
    args: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Signal:
    """`signal F[i]`: add 1 to flag F[i] once the block's global writes are visible;
    `n: i32 = signal F[i]` (a counter) also declares `n`, the value before the add."""

    flag: Expr
    span: Span
    result: str | None = None
    dtype: str | None = None


@dataclass(frozen=True)
class Wait:
    """`wait F[i] >= n`: go on once flag F[i] has reached n."""

    flag: Expr
    count: Expr
    span: Span


Stmt = (SharedDecl | MBarrierDecl | Role | For | If | Copy | TileDecl | ScalarDecl | Assign | Elect
        | Manual | SyncStmt | Signal | Wait)


# ---------------------------------------------------------------- kernel
@dataclass(frozen=True)
class TensorParam:
    name: str
    dtype: str
    dims: tuple[Name | IntLit, ...]
    span: Span


@dataclass(frozen=True)
class ScalarParam:
    name: str
    dtype: str
    span: Span


@dataclass(frozen=True)
class ConstDef:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class GridDim:
    name: str
    extent: Expr
    span: Span


@dataclass(frozen=True)
class Clause:
    """A clause of the kernel header, by its keyword."""

    keyword: str
    span: Span


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[TensorParam | ScalarParam, ...]
    consts: tuple[ConstDef, ...]
    grid: tuple[GridDim, ...]
    cluster: tuple[int, ...] | None
    threads: int | None
    manual: bool
    body: Block
    span: Span
    persistent: bool = False  # each block loops over output tiles
    specialize: bool = False  # the compiler splits the body into producer and consumer roles
    pingpong: bool = False  # a role's warpgroups take the block's tiles in turn
    clauses: tuple[Clause, ...] = ()  # where each header clause is written

    def clause_span(self, keyword: str) -> Span:
        """The header's `keyword` clause (`threads`, `cluster`, ...), or the kernel
        where it has none: the place to report what is wrong with that clause."""
        return next((c.span for c in self.clauses if c.keyword == keyword), self.span)


def walk(node):
    """Every syntax node under `node` (a node, or a list or tuple of them), itself
    included, nested blocks too."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif is_dataclass(item):
            yield item
            stack.extend(getattr(item, f.name) for f in fields(item) if f.name != "span")


def dump(node, indent: int = 0) -> str:
    """An indented tree of the AST without spans (`hopperc emit --ast`)."""
    pad = "  " * indent
    if isinstance(node, tuple):
        return "\n".join(dump(item, indent) for item in node)
    if not hasattr(node, "__dataclass_fields__"):
        return f"{pad}{node!r}"
    lines = [f"{pad}{type(node).__name__} @{node.span.line}:{node.span.col}"]
    for name in node.__dataclass_fields__:
        if name == "span":
            continue
        value = getattr(node, name)
        if hasattr(value, "__dataclass_fields__") or (isinstance(value, tuple) and value and
                                                      hasattr(value[0], "__dataclass_fields__")):
            lines.append(f"{pad}  {name}:")
            lines.append(dump(value, indent + 2))
        else:
            lines.append(f"{pad}  {name}: {value!r}")
    return "\n".join(lines)
