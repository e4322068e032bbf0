"""Time `hopperc check` (default shapes, seeds and search budget) per sample.

Each sample runs as the command a user types, in a fresh process, so the wall
time includes start-up; the simulation time is the one the report line prints.
Prints the median of N runs of each and every run.

Usage: python bench/check.py [N] [--before TREE] [SAMPLE ...]
  (default: 3 runs of every sample). With --before, each run of this tree
  alternates with a run of the source tree TREE (another checkout of the
  project, e.g. `git worktree add ../before main`), and the ratio of the
  medians is printed: both see the same load on a shared machine.
"""
from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM_SECONDS = re.compile(r"\(([\d.]+) s\)\s*$")


def timed(sample: str, tree: Path | None) -> tuple[float, float]:
    """Wall and simulation seconds of one `hopperc check` of `sample`."""
    # `python -m` imports the package of the working directory first.
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hopperc", "check",
                           str(ROOT / "samples" / f"{sample}.hk")],
                          capture_output=True, text=True, cwd=tree or ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{sample}: hopperc check failed\n{proc.stdout}{proc.stderr}")
    found = SIM_SECONDS.search(proc.stdout.strip().splitlines()[-1])
    return wall, float(found.group(1)) if found else float("nan")


def summary(runs: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in runs]
    return (f"wall median {statistics.median(walls):5.2f} s, simulation median "
            f"{statistics.median(s for _, s in runs):5.1f} s  "
            f"(runs {' '.join(f'{w:.2f}' for w in walls)})")


def main() -> None:
    args = sys.argv[1:]
    runs = int(args.pop(0)) if args and args[0].isdigit() else 3
    before = None
    if args[:1] == ["--before"]:
        before = Path(args[1]).resolve()
        args = args[2:]
    names = args or [p.stem for p in sorted((ROOT / "samples").glob("*.hk"))]
    for name in names:
        now, then = [], []
        for _ in range(runs):
            if before is not None:
                then.append(timed(name, before))
            now.append(timed(name, None))
        print(f"{name:<16} hopperc check: {summary(now)}")
        if before is not None:
            ratio = statistics.median(w for w, _ in then) / statistics.median(w for w, _ in now)
            print(f"{'':<16} before:        {summary(then)}  -> {ratio:.2f}x faster now")


if __name__ == "__main__":
    main()
