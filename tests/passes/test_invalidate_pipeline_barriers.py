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


def test_an_empty_barrier_rings_share_is_invalidated_once():
    """attention_two_tiles with an epilogue stored by the role's one thread (so a
    barrier of all 256 consumer threads follows the loop): K_b and V_a free
    their stages through K_a's empty barrier, so four rings invalidate 4 full
    and 2 empty arrays of 2 stages, each once (an inval after an inval is
    barrier misuse, which the simulator reported before)."""
    from hopperc import driver
    from tests.conftest import ROOT
    text = driver.read_source(ROOT / "tests" / "sim" / "kernels" /
                              "attention_two_tiles.hk").text
    text = text.replace("    shared so: bf16[4, 64, H] swizzle 128B\n",
                        "    shared so0: bf16[BM, H] swizzle 128B\n"
                        "    shared so1: bf16[BM, H] swizzle 128B\n")
    text = text.replace("""        so[wg] = bf16(o0 / l[:, None])
        tma O[2 * tile.m + wg, 0] <- so[wg]
        so[2 + wg] = bf16(o1 / l[:, None])
        tma O[2 * tile.m + wg, 1] <- so[2 + wg]
""", """        so0[wg] = bf16(o0 / l[:, None])
        so1[wg] = bf16(o1 / l[:, None])
        tma O[tile.m, 0] <- so0
        tma O[tile.m, 1] <- so1
""")
    out = ir_after(text, PASS)
    invals = [line.split()[1] for line in out.splitlines()
              if line.strip().startswith("mbarrier.inval")]
    assert len(invals) == len(set(invals)) == 12
    assert sum(1 for b in invals if "_empty[" in b) == 4
