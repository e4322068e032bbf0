"""Time `hopperc check` (default shapes, seeds and search budget) per kernel.

Each kernel runs as the command a user types, in a fresh process (with its
default `-j`: the seeded schedules and the search in one worker process per
core), so the wall time includes start-up; the simulation time is the one the
report line prints. Prints the median of N runs of each and every run.

Usage: python bench/check.py [N] [--before TREE] [--samples | --kernels] [NAME ...]
  (default: 3 runs of every sample and every kernel of bench/kernels: multi-head
  attention, GQA, an FP8 GEMM, a long-row softmax and rotary embedding, written
  as a user would). NAME is a sample or a bench/kernels kernel. With --before,
  each run of this tree alternates with a run of the source tree TREE (another
  checkout of the project, e.g. `git worktree add ../before main`) on the same
  .hk file of this tree, and the ratio of the medians is printed: both see the
  same load on a shared machine. Target (issue 30): every one <= 10 s wall on
  2 cores. Results: docs/perf.md, "`hopperc check`".
"""
from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = (ROOT / "samples", ROOT / "bench" / "kernels")
SIM_SECONDS = re.compile(r"\(([\d.]+) s\)\s*$")


def timed(path: Path, tree: Path | None) -> tuple[float, float]:
    """Wall and simulation seconds of one `hopperc check` of `path`."""
    # `python -m` imports the package of the working directory first.
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hopperc", "check", str(path)],
                          capture_output=True, text=True, cwd=tree or ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{path.stem}: hopperc check failed\n{proc.stdout}{proc.stderr}")
    found = SIM_SECONDS.search(proc.stdout.strip().splitlines()[-1])
    return wall, float(found.group(1)) if found else float("nan")


def kernel(name: str) -> Path:
    for folder in FOLDERS:
        if (folder / f"{name}.hk").exists():
            return folder / f"{name}.hk"
    sys.exit(f"no kernel {name} in samples/ or bench/kernels/")


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
    folders = FOLDERS
    if args[:1] in (["--samples"], ["--kernels"]):
        folders = FOLDERS[:1] if args.pop(0) == "--samples" else FOLDERS[1:]
    paths = [kernel(a) for a in args] or [p for f in folders for p in sorted(f.glob("*.hk"))]
    for path in paths:
        name = path.stem
        now, then = [], []
        for _ in range(runs):
            if before is not None:
                then.append(timed(path, before))
            now.append(timed(path, None))
        print(f"{name:<16} hopperc check: {summary(now)}", flush=True)
        if before is not None:
            ratio = statistics.median(w for w, _ in then) / statistics.median(w for w, _ in now)
            print(f"{'':<16} before:        {summary(then)}  -> {ratio:.2f}x faster now",
                  flush=True)


if __name__ == "__main__":
    main()
