"""Row reductions in manual code (tests/sim/manual/row_softmax.hk): rowmax and
rowsum of a [16, 256] tile whose rows span the 4 warps store each warp's
partials and combine them inside one statement, where the user cannot put a
barrier. The compiler writes the barrier between the partials and their
combine, and the one before they are stored again, on an id of its own; where
the threads may not all run the reduction, it is refused."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.problem import make_problem
from tests.conftest import ROOT, edit_error, filecheck, ir_after
from tests.sim import mutations as m

KERNEL = ROOT / "tests" / "sim" / "manual" / "row_softmax.hk"
TEXT = KERNEL.read_text()
SMALL = {"M": 32}
# One reduction in a loop, with no barrier of the user's in it.
ONE_REDUCTION = """kernel rows_loop(X: f32[M, 256], Y: f32[M, 256])
    tile(BM = 16, BN = 256) grid(m: M / BM) threads 128 manual
{
    shared sx: f32[BM, BN]
    mbarrier full[1]
    if thread == 0 {
        mbarrier.init full[0], 1
        fence.mbarrier_init
    }
    bar.sync 0, 128
    if thread == 0 {
        mbarrier.expect_tx full[0], 16384
        tma sx <- X[tile.m, 0] via full[0]
    }
    mbarrier.wait full[0], 0
    x: f32[BM, BN] = sx
    for i in 0 .. 3 {
        m: f32[BM] = rowmax(x)
        x = x - m[:, None] * 0.5
    }
    sx = x
    fence.proxy.async
    bar.sync 0, 128
    if thread == 0 {
        tma Y[tile.m, 0] <- sx
        bulk.commit
        bulk.wait_read 0
        mbarrier.inval full[0]
    }
}
"""
TWO_IN_A_LOOP = ONE_REDUCTION.replace("x = x - m[:, None] * 0.5",
                                      "x = x - m[:, None] * 0.5\n        s: f32[BM] = rowsum(x)\n"
                                      "        x = x / s[:, None]")


def test_partials_and_their_combine_get_the_compilers_barriers(tmp_path):
    """Per reduction, a barrier between the partials and the combine, on id 15
    (no bar.sync of the kernel names it), over the block's 128 threads."""
    filecheck(ir_after(TEXT, "insert_barriers", "row_softmax.hk"), """
CHECK: mbarrier.wait full[0]
CHECK-NEXT: x: f32[16, 256]
CHECK-NEXT: st.shared x_rowmax_partials[warp, row] = rowmax(x)
CHECK-NEXT: bar.sync 15, 128
CHECK-SAME: why: x_rowmax_partials written by a row reduction's partials (row_softmax.hk:22), read by their combine, in one statement of manual code (row_softmax.hk:22)
CHECK-NEXT: m: f32[16] every_row = max over warps of x_rowmax_partials[:, row]
CHECK-NEXT: p: f32[16, 256]
CHECK-NEXT: st.shared p_rowsum_partials[warp, row] = rowsum(p)
CHECK-NEXT: bar.sync 15, 128
CHECK-NEXT: l: f32[16] every_row = sum over warps of p_rowsum_partials[:, row]
CHECK-NOT: bar.sync 15
""", tmp_path)


def test_two_reductions_in_a_loop_order_each_others_partials(tmp_path):
    """Each reduction's barrier also orders the other's combine before its
    partials are stored again (the next iteration): two barriers per iteration,
    as in automatic code."""
    filecheck(ir_after(TWO_IN_A_LOOP, "insert_barriers", "rows_loop.hk"), """
CHECK: for i in 0 .. 3:
CHECK-NEXT: st.shared x_rowmax_partials
CHECK-NEXT: bar.sync 15, 128
CHECK: st.shared x_rowsum_partials
CHECK-NEXT: bar.sync 15, 128
CHECK-NOT: bar.sync
CHECK: sx = x
""", tmp_path)


def test_one_reduction_in_a_loop_gets_a_barrier_before_its_partials(tmp_path):
    """Alone in the loop, rowmax's partials are stored again while the previous
    iteration's combine may still read them: a second barrier goes before them."""
    filecheck(ir_after(ONE_REDUCTION, "insert_barriers", "rows_loop.hk"), """
CHECK: for i in 0 .. 3:
CHECK-NEXT: bar.sync 15, 128
CHECK-SAME: why: x_rowmax_partials read by their combine, in one statement of manual code (rows_loop.hk:18), written by a row reduction's partials (rows_loop.hk:18)
CHECK-NEXT: st.shared x_rowmax_partials[warp, row] = rowmax(x)
CHECK-NEXT: bar.sync 15, 128
CHECK-NEXT: m: f32[16] every_row
""", tmp_path)


def test_explain_lists_the_compilers_barriers_in_manual_code():
    from hopperc.ir.explain import inserted_syncs
    listed = inserted_syncs(driver.lower(driver.check(SourceFile(KERNEL.name, TEXT))))
    assert [line.split("\n")[0] for line in listed] == [
        "row_softmax.hk:22: bar.sync 15, 128", "row_softmax.hk:24: bar.sync 15, 128"]
    assert "p_rowsum_partials written by a row reduction's partials" in listed[1]


