"""Keywords in a syntax error: a misspelt one (which word was meant, and where it
is), and one glued to a name (`forj`).

A misspelt keyword is often not where the parser stops: `rol math: warpgroup`
reads `rol` as a name (a statement may start with one) and fails at `math`;
`swizle 128B` reads `swizle` as the next statement's name and fails at `128`;
`warpgroop` lexes as the keyword `warp` followed by `groop`. So the words looked at
are the unexpected token itself, the name just before it, and a keyword glued to
it. Each is compared (scope.closest, the measure unknown names use) with the
literals the grammar accepts where that word starts, and a suggestion is made only
where the text with the word replaced parses past the token after it, and further
than the word split after a keyword it starts with: `fork in` is `for k in`, not
`for in`, and keeps its glued-name note.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import lark
from lark import Token

from hopperc.diagnostics import CompileError, SourceFile, Span
from hopperc.frontend.scope import closest

# The candidates are only the literals the grammar accepts at the word and each
# suggestion is tried by re-parsing, so a looser cutoff than for names is safe;
# it admits one changed letter in a two-letter keyword (`on` for `in`).
KEYWORD_CUTOFF = 0.5
# A terminal that is a list of words, as DTYPE is: `(bf16|f16|f32)(?![\w])`.
WORD_LIST = re.compile(r"\((\w+(?:\|\w+)+)\)(?:\(\?!.*\))?")


@dataclass(frozen=True)
class Typo:
    """The misspelt word (text offsets, end exclusive) and the literal meant."""

    start: int
    end: int
    word: str
    meant: str
    read_as_name: bool  # the parser took the word for a name and failed after it


def find_typo(parser: lark.Lark, text: str, seen: list[Token],
              exc: lark.UnexpectedInput) -> Typo | None:
    """The likeliest misspelt keyword behind `exc`, or None. `seen` holds the tokens
    the lexer produced before the error, in order."""
    failed_at = _offset(exc, text)
    before = [t for t in seen if t.start_pos < failed_at]
    unexpected = exc.token if isinstance(exc, lark.UnexpectedToken) else None
    if unexpected is not None and unexpected.type != "$END":
        accepted = exc.accepts or exc.expected
        typo = _try(parser, text, unexpected.start_pos, unexpected.end_pos, accepted, False)
        if typo is not None:
            return typo
    if not before:
        return None
    previous = before[-1]
    end = previous.end_pos
    if (unexpected is not None and unexpected.type != "$END" and end == unexpected.start_pos
            and _is_word(str(previous)) and _is_word(str(unexpected))):
        end = unexpected.end_pos  # `warpgroop`: the keyword `warp` glued to `groop`
    elif previous.type != "NAME":
        return None
    return _try(parser, text, previous.start_pos, end, _accepts(parser, text, before[:-1]),
                end == previous.end_pos)


def typo_error(source: SourceFile, typo: Typo, exc: lark.UnexpectedInput) -> CompileError:
    """`unexpected 'rol'; did you mean 'role'?` with the caret on the misspelt word."""
    line = source.text.count("\n", 0, typo.start) + 1
    col = typo.start - source.text.rfind("\n", 0, typo.start)
    span = Span(source.name, line, col, line, col + typo.end - typo.start)
    notes = ()
    if typo.read_as_name:
        if isinstance(exc, lark.UnexpectedCharacters):
            after = repr(source.text[exc.pos_in_stream])
        elif isinstance(exc, lark.UnexpectedToken) and exc.token.type != "$END":
            after = f"'{exc.token}'"
        else:
            after = "the end of the file"
        notes = (f"'{typo.word}' reads as a name here, which {after} cannot follow",)
    return CompileError(span, f"unexpected '{typo.word}'; did you mean '{typo.meant}'?", notes)


def glued_keyword_note(parser: lark.Lark, token: Token | None) -> tuple[str, ...]:
    """Where a name is allowed, `forj` is one name: say so when a syntax error follows it."""
    if token is None or token.type != "NAME":
        return ()
    for word in _keywords(parser):
        rest = str(token)[len(word):]
        if str(token).startswith(word) and rest and not rest[0].isdigit():
            return (f"'{token}' is read as one name; if you meant the keyword, write "
                    f"'{word} {rest}'",)
    return ()


def _keywords(parser: lark.Lark) -> tuple[str, ...]:
    """The grammar's word literals, longest first."""
    words = {t.pattern.value for t in parser.terminals
             if isinstance(t.pattern, lark.lexer.PatternStr) and t.pattern.value.isalpha()}
    return tuple(sorted(words, key=len, reverse=True))


def _try(parser: lark.Lark, text: str, start: int, end: int, terminals,
         read_as_name: bool) -> Typo | None:
    """`word` as the closest accepted literal, where the text then parses past the
    token after it, and further than with the word split after a keyword it starts
    with (`fork` as `for k`)."""
    word = text[start:end]
    literals = _literals(parser, terminals)
    meant = closest(word, literals - {word}, KEYWORD_CUTOFF)
    if meant is None:
        return None
    rest = text[end:]
    next_token = end + len(rest) - len(rest.lstrip())
    reach = _reach(parser, text[:start] + meant + text[end:]) - len(meant) + len(word)
    split = max((_reach(parser, f"{text[:start]}{kw} {text[start + len(kw):]}") - 1
                 for kw in literals if word.startswith(kw) and word[len(kw):][:1].isalpha()),
                default=-1)
    return Typo(start, end, word, meant, read_as_name) if reach > max(next_token, split) else None


def _reach(parser: lark.Lark, text: str) -> int:
    """How far `text` parses: the offset of its first syntax error, or past its end."""
    try:
        parser.parse(text)
    except lark.UnexpectedInput as exc:
        return _offset(exc, text)
    return len(text) + 1


def _offset(exc: lark.UnexpectedInput, text: str) -> int:
    if isinstance(exc, lark.UnexpectedToken) and exc.token.type != "$END":
        return exc.token.start_pos
    if isinstance(exc, lark.UnexpectedCharacters):
        return exc.pos_in_stream
    return len(text)


def _accepts(parser: lark.Lark, text: str, tokens: list[Token]) -> set[str]:
    """The terminals the parser accepts after `tokens` (replayed on a fresh parse)."""
    state = parser.parse_interactive(text)
    for token in tokens:
        state.feed_token(token)
    return state.accepts()


def _literals(parser: lark.Lark, terminals) -> set[str]:
    """The fixed texts (keywords and punctuation) among `terminals`, and, where no
    name is accepted (so the word cannot be one), the words of a terminal that is a
    list of them (DTYPE's `bf16|f16|...`: `buf: bf61` means `bf16`)."""
    names_accepted = "NAME" in terminals
    texts = set()
    for name in terminals:
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            continue
        if isinstance(pattern, lark.lexer.PatternStr):
            texts.add(pattern.value)
        elif not names_accepted and (words := WORD_LIST.fullmatch(pattern.value)):
            texts.update(words.group(1).split("|"))
    return texts


def _is_word(text: str) -> bool:
    return bool(text) and all(c.isascii() and (c.isalnum() or c == "_") for c in text)
