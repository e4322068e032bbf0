"""connect_role_pipelines: a stage ring per producer role, with exact counts.

Expected values are worked out from the kernels: WS_GEMM's stage carries
sa (128 x 64 bf16 = 16384 B) and sb (64 x 64 bf16 = 8192 B), so the producer
expects 24576 bytes; its consumers are 2 warpgroups = 8 warps.
"""
import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import MMA_SITES, TWO_PRODUCERS, WS_GEMM, WS_HEADER

PASS = "connect_role_pipelines"


def test_pipeline_counts_and_bytes():
    out = ir_after(WS_GEMM, PASS)
    assert ("pipeline load_math: load -> math [sa, sb] stages 3 full load_math_full "
            "empty load_math_empty (8 arrivals) expect_tx 24576 B") in out
    assert "mbarrier load_math_full[3] arrivals 1" in out
    assert "mbarrier load_math_empty[3] arrivals 8" in out


def test_producer_waits_empty_with_flipped_parity_then_arms_and_loads(tmp_path):
    """The producer carries its stage and phase in registers (counters, not k % 3 and
    k // 3 % 2 recomputed each iteration) and waits parity 1 - phase, which a fresh
    barrier passes (its first pass over the ring never blocks)."""
    filecheck(ir_after(WS_GEMM, PASS), """
CHECK: carried load_math_load_stage
CHECK: role load
CHECK: for k in 0 .. K / 64:
CHECK-NEXT: one_thread:
CHECK-NEXT: mbarrier.wait load_math_empty[load_math_load_stage], parity 1 - load_math_load_phase
CHECK-NEXT: mbarrier.arrive.expect_tx load_math_full[load_math_load_stage], 24576
CHECK-NEXT: tma.load sa{stage load_math_load_stage} <- A[tile.m * 128, k * 64] (16384 B) on load_math_full[load_math_load_stage]
CHECK-NEXT: tma.load sb{stage load_math_load_stage} <- B[tile.n * 64, k * 64] (8192 B) on load_math_full[load_math_load_stage]
CHECK-NEXT: advance load_math_load_stage mod 3 (flip load_math_load_phase on wrap)
""", tmp_path)


def test_wgmma_consumer_releases_the_previous_stage_and_not_the_last_of_its_one_loop(tmp_path):
    """One tile per block: the loop runs once, no load refills the stage the
    last iteration read, so nothing releases it (NESTED below does)."""
    filecheck(ir_after(WS_GEMM, PASS), """
CHECK: role math
CHECK: for k in 0 .. K / 64:
CHECK-NEXT: mbarrier.wait load_math_full[load_math_math_stage], parity load_math_math_phase
CHECK-NEXT: wgmma acc += sa{stage load_math_math_stage}[wg of 2] @ sb{stage load_math_math_stage}^T
CHECK-NEXT: if k > 0:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_empty[(load_math_math_stage + 2) % 3]  (release stage, lag 1)
CHECK-NEXT: advance load_math_math_stage mod 3 (flip load_math_math_phase on wrap)
CHECK-NEXT: st.shared sc[wg of 2] = bf16(acc)
""", tmp_path)


def test_two_producers_get_their_own_barriers(tmp_path):
    """Element-wise readers: every consumer thread arrives (128), right after
    its reads; each producer fences before refilling what ld.shared read."""
    out = ir_after(TWO_PRODUCERS, PASS)
    for p in ("px", "py"):
        assert f"mbarrier {p}_add_full[2] arrivals 1" in out
        assert f"mbarrier {p}_add_empty[2] arrivals 128" in out
    assert out.count("mbarrier ") == 4  # 2 barriers x 2 stages x 2 producer roles
    filecheck(out, """
CHECK: role add
CHECK-NEXT: for j in 0 .. N / 64:
CHECK-NEXT: mbarrier.wait px_add_full[px_add_add_stage], parity px_add_add_phase
CHECK-NEXT: mbarrier.wait py_add_full[py_add_add_stage], parity py_add_add_phase
CHECK-NEXT: st.shared sz = bf16((f32(ld.shared(sx{stage px_add_add_stage})) + f32(ld.shared(sy{stage py_add_add_stage}))))
CHECK-DAG: mbarrier.arrive px_add_empty[px_add_add_stage]  (release stage, lag 0)
CHECK-DAG: mbarrier.arrive py_add_empty[py_add_add_stage]  (release stage, lag 0)
CHECK: role px
CHECK: mbarrier.wait px_add_empty[px_add_px_stage], parity 1 - px_add_px_phase
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: sx read by ld.shared in role 'add'
CHECK-NEXT: mbarrier.arrive.expect_tx px_add_full[px_add_px_stage], 8192
CHECK: role py
CHECK: mbarrier.wait py_add_empty[py_add_py_stage], parity 1 - py_add_py_phase
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: mbarrier.arrive.expect_tx py_add_full[py_add_py_stage], 8192
""", tmp_path)


