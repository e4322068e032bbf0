"""Time `hopperc build` as a CI script uses it: a library (the samples and four
`-D` variants) cold with -j 1 and -j 2, then cached; its two `--shard`s cold; one
kernel (gemm_bf16) uncached, cached, cached through `hopperc.build` in a new
process, and from the remote cache tier (a wsgidav server started here, a machine
with an empty local cache); and `hopperc --help`, against the targets.

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
import socket
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


def timed(args: list[str], cache: Path, cwd: Path, remote: str | None = None,
          python: list[str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of `hopperc ARGS` (or of `python PYTHON`), workers included."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["HOPPERC_CACHE_DIR"] = str(cache)
    if remote:
        env["HOPPERC_REMOTE_CACHE"] = remote
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *(python or ["-m", "hopperc", *args])], cwd=cwd,
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"hopperc {' '.join(args)} failed:\n{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def webdav(root: Path) -> tuple[subprocess.Popen, str]:
    """A wsgidav server (the test extra installs it) serving `root`, and its URL."""
    root.mkdir(exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "wsgidav.server.server_cli", "--host",
                               "127.0.0.1", "--port", str(port), "--root", str(root),
                               "--auth", "anonymous", "--no-config", "-q"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"http://127.0.0.1:{port}/hopperc"
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("wsgidav did not start")
            time.sleep(0.05)


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
            results.setdefault("cached gemm_bf16 hopperc.build", []).append(
                timed([], warm, work, python=["-c", "import hopperc; hopperc.build("
                                              f"{str(SAMPLES / 'gemm_bf16.hk')!r})"]))
            for shard in ("1/2", "2/2"):
                results.setdefault(f"library cold --shard {shard}", []).append(
                    timed(["build", str(lib), "--out-dir", "out-s", "-j", "2", "-q",
                           "--shard", shard], work / f"shard-{run}-{shard[0]}", work))
            results.setdefault("--help", []).append(timed(["--help"], warm, work))
        server, url = webdav(work / "dav")
        try:
            gemm = ["build", str(SAMPLES / "gemm_bf16.hk"), "-o", "r.cubin", "-q"]
            for run in range(runs):
                remote = f"{url}/{run}"
                results.setdefault("gemm_bf16 cold, filling the remote", []).append(
                    timed(gemm, work / f"machine-a-{run}", work, remote))
                results.setdefault("gemm_bf16 remote hit", []).append(
                    timed(gemm, work / f"machine-b-{run}", work, remote))
                results.setdefault("gemm_bf16 local hit, remote set", []).append(
                    timed(gemm, work / f"machine-b-{run}", work, remote))
        finally:
            server.terminate()
            server.wait()
    print(f"{runs} runs each, medians (CPU includes worker processes)\n")
    print(f"{'':36} {'wall s':>8} {'CPU s':>8}")
    medians = {}
    for name, values in results.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        medians[name] = (wall, cpu)
        print(f"{name:36} {wall:8.3f} {cpu:8.3f}")
    one, two = medians["library cold -j 1"][0], medians["library cold -j 2"][0]
    print(f"\nlibrary cold, -j 1 / -j 2 wall: {one / two:.2f}x")
    print(f"library cold -j 2 / cached -j 2 wall: "
          f"{two / medians['library cached -j 2'][0]:.1f}x")
    api, cli = medians["cached gemm_bf16 hopperc.build"][0], medians["cached gemm_bf16"][0]
    print(f"hopperc.build / hopperc build, cached, new process, wall: {api / cli:.2f}x")
    remote = medians["gemm_bf16 remote hit"][0]
    cold = medians["gemm_bf16 cold, filling the remote"][0]
    print(f"remote hit / cold build wall: {remote / cold:.2f}x")
    checks = {"cached gemm_bf16 wall": medians["cached gemm_bf16"][0],
              "uncached gemm_bf16 CPU": medians["uncached gemm_bf16"][1],
              "--help CPU": medians["--help"][1]}
    print()
    for name, value in checks.items():
        verdict = "met" if value <= TARGETS[name] else "MISSED"
        print(f"target {name} <= {TARGETS[name]} s: {value:.3f} s, {verdict}")


if __name__ == "__main__":
    main()
