"""`hopperc sim` and `hopperc check` as a user runs them."""
from __future__ import annotations

import json
import re

from tests.conftest import ROOT
from tests.sim.test_manual_kernels import variant

TMA_COPY = str(ROOT / "samples" / "tma_copy.hk")


def test_check_passes_a_sample(hopperc_cli):
    proc = hopperc_cli("check", TMA_COPY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shapes: M=97 N=96, 4 blocks" in proc.stdout  # partial last tiles
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
    assert proc.returncode == 1 and "expected NAME=INTEGER" in proc.stderr
    proc = hopperc_cli("check", str(tmp_path / "missing.hk"))
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in \
        proc.stderr


def test_json_diagnostics_give_one_record_per_finding(hopperc_cli, tmp_path):
    """Line 27 writes `out` with st.shared; with the fence on line 28 deleted,
    the TMA store (now line 30) reads it through the async proxy unfenced."""
    broken = tmp_path / "broken.hk"
    broken.write_text(variant(28, "fence.proxy.async", None).text)
    proc = hopperc_cli("sim", str(broken), "--seeds", "2", "--search", "0", "--diagnostics",
                       "json")
    assert proc.returncode == 1
    *findings, summary = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(findings) == 1 and summary["kind"] == "summary"
    assert summary["ok"] is False and summary["findings"] == 1
    finding = findings[0]
    assert finding["kind"] == "finding" and finding["category"] == "missing proxy fence"
    assert finding["rule"] == "missing-proxy-fence" and finding["end_line"] == 27
    assert (finding["file"], finding["line"], finding["column"]) == (str(broken), 27, 13)
    assert (finding["related"]["line"], finding["related"]["column"]) == (30, 17)
    assert "fence.proxy.async" in finding["message"]
    assert finding["schedule"] and finding["trace"], "the trace comes with every record"


def test_check_json_on_a_clean_kernel_is_one_summary(hopperc_cli):
    proc = hopperc_cli("check", TMA_COPY, "--diagnostics", "json")
    assert proc.returncode == 0
    (summary,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert summary == {"kind": "summary", "ok": True, "complete": True, "findings": 0,
                       "lines": summary["lines"]}
    assert summary["lines"][-1].startswith("ok: no deadlock")
