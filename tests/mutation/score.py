"""Run every mutant of some kernels through the simulator and score them."""
from __future__ import annotations

import time
import tomllib
from fnmatch import fnmatchcase
from dataclasses import dataclass, field
from pathlib import Path

from hopperc import driver
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Finding
from hopperc.sim.problem import MAX_BLOCKS, default_dims, make_problem
from hopperc.sim.warp import SimUnsupported
from tests.mutation.engine import Mutant, mutants, verdict

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT_FILE = Path(__file__).with_name("equivalent.toml")
# `make test` scores these; `make mutate` adds the warp-specialized GEMM samples.
SMALL = [*(ROOT / "samples" / f"{name}.hk" for name in ("tma_copy", "scale_rows", "gemm_relu",
                                                        "two_producers")),
         *sorted((ROOT / "tests" / "sim" / "manual").glob("*.hk")),
         *sorted((ROOT / "tests" / "sim" / "hazards").glob("*.hk"))]
ALL = [*sorted((ROOT / "samples").glob("*.hk")), *sorted((ROOT / "tests" / "sim" / "manual")
                                                          .glob("*.hk")),
       *sorted((ROOT / "tests" / "sim" / "hazards").glob("*.hk")),
       *sorted((ROOT / "tests" / "sim" / "kernels").glob("*.hk")),
       # the one kernel taking an fp8 A from registers (the quad exchange before its fence)
       ROOT / "bench" / "kernels" / "attention_fp8.hk"]


def equivalents() -> dict[str, str]:
    """Mutant id, or a glob of ids sharing one argument -> why the mutant cannot
    change what the kernel does."""
    return tomllib.loads(EQUIVALENT_FILE.read_text())["equivalent"]


def reason_for(mutant_id: str, reasons: dict[str, str]) -> str | None:
    return next((why for pattern, why in reasons.items() if fnmatchcase(mutant_id, pattern)),
                None)


@dataclass
class Outcome:
    mutant: Mutant
    verdict: str  # caught, elsewhere, missed, equivalent
    first: Finding | None


@dataclass
class KernelScore:
    file: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, verdict: str) -> int:
        return sum(o.verdict == verdict for o in self.outcomes)

    @property
    def score(self) -> float:
        live = len(self.outcomes) - self.count("equivalent")
        return self.count("caught") / live if live else 1.0

    def line(self) -> str:
        return (f"{self.file}: {len(self.outcomes)} mutants, {self.count('equivalent')} "
                f"equivalent, {self.count('caught')} caught, {self.count('elsewhere')} caught "
                f"elsewhere, {self.count('missed')} missed: {100 * self.score:.0f}% "
                f"({self.seconds:.1f} s)")


def score_kernel(path: Path, seeds: int, search: int, reasons: dict[str, str]) -> KernelScore:
    start = time.perf_counter()
    source = driver.read_source(path)
    front_end = driver.check(source)
    lowered = driver.lower(front_end)
    problem = make_problem(lowered, default_dims(lowered), max_blocks=MAX_BLOCKS)
    result = KernelScore(path.name)
    for mutant in mutants(lowered, path.name):
        if reason_for(mutant.id, reasons) is not None:
            result.outcomes.append(Outcome(mutant, "equivalent", None))
            continue
        try:
            report = simulate(mutant.kernel, front_end, problem, seeds, search,
                              first_finding=True)
            findings = report.findings
        except SimUnsupported as exc:
            raise AssertionError(f"{mutant.id}: {exc}") from None
        result.outcomes.append(Outcome(mutant, verdict(mutant, findings),
                                       findings[0] if findings else None))
    result.seconds = time.perf_counter() - start
    return result
