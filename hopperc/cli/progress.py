"""A progress line for people at a terminal: `[12/40] gemm_bf16_bn128 ...` on
stderr, rewritten in place (carriage return, then erase to the end of the line)
and erased before anything else is printed and at the end.

Shown only where a person watches it: stderr is a terminal, the diagnostics are
text (JSON lines and SARIF are for programs) and `-q` was not given. A CI log
(not a terminal) never gets a carriage return or an escape sequence.
"""
from __future__ import annotations

import os
import sys
from typing import TextIO

_ERASE = "\r\x1b[K"  # back to the line's start, erase to its end (ECMA-48 EL)


class Progress:
    """`show(done, what)` while working, `clear()` before printing and at the end."""

    def __init__(self, total: int, stream: TextIO, shown: bool):
        self.total = total
        self.stream = stream
        self.shown = shown
        self.drawn = False

    @classmethod
    def on_stderr(cls, total: int, form: str, quiet: bool,
                  stream: TextIO | None = None) -> Progress:
        """Shown for more than one step of text diagnostics, not quiet, on a terminal."""
        stream = stream or sys.stderr
        return cls(total, stream, total > 1 and form == "text" and not quiet
                   and _is_terminal(stream))

    def show(self, done: int, what: str) -> None:
        if not self.shown:
            return
        line = f"[{done}/{self.total}] {what} ..."
        self.stream.write(_ERASE + line[:_columns(self.stream) - 1])
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write(_ERASE)
            self.stream.flush()
            self.drawn = False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def _columns(stream: TextIO) -> int:
    """The terminal's width: a longer line would wrap, and the erase would miss it."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80
