"""`hopperc sim` and `hopperc check` as a user runs them."""
from __future__ import annotations

import re

from tests.conftest import ROOT
from tests.sim.test_manual_kernels import variant

TMA_COPY = str(ROOT / "samples" / "tma_copy.hk")


def test_check_passes_a_sample(hopperc_cli):
    proc = hopperc_cli("check", TMA_COPY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shapes: M=128 N=128, 4 blocks" in proc.stdout
    # The search ran out of choices before its budget: every order was explored.
    assert re.search(r"all \d+ runs of the exhaustive search of block 0", proc.stdout)
    assert "Y max error 0 against the numpy reference" in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("ok: no deadlock, race, missing fence")


def test_check_fails_on_a_finding_without_the_trace(hopperc_cli, tmp_path):
    broken = tmp_path / "broken.hk"
    broken.write_text(variant(28, "fence.proxy.async", None).text)
    proc = hopperc_cli("check", str(broken))
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"{broken}:27:") and "missing proxy fence:" in first
    assert "last events:" not in proc.stdout and "FAILED: 1 finding" in proc.stdout


def test_sim_prints_the_trace_and_honours_shape_and_seeds(hopperc_cli, tmp_path):
    broken = tmp_path / "broken.hk"
    broken.write_text(variant(20, "j % 4 >= 2", "j % 4 < 2").text)
    proc = hopperc_cli("sim", str(broken), "--shape", "M=64,N=320", "--seeds", "2",
                       "--search", "0")
    assert proc.returncode == 1
    assert "shapes: M=64 N=320, 1 block" in proc.stdout
    assert "schedules: 2 seeded, no exhaustive search" in proc.stdout
    assert "last events:" in proc.stdout and "found by: seed 0 (async-early)" in proc.stdout


def test_sim_input_errors(hopperc_cli, tmp_path):
    proc = hopperc_cli("sim", TMA_COPY, "--shape", "Q=3")
    assert proc.returncode == 1 and "--shape: the kernel has no dimension 'Q' (it has: M, N)" \
        in proc.stderr
    proc = hopperc_cli("sim", TMA_COPY, "--shape", "M=0")
    assert proc.returncode == 1 and "M must be positive, not 0" in proc.stderr
    proc = hopperc_cli("sim", TMA_COPY, "--shape", "M")
    assert proc.returncode == 2 and "expected NAME=INTEGER" in proc.stderr
    proc = hopperc_cli("check", str(tmp_path / "missing.hk"))
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in \
        proc.stderr
