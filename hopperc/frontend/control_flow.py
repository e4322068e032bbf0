"""Loops and conditionals of the statement walk (a mixin of semantic._Analyzer,
as register_tiles.RegisterTiles is): a loop's range or its unrolled copies, a
condition, and the constructs the threads may take differently (what the
barriers the compiler inserts must not sit in)."""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.frontend import ast, unroll
from hopperc.frontend.bounds import loop_range
from hopperc.frontend.scope import DIVERGENT_BUILTINS, scalar_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in


class ControlFlow:
    def _divergent_block(self, block: ast.Block, divergent: tuple[Span, str] | None) -> ir.Block:
        """`block`, inside `divergent` where that is a construct (its span and what
        it is) the threads may take differently; None: as uniform as around it."""
        outer = self.divergent
        self.divergent = divergent or outer
        try:
            return self._block(block)
        finally:
            self.divergent = outer

    def _require_manual(self, span: Span, what: str) -> None:
        if not self.manual:
            raise CompileError(span, f"{what} is synchronization the compiler writes; to write "
                                     "it yourself, put it in a 'manual { ... }' block")

    def _for(self, stmt: ast.For) -> list[ir.Stmt]:
        start = scalar_expr(stmt.start, self.scope)
        stop = scalar_expr(stmt.stop, self.scope)
        values = unroll.unrolled_values(stmt, start, stop, self.scope)
        if values is not None:
            return self._unrolled(stmt, values)
        self.scope.loop_ranges[stmt.var] = loop_range(start, stop, self.scope.loop_ranges,
                                                      self._warpgroups)
        self.scope.push()
        try:
            self.scope.declare(stmt.var, "loop", stmt.span)
            divergent = (builtins_in(start) | builtins_in(stop)) & DIVERGENT_BUILTINS
            if divergent and not self.manual:
                raise CompileError(stmt.span, "this loop's bounds differ between the threads of "
                                              "a role, so the barriers the compiler inserts could "
                                              "not be reached by all of them; bound it by values "
                                              "the whole block shares, use roles, or a 'manual' "
                                              "block")
            body = self._divergent_block(stmt.body, (stmt.span, "loop") if divergent else None)
        finally:
            self.scope.pop()
        if stmt.turns:
            self._check_turns(stmt.span)
        return [ir.ForLoop(stmt.var, start, stop, body, stmt.span, stmt.turns)]

    def _unrolled(self, stmt: ast.For, values: range) -> list[ir.Stmt]:
        """The loop's body once per value, its variable that constant (frontend/unroll.py)."""
        if stmt.turns:
            raise CompileError(stmt.span, "'turns' orders a loop's products; this loop is "
                                          f"unrolled ({unroll.why(stmt.var)})")
        copies: list[ir.Stmt] = []
        for value in values:
            self.scope.push()
            try:
                self.scope.declare(stmt.var, value, stmt.span)
                copies.extend(self._block(stmt.body).stmts)
            finally:
                self.scope.pop()
            unroll.check_size(stmt, unroll.statements(copies), len(values))
        return copies

    def _check_turns(self, span: Span) -> None:
        """`turns` orders the warpgroups of a warp-specialized role: its loads come
        from a producer role, so no thread of it waits on the others' reads."""
        if self.manual:
            raise CompileError(span, "'turns' has the compiler write the warpgroups' named "
                                     "barriers; manual code writes its own")
        if self.kernel.pingpong:
            raise CompileError(span, "in a pingpong kernel the warpgroups already take whole "
                                     "tiles in turn; 'turns' orders the warpgroups that share "
                                     "a tile")
        if self.role is None:
            where = "this kernel has no roles"
        elif self.role.active_warps % 4:
            warps = self.role.active_warps
            where = (f"role '{self.role.name}' has {warps} warp{'s' if warps > 1 else ''}, "
                     "not whole warpgroups")
        elif self.role.active_warps < 8:
            where = f"role '{self.role.name}' has 1 warpgroup"
        else:
            return
        raise CompileError(span, "'turns' has the warpgroups of a role take turns issuing "
                                 f"this loop's products; {where}: write it in a role of two or "
                                 "more warpgroups ('warpgroup x2') whose loads another role "
                                 "issues")

    def _if(self, stmt: ast.If) -> ir.IfThen:
        cond = scalar_expr(stmt.cond, self.scope)
        if not self.manual and builtins_in(cond) & DIVERGENT_BUILTINS:
            raise CompileError(stmt.cond.span, "this condition differs between the threads of a "
                                               "role, so the barriers the compiler inserts could "
                                               "not be reached by all of them; branch on values "
                                               "the whole block shares, use roles, or a 'manual' "
                                               "block")
        divergent = (stmt.cond.span, "condition") if builtins_in(cond) & DIVERGENT_BUILTINS \
            else None
        then = self._divergent_block(stmt.then, divergent)
        orelse = self._divergent_block(stmt.orelse, divergent) if stmt.orelse is not None \
            else ir.Block()
        return ir.IfThen(cond, then, orelse, stmt.span)
