"""Run one `.hk` input through the CLI in process and check the properties every
input must have, whatever it contains:

- no traceback escapes, and the exit code is 0 or 1 (2 is an internal or
  toolchain error: a bug for any input);
- an error is located, `file:line:col: error: ...`, with `line` inside the file
  and the quoted line exactly that line as the lexer counts lines (`\\n` only);
- an accepted kernel renders to `.cu` (the IR verifier runs between passes), and
  a failed one leaves no output file;
- on request, an accepted kernel also compiles with NVRTC.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from hopperc.cli import main

_HEAD = re.compile(r"(?P<line>\d+):(?P<col>\d+): error: (?P<message>.*)")
_FRAME = re.compile(r'File "(?P<path>[^"]*[/\\]hopperc[/\\][^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


@dataclass(frozen=True)
class Outcome:
    """What one input did: exit code, the error's kind, and a failure if any."""

    exit_code: int
    stderr: str
    error_kind: str | None = None  # the located error's message, names and numbers blanked
    failure: str | None = None  # what property broke, None when all hold
    failure_key: tuple[str, ...] | None = None  # (exit code, exception type, hopperc frame)


def run_input(text: str, workdir: Path, nvrtc: bool = False, name: str = "fuzz.hk") -> Outcome:
    """`hopperc emit --cu` (or `build`, with `nvrtc`) on `text`, checked."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass", newline="")
    output = workdir / ("fuzz.cubin" if nvrtc else "fuzz.cu")
    output.unlink(missing_ok=True)
    args = (["build", str(path), "-o", str(output), "-q"] if nvrtc
            else ["emit", "--cu", str(path), "-o", str(output)])
    result = CliRunner().invoke(main, args, env={"HOPPERC_TRACEBACK": "1"})
    stderr = result.stderr
    code = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        frame = _innermost_frame(exc.__traceback__)
        return Outcome(code, stderr, failure=f"traceback escaped the CLI: {type(exc).__name__}: {exc}",
                       failure_key=("traceback", type(exc).__name__, frame))
    if code not in (0, 1):
        exc_type, where = _internal_error_place(stderr)
        return Outcome(code, stderr, failure=f"exit {code} (internal/toolchain error): "
                                             f"{stderr.split(chr(10), 1)[0][:300]}",
                       failure_key=(f"exit {code}", exc_type, where))
    if code == 0:
        if not output.is_file() or (not nvrtc and "__global__" not in output.read_text()):
            return Outcome(code, stderr, failure="exit 0 without a complete output file",
                           failure_key=("exit 0", "no output", ""))
        return Outcome(code, stderr)
    if output.exists():
        return Outcome(code, stderr, failure="exit 1 left an output file",
                       failure_key=("exit 1", "partial output", ""))
    # What the lexer sees: the file as the driver reads it (universal newlines).
    source = path.read_text(encoding="utf-8", errors="surrogatepass")
    problem, kind = _check_location(stderr, str(path), source)
    if problem:
        return Outcome(code, stderr, kind, failure=problem,
                       failure_key=("exit 1", "bad location", problem.split(":")[0]))
    return Outcome(code, stderr, kind)


def _check_location(stderr: str, file: str, source: str) -> tuple[str | None, str | None]:
    """(what is wrong with the error's location or None, the error's kind)."""
    lines = stderr.split("\n")
    if not lines[0].startswith(file + ":"):
        return f"unlocated error: {lines[0][:200]!r}", None
    head = _HEAD.fullmatch(lines[0][len(file) + 1:])
    if head is None:
        return f"unlocated error: {lines[0][:200]!r}", None
    kind = _error_kind(head.group("message").split("; expected")[0])
    line, col = int(head.group("line")), int(head.group("col"))
    source_lines = source.split("\n")
    if not 1 <= line <= len(source_lines):
        return f"line out of range: line {line} of {len(source_lines)}", kind
    expected = source_lines[line - 1]
    if expected:
        quoted = lines[1] if len(lines) > 1 else ""
        if quoted != expected:
            return (f"quoted line differs: line {line} is {expected[:120]!r}, "
                    f"quoted {quoted[:120]!r}"), kind
        caret = lines[2] if len(lines) > 2 else ""
        if not caret.startswith(" " * (col - 1) + "^"):
            return f"caret not at column {col}: {caret[:120]!r}", kind
    return None, kind


def _internal_error_place(stderr: str) -> tuple[str, str]:
    """(exception type, innermost hopperc frame) of an internal error's traceback.

    A chained traceback prints the original exception first: a wrapper such as
    lark's VisitError is reported by the error it wraps."""
    kind = re.search(r"internal error: (\w+)", stderr)
    if kind is None:
        return "ToolchainError", _toolchain_kind(stderr)
    original = re.split(r"\n(?:The above exception|During handling)", stderr, maxsplit=1)[0]
    raised = re.findall(r"(?m)^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit))\b", original)
    frames = _FRAME.findall(original)
    exc_type = raised[-1] if raised else kind.group(1)
    return exc_type, _frame_name(*frames[-1]) if frames else ""


def _error_kind(message: str) -> str:
    """The message with quoted text and numbers blanked, to count errors by kind."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'_'", message)
    return re.sub(r"\d+", "N", message)[:100]


def _innermost_frame(tb) -> str:
    where = ""
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if f"{os.sep}hopperc{os.sep}" in path:
            where = _frame_name(path, str(tb.tb_lineno), tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return where


def _frame_name(path: str, line: str, func: str) -> str:
    tail = path.replace("\\", "/").rsplit("/hopperc/", 1)[-1]
    return f"hopperc/{tail}:{line}:{func}"


def _toolchain_kind(stderr: str) -> str:
    first = stderr.split("\n", 1)[0]
    return re.sub(r"\d+", "N", first.rsplit("error:", 1)[-1])[:100]
