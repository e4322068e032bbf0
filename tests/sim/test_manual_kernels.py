"""Hand-synchronized kernels: the correct one passes the simulator; each broken
variant (one bug planted by editing one line) is reported with its category
at the line of the bug."""
from __future__ import annotations

from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.sim.findings import Category

SOURCE = (Path(__file__).parent / "manual" / "manual_pipe.hk").read_text()
LINES = SOURCE.splitlines()


def variant(line: int, old: str, new: str | None) -> SourceFile:
    """The kernel with `old` on `line` (1-based) replaced by `new` (None: deleted)."""
    lines = list(LINES)
    assert old in lines[line - 1], lines[line - 1]
    if new is None:
        del lines[line - 1]
    else:
        lines[line - 1] = lines[line - 1].replace(old, new)
    return SourceFile("manual_pipe.hk", "\n".join(lines) + "\n")


def findings(source: SourceFile):
    return driver.simulate(source, seeds=8, search=300).findings


def test_correct_manual_pipeline_passes():
    report = driver.simulate(SourceFile("manual_pipe.hk", SOURCE), seeds=8, search=300)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.reference == "numpy reference"
    assert report.max_error["Y"] == 0.0


@pytest.mark.parametrize("line, old, new, category, where", [
    # the consumer reads the stage without waiting for the load: race at the read
    (20, "mbarrier.wait full[j % 2], j % 4 >= 2", "", Category.RACE, 21),
    # no fence between st.shared and the TMA store that reads it: at the write
    (28, "fence.proxy.async", None, Category.MISSING_FENCE, 27),
    # the opposite parity passes at once on the fresh full barrier
    (20, "j % 4 >= 2", "j % 4 < 2", Category.BARRIER_MISUSE, 20),
    # 64 threads for a barrier all 128 threads of the role reach
    (29, "bar.sync 1, 128", "bar.sync 1, 64", Category.BARRIER_MISUSE, 29),
    # thread 0 arrives a second time on the empty barrier
    (24, "bulk.wait_read 0", "bulk.wait_read 0\n mbarrier.arrive empty[j % 2]",
     Category.BARRIER_MISUSE, 25),
    # `out` is rewritten while the previous store may still read it
    (24, "bulk.wait_read 0", "", Category.RACE, 27),
    # the load warp skips the setup barrier: barriers used before their init is visible
    (40, "bar.sync 0, 160", "", Category.BARRIER_MISUSE, 43),
])
def test_broken_variant_is_reported_at_its_line(line, old, new, category, where):
    found = findings(variant(line, old, new))
    assert found, "the bug went unnoticed"
    first = found[0]
    assert first.category is category, first.headline()
    assert first.span.line == where, first.headline()


def test_producer_parity_bug_is_a_deadlock_naming_both_waits():
    found = findings(variant(43, "1 - (j % 4 >= 2)", "(j % 4 >= 2)"))
    deadlock = found[0]
    assert deadlock.category is Category.DEADLOCK, deadlock.headline()
    state = "\n".join(deadlock.state)
    assert "manual_pipe.hk:20" in state and "manual_pipe.hk:43" in state
    assert "warps 0-3 (math) wait at mbarrier.wait full[0] parity 0" in state
    assert "warp 4 (load) waits at mbarrier.wait empty[0] parity 0" in state
