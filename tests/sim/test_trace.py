"""Simulated runs as Chrome/Perfetto traces (`sim/recorder.py`, `sim/trace.py`,
`hopperc sim|check --trace`)."""
from __future__ import annotations

import json

import pytest

from hopperc import driver
from hopperc.cli.sim import _problem
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.sim import recorder as recorder_module
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category, Finding
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.recorder import replay
from hopperc.sim.trace import trace_bytes
from tests.sim import mutations as m
from tests.sim.test_manual_kernels import variant

# A producer warpgroup loads two stages; a consumer warpgroup multiplies them.
TINY = """\
kernel tiny_gemm(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N])
    tile(BM = 64, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) threads 128 specialize
{
    shared sa: bf16[BM, BK] stages 2 swizzle 128B
    shared sb: bf16[BN, BK] stages 2 swizzle 128B
    shared sc: bf16[64, 64] swizzle 128B

    acc: f32[64, BN] = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc += sa @ sb^T
    }
    sc = bf16(acc)
    tma C[tile.m, tile.n] <- sc
}
"""
LOAD_A, MMA = "t.hk:10", "t.hk:12"


@pytest.fixture(scope="module")
def tiny():
    front_end = driver.check(SourceFile("t.hk", TINY))
    lowered = driver.lower(front_end)
    dims = {**default_dims(lowered), "M": 64, "N": 64, "K": 192}  # three loads per ring
    return front_end, lowered, make_problem(lowered, dims)


def run(tiny, edit=None, seeds: int = 1, search: int = 0):
    front_end, lowered, problem = tiny
    kernel = m.edit(lowered, edit) if edit else lowered
    return simulate(kernel, front_end, problem, seeds, search)


def events(report, finding=None) -> list[dict]:
    trace = json.loads(trace_bytes(replay(report, finding)))
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    out = trace["traceEvents"]
    for event in out:  # the trace-event format's required keys
        assert {"ph", "pid", "tid", "name"} <= set(event), event
        assert "ts" in event or event["ph"] == "M", event
        if event["ph"] == "X":
            assert event["dur"] >= 1, event
        if event["ph"] in "sf":
            assert "id" in event and (event["ph"] == "s" or event["bp"] == "e"), event
    return out


def tracks(out: list[dict]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in out
            if e["ph"] == "M" and e["name"] == "thread_name"}


def spans(out: list[dict]) -> list[dict]:
    return [e for e in out if e["ph"] == "X"]


def enclosing(out: list[dict], event: dict) -> dict:
    """The span a flow event binds to: on its track, around its time."""
    around = [e for e in spans(out) if (e["pid"], e["tid"]) == (event["pid"], event["tid"])
              and e["ts"] <= event["ts"] < e["ts"] + e["dur"]]
    assert around, event
    return min(around, key=lambda e: e["dur"])


def test_trace_of_a_correct_kernel(tiny):
    report = run(tiny)
    assert report.ok
    out = events(report)
    names = tracks(out)
    warps = [n for n in names.values() if n.startswith("warp ")]
    assert len(warps) == 8  # one track per warp, named with its role and the role's warps
    assert "warp 0: consumer (warps 0-3, warpgroup 0)" in warps
    assert "warp 4: producer (warps 4-7, warpgroup 1)" in warps
    load = next(e for e in spans(out) if e["cat"] == "tma" and e["args"]["source"] == LOAD_A)
    assert names[(load["pid"], load["tid"])].startswith("TMA loads")
    assert load["args"]["tensor"] == "A" and load["args"]["barrier"].endswith("full[0]")
    product = next(e for e in spans(out) if e["cat"] == "wgmma")
    assert product["args"]["source"] == MMA and "sa stage 0" in product["args"]["reads"]
    assert names[(product["pid"], product["tid"])].startswith("wgmma of warp ")
    wait = next(e for e in spans(out) if e["name"].startswith("mbarrier.wait")
                and "full" in e["args"]["barrier"])
    assert wait["args"]["source"] == MMA and {"phase", "parity", "stage"} <= set(wait["args"])
    assert "consumer" in names[(wait["pid"], wait["tid"])]

    flows = {e["id"]: [] for e in out if e["ph"] in "sf"}
    for e in out:
        if e["ph"] in "sf":
            flows[e["id"]].append(e)
    released_by = []
    for start, finish in flows.values():
        assert (start["ph"], finish["ph"]) == ("s", "f") and start["ts"] <= finish["ts"]
        source, target = enclosing(out, start), enclosing(out, finish)
        assert target["name"].startswith(("mbarrier.wait", "bar.sync", "wgmma.wait_group"))
        if target is wait:
            released_by.append((names[(source["pid"], source["tid"])].split(":")[0],
                                source["name"].split(" ")[0]))
    # The consumer's first full wait: the producer's expect_tx and both TMA loads' bytes.
    assert sorted(released_by) == [("TMA loads", "TMA"), ("TMA loads", "TMA"),
                                   ("warp 4", "mbarrier.arrive.expect_tx")]


