"""Time `hopperc check` (default shapes, seeds and search budget) per sample.

Each sample runs as the command a user types, in a fresh process, so the time
includes start-up; prints the wall time of each of N runs and the median.
Usage: python bench/check.py [N] [SAMPLE ...]   (default: 3 runs of every sample)
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    names = sys.argv[2:] or [p.stem for p in sorted((ROOT / "samples").glob("*.hk"))]
    for name in names:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "hopperc", "check",
                                   str(ROOT / "samples" / f"{name}.hk")],
                                  capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                sys.exit(f"{name}: hopperc check failed\n{proc.stdout}{proc.stderr}")
        print(f"{name:<16} hopperc check: median {statistics.median(times):5.2f} s  "
              f"runs {' '.join(f'{t:.2f}' for t in times)}")


if __name__ == "__main__":
    main()
