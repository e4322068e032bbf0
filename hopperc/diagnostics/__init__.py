"""Source spans and user-facing diagnostics.

Every error the user can cause is a `CompileError` carrying the span of the
source it is about; the CLI prints it as `file:line:col: error: message`, then
the source line and a caret, and never a traceback.
"""
from __future__ import annotations

import os
import stat
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
                 file: str | None = None, rule: str | None = None,
                 source: SourceFile | None = None):
        super().__init__(message)
        self.span = span
        self.message = message
        self.notes = notes
        self.file = span.file if span is not None else file
        self.source = source  # the text to quote where the caller has none (input errors)
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
    source = source or error.source
    lines = [f"{span}: {severity}: {error.message}"]
    if source is not None and source.name == span.file:
        text = source.line_text(span.line)
        if text:
            width = span.end_col - span.col if span.end_line == span.line else len(text) - span.col + 1
            lines.append(text)
            lines.append(" " * (span.col - 1) + "^" + "~" * max(0, width - 1))
    lines.extend(f"note: {n}" for n in error.notes)
    return "\n".join(lines)


MAX_INPUT_BYTES = 4 * 1024 * 1024  # a .hk or library file; the largest sample is ~4 KiB


def read_source(path: str | Path) -> SourceFile:
    """A `.hk` file's text, read through `read_input`."""
    return SourceFile(str(path), read_input(path))


def read_input(path: str | Path) -> str:
    """The text of an input file (`.hk` or library `.toml`), the one way every command
    and the API read one. At most MAX_INPUT_BYTES + 1 bytes are read, so a device
    (/dev/zero) or a huge file ends in an error, not an exhausted memory; a FIFO
    without a writer reads as empty instead of blocking. What cannot be read, is not
    UTF-8 or holds a NUL byte is the user's error, named (rule "input")."""
    path = Path(path)
    if "\0" in str(path):  # no file system names one
        raise input_error(Path(str(path).replace("\0", "\\0")), "a path cannot hold a NUL "
                                                                  "character")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise unreadable_input(path, exc) from None
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise input_error(path, "is a directory, not a file")
        os.set_blocking(fd, True)  # opened non-blocking only so a FIFO's open returns
        data = _read_at_most(fd, MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise unreadable_input(path, exc) from None
    finally:
        os.close(fd)
    if len(data) > MAX_INPUT_BYTES:
        raise input_error(path, f"is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; "
                                 "an input file is source text")
    return decode_input(str(path), data)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def decode_input(name: str, data: bytes) -> str:
    """`data` as text, with Python's universal newlines (CR LF and a lone CR end a
    line, as a text-mode read makes them); bytes that are not UTF-8, and NUL bytes,
    are located."""
    try:
        text = _universal_newlines(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        before = _universal_newlines(data[:exc.start].decode("utf-8"))
        quoted = SourceFile(name, _universal_newlines(data.decode("utf-8", "replace")))
        raise CompileError(_char_span(name, before, len(before)),
                           f"not UTF-8 text ({exc.reason}, byte 0x{data[exc.start]:02x})",
                           rule="input", source=quoted) from None
    check_text(name, text)
    return text


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


TEXT_NAME = "<string>"


def as_source(source: str | os.PathLike[str] | SourceFile,
              name: str | None = None) -> SourceFile:
    """A path (str or PathLike) to a `.hk` file, or a kernel's text. A str is a
    path when it holds no newline and names an existing file or ends in `.hk`;
    else it is text when it holds a newline or a `{`, else a path. `name` is
    the file name diagnostics and the cubin give it (default: the path as
    given, or `<string>`). A SourceFile is taken as it is."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str (the file name diagnostics give the kernel), "
                        f"not {type(name).__name__}")
    if name == "":
        raise ValueError("name is empty: give the file name diagnostics give the kernel")
    if isinstance(source, SourceFile):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"hopperc takes a path or a kernel's text, not "
                        f"{type(source).__name__}")
    if isinstance(source, str) and is_kernel_text(source):
        check_text(name or TEXT_NAME, source)
        return SourceFile(name or TEXT_NAME, source)
    path = os.fspath(source)
    if not path:
        raise ValueError("the source is an empty string: give a .hk file's path or the "
                         "kernel's text")
    return SourceFile(name or path, read_input(path))


def is_kernel_text(source: str) -> bool:
    """Whether the API reads a str as kernel text rather than a path (`as_source`)."""
    if "\n" in source:
        return True
    if source.endswith(".hk") or os.path.isfile(source):
        return False
    return "{" in source


def check_text(name: str, text: str) -> None:
    """What every source text obeys, a file's and a string given to the API: a bound
    on its size, and no NUL byte."""
    if len(text) > MAX_INPUT_BYTES:
        raise CompileError(None, f"is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; "
                                 "an input file is source text", file=name, rule="input")
    nul = text.find("\0")
    if nul >= 0:
        raise CompileError(_char_span(name, text, nul), "a NUL byte: an input file is text",
                           rule="input", source=SourceFile(name, text))


def _char_span(name: str, text: str, offset: int) -> Span:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Span(name, line, col, line, col + 1)


def input_error(path: str | Path, message: str) -> CompileError:
    """An error about an input file as a whole (rule "input"): no line to point at."""
    return CompileError(None, message, file=str(path), rule="input")


def unreadable_input(path: str | Path, exc: OSError) -> CompileError:
    """The user's input file that could not be opened or read, said in words."""
    if isinstance(exc, FileNotFoundError):
        return input_error(path, "no such file")
    if isinstance(exc, IsADirectoryError):
        return input_error(path, "is a directory, not a file")
    return input_error(path, f"cannot read ({exc.strerror})")
