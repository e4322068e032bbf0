"""One error, warning or finding as every output format needs it: the text a
person reads, the JSON record a script reads, and the SARIF result a
code-scanning tool reads (sarif.py). Built at the command-line boundary from
the exceptions the compiler raises; nothing here reaches into the compiler.

Exit codes: 1 for the user's input (the `.hk` file, the command line, a
finding), 2 for the toolchain or an internal error.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from hopperc.diagnostics import CompileError, SourceFile, Span, ToolchainError, format_diagnostic

EXIT_USER, EXIT_TOOLCHAIN = 1, 2


class Problem(NamedTuple):
    severity: str  # "error" or "warning"
    rule: str  # a stable id: what kind of problem (docs/cli.md lists them)
    message: str
    text: str  # the human form: location, message, quoted line, caret, notes
    exit_code: int = EXIT_USER
    span: Span | None = None
    file: str | None = None  # where there is no span (a missing file, an option)
    related: tuple[Span, ...] = ()
    notes: tuple[str, ...] = ()

    def record(self) -> dict:
        """The JSON form (`--diagnostics json`): one object per problem."""
        return {"severity": self.severity, "rule": self.rule, "exit_code": self.exit_code,
                "message": self.message, **location(self.span, self.file),
                "related": [location(span) for span in self.related],
                "notes": list(self.notes)}


def location(span: Span | None, file: str | None = None) -> dict:
    fields = ("line", "column", "end_line", "end_column")
    if span is None:
        return {"file": file, **dict.fromkeys(fields)}
    return {"file": span.file, **dict(zip(fields, (span.line, span.col, span.end_line,
                                                   span.end_col)))}


def describe(exc: BaseException, source: SourceFile | None) -> Problem:
    """The problem an exception from the compiler stands for."""
    if isinstance(exc, CompileError):
        return Problem("error", exc.rule, exc.message, format_diagnostic(exc, source),
                       EXIT_USER, exc.span, exc.file or (source.name if source else None),
                       notes=tuple(exc.notes))
    if isinstance(exc, ToolchainError):
        return Problem("error", "toolchain", str(exc), f"error: {exc}", EXIT_TOOLCHAIN,
                       file=source.name if source else None)
    text = f"internal error: {type(exc).__name__}: {exc}\nnote: this is a bug in hopperc"
    if os.environ.get("HOPPERC_TRACEBACK"):
        import traceback
        text += "\n" + "".join(traceback.format_exception(exc))
    return Problem("error", "internal", f"{type(exc).__name__}: {exc}", text, EXIT_TOOLCHAIN,
                   file=source.name if source else None)


def warning(rule: str, message: str, span: Span | None, file: str | None = None,
            source: SourceFile | None = None, notes: tuple[str, ...] = ()) -> Problem:
    """A warning, quoted at its line like an error (it does not fail the build)."""
    text = format_diagnostic(CompileError(span, message, notes, file=file), source, "warning")
    return Problem("warning", rule, message, text, 0, span, file, notes=notes)


def as_error(problem: Problem, why: str) -> Problem:
    """A warning made an error (`--Werror`): the same rule, place and message, with
    `why` as its last note."""
    head, sep, rest = problem.text.partition("\n")
    head = head.replace(": warning: ", ": error: ", 1)
    return problem._replace(severity="error", exit_code=EXIT_USER,
                            text=f"{head}{sep}{rest}\nnote: {why}",
                            notes=(*problem.notes, why))


def in_context(problem: Problem, context: str) -> Problem:
    """`problem` as one of several builds of a file reports it: `context` (which
    build) heads its text, on a line of its own so that the located line still
    starts with `file:line:col:`, and leads its message."""
    return problem._replace(message=f"{context}: {problem.message}",
                            text=f"{context}:\n{problem.text}")
