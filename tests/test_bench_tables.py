"""bench/speed_table.py: the report every comparison benchmark prints (its GPU runs
are not possible here; the table is)."""
from __future__ import annotations

import sys
import types

from bench.speed_table import Measured, geometric_mean_speed, print_markdown


def test_progress_timings_give_both_speeds_and_the_ratio():
    row = Measured((1024,), ours_ms=0.5, theirs_ms=1.0, flops=1e12)
    assert row.ratio == 2.0
    assert row.timings("sdpa") == ("hopperc     500.0 us 2000.0 TFLOP/s  sdpa    1000.0 us "
                                   "1000.0 TFLOP/s  ratio 2.000")


def test_markdown_table_has_the_cases_speeds_and_notes(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.9"))
    rows = [Measured((8, 4096), 2.0, 1.0, 4e12, ("1.0e-02", "a loop")),
            Measured((64, 8192), 1.0, 4.0, 4e12, ("2.0e-02", "_grouped_mm"))]
    print_markdown("grouped_gemm (N = 4096)", "H100", "13.0", ["E", "tokens"], "PyTorch",
                   ["max diff", "PyTorch ran"], rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("grouped_gemm (N = 4096) on H100, driver 13.0, torch 2.9, ")
    assert lines[2] == ("| E | tokens | hopperc us | TFLOP/s | PyTorch us | TFLOP/s | ratio | "
                        "max diff | PyTorch ran |")
    assert lines[3] == "|---|---|---|---|---|---|---|---|---|"
    assert lines[4] == "| 8 | 4096 | 2000.0 | 2000.0 | 1000.0 | 4000.0 | 0.500 | 1.0e-02 | a loop |"
    assert abs(geometric_mean_speed(rows) - 2 ** 0.5) < 1e-12  # sqrt(0.5 * 4)
