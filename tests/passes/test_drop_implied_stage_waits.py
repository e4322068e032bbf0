"""drop_implied_stage_waits: a ring's empty barrier goes where the producer's
earlier wait in the same iteration already implies its stage is free.

The figures are worked out from tests/sim/kernels/attention_two_tiles.hk (one
iteration j, two 64-key tiles a and b; each product is its own batch):
S_a(j) issued, K_a's stage of j - 1 released, wait_group 0 (S_a(j) and every
older batch done), S_b(j) issued, P V_a(j) issued, wait_group 1 (S_b(j)
done), wait_group 0 (P V_a(j) done), P V_b(j) issued, V_b's stage of j - 1
released. At K_a's release in iteration j, S_b(j - 1) and P V_a(j - 1) are
complete (iteration j - 1's waits) but P V_b(j - 1) is not (this iteration's
first wait completes it): K_b and V_a go, V_b stays.
"""
from hopperc import driver
from tests.conftest import ROOT, ir_after
from tests.passes.kernels import MMA_SITES
from tests.passes.test_connect_role_pipelines import SPLIT_RINGS

PASS = "drop_implied_stage_waits"
ATTENTION = driver.read_source(ROOT / "tests" / "sim" / "kernels" /
                               "attention_two_tiles.hk").text


def _empties(out: str) -> list[str]:
    return [line.split()[1].split("[")[0] for line in out.splitlines()
            if line.startswith("  mbarrier ") and "_empty[" in line]


def test_attention_keeps_the_empty_barriers_of_k_a_and_v_b():
    before, after = ir_after(ATTENTION, "wait_wgmma_batches"), ir_after(ATTENTION, PASS)
    assert _empties(before) == ["load_math_ska0_empty", "load_math_skb0_empty",
                                "load_math_sva0_empty", "load_math_svb0_empty"]
    assert _empties(after) == ["load_math_ska0_empty", "load_math_svb0_empty"]
    assert "mbarrier.init load_math_skb0_empty" not in after
    assert "pipeline load_math_skb0: load -> math [skb0, skb1] stages 2 full " \
           "load_math_skb0_full empty load_math_ska0_empty" in after
    assert "pipeline load_math_sva0: load -> math [sva0, sva1] stages 2 full " \
           "load_math_sva0_full empty load_math_ska0_empty" in after
    # one producer wait and one consumer release per kept ring, none for the others
    for empty, count in (("ska0", 1), ("skb0", 0), ("sva0", 0), ("svb0", 1)):
        assert after.count(f"mbarrier.wait load_math_{empty}_empty[") == count
        assert after.count(f"mbarrier.arrive load_math_{empty}_empty[") == count


def test_the_release_after_the_loop_must_imply_it_too():
    """Persistent: the loops run again, so the last stage is released after the
    loop, K_a's before the wait_group 0 that completes P V_b: K_b and V_a
    still go (S_b and P V_a of the last iteration are done), V_b stays."""
    text = ATTENTION.replace("grid(m: L / BM)", "grid(m: L / BM) persistent")
    after = ir_after(text, PASS)
    assert _empties(after) == ["load_math_ska0_empty", "load_math_svb0_empty"]
    assert after.count("(release stage, lag 0)") == 2


def test_rings_are_taken_in_the_producers_order():
    """With V loaded first, V_a's release (after P V_a(j) is issued, past the
    first wait of iteration j, which completed every batch of j - 1) implies
    the other three: one empty barrier, waited for before the first load."""
    loads = ATTENTION[ATTENTION.index("            tma ska0 <- K"):
                      ATTENTION.index("            tma sva0 <- V")]
    text = ATTENTION.replace(loads, "").replace(
        "            tma svb1 <- V[2 * j + 1, 1]\n",
        "            tma svb1 <- V[2 * j + 1, 1]\n" + loads)
    after = ir_after(text, PASS)
    assert _empties(after) == ["load_math_sva0_empty"]


def test_element_wise_rings_keep_their_own():
    """Element-wise readers release right after their reads (no wgmma wait to
    reason about): the pass leaves them."""
    assert ir_after(SPLIT_RINGS, "wait_wgmma_batches") == ir_after(SPLIT_RINGS, PASS)


def test_rings_read_at_several_sites_keep_their_own_empty_barriers():
    """K's read in iteration j takes fill j and V's fill j - 1: the stage index
    of one says nothing about the other's, so neither release implies the other
    (K's release in iteration j comes before P_{j-1} V_{j-1} reads V's stage:
    without V's own wait the producer refills it first, a race `check` reports)."""
    out = ir_after(MMA_SITES, PASS)
    assert "mbarrier load_math_sk_empty[2] arrivals 4" in out
    assert "mbarrier load_math_sv_empty[2] arrivals 4" in out
    assert "mbarrier.wait load_math_sv_empty[load_math_load_stage]" in out