def test_negative_wgmma_readers_need_no_proxy_fence():
    assert "fence.proxy.async" not in ir_after(WS_GEMM, PASS)


NESTED = WS_HEADER + """    role math: warpgroup x2 regs 232 {
        for r in 0 .. 2 {
            acc: f32[64, BN] = 0
            for k in 0 .. K / BK {
                acc += sa[wg] @ sb^T
            }
        }
    }
    role load: warp regs 40 {
        for r in 0 .. 2 {
            for k in 0 .. K / BK {
                tma sa <- A[tile.m, k]
                tma sb <- B[tile.n, k]
            }
        }
    }
}
"""


def test_nested_loops_carry_stage_and_phase_in_registers(tmp_path):
    """The inner loops run again, so the consumer releases the last stage
    after each run: the producer's next run refills it."""
    out = ir_after(NESTED, PASS)
    for reg in ("load_math_load_stage", "load_math_load_phase", "load_math_math_stage",
                "load_math_math_phase"):
        assert f"carried {reg}" in out
    filecheck(out, """
CHECK: role math
CHECK: mbarrier.wait load_math_full[load_math_math_stage], parity load_math_math_phase
CHECK: mbarrier.arrive load_math_empty[(load_math_math_stage + 2) % 3]  (release stage, lag 1)
CHECK-NEXT: advance load_math_math_stage mod 3 (flip load_math_math_phase on wrap)
CHECK: mbarrier.arrive load_math_empty[(load_math_math_stage + 2) % 3]  (release stage, lag 0)
CHECK: role load
CHECK: mbarrier.wait load_math_empty[load_math_load_stage], parity 1 - load_math_load_phase
CHECK: tma.load sb
CHECK-NEXT: advance load_math_load_stage mod 3 (flip load_math_load_phase on wrap)
""", tmp_path)


def test_a_one_stage_wgmma_ring_is_released_in_its_own_iteration(tmp_path):
    """With one stage, iteration k + 1's load goes into the stage iteration k
    read: releasing it only in iteration k + 1 (the previous stage, after the
    next full wait) deadlocks, which the simulator showed. It is released in
    iteration k, after its reads, and not again after the loop."""
    from hopperc import driver
    text = WS_GEMM.replace("stages 3", "stages 1")
    out = ir_after(text, PASS)
    filecheck(out, """
CHECK: for k in 0 .. K / 64:
CHECK-NEXT: mbarrier.wait load_math_full[load_math_math_stage], parity load_math_math_phase
CHECK-NEXT: wgmma acc += sa{stage load_math_math_stage}[wg of 2] @ sb{stage load_math_math_stage}^T
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_empty[load_math_math_stage]  (release stage, lag 0)
CHECK-NEXT: advance load_math_math_stage mod 1
CHECK-NEXT: st.shared sc
""", tmp_path)
    path = tmp_path / "one_stage.hk"
    path.write_text(text)
    report = driver.simulate(driver.read_source(path), seeds=4, search=200)
    assert report.ok, [line for f in report.findings for line in f.lines()]


