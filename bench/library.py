"""Time `hopperc build` as a CI script uses it: a 12-kernel library (the samples
and four `-D` variants) cold with -j 1 and -j 2, then cached; and one kernel
(gemm_bf16) uncached and cached, and `hopperc --help`, against the targets.

Every figure is the median of N runs, each the command a user types in a fresh
process: wall seconds, and CPU seconds of the process and its workers.
"Cold" starts from an empty cache directory (grammar tables and compiled
templates included); "uncached" is `--no-cache` with those two already made,
as on any machine after its first build. hopperc's bytecode is compiled first and
PYTHONDONTWRITEBYTECODE is dropped, as in an installed package (without bytecode
each process compiles hopperc's modules again, ~0.05 s).

Usage: python bench/library.py [N]   (default N = 5)
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
VARIANTS = [("gemm_bf16_bn128", "gemm_bf16", {"BN": 128}),
            ("scale_rows_bm128", "scale_rows", {"BM": 128}),
            ("tma_copy_bm32", "tma_copy", {"BM": 32}),
            ("tma_copy_bn32", "tma_copy", {"BN": 32})]
TARGETS = {"cached gemm_bf16 wall": 0.1, "uncached gemm_bf16 CPU": 0.6, "--help CPU": 0.15}


def library(directory: Path) -> Path:
    """The library file: every sample, then the variants."""
    def source(name: str) -> str:
        return os.path.relpath(SAMPLES / f"{name}.hk", directory)
    tables = [f'[[kernel]]\nsource = "{source(p.stem)}"\n' for p in sorted(SAMPLES.glob("*.hk"))]
    for name, sample, defines in VARIANTS:
        values = ", ".join(f"{k} = {v}" for k, v in defines.items())
        tables.append(f'[[kernel]]\nsource = "{source(sample)}"\nname = "{name}"\n'
                      f"defines = {{ {values} }}\n")
    path = directory / "library.toml"
    path.write_text("\n".join(tables))
    return path


def timed(args: list[str], cache: Path, cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `hopperc ARGS`, workers included."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["HOPPERC_CACHE_DIR"] = str(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hopperc", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"hopperc {' '.join(args)} failed:\n{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "hopperc")], check=True)
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        lib = library(work)
        warm = work / "warm-cache"
        timed(["build", str(SAMPLES / "tma_copy.hk"), "-o", "warm.cubin", "-q"], warm, work)
        for run in range(runs):
            for jobs in ("1", "2"):
                cache = work / f"cold-{run}-{jobs}"
                results.setdefault(f"library cold -j {jobs}", []).append(
                    timed(["build", str(lib), "--out-dir", f"out-{jobs}", "-j", jobs, "-q"],
                          cache, work))
            results.setdefault("library cached -j 2", []).append(
                timed(["build", str(lib), "--out-dir", "out-2", "-j", "2", "-q"],
                      work / f"cold-{run}-2", work))
            results.setdefault("uncached gemm_bf16", []).append(
                timed(["build", str(SAMPLES / "gemm_bf16.hk"), "-o", "g.cubin", "-q",
                       "--no-cache"], warm, work))
            timed(["build", str(SAMPLES / "gemm_bf16.hk"), "-o", "g.cubin", "-q"], warm, work)
            results.setdefault("cached gemm_bf16", []).append(
                timed(["build", str(SAMPLES / "gemm_bf16.hk"), "-o", "g.cubin", "-q"], warm,
                      work))
            results.setdefault("--help", []).append(timed(["--help"], warm, work))
    print(f"{runs} runs each, medians (CPU includes worker processes)\n")
    print(f"{'':24} {'wall s':>8} {'CPU s':>8}")
    medians = {}
    for name, values in results.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        medians[name] = (wall, cpu)
        print(f"{name:24} {wall:8.3f} {cpu:8.3f}")
    one, two = medians["library cold -j 1"][0], medians["library cold -j 2"][0]
    print(f"\nlibrary cold, -j 1 / -j 2 wall: {one / two:.2f}x")
    print(f"library cold -j 2 / cached -j 2 wall: "
          f"{two / medians['library cached -j 2'][0]:.1f}x")
    checks = {"cached gemm_bf16 wall": medians["cached gemm_bf16"][0],
              "uncached gemm_bf16 CPU": medians["uncached gemm_bf16"][1],
              "--help CPU": medians["--help"][1]}
    print()
    for name, value in checks.items():
        verdict = "met" if value <= TARGETS[name] else "MISSED"
        print(f"target {name} <= {TARGETS[name]} s: {value:.3f} s, {verdict}")


if __name__ == "__main__":
    main()
