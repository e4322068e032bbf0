"""The ranges of numbers the generated code can hold.

Indices, loop counters, tile constants and sizes are C `int` (int32) in the
generated CUDA, and float literals are `float` (f32): a literal, a folded
constant or a `-D` value outside those ranges would wrap or become infinity in
the kernel, so it is refused where it is written.
"""
from __future__ import annotations

import math
import struct

from hopperc.diagnostics import CompileError, Span

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
# Longer decimal literals are out of range whatever their digits, and converting them
# would hit Python's own limit on the length of int strings.
_MAX_INT_DIGITS = len(str(INT32_MAX))


def int_literal(text: str, span: Span) -> int:
    """The value of an integer literal (decimal digits), which must fit int32."""
    digits = text.lstrip("0") or "0"
    if len(digits) > _MAX_INT_DIGITS or int(digits) > INT32_MAX:
        shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"
        raise CompileError(span, f"integer literal {shown} is out of range: indices, sizes and "
                                 f"loop bounds are 32-bit ints (at most {INT32_MAX})")
    return int(digits)


def float_literal(text: str, span: Span) -> float:
    """The value of a float literal, which must be a finite f32."""
    value = float(text)
    try:
        struct.pack("<f", value)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise CompileError(span, f"float literal {text} is out of range: float literals are f32 "
                                 "(largest magnitude about 3.4028235e38)")
    return value


def check_int32(value: int, span: Span | None, what: str) -> int:
    """A value the generated code holds in an int (a folded constant, a -D value)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise CompileError(span, f"{what} is {value}, out of the range of a 32-bit int "
                                 f"({INT32_MIN} to {INT32_MAX})")
    return value