# Each block stores its own column of Z's boxes (a box stored by two blocks races).
INTERLEAVED_HANDOFFS = """kernel three(Q: bf16[M, 64], K: bf16[L, 64], V: bf16[L, 64], W: f32[L, 64], O: bf16[M, 64], Z: f32[L, M])
    tile(BM = 64, BN = 64, H = 64) grid(m: M / BM)
{
    shared sq: bf16[BM, H] swizzle 128B
    shared sk: bf16[BN, H] stages 2 swizzle 128B
    shared sv: bf16[BN, H] stages 2 swizzle 128B
    shared sw: f32[BN, H] stages 2
    shared so: bf16[64, H] swizzle 128B
    shared sz: f32[BN, H]

    role math: warpgroup {
        tma sq <- Q[tile.m, 0]
        o: f32[64, H] = 0
        for j in 0 .. L / BN {
            s: f32[64, BN] = sq @ sk^T
            o += sq @ sv^T
        }
        so = bf16(o)
        tma O[tile.m, 0] <- so
    }
    role ew: warpgroup {
        for j in 0 .. L / BN {
            sz = sw * 2.0
            tma Z[j, tile.m] <- sz
        }
    }
    role load: warp {
        for j in 0 .. L / BN {
            tma sk <- K[j, 0]
            tma sw <- W[j, 0]
            tma sv <- V[j, 0]
        }
    }
}
"""


