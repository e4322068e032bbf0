"""drop_implied_refill_fences: the producer's fence before refilling a stage its
consumer read with ld.shared goes where every consumer thread fences between its
reads and its release of the stage (samples/attention_bwd.hk: LSE's stage, read
for P, then dS^T's fence, then the release after dK's product), and stays where
the release comes before any fence (Delta's stage, released right after dS)."""
from hopperc import driver
from tests.conftest import ROOT, ir_after

PASS = "drop_implied_refill_fences"
SAMPLE = driver.read_source(ROOT / "samples" / "attention_bwd.hk").text
SLSE = "fence.proxy.async.shared::cta  # why: slse read by ld.shared in role 'math'"
SDELTA = "fence.proxy.async.shared::cta  # why: sdelta read by ld.shared in role 'math'"


def test_a_fence_the_consumers_make_before_their_release_implies_the_producers():
    before, after = ir_after(SAMPLE, "insert_proxy_fences"), ir_after(SAMPLE, PASS)
    assert SLSE in before and SLSE not in after
    # the consumer's fence that implies it: after the read of slse, before the release
    body = after[after.index("for i in"):after.index("role load")]
    read = body.index("ld.shared(slse")
    fence = body.index("fence.proxy.async.shared::cta", read)
    assert read < fence < body.index("mbarrier.arrive load_math_sq_empty")


def test_negative_a_release_before_any_fence_keeps_the_producers():
    after = ir_after(SAMPLE, PASS)
    assert after.count(SDELTA) == 1
    body = after[after.index("for i in"):after.index("role load")]
    release = body.index("mbarrier.arrive load_math_sdelta_empty")
    assert "fence.proxy" not in body[body.index("ld.shared(sdelta"):release]


def test_negative_a_consumer_without_fences_keeps_the_producers():
    """Without the products that read dS^T from shared memory, nothing fences
    between LSE's read and the release of its stage."""
    text = SAMPLE.replace("            sds[wg] = dsb\n", "").replace(
        "            dq: f32[64, 64] = sds^T @ skc[wg]\n", "            dq: f32[64, 64] = 0\n")
    text = text.replace("            sdq[wg] = dq\n", "").replace(
        "            tma DQ[tile.b, tile.h, i, wg] += sdq[wg]\n", "").replace(
        "            dk += sds[wg] @ sq\n", "            dk += dsb @ sq\n")
    after = ir_after(text, PASS)
    assert SLSE in after
