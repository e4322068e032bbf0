"""`make gpu-check` (bench/gpu_check.py, bench/gpu_wheels.py) where no GPU is: a clear report and exit 1
without a GPU, the wheel folder installing offline (when `make gpu-wheels` has
made one), compute-sanitizer's refusal of a device reported as such, and the
GEMM benchmarks covering every GEMM sample."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from hopperc import driver
from tests.conftest import ROOT, SAMPLES

SCRIPT = ROOT / "bench" / "gpu_check.py"
NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def _module(name: str = "gpu_check"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(tmp_path, wheels):
    report = tmp_path / "report.md"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--wheels", str(wheels),
                           "--report", str(report), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, env=NO_GPU, timeout=300)
    return proc, report.read_text()


def test_without_a_gpu_the_report_says_so_and_the_check_fails(tmp_path):
    (tmp_path / "empty").mkdir()
    proc, report = _check(tmp_path, tmp_path / "empty")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert "| environment | FAIL |" in report and "no Hopper GPU" in report
    assert "no hopperc wheel in" in report and "run `make gpu-wheels`" in report
    for step in ("GPU tests", "bench gemm_bf16 vs cuBLAS", "bench attention_fwd causal vs FA3 and SDPA"):
        assert f"| {step} | not run |" in report
    assert "| tma_copy | not run (no Hopper GPU) | not run (no Hopper GPU) |" in report
    assert "result: **FAIL" in report


def test_the_wheel_folder_installs_offline_and_a_stale_one_is_refused(tmp_path):
    module = _module("gpu_wheels")
    made = ROOT / "wheels"
    carried = [w for w in made.glob("*.whl") if not w.name.startswith("hopperc-")] \
        if made.is_dir() else []
    if len(carried) < len(module.CARRIED):
        pytest.skip("no wheel folder: `make gpu-wheels` makes one (it needs the registries)")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for wheel in carried:
        shutil.copy(wheel, wheels)
    module.build_hopperc_wheel(wheels)
    assert sum(p.stat().st_size for p in wheels.iterdir()) < module.WHEEL_FOLDER_LIMIT
    proc, report = _check(tmp_path, wheels)
    assert "| install | pass |" in report, report
    for name in module.CARRIED:
        assert f"- {name} " in report and "(carried;" in report
    assert "**missing**" not in report
    (wheels / module.SOURCE_DIGEST).write_text("0" * 64 + "\n")
    proc, report = _check(tmp_path, wheels)
    assert "| install | FAIL |" in report and "run `make gpu-wheels` again" in report


def _fake_sanitizer(tmp_path, monkeypatch, script: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "compute-sanitizer"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("script, outcome, note", [
    ("echo '========= Error: Device not supported'; exit 1", "refused",
     "compute-sanitizer does not support this device"),
    # the program ran unchecked: not a pass
    ("echo '========= Error: Device not supported'; exit 0", "refused",
     "compute-sanitizer does not support this device"),
    ("echo '========= ERROR SUMMARY: 2 errors'; exit 86", "FAIL", "racecheck reported hazards"),
    ("exit 0", "pass", ""),
])
def test_compute_sanitizer_outcomes(tmp_path, monkeypatch, script, outcome, note):
    module = _module()
    _fake_sanitizer(tmp_path, monkeypatch, script)
    check = module.Check(tmp_path, tmp_path / "r.md", tmp_path, budget=60)
    sample = ROOT / "samples" / "tma_copy.hk"
    for tool in module.SANITIZER_TOOLS:
        check.sanitizer[("tma_copy", tool)] = module.Step(f"{tool} tma_copy")
        module.sanitize(check, sample, tool, 30)
    step = check.sanitizer[("tma_copy", "racecheck")]
    assert (step.outcome, step.note) == (outcome, note)
    check.done = True
    code, _ = module.outcome_of(check)
    assert code == {"refused": 3, "FAIL": 1, "pass": 0}[outcome]


def test_the_gemm_benchmarks_cover_every_gemm_sample():
    """bench/gemm.py takes a sample computing C from A and B: each such sample is benched."""
    gemms = {p.stem for p in SAMPLES
             if [t.name for t in driver.check(driver.read_source(p)).tensors] == ["A", "B", "C"]}
    assert set(_module().GEMM_SAMPLES) == gemms


def test_a_bug_of_the_script_fails_its_step_and_the_check_goes_on(tmp_path):
    module = _module()
    check = module.Check(tmp_path, tmp_path / "r.md", tmp_path, budget=60)
    assert module.guarded(check, "benchmarks", lambda: 1 / 0) is None
    check.done = True
    report = (tmp_path / "r.md").read_text()
    assert "| benchmarks | FAIL | 0 | gpu_check.py failed here |" in report
    assert "ZeroDivisionError" in report and module.outcome_of(check)[0] == 1