def test_manual_row_softmax_passes_check():
    for text in (TEXT, ONE_REDUCTION, TWO_IN_A_LOOP):
        report = driver.simulate(SourceFile(KERNEL.name, text), None, SMALL, seeds=4, search=60)
        assert report.ok, [f.headline() for f in report.findings]
        assert report.max_error["Y"] < 1e-2


@pytest.mark.parametrize("text, which", [(TEXT, 0), (TEXT, 1), (ONE_REDUCTION, 0),
                                         (ONE_REDUCTION, 1), (TWO_IN_A_LOOP, 0),
                                         (TWO_IN_A_LOOP, 1)])
def test_without_a_compiler_barrier_the_partials_race(text, which):
    """Remove one of the compiler's barriers of manual code (after the partials
    of x or of p; alone in a loop, the one before or after them; two in a loop,
    either): a race on the partials, which the user could not have prevented."""
    front_end = driver.check(SourceFile(KERNEL.name, text))
    lowered = driver.lower(front_end)
    ours = [s for s in walk(lowered.body) if isinstance(s, ir.NamedBarrier) and s.id == 15]
    assert len(ours) == 2
    broken = m.edit(lowered, m.remove(ir.NamedBarrier, lambda s: s is ours[which]))
    report = simulate(broken, front_end, make_problem(broken, SMALL), 4, 60, first_finding=True)
    assert report.findings and report.findings[0].category.value == "race", \
        [f.headline() for f in report.findings]
    assert "partials" in report.findings[0].headline()


def test_the_barrier_takes_an_id_no_bar_sync_names():
    text = TEXT.replace("    bar.sync 0, 128\n    if thread == 0 {\n        tma Y",
                        "    bar.sync 15, 128\n    if thread == 0 {\n        tma Y")
    out = ir_after(text, "insert_barriers")
    assert "bar.sync 15, 128  # why" not in out
    assert "bar.sync 14, 128  # why: x_rowmax_partials" in out


def test_a_reduction_of_a_warpgroups_tile_needs_no_barrier():
    """rowmax of a [64, N] wgmma-layout tile is reduced in registers: nothing to add."""
    text = """kernel k(X: f32[M, 64], Y: f32[M, 64]) tile(BM = 64) grid(m: M / BM) manual {
    shared sx: f32[BM, 64]
    x: f32[BM, 64] = sx
    m: f32[BM] = rowmax(x)
    sx = x - m[:, None]
}
"""
    assert "bar.sync" not in ir_after(text)


@pytest.mark.parametrize("old, new, what", [
    ("    m: f32[BM] = rowmax(x)", "    if warp < 2 {\n    m: f32[BM] = rowmax(x)\n    }",
     "condition"),
    ("    m: f32[BM] = rowmax(x)", "    elect {\n    m: f32[BM] = rowmax(x)\n    }", "elect"),
    ("    m: f32[BM] = rowmax(x)", "    for i in 0 .. lane {\n    m: f32[BM] = rowmax(x)\n    }",
     "loop"),
])
def test_a_reduction_the_threads_may_not_all_run_is_refused(old, new, what):
    """Inside a condition, elect or loop bound that names the thread, some warps
    would not store their partials or meet the barrier: refused at the reduction."""
    error = edit_error(TEXT, old, new)
    edited = TEXT.replace(old, new, 1).splitlines()
    reduction = next(i for i, line in enumerate(edited, 1) if "rowmax(x)" in line)
    construct = next(i for i, line in enumerate(edited, 1) if new.split("\n")[0] in line)
    assert error.message == (
        "rowmax(x) combines the partials of every warp after a barrier of all 128 threads, "
        f"which the compiler writes; it cannot run inside the {what} at line {construct}, "
        "which the threads may take differently: reduce outside it")
    assert (error.span.line, error.span.col) == (reduction, edited[reduction - 1].index("rowmax") + 1)


def test_no_free_barrier_id_is_an_error_at_the_reduction():
    """Every id from the first past automatic code's to 15 named by the user."""
    taken = "".join(f"    bar.sync {i}, 128\n" for i in range(3, 16))
    text = TEXT.replace("    mbarrier.wait full[0], 0\n", "    mbarrier.wait full[0], 0\n" + taken)
    with pytest.raises(CompileError) as info:
        driver.lower(driver.check(SourceFile(KERNEL.name, text)))
    assert info.value.message.startswith("no named barrier id is left for the barrier this row "
                                         "reduction needs in manual code")
    assert info.value.span.line == text.splitlines().index("    m: f32[BM] = rowmax(x)") + 1


AUTOMATIC_LOOP = """kernel k(X: f32[M, 256], Y: f32[M, 256])
    tile(BM = 16, BN = 256) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, 0]
    x: f32[BM, BN] = sx
    for i in 0 .. 2 {
        m: f32[BM] = rowmax(x)
        x = x - m[:, None]
    }
    sx = x
    tma Y[tile.m, 0] <- sx
}
"""


