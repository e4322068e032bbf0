"""Integer operators of scalar expressions, one table for every stage that
evaluates them: constant folding in the front end and the passes, and the
simulator. `/` rounds up (tile counts), `//` rounds down (stage and phase)."""
from __future__ import annotations

from typing import Callable

INTEGER_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: -(-a // b), "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
    "and": lambda a, b: int(bool(a) and bool(b)), "or": lambda a, b: int(bool(a) or bool(b)),
}
