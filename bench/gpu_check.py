"""`make gpu-check`: everything hopperc can check on a Hopper GPU, in one command
of at most 8 minutes on a bare machine with no network, into one report file.
`make gpu-wheels` (bench/gpu_wheels.py, with the package registries) prepares
what it installs.

    python3 bench/gpu_check.py [--wheels wheels] [--report build/gpu-report.md]

It runs with the machine's own Python, the one that holds PyTorch, CUDA 13's
cuda-bindings and NVRTC, numpy and pytest. It installs hopperc and the few
requirements such an image lacks from the wheel folder into build/gpu-check/site
(`pip install --no-index --no-deps --target`, found through PYTHONPATH, so the
image's packages are used and never replaced: a venv made from that Python would
not see them when it is itself a venv). Then, each step with a time limit:
  1. the GPU tests (tests/gpu, HOPPERC_REQUIRE_GPU=1: a skip is a failure), and at
     the same time compute-sanitizer racecheck and synccheck of `hopperc run` on
     every sample (correctness only: they share the GPU);
  2. alone on the GPU, bench/gemm.py on every GEMM sample (against cuBLAS),
     bench/attention.py, causal and not (against FlashAttention-3 and SDPA),
     bench/gemm_fp8_blockscaled.py (against torch._scaled_mm),
     bench/grouped_gemm.py, both layouts (against torch._grouped_mm or a matmul
     per expert), and bench/attention_varlen.py (against FlashAttention's varlen,
     else SDPA).
The report says each step's outcome; a step that could not run says why.
Exit status: 0 when every step passed; 3 when every step that ran passed but
compute-sanitizer refused the device; 1 otherwise (a failure, a timeout, no GPU).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import re
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(Path(__file__).resolve().parent))  # its own modules, after all others

from gpu_report import (FAIL, NOT_RUN, PASS, REFUSED, SANITIZER_TOOLS, Ran, Step,  # noqa: E402
                        outcome_of, render, run_command, tail)
from gpu_wheels import PIP, SOURCE_DIGEST, package_digest  # noqa: E402
# Every sample computing C = A @ B^T from A, B and C (a test keeps this list whole).
GEMM_SAMPLES = ("gemm_bf16", "gemm_multicast", "gemm_one_role", "gemm_persistent",
                "gemm_pingpong", "gemm_pipelined", "gemm_relu", "gemm_splitk", "gemm_tf32")
FP8_BENCH = "bench gemm_fp8_blockscaled vs torch._scaled_mm"
ATTENTION_BENCH = "bench attention_fwd vs FA3 and SDPA"
ATTENTION_CAUSAL_BENCH = "bench attention_fwd causal vs FA3 and SDPA"
VARLEN_BENCH = "bench attention_varlen vs flash_attn varlen or SDPA"
BUDGET_SECONDS = 470
CORRECTNESS_SECONDS = 240  # the GPU tests and compute-sanitizer, side by side
SANITIZER_FINDINGS = 86  # compute-sanitizer's exit status when it reports an error
REFUSAL = re.compile(r"device not supported|not supported on this (device|platform|gpu)", re.I)

class Check:
    def __init__(self, wheels: Path, report: Path, work: Path, budget: float):
        self.wheels, self.report, self.work = wheels, report, work
        self.deadline = time.monotonic() + budget
        self.started = time.monotonic()
        self.facts: list[str] = []
        self.sections: dict[str, str] = {}
        self.steps: list[Step] = []
        self.sanitizer: dict[tuple[str, str], Step] = {}
        self.lock = threading.Lock()
        self.done = False  # until then the report says the check is under way
        self.site = work / "site"
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(self.site), os.environ.get("PYTHONPATH")])),
            "HOPPERC_CACHE_DIR": str(work / "cache")}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str) -> Step:
        with self.lock:
            self.steps.append(Step(name))
            return self.steps[-1]

    def finish(self, step: Step, ran: Ran | None, outcome: str, note: str = "",
               section: tuple[str, str] | None = None) -> None:
        """Record a step's outcome (and a section of the report) and rewrite the report."""
        with self.lock:
            step.outcome, step.note = outcome, note
            if section is not None:
                self.sections[section[0]] = section[1]
            if ran is not None:
                step.seconds, step.output = ran.seconds, ran.output
                if ran.timed_out:
                    step.outcome, step.note = FAIL, f"timed out after {ran.seconds:.0f} s"
                elif step.outcome == FAIL and not step.note:
                    step.note = tail(ran.output, 1)[:120]
            print(f"[{time.monotonic() - self.started:4.0f} s] {step.name}: {step.outcome}"
                  f"{f' ({step.note})' if step.note else ''}", flush=True)
            self.write()

    def write(self) -> None:
        self.report.parent.mkdir(parents=True, exist_ok=True)
        self.report.write_text(render(self))