@pytest.mark.parametrize("bound", ["lane", "thread / 32", "warp + 1"])
def test_automatic_code_refuses_a_loop_whose_bounds_name_the_thread(bound):
    """The relative in automatic code: the barriers the compiler puts in such a
    loop would be reached a different number of times by different threads."""
    error = edit_error(AUTOMATIC_LOOP, "for i in 0 .. 2", f"for i in 0 .. {bound}")
    assert error.message.startswith("this loop's bounds differ between the threads of a role, "
                                    "so the barriers the compiler inserts could not be reached")
    assert error.span.line == 7


# Two warpgroups, each reducing its own tile (its own part of the partials).
PER_WARPGROUP = """kernel rows_wg(X: f32[M, 256], Y: f32[M, 256])
    tile(BM = 32, BN = 256) grid(m: M / BM) threads 256 manual
{
    shared sx: f32[BM, BN]
    mbarrier full[1]
    if thread == 0 {
        mbarrier.init full[0], 1
        fence.mbarrier_init
    }
    bar.sync 0, 256
    if thread == 0 {
        mbarrier.expect_tx full[0], 32768
        tma sx <- X[tile.m, 0] via full[0]
    }
    mbarrier.wait full[0], 0
    x: f32[16, BN] = sx[wg]
    for i in 0 .. 2 {
        m: f32[16] = rowmax(x)
        x = x - m[:, None] * 0.5
    }
    sx[wg] = x
    fence.proxy.async
    bar.sync 0, 256
    if thread == 0 {
        tma Y[tile.m, 0] <- sx
        bulk.commit
        bulk.wait_read 0
        mbarrier.inval full[0]
    }
}
"""
# The same in a pingpong turn, which runs one warpgroup at a time.
PINGPONG = """kernel pingpong_rows(A: bf16[M, K], B: bf16[64, K], C: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) persistent pingpong
{
    shared sa: bf16[BM, 64] stages 2 swizzle 128B
    shared sb: bf16[64, 64] stages 2 swizzle 128B
    shared sc: f32[2, BM, 64]

    role math: warpgroup x2 {
        acc: f32[BM, 64] = 0
        for k in 0 .. K / 64 {
            acc += sa @ sb^T
        }
        x: f32[16, 256] = 1.0
        manual {
            m: f32[16] = rowmax(x)
            x = x - m[:, None]
        }
        sc[wg] = acc + 0.0
        tma C[tile.m, 0] <- sc[wg]
    }
    role load: warp {
        for k in 0 .. K / 64 {
            tma sa <- A[tile.m, k]
            tma sb <- B[0, k]
        }
    }
}
"""


def test_each_warpgroup_meets_alone_on_its_own_partials(tmp_path):
    """Each warpgroup stores and combines its own part (`buf[wg]`): it meets
    alone, on two ids of the compiler's (`14 + wg`), as in automatic code."""
    filecheck(ir_after(PER_WARPGROUP, "insert_barriers", "rows_wg.hk"), """
CHECK: for i in 0 .. 2:
CHECK-NEXT: bar.sync 14 + wg, 128
CHECK-NEXT: st.shared x_rowmax_partials[wg of 2][warp, row]
CHECK-NEXT: bar.sync 14 + wg, 128
CHECK-NEXT: m: f32[16] every_row
CHECK-NOT: bar.sync 15
""", tmp_path)
    report = driver.simulate(SourceFile("rows_wg.hk", PER_WARPGROUP), None, {"M": 64}, seeds=4,
                             search=60)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.max_error["Y"] < 1e-2


@pytest.mark.parametrize("which", [0, 1])
def test_without_a_warpgroups_barrier_its_partials_race(which):
    front_end = driver.check(SourceFile("rows_wg.hk", PER_WARPGROUP))
    lowered = driver.lower(front_end)
    ours = [s for s in walk(lowered.body) if isinstance(s, ir.NamedBarrier) and s.per_warpgroup]
    assert len(ours) == 2
    broken = m.edit(lowered, m.remove(ir.NamedBarrier, lambda s: s is ours[which]))
    report = simulate(broken, front_end, make_problem(broken, {"M": 64}), 4, 60,
                      first_finding=True)
    assert report.findings and report.findings[0].category.value == "race", \
        [f.headline() for f in report.findings]
    assert "partials" in report.findings[0].headline()


def test_a_pingpong_turn_reduces_in_manual_code():
    """A turn runs one warpgroup: a barrier of the whole role would never fill
    (refused); each warpgroup's own barrier does."""
    source = SourceFile("pingpong_rows.hk", PINGPONG)
    assert "bar.sync 14 + wg, 128  # why: x_rowmax_partials" in ir_after(PINGPONG)
    report = driver.simulate(source, None, {"M": 256, "K": 128}, seeds=4, search=60)
    assert report.ok, [f.headline() for f in report.findings]
