"""`signal F[i]` and `wait F[i] >= n`: flags in global memory between blocks
(ir.Signal, ir.Wait; passes/order_semaphores.py; sim/semaphores.py). What the
front end accepts and refuses, the release and acquire the pass builds around
them, the PTX and SASS they become, and the simulator: the blocks of a flag
kernel run interleaved, and each sync the pass adds, taken out, is a finding
at the right place."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.interleave import searched_clusters
from hopperc.sim.explore import program
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import edit_error
from tests.sim.mutations import edit, remove

# Block (m, p < P - 1) stores its column tile of X to W[p] and signals F[m];
# block (m, P - 1) waits for them, adds their tiles to its own and stores Y.
SPLIT = """kernel split_rows(X: f32[M, N], W: f32[P, M, 64], F: i32[T], Y: f32[M, 64])
    tile(BM = 64, BN = 64, P = 3) grid(m: M / BM, p: P) threads 128
{
    shared sx: f32[BM, BN]
    shared sw: f32[BM, BN]
    tma sx <- X[tile.m, tile.p]
    if tile.p < P - 1 {
        tma W[tile.p, tile.m, 0] <- sx
        signal F[tile.m]
    } else {
        wait F[tile.m] >= P - 1
        for q in 0 .. P - 1 {
            tma sw <- W[q, tile.m, 0]
            sx = sx + sw
        }
        tma Y[tile.m, 0] <- sx
    }
}
"""
SIGNAL, WAIT, LOAD, STORE = 9, 11, 13, 8
SHAPES = {"M": 100, "N": 192, "T": 2}


def _lowered():
    return driver.lower(driver.check(SourceFile("split.hk", SPLIT)))


def _findings(kernel: ir.Kernel, seeds: int = 8):
    problem = make_problem(kernel, SHAPES)
    report = simulate(kernel, driver.check(SourceFile("split.hk", SPLIT)), problem, seeds, 200)
    return report.findings


def test_blocks_hand_their_tiles_to_the_last_one():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((100, 192)).astype(np.float32)
    out = hopperc.simulate(SourceFile("split.hk", SPLIT), {"X": x}, shapes={"T": 2},
                           schedules=4)
    want = x[:, :64].astype(np.float64) + x[:, 64:128] + x[:, 128:]
    assert np.all(np.abs(out["Y"] - want) <= 2 ** -22 * np.abs(x).reshape(100, 3, 64).sum(1))
    np.testing.assert_array_equal(out["F"], [2, 2])  # each row tile signalled twice


def test_the_pass_makes_a_release_and_an_acquire():
    lowered = _lowered()
    stmts = list(walk(lowered.body))
    signal = next(i for i, s in enumerate(stmts) if isinstance(s, ir.Signal))
    wait = next(i for i, s in enumerate(stmts) if isinstance(s, ir.Wait))
    before = stmts[signal - 4:signal]
    assert [type(s) for s in before] == [ir.OneThread, ir.BulkWaitRead, ir.NamedBarrier,
                                         ir.OneThread]
    assert before[1].pending == 0 and not before[1].read
    assert before[2].id == 0 and before[2].threads == 128
    assert isinstance(stmts[wait + 1], ir.GlobalProxyFence)
    assert isinstance(stmts[wait + 2], ir.NamedBarrier) and stmts[wait + 2].id == 0


def test_negative_no_proxy_fence_without_tma_loads():
    text = SPLIT.replace("            tma sw <- W[q, tile.m, 0]\n            sx = sx + sw\n", "")
    lowered = driver.lower(driver.check(SourceFile("split.hk", text)))
    kinds = {type(s) for s in walk(lowered.body)}
    assert ir.Wait in kinds and ir.GlobalProxyFence not in kinds


def test_ptx_and_sass():
    built = driver.build(SourceFile("split.hk", SPLIT))
    ptx = built.result.ptx
    for instruction in ("red.release.gpu.global.add.s32", "ld.acquire.gpu.global.b32",
                        "fence.proxy.async.global", "cp.async.bulk.wait_group 0"):
        assert instruction in ptx, instruction
    (code,) = sm.functions(built.result.cubin).values()
    opcodes = [i.opcode for i in code]
    red = next(i for i, op in enumerate(opcodes) if op.startswith("REDG.E.ADD.S32.STRONG.GPU"))
    assert "MEMBAR.ALL.GPU" in opcodes[red - 4:red]  # the release
    load = next(i for i, op in enumerate(opcodes) if op.startswith("LDG.E.STRONG.GPU"))
    assert "CCTL.IVALL" in opcodes[load:load + 3]  # the acquire
    fence = opcodes.index("FENCE.VIEW.ASYNC.G")
    assert load < fence < next(i for i, op in enumerate(opcodes) if op.startswith("UTMALDG.3D"))


def test_check_is_clean_and_every_block_runs():
    report = driver.simulate(SourceFile("split.hk", SPLIT), shapes=SHAPES, seeds=8, search=300)
    assert report.ok, [f.headline() for f in report.findings]
    assert len(report.problem.grid) == 6 and report.max_error["F"] == 0


def test_default_shapes_hold_every_flag():
    dims = default_dims(_lowered())
    assert dims["T"] >= -(-dims["M"] // 64)


def test_blocks_without_flags_keep_running_a_cluster_at_a_time():
    plain = driver.lower(driver.check(SourceFile("c.hk", """kernel c(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    tma Y[tile.m, 0] <- sx
}
""")))
    clusters = [[{"tile.m": i}] for i in range(3)]
    assert searched_clusters(program(plain), clusters) == clusters[:1]
    assert searched_clusters(program(_lowered()), clusters) == clusters


def test_negative_removed_signal_is_a_deadlock_at_the_wait():
    (finding, *_) = _findings(edit(_lowered(), remove(ir.Signal), limit=1))
    assert finding.category is Category.DEADLOCK and finding.span.line == WAIT
    assert "the spin on F[0] >= 2" in " ".join(finding.state) and "F[0] holds 0" in \
        " ".join(finding.state)


def test_negative_a_wait_for_too_many_signals_is_a_deadlock():
    lowered = edit(_lowered(), lambda s: [ir.Wait(s.tensor, s.index, ir.const(3), s.span)]
                   if isinstance(s, ir.Wait) else None)
    (finding, *_) = _findings(lowered)
    assert finding.category is Category.DEADLOCK and "F[0] holds 2" in " ".join(finding.state)


def test_negative_removed_wait_is_a_race_on_the_workspace():
    findings = _findings(edit(_lowered(), remove(ir.Wait)))
    races = [f for f in findings if f.category in (Category.RACE, Category.WRONG_RESULT)]
    assert races and {races[0].span.line, getattr(races[0].related, "line", None)} & \
        {LOAD, STORE}, [f.headline() for f in findings]


def test_negative_removed_proxy_fence_is_a_missing_fence_at_the_load():
    findings = _findings(edit(_lowered(), remove(ir.GlobalProxyFence)))
    assert findings and findings[0].category is Category.MISSING_FENCE
    assert findings[0].span.line == LOAD and findings[0].related.line == STORE
    assert "fence.proxy.async.global" in findings[0].message


def test_negative_removed_store_completion_is_a_race():
    findings = _findings(edit(_lowered(), remove(
        ir.OneThread, lambda s: isinstance(s.body.stmts[0], ir.BulkWaitRead) and
        not s.body.stmts[0].read)))
    assert findings and findings[0].category is Category.RACE
    assert findings[0].span.line == LOAD and findings[0].related.line == STORE


@pytest.mark.parametrize("old, new, message", [
    ("signal F[tile.m]", "signal X[tile.m, 0]", "'X' is f32: flags are i32 elements"),
    ("signal F[tile.m]", "signal F[tile.m, 0]", "'F' has rank 1: a flag takes one index"),
    ("signal F[tile.m]", "signal F[0 : 2]", "a flag is one element"),
    ("signal F[tile.m]", "signal F[lane]", "this names 'lane', which differs between"),
    ("signal F[tile.m]", "signal sx[0]", "'sx' is not a tensor"),
    ("wait F[tile.m] >= P - 1", "wait F[tile.m] == P - 1", "a flag is waited on with '>='"),
    ("wait F[tile.m] >= P - 1", "wait F[tile.m] >= thread", "this names 'thread'"),
    ("signal F[tile.m]", "manual { signal F[tile.m] }", "'signal' is automatic code"),
])
def test_diagnostics(old, new, message):
    assert message in edit_error(SPLIT, old, new).message


def test_diagnostics_in_a_role_and_in_a_cluster():
    roles = """kernel r(F: i32[T]) tile(BM = 64) grid(m: 4) {
    role math: warpgroup {
        signal F[tile.m]
    }
}
"""
    with pytest.raises(CompileError, match="in a role \\('math'\\)"):
        driver.check(SourceFile("r.hk", roles))
    cluster = "kernel c(F: i32[T]) tile(BM = 64) grid(m: 4) cluster(2) threads 128 {\n" \
              "    wait F[tile.m] >= 1\n}\n"
    with pytest.raises(CompileError, match="not available in a kernel with clusters"):
        driver.check(SourceFile("c.hk", cluster))


def test_a_findings_trace_replays_every_block_interleaved(tmp_path, hopperc_cli):
    kernel = tmp_path / "split.hk"
    kernel.write_text(SPLIT.replace("        signal F[tile.m]\n", ""))
    done = hopperc_cli("sim", "-j", "1", str(kernel), "--seeds", "2", "--search", "10",
                       "--trace", str(tmp_path / "traces"))
    assert done.returncode == 1 and "deadlock" in done.stdout + done.stderr
    assert "exhaustive search of every block" in done.stdout + done.stderr
    (trace,) = sorted((tmp_path / "traces").glob("*.json"))[:1]
    assert "flag F[0]" in trace.read_text()