def test_hang_shows_the_waits_still_open(tiny):
    """Without the consumer's release of a stage the producer waits forever for
    it, and the consumer for the load that never comes."""
    report = run(tiny, m.remove(ir.StageRelease))
    [finding] = report.findings
    assert finding.category is Category.DEADLOCK
    out = events(report, finding)
    end = max(e["ts"] + e["dur"] for e in spans(out))
    open_waits = [e for e in spans(out) if e["args"].get("open")
                  and e["name"].startswith("mbarrier.wait")]
    names = tracks(out)
    assert {names[(e["pid"], e["tid"])].split(":")[1].split()[0] for e in open_waits} == \
        {"producer", "consumer"}
    assert all(e["ts"] + e["dur"] == end and "arrivals" in e["args"]["state"]
               for e in open_waits)
    producer = next(e for e in open_waits if "empty" in e["args"]["barrier"])
    assert producer["args"]["source"] == LOAD_A and "0 of 4 arrivals" in \
        producer["args"]["state"]
    # the other side of the hang, the finding's related line
    assert [e for e in spans(out) if "finding" in e["args"]] == [producer]
    [instant] = [e for e in out if e["ph"] == "i"]
    assert instant["s"] == "g" and instant["name"].startswith("deadlock: every live warp")


def test_race_shows_both_accesses(tiny):
    """Without wgmma.wait_group the consumer releases a stage its products may
    still read, and the next load into it races with them."""
    report = run(tiny, m.remove(ir.WgmmaWait))
    finding = report.findings[0]
    assert finding.category is Category.RACE
    out = events(report, finding)
    names = tracks(out)
    [instant] = [e for e in out if e["ph"] == "i"]
    assert names[(instant["pid"], instant["tid"])] == "TMA loads"
    assert instant["args"]["source"] == LOAD_A and instant["args"]["related"] == MMA
    others = [e for e in spans(out) if "finding" in e["args"]]
    assert others and all(e["cat"] == "wgmma" and e["args"]["open"]
                          and "sa stage 0" in e["args"]["reads"] for e in others)


@pytest.mark.parametrize("seeds, search", [(2, 0), (0, 40)])
def test_replay_is_the_run_that_found_it(tiny, seeds, search):
    """A seeded schedule and a run of the search replay to the same finding,
    through the same last events."""
    report = run(tiny, m.remove(ir.StageRelease), seeds, search)
    finding = report.findings[0]
    assert finding.run[0] == ("seed" if seeds else "search")
    recording = replay(report, finding)
    assert recording.finding == finding and recording.finding.trace == finding.trace


def test_without_a_trace_no_recording_code_runs(tiny, monkeypatch):
    """The plain blocks and warps run; only a replay makes recording ones."""
    made = []
    monkeypatch.setattr(recorder_module.Recorder, "counted",
                        lambda self, chooser: made.append(self) or chooser)
    run(tiny, seeds=2, search=20)
    assert made == []
    replay(run(tiny))
    assert len(made) == 1


def test_check_writes_a_trace_per_finding(hopperc_cli, tmp_path):
    hang = tmp_path / "hang.hk"
    hang.write_text(variant(22, "mbarrier.arrive empty[j % 2]", None).text)
    proc = hopperc_cli("sim", str(hang), "--seeds", "2", "--search", "0", "-q",
                       "--trace", str(tmp_path / "traces"))
    assert proc.returncode == 1, proc.stderr
    written = tmp_path / "traces" / "manual_pipe-finding-1.json"
    assert f"  trace: {written}" in proc.stdout
    trace = json.loads(written.read_text())
    assert trace["otherData"]["schedule"] == "seed 0 (async-early)"
    assert any(e["ph"] == "X" and e["args"].get("open") for e in trace["traceEvents"])
    assert [p.name for p in (tmp_path / "traces").iterdir()] == [written.name]


def test_trace_path_that_cannot_be_written(hopperc_cli, tmp_path):
    """Refused before the simulation runs, with nothing written."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = hopperc_cli("check", "samples/tma_copy.hk", "--trace", str(blocker / "run.json"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"cannot write {blocker}/run.json: {blocker} is a file, not a directory" in \
        proc.stderr
    assert "shapes:" not in proc.stdout and list(tmp_path.iterdir()) == [blocker]
    proc = hopperc_cli("check", "samples/tma_copy.hk", "--trace", str(tmp_path))
    assert proc.returncode == 0 and "traces: none written" in proc.stdout


def test_a_finding_names_its_trace_in_every_form():
    finding = Finding(Category.DEADLOCK, "stuck", None, trace_file="traces/k-finding-1.json")
    assert "  trace: traces/k-finding-1.json" in finding.lines()
    assert finding.record()["trace_file"] == "traces/k-finding-1.json"
    assert "trace: traces/k-finding-1.json" in _problem(finding).notes
    assert "trace_file" not in Finding(Category.DEADLOCK, "stuck", None).record()
