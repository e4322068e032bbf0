"""Parse `.hk` text into the AST (Lark LALR with propagated positions): the
parser's cached tables, the checks on the token stream and the syntax errors;
`to_ast.py` builds the nodes from the parse tree."""
from __future__ import annotations

import hashlib
import io
from functools import lru_cache

import lark
from lark import Token

from hopperc.diagnostics import CompileError, SourceFile, Span
from hopperc.frontend import ast
from hopperc.frontend.keyword_typos import find_typo, glued_keyword_note, typo_error
from hopperc.frontend.nesting import check_nesting
from hopperc.frontend.to_ast import ToAst
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
        return ToAst(source.name).transform(tree)
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