def test_a_producer_interleaving_two_handoffs_arms_each_before_its_own_loads(tmp_path):
    """sk and sv go to role math (one ring), sw between them to role ew. Each
    hand-off's issue arms its own full barrier before its own loads, and the
    other's load stays out of it (wrapping it once crashed the compiler, as the
    second hand-off then found its load inside the first one's issue)."""
    from hopperc import driver
    out = ir_after(INTERLEAVED_HANDOFFS, PASS)
    filecheck(out, """
CHECK: role load
CHECK: mbarrier.arrive.expect_tx load_math_full[load_math_load_stage], 16384
CHECK-NEXT: tma.load sk{stage load_math_load_stage}
CHECK-SAME: on load_math_full
CHECK: mbarrier.arrive.expect_tx load_ew_full[load_ew_load_stage], 16384
CHECK-NEXT: tma.load sw{stage load_ew_load_stage}
CHECK-SAME: on load_ew_full
CHECK-NEXT: tma.load sv{stage load_math_load_stage}
CHECK-SAME: on load_math_full
""", tmp_path)
    path = tmp_path / "interleaved.hk"
    path.write_text(INTERLEAVED_HANDOFFS)
    report = driver.simulate(driver.read_source(path), seeds=4, search=200)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def _error(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        ir_after(text, PASS)
    return info.value


def test_loops_with_different_bounds_are_refused():
    err = _error(WS_GEMM.replace("        for k in 0 .. K / BK {\n            acc",
                                 "        for k in 0 .. 2 {\n            acc"))
    assert "same bounds" in err.message and err.span.line == 10


def test_buffers_of_one_stage_with_different_depths_are_refused():
    err = _error(WS_GEMM.replace("shared sb: bf16[BN, BK] stages 3", "shared sb: bf16[BN, BK] stages 2"))
    assert "'sb' has stages 2 but 'sa' (line 4) has stages 3, and both are handed over" in \
        err.message and err.span.line == 5


def test_a_consumer_may_not_write_the_ring():
    err = _error(WS_GEMM.replace("        sc[wg] = bf16(acc)", "        sa[wg] = bf16(acc)"))
    assert "not write it" in err.message and err.span.line == 12


def test_two_loads_of_one_stage_are_refused():
    err = _error(WS_GEMM.replace("            tma sb <- B[tile.n, k]",
                                 "            tma sa <- A[tile.m, k]\n            tma sb <- B[tile.n, k]"))
    assert "loaded twice per iteration" in err.message and err.span.line == 18


def test_reused_ring_memory_is_refused_before_the_consumer_loop_ends():
    text = WS_GEMM.replace("    shared sc: bf16[BM, BN]\n", "    shared sc: bf16[BM, BN] reuses sa\n")
    text = text.replace("        acc: f32[64, BN] = 0\n", "        acc: f32[64, BN] = 0\n"
                                                          "        sc[wg] = 1.0\n")
    err = _error(text)
    assert "use it in role 'math' after the loop that reads 'sa'" in err.message
    assert err.span.line == 9


def test_reused_ring_memory_after_the_loop_builds():
    text = WS_GEMM.replace("    shared sc: bf16[BM, BN]\n", "    shared sc: bf16[BM, BN] reuses sa\n")
    out = ir_after(text, "insert_barriers")
    # The other warpgroup may still read sa with wgmma: a barrier before sc is written.
    assert "bar.sync 1, 256  # why: sc read by wgmma as 'sa' (t.hk:10), written by st.shared" in out


TWO_ROLES_ONE_MEMORY = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM)
{
    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN] reuses sx
    shared sz: bf16[BM, BN] reuses sx
    role a: warpgroup {
        sy = 1.0
        tma Y[tile.m, 0] <- sy
    }
    role b: warpgroup {
        sz = 2.0
        tma Y[tile.m, 1] <- sz
    }
}
"""


def test_memory_reused_by_two_roles_is_refused_whichever_names_they_use():
    """sy and sz both live in sx's memory, and sx itself is never named: the
    two roles would still write the same bytes with nothing ordering them."""
    err = _error(TWO_ROLES_ONE_MEMORY)
    assert "'sy' reuses the memory of 'sx', which role 'b' uses (as 'sz')" in err.message
    assert err.span.line == 8


def test_memory_reused_by_two_roles_through_the_original_name_is_refused():
    err = _error(TWO_ROLES_ONE_MEMORY.replace("        sz = 2.0\n        tma Y[tile.m, 1] <- sz",
                                              "        sx = 2.0\n        tma Y[tile.m, 1] <- sx"))
    assert "reuses the memory of 'sx', which role 'b' uses (as 'sx')" in err.message
    assert err.span.line == 8


RINGS_HEADER = """kernel rings(X: bf16[M, N], Y: bf16[M, N], W: bf16[M, N], Z: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM)
{
    shared sx: bf16[BM, BN] stages 2 swizzle 128B
    shared sy: bf16[BM, BN] stages 2 swizzle 128B
    shared sw: bf16[BM, BN] stages 2 swizzle 128B
    shared sz: bf16[BM, BN] swizzle 128B
    role add: warpgroup {
        for j in 0 .. N / BN {
            x: f32[BM, BN] = f32(sx) + f32(sw)
            x = x * 2.0
            sz = bf16(x + f32(sy))
            tma Z[tile.m, j] <- sz
        }
    }
    role load: warp {
        for j in 0 .. N / BN {
"""
SPLIT_RINGS = RINGS_HEADER + """            tma sx <- X[tile.m, j]
            tma sw <- W[tile.m, j]
            tma sy <- Y[tile.m, j]
        }
    }
}
"""


def test_work_before_a_first_read_gives_its_buffers_their_own_ring(tmp_path):
    """sy is first read two statements after sx and sw, past element-wise
    work: it gets its own full and empty barriers, so the consumer waits for
    sx and sw only (8192 B each, one statement) before that work, and for sy
    right before its read. Both rings count the same iterations, so each side
    steps one stage and phase for both, and the producer's thread arms both
    rings in one issue."""
    out = ir_after(SPLIT_RINGS, PASS)
    assert ("pipeline load_add_sx: load -> add [sx, sw] stages 2 full load_add_sx_full empty "
            "load_add_sx_empty (128 arrivals) expect_tx 16384 B") in out
    assert ("pipeline load_add_sy: load -> add [sy] stages 2 full load_add_sy_full empty "
            "load_add_sy_empty (128 arrivals) expect_tx 8192 B") in out
    # One stage and phase per role, shared by both rings, each stepped once.
    assert out.count("carried ") == 4
    assert out.count("advance load_add_add_stage") == out.count("advance load_add_load_stage") == 1
    filecheck(out, """
