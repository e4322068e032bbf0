"""Record everything `hopperc check` reports, to compare two trees.

    python bench/check_outputs.py OUT.json [--mutants | --only-mutants] [KERNEL ...]

Run from the root of the tree to record (`python -m`-style: the `hopperc` of
the working directory is imported). Default kernels: the samples, tests/sim
(hazards, manual, kernels, layouts) and bench/kernels of THIS script's tree, so
the same files are run by both trees. Per kernel it records the report of the
default `check` (every finding with its message, lines, state, schedule and
trace; the run counts; the maximum errors; the shapes), and with --mutants the
first finding of every mutant of the kernels `make test` scores (as the
mutation tests run them). Compare two records with `cmp` or `diff`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

from hopperc import driver  # noqa: E402
from hopperc.sim.warp import SimUnsupported  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
DEFAULT = [*sorted((HERE / "samples").glob("*.hk")),
           *sorted((HERE / "tests" / "sim").glob("*/*.hk")),
           *sorted((HERE / "bench" / "kernels").glob("*.hk"))]


def finding(f) -> dict:
    return {"lines": f.lines(), "schedule": f.schedule, "trace": list(f.trace)}


def report(path: Path) -> dict:
    try:
        r = driver.simulate(driver.read_source(path))
    except Exception as exc:  # noqa: BLE001 - recorded, compared like the rest
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"findings": [finding(f) for f in r.findings], "schedules": r.schedules,
            "exhaustive": r.exhaustive, "complete": r.exhaustive_complete,
            "max_error": r.max_error, "reference": r.reference,
            "shapes": r.problem.describe()}


def mutants(path: Path) -> list:
    from hopperc.sim.explore import simulate
    from hopperc.sim.problem import MAX_BLOCKS, default_dims, make_problem
    from tests.mutation.engine import mutants as all_mutants
    source = driver.read_source(path)
    front_end = driver.check(source)
    lowered = driver.lower(front_end)
    problem = make_problem(lowered, default_dims(lowered), max_blocks=MAX_BLOCKS)
    out = []
    for mutant in all_mutants(lowered, path.name):
        try:
            r = simulate(mutant.kernel, front_end, problem, driver.DEFAULT_SEEDS,
                         driver.DEFAULT_SEARCH, first_finding=True)
            out.append([mutant.id, r.schedules, r.exhaustive,
                        [finding(f) for f in r.findings]])
        except SimUnsupported as exc:
            out.append([mutant.id, str(exc)])
    return out


def main() -> None:
    args = sys.argv[1:]
    out = Path(args.pop(0))
    with_mutants = "--mutants" in args or "--only-mutants" in args
    paths = [Path(a).resolve() for a in args if not a.startswith("--")] or DEFAULT
    if "--only-mutants" in args:
        paths = []
    record = {}
    for path in paths:
        name = str(path.relative_to(HERE)) if path.is_relative_to(HERE) else str(path)
        record[name] = report(path)
        print(name, "ok" if not record[name].get("findings") else "findings", flush=True)
    if with_mutants:
        from tests.mutation.score import SMALL
        for path in SMALL:
            record[f"mutants {path.name}"] = mutants(path)
            print("mutants", path.name, flush=True)
    out.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
