"""Time the compiler without NVRTC: parse + checks + passes + render, per sample.

Prints the median and the fastest of N runs in one process (after one warm-up
run that loads the grammar and templates). Usage: python bench/frontend.py [N]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from hopperc import driver

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    for path in sorted((ROOT / "samples").glob("*.hk")):
        source = driver.read_source(path)
        driver.generate(source)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            driver.generate(source)
            times.append((time.perf_counter() - start) * 1000)
        print(f"{path.stem:<16} front end + passes + render: median {statistics.median(times):6.2f} ms"
              f"  min {min(times):6.2f} ms  ({runs} runs)")


if __name__ == "__main__":
    main()
