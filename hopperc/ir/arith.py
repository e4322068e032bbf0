"""Integer operators of scalar expressions, one table for every stage that
evaluates them: constant folding in the front end and the passes, and the
simulator. `/` rounds up (tile counts), `//` rounds down (stage and phase).

The operators a grid extent may use (+ - * / %) are the launch's own
(runtime/launch_rules.EXTENT_OPS): the runtime evaluates extents without the
compiler, so it holds their definition and this table adds the rest."""
from __future__ import annotations

from typing import Callable

from hopperc.runtime.launch_rules import EXTENT_OPS

INTEGER_OPS: dict[str, Callable[[int, int], int]] = {
    **EXTENT_OPS, "//": lambda a, b: a // b,
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
    "min": min, "max": max,
    "and": lambda a, b: int(bool(a) and bool(b)), "or": lambda a, b: int(bool(a) or bool(b)),
}
