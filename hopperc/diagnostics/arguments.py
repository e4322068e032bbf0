"""The Python API's own arguments (`hopperc.build`, `hopperc.simulate`): a call
that is wrong in itself (a type, a count out of range) is a TypeError or
ValueError saying what the argument takes, before anything runs. What the
kernel makes of a value (a define it has no constant for, a shape its arrays
contradict) is a CompileError, located."""
from __future__ import annotations

import operator
from typing import Mapping


def checked_defines(defines: Mapping[str, int] | None) -> dict[str, int]:
    """The defines as `-D NAME=INTEGER` takes them: identifiers to integers."""
    checked = dict(_mapping("defines", defines))
    for name, value in checked.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"defines: {name!r} is not a name")
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"defines: {name} must be an int, not {type(value).__name__}")
    return checked


def checked_shapes(shapes: Mapping[str, int] | None) -> dict[str, int]:
    """Dimension names to sizes, each an int of at least 1."""
    checked = dict(_mapping("shapes", shapes))
    for name, size in checked.items():
        if not isinstance(name, str):
            raise TypeError(f"shapes: a dimension is named by a str, not {name!r}")
        checked[name] = counted(f"shapes: {name}", size, 1)
    return checked


def counted(what: str, value: object, least: int) -> int:
    """`value` as a count: an integer (a numpy one too; not a bool) of at least
    `least`, as a Python int."""
    try:  # numpy's bool is no integer to operator.index; Python's is
        count = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        count = None
    if count is None:
        raise TypeError(f"{what} must be an int, not {type(value).__name__} ({value!r})")
    if count < least:
        raise ValueError(f"{what} must be at least {least}, not {count}")
    return count


def _mapping(what: str, value: object) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping of names to ints (a dict), not "
                        f"{type(value).__name__}")
    return value