CHECK: role add
CHECK-NEXT: for j in 0 .. N / 64:
CHECK-NEXT: mbarrier.wait load_add_sx_full[load_add_add_stage], parity load_add_add_phase
CHECK-NEXT: x: f32[64, 64]
CHECK-SAME: ld.shared(sx{stage load_add_add_stage})
CHECK-SAME: ld.shared(sw{stage load_add_add_stage})
CHECK-NEXT: mbarrier.arrive load_add_sx_empty[load_add_add_stage]  (release stage, lag 0)
CHECK-NEXT: x = (x * 2)
CHECK-NEXT: mbarrier.wait load_add_sy_full[load_add_add_stage], parity load_add_add_phase
CHECK-NEXT: st.shared sz =
CHECK-NEXT: mbarrier.arrive load_add_sy_empty[load_add_add_stage]  (release stage, lag 0)
CHECK: role load
CHECK-NEXT: for j in 0 .. N / 64:
CHECK-NEXT: one_thread:
CHECK-NEXT: mbarrier.wait load_add_sx_empty[load_add_load_stage], parity 1 - load_add_load_phase
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: mbarrier.arrive.expect_tx load_add_sx_full[load_add_load_stage], 16384
CHECK-NEXT: tma.load sx{stage load_add_load_stage} <- X[tile.m * 64, j * 64] (8192 B) on load_add_sx_full[load_add_load_stage]
CHECK-NEXT: tma.load sw{stage load_add_load_stage} <- W[tile.m * 64, j * 64] (8192 B) on load_add_sx_full[load_add_load_stage]
CHECK-NEXT: mbarrier.wait load_add_sy_empty[load_add_load_stage], parity 1 - load_add_load_phase
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: mbarrier.arrive.expect_tx load_add_sy_full[load_add_load_stage], 8192
CHECK-NEXT: tma.load sy{stage load_add_load_stage} <- Y[tile.m * 64, j * 64] (8192 B) on load_add_sy_full[load_add_load_stage]
CHECK-NEXT: advance load_add_load_stage mod 2
""", tmp_path)


def test_rings_the_producer_interleaves_are_one():
    """The producer loads sx, sy, sw: sy's load sits between the loads of the
    sx/sw ring, and one arrive.expect_tx arms a ring before all its loads, so
    the two rings are one (one wait before the first read)."""
    out = ir_after(RINGS_HEADER + """            tma sx <- X[tile.m, j]
            tma sy <- Y[tile.m, j]
            tma sw <- W[tile.m, j]
        }
    }
}
""", PASS)
    assert ("pipeline load_add: load -> add [sx, sw, sy] stages 2 full load_add_full empty "
            "load_add_empty (128 arrivals) expect_tx 24576 B") in out
    assert out.count("mbarrier.wait load_add_full") == 1



# ---------------------------------------------------------------- a ring read at several sites
def test_a_ring_read_at_several_sites_steps_its_own_stage_at_each_read(tmp_path):
    """K's first read (before the loop) takes fill 0 and steps K's stage; the
    loop's read j takes fill j and releases the previous read's stage (always
    there: the read before the loop); V's loop read j takes fill j - 1 and
    releases the previous one from j = 2; V's read after the loop takes the
    last fill, and, the last read, releases and steps nothing: no fill
    follows. The producer's one pair of registers steps once per iteration
    for both rings."""
    filecheck(ir_after(MMA_SITES, PASS), """
