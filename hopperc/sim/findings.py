"""What the simulator reports: a finding (category, message, source location and
the state that shows it) and the short trace of events that led to it."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hopperc.diagnostics import Span


class Category(Enum):
    DEADLOCK = "deadlock"
    RACE = "race"
    MISSING_FENCE = "missing proxy fence"
    BARRIER_MISUSE = "barrier misuse"
    WRONG_RESULT = "wrong result"
    OUT_OF_RANGE = "out-of-range access"


@dataclass(frozen=True)
class Finding:
    category: Category
    message: str
    span: Span | None
    related: Span | None = None  # the other access or statement involved
    state: tuple[str, ...] = ()  # e.g. which warp waits on which barrier
    trace: tuple[str, ...] = field(default=(), compare=False)
    schedule: str = field(default="", compare=False)  # the schedule that found it
    # How to run that schedule again (`sim/recorder.py`): ("seed", n) or
    # ("search", choices); `trace_file`: where `--trace` wrote that run.
    run: tuple = field(default=(), compare=False)
    trace_file: str = field(default="", compare=False)

    @property
    def key(self) -> tuple:
        """Findings with the same key are one bug seen by several schedules."""
        return (self.category, self.span, self.related, self.message)

    @property
    def rule(self) -> str:
        """The category as a rule id (`--diagnostics json|sarif`): `missing-proxy-fence`."""
        return self.category.value.replace(" ", "-")

    def headline(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}{self.category.value}: {self.message}"

    def record(self) -> dict:
        """The finding as one JSON-ready record (`check --diagnostics json`)."""
        return {"kind": "finding", "category": self.category.value, "rule": self.rule,
                "message": self.message,
                **_location(self.span),
                "related": _location(self.related) if self.related else None,
                "state": list(self.state), "schedule": self.schedule, "trace": list(self.trace),
                **({"trace_file": self.trace_file} if self.trace_file else {})}

    def lines(self) -> list[str]:
        out = [self.headline()]
        out += [f"  {line}" for line in self.state]
        if self.schedule:
            out.append(f"  found by: {self.schedule}")
        if self.trace_file:
            out.append(f"  trace: {self.trace_file}")
        if self.trace:
            out.append("  last events:")
            out += [f"    {line}" for line in self.trace]
        return out


class SimFailure(Exception):
    """Stops a schedule at its first finding (later events would only echo it)."""

    def __init__(self, finding: Finding):
        super().__init__(finding.message)
        self.finding = finding


def fail(category: Category, message: str, span: Span | None, related: Span | None = None,
         state: tuple[str, ...] = ()) -> SimFailure:
    return SimFailure(Finding(category, message, span, related, state))


def _location(span: Span | None) -> dict:
    """Where a finding is; all None for a statement the compiler made without a line."""
    fields = ("file", "line", "column", "end_line", "end_column")
    if span is None:
        return dict.fromkeys(fields)
    return dict(zip(fields, (span.file, span.line, span.col, span.end_line, span.end_col)))


def line(span: Span | None) -> str:
    """`(k.hk:19)` for messages, or nothing for compiler-made statements without one."""
    return f" ({span.file.rsplit('/', 1)[-1]}:{span.line})" if span else ""
