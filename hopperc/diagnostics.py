"""Source spans and user-facing diagnostics.

Every error the user can cause is a `CompileError` carrying the span of the
source it is about; the CLI prints it as `file:line:col: error: message`, then
the source line and a caret, and never a traceback.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Span:
    """A region of a source file; lines and columns count from 1."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class SourceFile:
    """The text of one `.hk` file, kept so diagnostics can quote it."""

    name: str
    text: str

    def line_text(self, line: int) -> str:
        """Line `line` as the lexer counts lines: only `\\n` ends one (`str.splitlines`
        also splits at form feeds, `\\v`, `\\x1c`-`\\x1e`, `\\x85`, U+2028 and U+2029)."""
        lines = self.text.split("\n")
        return lines[line - 1].removesuffix("\r") if 0 < line <= len(lines) else ""


class CompileError(Exception):
    """An error in the user's input (exit code 1). `rule` says what kind (the
    id `--diagnostics json|sarif` reports); the stage that raises sets it."""

    rule = "semantics"

    def __init__(self, span: Span | None, message: str, notes: tuple[str, ...] = (),
                 file: str | None = None, rule: str | None = None):
        super().__init__(message)
        self.span = span
        self.message = message
        self.notes = notes
        self.file = span.file if span is not None else file
        if rule is not None:
            self.rule = rule


class ToolchainError(Exception):
    """The toolchain or the compiler itself failed (exit code 2)."""


def format_diagnostic(error: CompileError, source: SourceFile | None, severity: str = "error") -> str:
    """`file:line:col: error: message`, the quoted line and a caret under the span."""
    if error.span is None:
        name = error.file or (source.name if source else "<input>")
        head = f"{name}: {severity}: {error.message}"
        return "\n".join([head, *(f"note: {n}" for n in error.notes)])
    span = error.span
    lines = [f"{span}: {severity}: {error.message}"]
    if source is not None and source.name == span.file:
        text = source.line_text(span.line)
        if text:
            width = span.end_col - span.col if span.end_line == span.line else len(text) - span.col + 1
            lines.append(text)
            lines.append(" " * (span.col - 1) + "^" + "~" * max(0, width - 1))
    lines.extend(f"note: {n}" for n in error.notes)
    return "\n".join(lines)


def read_source(path: str | Path) -> SourceFile:
    """A `.hk` file's text; an unreadable file is the user's error, named."""
    path = Path(path)
    try:
        return SourceFile(str(path), path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        message = "no such file"
    except IsADirectoryError:
        message = "is a directory, not a .hk file"
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text ({exc.reason})"
    except OSError as exc:
        message = f"cannot read ({exc.strerror})"
    raise CompileError(None, message, file=str(path), rule="input")
