"""invalidate_pipeline_barriers: inval once every consumer thread is done."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, TWO_PRODUCERS, WS_GEMM

PASS = "invalidate_pipeline_barriers"


def test_inval_rides_on_the_epilogue_barrier(tmp_path):
    """The store hand-off barrier already follows the last release: no new one."""
    out = ir_after(WS_GEMM, PASS)
    math = out.split("role math")[1].split("role load")[0]
    assert math.count("bar.sync 1, 256") == 1 and math.count("mbarrier.inval") == 6
    filecheck(out, """
CHECK: bar.sync 1, 256
CHECK-NEXT: mbarrier.inval load_math_full[0]
CHECK-NEXT: mbarrier.inval load_math_full[1]
CHECK-NEXT: mbarrier.inval load_math_full[2]
CHECK-NEXT: mbarrier.inval load_math_empty[0]
CHECK-NEXT: mbarrier.inval load_math_empty[1]
CHECK-NEXT: mbarrier.inval load_math_empty[2]
CHECK-NEXT: tma.store C
""", tmp_path)


def test_negative_without_a_later_barrier_none_is_added(tmp_path):
    """No buffer reuses mbarrier memory: invalidating at the block's end would
    buy a barrier for nothing, so the role ends after its last store wait."""
    out = ir_after(TWO_PRODUCERS, PASS)
    add = out.split("role add")[1].split("role px")[0]
    assert "mbarrier.inval" not in add
    filecheck(add, """
CHECK: wait_group.read 0  # why: sz read by TMA store (t.hk:10), shared memory released when
CHECK-NOT: bar.sync
CHECK-NOT: mbarrier
""", tmp_path)


def test_negative_a_warpgroups_own_barrier_does_not_carry_the_invals():
    """Per-warpgroup epilogue barriers only order one warpgroup: the other may
    still wait on the ring, so nothing is invalidated after them."""
    out = ir_after(WS_GEMM.replace("tma C[tile.m, tile.n] <- sc",
                                   "tma C[2 * tile.m + wg, tile.n] <- sc[wg]"), PASS)
    math = out.split("role math")[1].split("role load")[0]
    assert "bar.sync 3 + wg, 128" in math
    assert "mbarrier.inval" not in math.split("bar.sync 3 + wg")[1]


def test_negative_barriers_of_a_single_role_are_left_alone():
    assert "mbarrier.inval" not in ir_after(COPY, PASS)
