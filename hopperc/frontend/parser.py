"""Parse `.hk` text into the AST (Lark LALR with propagated positions)."""
from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass
from functools import lru_cache

import lark
from lark import Token, Transformer, v_args

from hopperc.diagnostics import CompileError, SourceFile, Span
from hopperc.frontend import ast
from hopperc.frontend.keyword_typos import find_typo, glued_keyword_note, typo_error
from hopperc.frontend.literals import float_literal, int_literal
from hopperc.frontend.nesting import check_nesting
from hopperc.local_files import cache_root, data_directory, store_quietly

MAX_EXPECTED = 12
CLOSERS = ("'}'", "')'", "']'")
# Friendly names for the named terminals a syntax error lists as expected.
_TOKEN_NAMES = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "DTYPE": "a dtype",
    "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "COMMA": "','", "COLON": "':'", "EQUAL": "'='", "ARROW": "'<-'",
    "ASSIGN_OP": "'=' or '+='", "SWIZZLE": "a swizzle mode (none, 32B, 64B, 128B)",
    "SYNC_OP": "a sync primitive", "SYNC_BARE": "a sync primitive", "WG_COUNT": "a warpgroup count like x2",
    "MANUAL": "'manual'", "$END": "end of file",
}


@dataclass(frozen=True)
class _Clause:
    """One clause of the kernel header (`tile(...)`, `threads 128`, `persistent`)."""

    keyword: str
    value: object
    span: Span


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    """The LALR parser. Building its tables takes ~0.1 s, so they are kept in the
    cache directory under the hash of the grammar and lark's version, written
    atomically (lark's own `cache=` writes in place, which concurrent builds
    would read half-written); a table that cannot be read or written is rebuilt."""
    grammar = (data_directory("grammar") / "hk.lark").read_text(encoding="utf-8")
    digest = hashlib.sha256(f"{lark.__version__}\0{grammar}".encode()).hexdigest()[:32]
    path = cache_root() / "grammar" / f"hk-{digest}.lark"
    try:
        with path.open("rb") as handle:
            return lark.Lark.load(handle)
    except Exception:  # noqa: BLE001 - missing, damaged or from another lark: rebuild
        pass
    parser = lark.Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)
    tables = io.BytesIO()
    parser.save(tables)
    store_quietly(path, tables.getvalue())
    return parser


def load_parser() -> None:
    """Load (or build) the parser's tables now rather than at the first parse."""
    _parser()


def parse(source: SourceFile) -> ast.Kernel:
    """Parse one kernel; syntax errors become located `CompileError`s (rule "syntax")."""
    try:
        return _parse(source)
    except CompileError as error:
        error.rule = "syntax"
        raise


def _parse(source: SourceFile) -> ast.Kernel:
    seen: list[Token] = []  # the tokens lexed so far, for a syntax error's diagnosis
    try:
        parser = _parser().parse_interactive(source.text)
        for token in parser.iter_parse():
            _check_separated(seen[-1] if seen else None, token, source)
            seen.append(token)
        tree = parser.feed_eof()
    except lark.UnexpectedInput as exc:
        typo = find_typo(_parser(), source.text, seen, exc)
        if typo is not None:
            raise typo_error(source, typo, exc) from None
        error = _syntax_error(source, exc)
        if isinstance(exc, lark.UnexpectedToken):
            error.notes += glued_keyword_note(_parser(), seen[-1] if seen else None)
        raise error from None
    check_nesting(tree, source.name)
    try:
        return _ToAst(source.name).transform(tree)
    except lark.exceptions.VisitError as exc:
        # Lark wraps what a rule method raises; a literal out of range is the user's error.
        if isinstance(exc.orig_exc, CompileError):
            raise exc.orig_exc from None
        raise


def _is_word(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


def _check_separated(previous: Token | None, token: Token, source: SourceFile) -> None:
    """Two words never touch: where only a keyword may come, the lexer would otherwise
    split `kernelfoo` into `kernel` and `foo` (and `threads128`, `1.0f` likewise)."""
    if previous is None or previous.end_pos != token.start_pos:
        return
    if _is_word(str(previous)[-1]) and _is_word(str(token)[0]):
        span = Span(source.name, previous.line, previous.column, token.end_line, token.end_column)
        raise CompileError(span, f"'{previous}{token}' reads as '{previous}' followed by "
                                 f"'{token}': separate them with a space")


def _syntax_error(source: SourceFile, exc: lark.UnexpectedInput) -> CompileError:
    line, col = exc.line, exc.column
    at_end = isinstance(exc, lark.UnexpectedEOF) or (
        isinstance(exc, lark.UnexpectedToken) and exc.token.type == "$END")
    if at_end or line is None or line < 1:
        # Point just past the last character of the file that is not whitespace to the
        # lexer (its WS is space, tab, \f, \r and \n; only \n ends a line).
        lines = source.text.rstrip(" \t\f\r\n").split("\n")
        line, col = len(lines), len(lines[-1]) + 1
    span = Span(source.name, line, col, line, col + 1)
    if isinstance(exc, lark.UnexpectedToken):
        token = exc.token
        found = "end of file" if at_end else f"'{token}'"
        accepts = exc.accepts or exc.expected
        # Where a copy's arrow may come, ASSIGN_OP is only ever a reduce-add's '+=':
        # the copies' '=' is refused (tma_stmt, bulk_stmt).
        copy = {"ASSIGN_OP": "'+='"} if "ARROW" in accepts else {}
        names = {copy.get(t) or _TOKEN_NAMES.get(t, _literal(t)) for t in accepts}
        # A missing closing bracket is the likeliest mistake: list closers first.
        expected = sorted(names, key=lambda n: (n not in CLOSERS, n))
        if not at_end:
            span = Span(source.name, line, col, line, col + max(1, len(str(token))))
        shown = ", ".join(expected[:MAX_EXPECTED]) + (", ..." if len(expected) > MAX_EXPECTED else "")
        return CompileError(span, f"unexpected {found}" + (f"; expected {shown}" if expected else ""))
    if isinstance(exc, lark.UnexpectedCharacters):
        return CompileError(span, f"unexpected character {source.line_text(line)[col - 1:col]!r}")
    return CompileError(span, "unexpected end of file")


def _literal(terminal: str) -> str:
    """The text of an anonymous terminal (Lark names them like CIRCUMFLEX or WARP)."""
    try:
        pattern = _parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal.lower()
    return f"'{pattern.value}'" if isinstance(pattern, lark.lexer.PatternStr) else terminal.lower()


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
class _ToAst(Transformer):
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
