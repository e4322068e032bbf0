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


def test_without_a_later_barrier_one_is_added_at_the_role_end(tmp_path):
    out = ir_after(TWO_PRODUCERS, PASS)
    add = out.split("role add")[1].split("role px")[0]
    assert add.count("mbarrier.inval") == 8  # 2 producers x (full, empty) x 2 stages
    filecheck(add, """
CHECK: wait_group.read 0  # why: sz read by TMA store (t.hk:10), shared memory released when
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: invalidated once every consumer thread is past them
CHECK-NEXT: mbarrier.inval px_add_full[0]
""", tmp_path)


def test_negative_barriers_of_a_single_role_are_left_alone():
    assert "mbarrier.inval" not in ir_after(COPY, PASS)