# -- the steps ---------------------------------------------------------------------

PROBE = """
import json, platform
info = {"python": platform.python_version()}
try:
    import torch
    info.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                gpu=torch.cuda.is_available())
    if info["gpu"]:
        info.update(device=torch.cuda.get_device_name(0),
                    capability=list(torch.cuda.get_device_capability(0)))
except Exception as exc:
    info["torch_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(info))
"""


def environment(check: Check, step: Step) -> bool:
    """The device, driver, PyTorch and CUDA; whether a Hopper GPU is usable."""
    ran = run_command([sys.executable, "-c", PROBE], min(90, check.left()))
    smi = run_command(["nvidia-smi", "--query-gpu=name,driver_version",
                       "--format=csv,noheader"], 30)
    driver = smi.output.strip().splitlines()[0].rsplit(",", 1)[-1].strip() \
        if smi.code == 0 and smi.output.strip() else "unknown (nvidia-smi: " \
        f"{tail(smi.output, 1) or 'no answer'})"
    try:
        info = json.loads(ran.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        check.finish(step, ran, FAIL, "the probe of PyTorch failed")
        return False
    torch = info.get("torch", f"not importable ({info.get('torch_error')})")
    check.facts += [f"python {info['python']} ({sys.executable})",
                    f"torch {torch}" + (f", built for CUDA {info['torch_cuda']}"
                                        if info.get("torch_cuda") else ""),
                    f"device: {info.get('device', 'none')}"
                    f"{' (sm_%d%d)' % tuple(info['capability']) if 'capability' in info else ''}",
                    f"driver: {driver}"]
    if not info.get("gpu"):
        reason = "PyTorch sees no GPU" if "torch" in info else "PyTorch is not importable"
        check.finish(step, ran, FAIL, f"no Hopper GPU: {reason}")
        return False
    if info["capability"][0] != 9:
        check.finish(step, ran, FAIL, f"no Hopper GPU: {info['device']} is "
                                      f"sm_{info['capability'][0]}{info['capability'][1]}")
        return False
    check.finish(step, ran, PASS, info["device"])
    return True


REQUIREMENTS = """
import importlib.metadata as md, json, re
found = []
for line in md.requires("hopperc") or []:
    if "extra ==" in line:
        continue
    name = re.match(r"[A-Za-z0-9_.-]+", line).group(0)
    spec = line[len(name):].split(";")[0].strip()
    entry = {"name": name, "spec": spec, "version": None, "path": None, "ok": None}
    try:
        dist = md.distribution(name)
        entry.update(version=dist.version, path=str(dist.locate_file("")))
        try:
            from packaging.specifiers import SpecifierSet
            entry["ok"] = SpecifierSet(spec).contains(dist.version, prereleases=True)
        except ImportError:
            pass
    except md.PackageNotFoundError:
        pass
    found.append(entry)
print(json.dumps(found))
"""


def install(check: Check, step: Step) -> bool:
    """hopperc and the carried requirements from the wheel folder, offline."""
    wheels = sorted(check.wheels.glob("*.whl")) if check.wheels.is_dir() else []
    if not any(w.name.startswith("hopperc-") for w in wheels):
        check.finish(step, None, FAIL, f"no hopperc wheel in {check.wheels}/: run "
                                       "`make gpu-wheels` where the package registries "
                                       "are reachable, and bring the folder along")
        return False
    shutil.rmtree(check.site, ignore_errors=True)
    ran = run_command([*PIP, "install", "--no-index", "--find-links", str(check.wheels),
                       "--no-deps", "--no-compile", "--quiet", "--target", str(check.site),
                       *map(str, wheels)], min(120, check.left()))
    if ran.code != 0:
        check.finish(step, ran, FAIL, "pip could not install the wheels")
        return False
    try:
        built_from = (check.wheels / SOURCE_DIGEST).read_text().strip()
    except OSError:
        built_from = None
    if built_from != package_digest(ROOT):
        check.finish(step, ran, FAIL, "the hopperc wheel was built from other sources than "
                                      "this checkout: run `make gpu-wheels` again")
        return False
    listed = run_command([sys.executable, "-c", REQUIREMENTS], 60, check.env, cwd=check.work)
    try:
        requirements = json.loads(listed.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        check.finish(step, listed, FAIL, "cannot list hopperc's requirements")
        return False
    lines, missing = [], []
    for r in requirements:
        if r["version"] is None:
            missing.append(r["name"])
            lines.append(f"- {r['name']} {r['spec']}: **missing**")
            continue
        origin = "carried" if r["path"].startswith(str(check.site)) else "already installed"
        verdict = {True: "within the pin", None: "not compared (no `packaging`)",
                   False: "outside hopperc's pin: used as it is, not replaced"}[r["ok"]]
        lines.append(f"- {r['name']} {r['version']} ({origin}; hopperc asks {r['spec']}): "
                     f"{verdict}")
    section = ("Requirements", "\n".join(lines))
    if missing:
        check.finish(step, ran, FAIL, f"missing: {', '.join(missing)}", section)
        return False
    check.finish(step, ran, PASS, ", ".join(w.name for w in wheels), section)
    return True


def gpu_tests(check: Check, step: Step, limit: float) -> None:
    workers = ["-n", "6"] if importlib.util.find_spec("xdist") else []
    ran = run_command([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                       *workers, "tests/gpu"], limit,
                      {**check.env, "HOPPERC_REQUIRE_GPU": "1"}, cwd=ROOT)
    summary = [line for line in ran.output.splitlines()
               if re.search(r"\d+ (passed|failed|error)", line)]
    failed = [line for line in ran.output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    body = "\n".join([f"`pytest tests/gpu {' '.join(workers)}`: "
                      f"{summary[-1].strip('= ') if summary else 'no summary'}",
                      *(f"- {line}" for line in failed[:20]),
                      *([f"- and {len(failed) - 20} more"] if len(failed) > 20 else [])])
    lines = ran.output.splitlines()
    first = next((i for i, line in enumerate(lines)
                  if re.fullmatch(r"=+ (FAILURES|ERRORS) =+", line)), None)
    if first is not None:  # the report shows the first failure, not the list again
        ran = Ran(ran.code, "\n".join(lines[first:first + 30]), ran.seconds, ran.timed_out)
    check.finish(step, ran, PASS if ran.code == 0 else FAIL,
                 summary[-1].strip("= ") if summary else "", ("GPU tests", body))


def sanitize(check: Check, sample: Path, tool: str, limit: float) -> None:
    step = check.sanitizer[(sample.stem, tool)]
    if limit < 5:
        check.finish(step, None, NOT_RUN, "the time for the correctness checks was spent")
        return
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    ran = run_command([sanitizer, "--tool", tool, "--error-exitcode", str(SANITIZER_FINDINGS),
                       sys.executable, "-m", "hopperc", "run", str(sample)], limit, check.env,
                      cwd=check.work)
    if REFUSAL.search(ran.output):  # whatever its exit status: it checked nothing
        check.finish(step, ran, REFUSED, "compute-sanitizer does not support this device")
    elif ran.code == 0:
        check.finish(step, ran, PASS)
    else:
        note = {SANITIZER_FINDINGS: f"{tool} reported hazards", 1: "wrong result (FAIL)",
                None: "did not start" if not ran.timed_out else ""}.get(ran.code,
                                                                        f"exit {ran.code}")
        check.finish(step, ran, FAIL, note)


def correctness(check: Check) -> None:
    """The GPU tests beside compute-sanitizer's runs, all within one time span."""
    samples = sorted((ROOT / "samples").glob("*.hk"))
    tests = check.step("GPU tests")
    for sample in samples:
        for tool in SANITIZER_TOOLS:
            check.sanitizer[(sample.stem, tool)] = Step(f"{tool} {sample.stem}")
    end = min(check.deadline, time.monotonic() + CORRECTNESS_SECONDS)
    runner = threading.Thread(target=guarded, args=(check, tests, gpu_tests, check, tests,
                                                    end - time.monotonic()))
    runner.start()
    # The first run tells whether compute-sanitizer works on this device at all.
    first = (next((s for s in samples if s.stem == "tma_copy"), samples[0]), SANITIZER_TOOLS[0])
    guarded(check, check.sanitizer[(first[0].stem, first[1])], sanitize, check, *first,
            min(150, end - time.monotonic()))
    if check.sanitizer[(first[0].stem, first[1])].outcome == REFUSED:
        message = tail(check.sanitizer[(first[0].stem, first[1])].output, 3)
        section = ("compute-sanitizer", "compute-sanitizer refused this device; no sample "
                                        f"was checked:\n```\n{message}\n```")
        for step in check.sanitizer.values():
            if step.outcome == NOT_RUN:
                check.finish(step, None, REFUSED, "compute-sanitizer refused the device",
                             section)
    else:
        rest = [(s, t) for s in samples for t in SANITIZER_TOOLS if (s, t) != first]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for done in [pool.submit(lambda s=s, t=t: guarded(
                    check, check.sanitizer[(s.stem, t)], sanitize, check, s, t,
                    min(150, end - time.monotonic()))) for s, t in rest]:
                done.result()
    runner.join()


def benchmarks(check: Check) -> None:
    runs = [(f"bench {s} vs cuBLAS", ["bench/gemm.py", "--sample", s], 45)
            for s in GEMM_SAMPLES]
    runs += [(ATTENTION_BENCH, ["bench/attention.py", "--runs", "20"], 60),
             (ATTENTION_CAUSAL_BENCH, ["bench/attention.py", "--causal", "--runs", "20"], 60),
             (FP8_BENCH, ["bench/gemm_fp8_blockscaled.py"], 60),
             ("bench grouped_gemm vs PyTorch", ["bench/grouped_gemm.py"], 60),
             ("bench grouped_gemm_masked vs PyTorch", ["bench/grouped_gemm.py", "--masked"], 60),
             (VARLEN_BENCH, ["bench/attention_varlen.py"], 60)]
    for name, arguments, limit in runs:
        step = check.step(name)
        if check.left() < 10:
            check.finish(step, None, NOT_RUN, "the 8-minute budget was spent")
            continue
        ran = run_command([sys.executable, *arguments, "--runs", "20"],
                          min(limit, check.left()), check.env, cwd=ROOT)
        lines = ran.output.rstrip().splitlines()
        skipped = sum("skipped:" in line for line in lines)
        mean = next((line for line in reversed(lines) if line.startswith("geometric mean")),
                    "")
        note = mean.replace("geometric mean of ", "") + (f"; {skipped} shapes not run (see "
                                                         "below)" if skipped else "")
        check.finish(step, ran, PASS if ran.code == 0 else FAIL, note,
                     (name, f"```\n{tail(ran.output, 40)}\n```"))


def guarded(check: Check, step: Step | str, function, *args):
    """`function(*args)`; an exception (a bug of this script) fails `step` (a step
    of that name, made then), with its traceback in the report, and the check
    goes on."""
    try:
        return function(*args)
    except Exception:  # noqa: BLE001 - reported, not raised: the report must be written
        failed = check.step(step) if isinstance(step, str) else step
        check.finish(failed, Ran(None, traceback.format_exc(), 0.0), FAIL,
                     "gpu_check.py failed here")
        return None


def not_run(check: Check, reason: str) -> None:
    for sample in sorted((ROOT / "samples").glob("*.hk")):
        for tool in SANITIZER_TOOLS:
            check.sanitizer[(sample.stem, tool)] = Step(f"{tool} {sample.stem}", note=reason)
    for name in ["GPU tests", *(f"bench {s} vs cuBLAS" for s in GEMM_SAMPLES),
                 ATTENTION_BENCH, ATTENTION_CAUSAL_BENCH, FP8_BENCH,
                 "bench grouped_gemm vs PyTorch", "bench grouped_gemm_masked vs PyTorch",
                 VARLEN_BENCH]:
        check.finish(check.step(name), None, NOT_RUN, reason)


# -- the commands ------------------------------------------------------------------

def check_command(wheels: Path, report: Path, work: Path, budget: float) -> int:
    work.mkdir(parents=True, exist_ok=True)
    check = Check(wheels, report, work, budget)
    check.write()
    step = check.step("environment")
    gpu = guarded(check, step, environment, check, step)
    step = check.step("install")
    installed = guarded(check, step, install, check, step)
    if not gpu or not installed:
        not_run(check, "no Hopper GPU" if not gpu else "the install failed")
    else:
        guarded(check, "correctness checks", correctness, check)
        guarded(check, "benchmarks", benchmarks, check)
    check.done = True
    check.write()
    code, verdict = outcome_of(check)
    print(f"{verdict}; report: {report}")
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=ROOT / "wheels")
    parser.add_argument("--report", type=Path, default=ROOT / "build" / "gpu-report.md")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "gpu-check",
                        help="where the wheels are installed and the commands run")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS,
                        help=argparse.SUPPRESS)
    options = parser.parse_args()
    return check_command(options.wheels.resolve(), options.report.resolve(),
                         options.work.resolve(), options.budget)


if __name__ == "__main__":
    sys.exit(main())
