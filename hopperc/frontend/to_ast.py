"""Turn Lark's parse tree into the AST: one method per grammar rule, building
nodes bottom-up with their spans (kernel header clauses, statements, expressions)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from lark import Token, Transformer, v_args

from hopperc.diagnostics import CompileError, Span
from hopperc.frontend import ast
from hopperc.frontend.literals import float_literal, int_literal


@dataclass(frozen=True)
class _Clause:
    """One clause of the kernel header (`tile(...)`, `threads 128`, `persistent`)."""

    keyword: str
    value: object
    span: Span


def _span(file: str, meta) -> Span:
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(file: str, tok: Token) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _binop(op: str):
    def method(self, meta, children):
        return ast.BinOp(op, children[0], children[1], self._s(meta))
    return method


def _boolop(op: str):
    def method(self, meta, children):
        return ast.BoolOp(op, children[0], children[1], self._s(meta))
    return method


@v_args(meta=True)
class ToAst(Transformer):
    """Build AST nodes bottom-up; each rule method receives Lark's position meta."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _s(self, meta) -> Span:
        return _span(self.file, meta)

    # ---- kernel
    def start(self, meta, children):
        return children[0]

    def kernel(self, meta, children):
        name, *rest = children
        manual = any(isinstance(c, Token) and c.type == "MANUAL" for c in rest)
        body = rest[-1]
        params = tuple(c for c in rest if isinstance(c, (ast.TensorParam, ast.ScalarParam)))
        clauses: dict[str, _Clause] = {}
        for clause in (c for c in rest if isinstance(c, _Clause)):
            if clause.keyword in clauses:
                raise CompileError(clause.span, f"the kernel header has a second "
                                                f"'{clause.keyword}' clause (the first is at "
                                                f"{clauses[clause.keyword].span}); give each "
                                                "clause once")
            clauses[clause.keyword] = clause

        def value(keyword: str, default):
            return clauses[keyword].value if keyword in clauses else default

        return ast.Kernel(str(name), params, value("tile", ()), value("grid", ()),
                          value("cluster", None), value("threads", None), manual, body,
                          self._s(meta), "persistent" in clauses, "specialize" in clauses,
                          "pingpong" in clauses,
                          tuple(ast.Clause(c.keyword, c.span) for c in clauses.values()))

    def tensor_param(self, meta, children):
        name, dtype, *dims = children
        return ast.TensorParam(str(name), dtype, tuple(self._dim(d) for d in dims), self._s(meta))

    def _dim(self, tok: Token) -> ast.Name | ast.IntLit:
        span = _tok_span(self.file, tok)
        if tok.type == "INT":
            return ast.IntLit(int_literal(str(tok), span), span)
        return ast.Name(str(tok), span)

    def scalar_param(self, meta, children):
        name, dtype = children
        return ast.ScalarParam(str(name), dtype, self._s(meta))

    def tile_clause(self, meta, children):
        return _Clause("tile", tuple(children), self._s(meta))

    def grid_clause(self, meta, children):
        return _Clause("grid", tuple(children), self._s(meta))

    def _int(self, tok: Token) -> int:
        return int_literal(str(tok), _tok_span(self.file, tok))

    def cluster_clause(self, meta, children):
        return _Clause("cluster", tuple(self._int(c) for c in children), self._s(meta))

    def threads_clause(self, meta, children):
        return _Clause("threads", self._int(children[0]), self._s(meta))

    def persistent_clause(self, meta, children):
        return _Clause("persistent", True, self._s(meta))

    def specialize_clause(self, meta, children):
        return _Clause("specialize", True, self._s(meta))

    def pingpong_clause(self, meta, children):
        return _Clause("pingpong", True, self._s(meta))

    def const_def(self, meta, children):
        return ast.ConstDef(str(children[0]), children[1], self._s(meta))

    def grid_dim(self, meta, children):
        return ast.GridDim(str(children[0]), children[1], self._s(meta))

    def dtype(self, meta, children):
        return str(children[0])

    # ---- statements
    def block(self, meta, children):
        return ast.Block(tuple(children), self._s(meta))

    def shared_decl(self, meta, children):
        name, dtype, *shape, stages, swizzle, reuses = children
        reused = None if reuses is None else ast.Name(str(reuses), _tok_span(self.file, reuses))
        return ast.SharedDecl(str(name), dtype, tuple(shape), stages,
                              None if swizzle is None else str(swizzle), self._s(meta), reused)

    def mbarrier_decl(self, meta, children):
        return ast.MBarrierDecl(str(children[0]), children[1], self._s(meta))

    def role(self, meta, children):
        name, (unit, count), regs, body = children
        return ast.Role(str(name), unit, count, None if regs is None else self._int(regs), body,
                        self._s(meta))

    def one_warp(self, meta, children):
        return ("warp", 1)

    def n_warps(self, meta, children):
        return ("warps", self._int(children[0]))

    def warpgroups(self, meta, children):
        count = children[0]
        if count is None:
            return ("warpgroup", 1)
        digits = Span(self.file, count.line, count.column + 1, count.end_line, count.end_column)
        return ("warpgroup", int_literal(str(count)[1:], digits))

    def for_stmt(self, meta, children):
        var, start, stop, turns, body = children
        return ast.For(str(var), start, stop, body, self._s(meta), turns is not None)

    def if_stmt(self, meta, children):
        cond, then, orelse = children
        if isinstance(orelse, ast.If):
            orelse = ast.Block((orelse,), orelse.span)
        return ast.If(cond, then, orelse, self._s(meta))

    def tma_stmt(self, meta, children):
        dst, op, src, via = children
        if str(op) == "=":
            raise CompileError(Span(self.file, op.line, op.column, op.end_line, op.end_column),
                               "a tma copy is 'tma DST <- SRC' or, to add a tile "
                               "into a tensor, 'tma T[i, j] += buf'")
        return ast.Copy("tma", dst, src, via, self._s(meta), reduce_add=str(op) == "+=")

    def bulk_stmt(self, meta, children):
        dst, op, src, via = children
        if str(op) != "<-":
            span = Span(self.file, op.line, op.column, op.end_line, op.end_column)
            if str(op) == "+=":
                raise CompileError(span, "a reduce-add is a TMA copy's (cp.reduce.async.bulk."
                                         "tensor): 'tma T[i] += buf'; a bulk copy is 'bulk DST "
                                         "<- SRC'")
            raise CompileError(span, "a bulk copy is 'bulk DST <- SRC'")
        return ast.Copy("bulk", dst, src, via, self._s(meta))

    def tile_decl(self, meta, children):
        name, dtype, *shape, init = children
        return ast.TileDecl(str(name), dtype, tuple(shape), init, self._s(meta))

    def scalar_decl(self, meta, children):
        name, dtype, value = children
        return ast.ScalarDecl(str(name), dtype, value, self._s(meta))

    def assign(self, meta, children):
        target, op, value = children
        return ast.Assign(target, str(op), value, self._s(meta))

    def signal_stmt(self, meta, children):
        return ast.Signal(children[0], self._s(meta))

    def count_decl(self, meta, children):
        name, dtype, flag = children
        return ast.Signal(flag, self._s(meta), str(name), dtype)

    def wait_stmt(self, meta, children):
        flag, op, count = children
        if str(op) != ">=":
            raise CompileError(self._s(meta), f"a flag is waited on with '>=' (wait F[i] >= n: "
                                              f"it only grows), not '{op}'")
        return ast.Wait(flag, count, self._s(meta))

    def elect_block(self, meta, children):
        return ast.Elect(children[0], self._s(meta))

    def manual_block(self, meta, children):
        return ast.Manual(children[1], self._s(meta))

    def sync_stmt(self, meta, children):
        op, *args = children
        return ast.SyncStmt(str(op), tuple(a for a in args if a is not None), self._s(meta))

    # ---- expressions
    def int_lit(self, meta, children):
        return ast.IntLit(int_literal(str(children[0]), self._s(meta)), self._s(meta))

    def float_lit(self, meta, children):
        return ast.FloatLit(float_literal(str(children[0]), self._s(meta)), self._s(meta))

    def inf_lit(self, meta, children):
        return ast.FloatLit(math.inf, self._s(meta))

    def name(self, meta, children):
        return ast.Name(str(children[0]), self._s(meta))

    def attribute(self, meta, children):
        return ast.Attribute(children[0], str(children[1]), self._s(meta))

    def subscript(self, meta, children):
        return ast.Subscript(children[0], tuple(children[1:]), self._s(meta))

    def full_slice(self, meta, children):
        return ast.FullSlice(self._s(meta))

    def range_slice(self, meta, children):
        return ast.RangeSlice(children[0], children[1], self._s(meta))

    def new_axis(self, meta, children):
        return ast.NewAxis(self._s(meta))

    def transpose(self, meta, children):
        return ast.Transpose(children[0], self._s(meta))

    def cast(self, meta, children):
        return ast.Cast(children[0], children[1], self._s(meta))

    def call(self, meta, children):
        name, *args = children
        return ast.Call(str(name), tuple(a for a in args if a is not None), self._s(meta))

    def neg(self, meta, children):
        return ast.Neg(children[0], self._s(meta))

    def not_(self, meta, children):
        return ast.Not(children[0], self._s(meta))

    def compare(self, meta, children):
        left, op, right = children
        return ast.Compare(str(op), left, right, self._s(meta))

    add, sub, mul, div, mod, matmul = (_binop(o) for o in ("+", "-", "*", "/", "%", "@"))
    and_, or_ = _boolop("and"), _boolop("or")