CHECK: pipeline load_math_sk: load -> math [sk] stages 2 full load_math_sk_full empty load_math_sk_empty (4 arrivals) expect_tx 8192 B
CHECK: pipeline load_math_sv: load -> math [sv] stages 2
CHECK-SAME: read at several sites (steps load_math_sv_math_stage)
CHECK: role math
CHECK: mbarrier.wait load_math_sk_full[load_math_sk_math_stage], parity load_math_sk_math_phase
CHECK-NEXT: wgmma s = sq @ sk{stage load_math_sk_math_stage}^T
CHECK-NEXT: advance load_math_sk_math_stage mod 2 (flip load_math_sk_math_phase on wrap)
CHECK: for j in 1 .. L / 64:
CHECK-NEXT: mbarrier.wait load_math_sk_full[load_math_sk_math_stage], parity load_math_sk_math_phase
CHECK-NEXT: wgmma s = sq @ sk{stage load_math_sk_math_stage}^T
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sk_empty[(load_math_sk_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: mbarrier.wait load_math_sv_full[load_math_sv_math_stage], parity load_math_sv_math_phase
CHECK-NEXT: wgmma o += p @ sv{stage load_math_sv_math_stage}
CHECK-NEXT: if j > 1:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sv_empty[(load_math_sv_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: x: f32[64, 64] wgmma = (s * 0.125)
CHECK-NEXT: p = bf16(x)
CHECK-NEXT: advance load_math_sk_math_stage mod 2
CHECK-NEXT: advance load_math_sv_math_stage mod 2
CHECK: mbarrier.wait load_math_sv_full[load_math_sv_math_stage], parity load_math_sv_math_phase
CHECK-NEXT: wgmma o += p @ sv{stage load_math_sv_math_stage}
CHECK-NEXT: st.shared so = bf16(o)
CHECK: role load
CHECK: for j in 0 .. L / 64:
CHECK-NOT: advance
CHECK: tma.load sk{stage load_math_load_stage}
CHECK-NOT: advance
CHECK: tma.load sv{stage load_math_load_stage}
CHECK-NEXT: advance load_math_load_stage mod 2 (flip load_math_load_phase on wrap)
""", tmp_path)


def test_the_last_read_releases_its_stage_where_the_sites_run_again(tmp_path):
    """In a persistent grid the next tile's loads refill the stages this tile
    read last: K's after the loop (its last read, one step back), V's right
    after its read after the loop (the wait pass completes that product),
    after that read released the loop's last (if the loop ran)."""
    persistent = MMA_SITES.replace("grid(m: L / BM)", "grid(m: L / BM) persistent")
    filecheck(ir_after(persistent, PASS), """
CHECK: for j in 1 .. L / 64:
CHECK: advance load_math_sv_math_stage mod 2
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sk_empty[(load_math_sk_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-SAME: read by wgmma
CHECK: wgmma o += p @ sv{stage load_math_sv_math_stage}
CHECK-NEXT: if L / 64 > 1:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sv_empty[(load_math_sv_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sv_empty[load_math_sv_math_stage]  (release stage, lag 0)
CHECK-NEXT: advance load_math_sv_math_stage mod 2
""", tmp_path)


def _consumer_loop(bounds: str) -> str:
    """MMA_SITES with the consumer's loop over `bounds` (the producer's is `0 .. L / BN`)."""
    return MMA_SITES.replace("for j in 1 .. L / BN {", f"for j in {bounds} {{")


def test_negative_a_ring_read_more_often_than_it_is_filled_is_refused():
    """At the first read of the last site that does not balance (K's, in the loop)."""
    err = _error(_consumer_loop("0 .. L / BN"))
    assert err.message == ("role 'math' reads 'sk' 1 + (L / 64) times (sites at lines 10, 14), "
                           "1 more than role 'load' fills it (L / 64 times, line 24); the k-th "
                           "read of a ring takes the k-th fill, so the last reads would wait for "
                           "fills that never come")
    assert err.span.line == 14


def test_negative_a_fill_left_unread_is_refused():
    err = _error(_consumer_loop("2 .. L / BN"))
    assert "reads 'sk' 1 + (L / 64 - 2) times (sites at lines 10, 14), 1 fewer than role 'load' " \
        "fills it" in err.message and err.span.line == 14


def test_negative_counts_the_compiler_cannot_compare_are_refused():
    err = _error(_consumer_loop("1 .. L / 32"))
    assert "cannot show these equal" in err.message and err.span.line == 14


def test_negative_a_read_site_under_a_condition_is_refused():
    err = _error(MMA_SITES.replace("        o += p @ sv\n        so",
                               "        if L > 64 {\n            o += p @ sv\n        }\n        so"))
    assert "reads 'sv' at 2 sites" in err.message and "not under an 'if'" in err.message
    assert err.span.line == 20


def test_one_stage_ring_read_at_several_sites_is_released_at_each_read(tmp_path):
    """With one stage the next fill goes into the stage just read: each site
    releases it right after its product (the wait pass completes the product
    first), and the sites still take the fills in turn."""
    text = MMA_SITES.replace("stages 2", "stages 1")
    filecheck(ir_after(text, PASS), """
CHECK: wgmma s = sq @ sk{stage load_math_sk_math_stage}^T
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sk_empty[load_math_sk_math_stage]  (release stage, lag 0)
CHECK-NEXT: advance load_math_sk_math_stage mod 1
CHECK: for j in 1 .. L / 64:
CHECK: wgmma o += p @ sv{stage load_math_sv_math_stage}
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sv_empty[load_math_sv_math_stage]  (release stage, lag 0)
""", tmp_path)
    path = tmp_path / "one_stage_sites.hk"
    path.write_text(text)
    report = driver.simulate(driver.read_source(path), seeds=4, search=100)
    assert report.ok, [line for f in report.findings for line in f.lines()]


ELEMENT_SITES = """kernel ew(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM)
{
    shared sx: f32[BM, 64] stages 2
    shared sy: f32[BM, 64]
    role use: warpgroup regs 240 {
        acc: f32[BM, 64] = sx * 2.0
        for k in 1 .. 4 {
            acc = acc + sx
        }
        acc = acc + sx * 3.0
        sy = acc
        tma Y[tile.m, 0] <- sy
    }
    role load: warp regs 40 {
        for k in 0 .. 5 { tma sx <- X[5 * tile.m + k, 0] }
    }
}
"""


def test_element_wise_reads_at_several_sites_release_the_stage_they_read(tmp_path):
    """Element-wise readers at three sites (1 + 3 + 1 reads of 5 fills): each
    site releases the stage it read right after its read (every thread
    arrives), and the producer fences before refilling what ld.shared read."""
    filecheck(ir_after(ELEMENT_SITES, PASS), """
CHECK: mbarrier load_use_sx_empty[2] arrivals 128
CHECK: role use
CHECK: mbarrier.wait load_use_sx_full[load_use_sx_use_stage], parity load_use_sx_use_phase
CHECK-NEXT: acc: f32[64, 64] wgmma = (ld.shared(sx{stage load_use_sx_use_stage}) * 2)
CHECK-NEXT: mbarrier.arrive load_use_sx_empty[load_use_sx_use_stage]  (release stage, lag 0)
CHECK-NEXT: advance load_use_sx_use_stage mod 2
CHECK-NEXT: for k in 1 .. 4:
CHECK-NEXT: mbarrier.wait load_use_sx_full[load_use_sx_use_stage]
CHECK-NEXT: acc = (acc + ld.shared(sx{stage load_use_sx_use_stage}))
CHECK-NEXT: mbarrier.arrive load_use_sx_empty[load_use_sx_use_stage]  (release stage, lag 0)
CHECK-NEXT: advance load_use_sx_use_stage mod 2
CHECK-NEXT: mbarrier.wait load_use_sx_full[load_use_sx_use_stage]
CHECK-NEXT: acc = (acc + (ld.shared(sx{stage load_use_sx_use_stage}) * 3))
CHECK-NEXT: st.shared sy = acc
CHECK: role load
CHECK: mbarrier.wait load_use_sx_empty[load_use_load_stage], parity 1 - load_use_load_phase
CHECK-NEXT: fence.proxy.async.shared::cta
""", tmp_path)
    path = tmp_path / "element_sites.hk"
    path.write_text(ELEMENT_SITES)
    report = driver.simulate(driver.read_source(path), seeds=4, search=100)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_negative_a_ring_read_at_several_sites_in_a_pingpong_turn_is_refused():
    """A warpgroup skips the stages of the tiles it leaves to the other by one
    loop's trip count; reads at several sites are not counted that way."""
    text = """kernel pp(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N])
    tile(BM = 64, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) persistent pingpong
{
    shared sa: bf16[BM, BK] stages 4 swizzle 128B
    shared sb: bf16[BN, BK] stages 4 swizzle 128B
    shared sc: bf16[2, 64, 64] swizzle 128B

    role math: warpgroup x2 regs 232 {
        acc: f32[BM, BN] = sa @ sb^T
        for k in 1 .. K / BK {
            acc += sa @ sb^T
        }
        sc[wg] = bf16(acc)
        tma C[tile.m, tile.n] <- sc[wg]
    }
    role load: warp regs 40 {
        for k in 0 .. K / BK {
            tma sa <- A[tile.m, k]
            tma sb <- B[tile.n, k]
        }
    }
}
"""
    err = _error(text)
    assert "reads 'sa' at several sites inside a pingpong turn" in err.message
    assert err.span.line == 9
