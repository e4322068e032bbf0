"""A fuzz campaign: inputs from both sources through the harness, failures
deduplicated by (exit code, exception type, place in hopperc), each class kept
with its shortest reproducer. `make fuzz` and the suite's tests share it."""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from tests.fuzz.harness import Outcome, run_input


@dataclass
class FailureClass:
    key: tuple[str, ...]
    failure: str
    reproducer: str
    name: str
    count: int = 0


@dataclass
class Campaign:
    """Runs inputs and tallies them; `nvrtc_rate` of accepted kernels also go through NVRTC."""

    workdir: Path
    seed: int = 0
    nvrtc_rate: float = 0.0
    nvrtc_max: int = 3
    inputs: int = 0
    accepted: int = 0
    compiled: int = 0
    errors: Counter = field(default_factory=Counter)
    failures: dict[tuple[str, ...], FailureClass] = field(default_factory=dict)

    def __post_init__(self):
        self._rng = random.Random(self.seed)

    def run(self, name: str, text: str) -> Outcome:
        outcome = run_input(text, self.workdir)
        self.inputs += 1
        if outcome.exit_code == 0 and outcome.failure is None:
            self.accepted += 1
            # A renamed kernel is where user names meet C++ and generated names.
            chosen = "rename" in name or self._rng.random() < self.nvrtc_rate
            if self.compiled < self.nvrtc_max and chosen:
                self.compiled += 1
                outcome = run_input(text, self.workdir, nvrtc=True)
        elif outcome.exit_code == 1:
            self.errors[outcome.error_kind or "unlocated"] += 1
        if outcome.failure is not None:
            self._record(name, text, outcome)
        return outcome

    def run_all(self, named_texts: Iterable[tuple[str, str]]) -> None:
        for name, text in named_texts:
            self.run(name, text)

    def _record(self, name: str, text: str, outcome: Outcome) -> None:
        known = self.failures.get(outcome.failure_key)
        if known is None or len(text) < len(known.reproducer):
            self.failures[outcome.failure_key] = FailureClass(
                outcome.failure_key, outcome.failure, text, name, known.count if known else 0)
        self.failures[outcome.failure_key].count += 1

    def report(self, reproducer_dir: Path | None = None) -> str:
        lines = [f"inputs: {self.inputs}", f"accepted: {self.accepted} "
                 f"({self.compiled} also compiled with NVRTC)",
                 f"errors (exit 1): {sum(self.errors.values())}, by kind:"]
        lines += [f"  {count:6d}  {kind}" for kind, count in self.errors.most_common(25)]
        lines.append(f"failure classes: {len(self.failures)}")
        if reproducer_dir is not None:
            reproducer_dir.mkdir(parents=True, exist_ok=True)
            for stale in reproducer_dir.glob("failure-*.hk"):
                stale.unlink()
        for index, cls in enumerate(sorted(self.failures.values(), key=lambda c: -c.count)):
            where = ""
            if reproducer_dir is not None:
                path = reproducer_dir / f"failure-{index:02d}.hk"
                path.write_text(cls.reproducer, encoding="utf-8", newline="")
                where = f" -> {path}"
            lines.append(f"  {cls.count:6d}  {' | '.join(cls.key)}: {cls.failure[:160]}{where}")
        return "\n".join(lines)
