"""defer_row_sums

Requires: the front end's IR (row vectors of a warpgroup's rows in Layout.ROWS).
Establishes: a row vector `l` that starts at 0 or at a row sum (`l = rowsum(p)`,
an online softmax's first tile) and that, until it is first read,
only updates of the form `l = l * a + rowsum(x)` or `l = l + rowsum(x)` write
and read (x a warpgroup's wgmma-layout f32 tile; a row-uniform: a row vector
other than l, a literal, a scalar, or element-wise math of them), in at least
one loop, is kept as per-thread parts through them: a Layout.ROW_PARTS vector
declared in l's place (starting at 0, or at the thread's own part of the first
row sum), each update `parts = parts * a + thread_rowsum(x)` (the
thread's own slots of the row, no shuffle), and l declared right before its
first read (or at the end of its block) as the quad sum of the parts
(RowPartsSum). An online softmax's row sums then cost no shuffle in its loop:
two shuffles and two adds per row once after it, not per iteration. The
updates may sit in loops and `if`s (a loop split into interior and boundary
iterations keeps its sums as parts across them) whose bounds and conditions
the lanes of a quad share. A vector read by anything else before or inside
the loop, updated in one thread (`elect`, `one_thread`) or manual code, or
that starts at another value (the parts would have to split it: only 0 splits
into four zeros, and a row sum into its lanes' parts, without choosing a lane),
stays as written.

Hardware rule: in the wgmma layout the 4 lanes of a quad hold a row (lane q
its columns c with (c % 8) / 2 == q), and rowsum is each lane's slots summed,
then the quad's shuffles (xor 1, 2). Sum is linear and a row-uniform factor is
the same in each lane of the row, so with r_q each lane's part of rowsum(x),
sum_q(l_q * a + r_q) = a * sum_q(l_q) + sum_q(r_q): the quad sum of the parts
equals l after every update, and one quad sum where l is read gives its value.
The result is the same sum in another order (f32 rounding, as any change of
summation order; `check` compares within its tolerance).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in, mma_registers, register_uses, tile_operands, walk
from hopperc.ir.rewrite import fresh_name

# Builtins that differ between the lanes of a quad (warp and wg do not).
_LANE_BUILTINS = frozenset({"lane", "thread"})


def defer_row_sums(kernel: ir.Kernel) -> ir.Kernel:
    tiles = {s.name: s for s in walk(kernel.body) if isinstance(s, ir.TileDef)}
    # every name the kernel gives a value, so the parts' name shadows none in C++
    taken = (set(tiles) | {b.name for b in kernel.buffers} | {t.name for t in kernel.tensors}
             | {p.name for p in kernel.scalars} | {name for name, _ in kernel.consts}
             | {s.var for s in walk(kernel.body) if isinstance(s, ir.ForLoop)})
    return replace(kernel, body=_Deferrer(tiles, taken).block(kernel.body))


@dataclass
class _Deferrer:
    tiles: dict[str, ir.TileDef]
    taken: set[str]

    def block(self, block: ir.Block) -> ir.Block:
        stmts = [self.nested(s) for s in block.stmts]
        at = 0
        while at < len(stmts):
            if self.candidate(stmts[at]):
                at += self.defer(stmts, at)
            at += 1
        return ir.Block(tuple(stmts))

    def nested(self, stmt: ir.Stmt) -> ir.Stmt:
        """Blocks every thread of the role runs (not elected or manual code)."""
        match stmt:
            case ir.RoleBlock() | ir.ForLoop():
                return replace(stmt, body=self.block(stmt.body))
            case ir.IfThen():
                return replace(stmt, then=self.block(stmt.then), orelse=self.block(stmt.orelse))
        return stmt

    def candidate(self, stmt: ir.Stmt) -> bool:
        return (isinstance(stmt, ir.TileDef) and stmt.layout is ir.Layout.ROWS
                and stmt.dtype is ir.DType.F32
                and (stmt.init == ir.Literal(0.0) or _row_sum(stmt.init) is not None))

    def defer(self, stmts: list[ir.Stmt], at: int) -> int:
        """Defer the sums of the vector `stmts[at]` defines, if its uses allow:
        the number of statements inserted."""
        name = stmts[at].name
        end, loops = at + 1, 0
        while end < len(stmts) and self.updates_only(stmts[end], name):
            loops += isinstance(stmts[end], ir.ForLoop) and self.touches(stmts[end], name)
            end += 1
        if not loops:
            return 0
        parts = fresh_name(f"{name}_parts", self.taken)
        definition = stmts[at]
        first = _row_sum(definition.init)
        stmts[at] = replace(definition, name=parts, layout=ir.Layout.ROW_PARTS,
                            init=definition.init if first is None else ir.ThreadRowSum(first))
        for k in range(at + 1, end):
            stmts[k] = self.rename(stmts[k], name, parts)
        stmts.insert(end, replace(definition, init=ir.RowPartsSum(parts)))
        return 1

    def updates_only(self, stmt: ir.Stmt, name: str) -> bool:
        """Whether `stmt` touches `name` only through updates of its sum, in code
        every lane of a quad runs the same number of times."""
        if not self.touches(stmt, name):
            return True
        match stmt:
            case ir.TileAssign():
                return self.update(stmt, name) is not None
            case ir.ForLoop(start=start, stop=stop, body=body):
                return self.quad_uniform(start, stop) and all(
                    self.updates_only(s, name) for s in body.stmts)
            case ir.IfThen(cond=cond, then=then, orelse=orelse):
                return self.quad_uniform(cond) and all(
                    self.updates_only(s, name) for s in then.stmts + orelse.stmts)
        return False

    def quad_uniform(self, *exprs: ir.ScalarExpr) -> bool:
        """Whether the lanes of a quad agree on these values (the front end
        already refuses conditions and bounds that differ between threads)."""
        return not set().union(*(builtins_in(e) for e in exprs)) & _LANE_BUILTINS

    def touches(self, stmt: ir.Stmt, name: str) -> bool:
        leaves = list(walk(ir.Block((stmt,))))
        return any(use.tile == name for leaf in leaves for use in register_uses(leaf)) or any(
            name in mma_registers(leaf) for leaf in leaves if isinstance(leaf, ir.Mma))

    def update(self, stmt: ir.TileAssign, name: str) -> tuple[ir.TileExpr | None, str] | None:
        """(the factor a, or None for 1; x) of `name = name * a + rowsum(x)`."""
        if stmt.name != name or not (isinstance(stmt.value, ir.Elementwise)
                                     and stmt.value.op == "+"):
            return None
        for carried, added in (stmt.value.args, stmt.value.args[::-1]):
            summed = _row_sum(added)
            if summed is None:
                continue
            if carried == ir.TileRef(name):
                return None, summed
            if isinstance(carried, ir.Elementwise) and carried.op == "*":
                for own, factor in (carried.args, carried.args[::-1]):
                    if own == ir.TileRef(name) and self.row_uniform(factor, name):
                        return factor, summed
        return None

    def row_uniform(self, expr: ir.TileExpr, name: str) -> bool:
        """The same value in each lane of a row: literals, scalars of no lane,
        row vectors (Layout.ROWS) other than `name`, and math of them."""
        for leaf in tile_operands(expr):
            match leaf:
                case ir.Literal():
                    continue
                case ir.ScalarValue(expr=value) if not builtins_in(value) & _LANE_BUILTINS:
                    continue
                case ir.TileRef(name=vector, columns=None) if vector != name and (
                        self.tiles[vector].layout is ir.Layout.ROWS):
                    continue
            return False
        return True

    def rename(self, stmt: ir.Stmt, name: str, parts: str) -> ir.Stmt:
        """Each update of `name`'s sum in `stmt` as an update of its parts."""
        match stmt:
            case ir.TileAssign(name=target) if target == name:
                factor, tile = self.update(stmt, name)
                carried = ir.TileRef(parts) if factor is None else ir.Elementwise(
                    "*", (ir.TileRef(parts), factor))
                return replace(stmt, name=parts,
                               value=ir.Elementwise("+", (carried, ir.ThreadRowSum(tile))))
            case ir.ForLoop(body=body):
                return replace(stmt, body=self.rename_block(body, name, parts))
            case ir.IfThen(then=then, orelse=orelse):
                return replace(stmt, then=self.rename_block(then, name, parts),
                               orelse=self.rename_block(orelse, name, parts))
        return stmt

    def rename_block(self, block: ir.Block, name: str, parts: str) -> ir.Block:
        return ir.Block(tuple(self.rename(s, name, parts) for s in block.stmts))


def _row_sum(expr: ir.TileExpr | None) -> str | None:
    """The tile `expr` sums along its rows across the quad (`rowsum(x)`), else None."""
    if isinstance(expr, ir.RowReduce) and expr.op == "sum" and expr.partials is None:
        return expr.name
    return None
