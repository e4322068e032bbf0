"""Diagnostics as the Python API hands them over: a located record per error or
warning, and `hopperc.CompileError`, the exception that carries an error's.
Both print exactly as the command line prints them (`file:line:col: error:
message`, the source line, a caret)."""
from __future__ import annotations

from typing import NamedTuple

from hopperc import diagnostics
from hopperc.diagnostics import SourceFile, Span
from hopperc.diagnostics.problems import Problem, describe


class Diagnostic(NamedTuple):
    """One error or warning: where (lines and columns count from 1; None where it
    has no place in the source, e.g. a missing file), what kind (`rule`, the id
    `--diagnostics json` reports), the message, the quoted source line, and the
    whole text as the command line prints it (also `str()`)."""

    severity: str  # "error" or "warning"
    rule: str
    message: str
    file: str | None
    line: int | None
    column: int | None
    end_line: int | None
    end_column: int | None
    source_line: str | None
    notes: tuple[str, ...]
    text: str

    def __str__(self) -> str:
        return self.text

    @classmethod
    def of(cls, problem: Problem, source: SourceFile | None) -> Diagnostic:
        span = problem.span
        if span is None:
            return cls(problem.severity, problem.rule, problem.message, problem.file, None,
                       None, None, None, None, tuple(problem.notes), problem.text)
        quoted = source.line_text(span.line) if source and source.name == span.file else None
        return cls(problem.severity, problem.rule, problem.message, span.file, span.line,
                   span.col, span.end_line, span.end_col, quoted, tuple(problem.notes),
                   problem.text)


class CompileError(diagnostics.CompileError):
    """`hopperc.build` (and `hopperc.compile`) refused the input: the kernel, its
    defines, its target, or its file. `diagnostics` holds the located errors (the
    first one's fields are also attributes); `str()` is the command line's text."""

    def __init__(self, error: diagnostics.CompileError, source: SourceFile | None):
        source = error.source or source
        located = Diagnostic.of(describe(error, source), source)
        super().__init__(error.span, error.message, tuple(error.notes), file=located.file,
                         rule=error.rule, source=source)
        self.diagnostics = (located,)

    @property
    def line(self) -> int | None:
        return self.diagnostics[0].line

    @property
    def column(self) -> int | None:
        return self.diagnostics[0].column

    @property
    def source_line(self) -> str | None:
        return self.diagnostics[0].source_line

    def __str__(self) -> str:
        return "\n".join(d.text for d in self.diagnostics)

    def __reduce__(self):
        # rebuilt from the located error, so a worker process can raise it to its parent
        return _rebuild, (self.span, self.message, self.notes, self.file, self.rule,
                          self.source)


def _rebuild(span: Span | None, message: str, notes: tuple[str, ...], file: str | None,
             rule: str, source: SourceFile | None) -> CompileError:
    return CompileError(diagnostics.CompileError(span, message, notes, file, rule, source),
                        source)
