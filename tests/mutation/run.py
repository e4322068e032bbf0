"""`make mutate`: every mutant of every kernel, scored (see engine.py).

    python -m tests.mutation.run [--small] [--seeds N] [--search N] [--json FILE] [KERNEL...]

Prints one line per kernel, then each mutant that was not caught with the
category and line its operator calls for, with its first finding. Exit 1
unless every non-equivalent mutant is caught.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hopperc import driver
from tests.mutation.score import ALL, SMALL, equivalents, score_kernel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation.run")
    parser.add_argument("kernels", nargs="*", type=Path)
    parser.add_argument("--small", action="store_true", help="the kernels `make test` scores")
    parser.add_argument("--seeds", type=int, default=driver.DEFAULT_SEEDS)
    parser.add_argument("--search", type=int, default=driver.DEFAULT_SEARCH)
    parser.add_argument("--json", type=Path, help="write every outcome here")
    args = parser.parse_args(argv)
    kernels = args.kernels or (SMALL if args.small else ALL)
    reasons = equivalents()
    start = time.perf_counter()
    scores, records, failed = [], [], 0
    for path in kernels:
        score = score_kernel(path, args.seeds, args.search, reasons)
        scores.append(score)
        print(score.line(), flush=True)
        for outcome in score.outcomes:
            first = outcome.first
            records.append({"kernel": path.name, "id": outcome.mutant.id,
                            "mutation": outcome.mutant.description, "verdict": outcome.verdict,
                            "finding": first.headline() if first else None})
            if outcome.verdict in ("missed", "elsewhere"):
                failed += 1
                print(f"  {outcome.verdict}: {outcome.mutant.id} ({outcome.mutant.description})"
                      + (f"\n    first finding: {first.headline()}" if first else ""))
    total = sum(len(s.outcomes) for s in scores)
    equivalent = sum(s.count("equivalent") for s in scores)
    caught = sum(s.count("caught") for s in scores)
    print(f"total: {total} mutants, {equivalent} equivalent, {caught} of {total - equivalent} "
          f"caught with the right category and line ({time.perf_counter() - start:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
