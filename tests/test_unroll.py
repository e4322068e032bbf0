"""A loop over a constant range whose variable indexes a register tile's columns
or a shared buffer's plane is unrolled by the front end (frontend/unroll.py):
the passes see the copies written by hand."""
from __future__ import annotations

import re

from hopperc import driver
from hopperc.frontend.unroll import MAX_UNROLLED_STATEMENTS
from hopperc.ir.printer import print_kernel
from tests.conftest import ROOT, edit_error, source

GEMM_RELU = (ROOT / "samples" / "gemm_relu.hk").read_text()
LOOP = """    for s in 0 .. BN / 64 {
        sc[2 * (s % 2) + wg] = bf16(relu(acc[:, 64 * s : 64 * s + 64]))
        tma C[2 * tile.m + wg, (BN / 64) * tile.n + s] <- sc[2 * (s % 2) + wg]
    }
"""
# The same epilogue for BN = 256, as the samples wrote it before loops were unrolled.
BY_HAND = """    sc[wg] = bf16(relu(acc[:, 0 : 64]))
    tma C[2 * tile.m + wg, 4 * tile.n] <- sc[wg]
    sc[2 + wg] = bf16(relu(acc[:, 64 : 128]))
    tma C[2 * tile.m + wg, 4 * tile.n + 1] <- sc[2 + wg]
    sc[wg] = bf16(relu(acc[:, 128 : 192]))
    tma C[2 * tile.m + wg, 4 * tile.n + 2] <- sc[wg]
    sc[2 + wg] = bf16(relu(acc[:, 192 : 256]))
    tma C[2 * tile.m + wg, 4 * tile.n + 3] <- sc[2 + wg]
"""


def _front_end(text: str, defines: dict[str, int] | None = None) -> str:
    return print_kernel(driver.check(source(text), defines))


def _without_lines(cuda: str) -> str:
    """The CUDA with its source lines (`#line`, `t.hk:N` in comments) left out."""
    return re.sub(r"\.hk:\d+", ".hk", re.sub(r"(?m)^#line .*\n", "", cuda))


def test_a_subtile_loop_becomes_a_copy_per_subtile_on_the_body_lines():
    assert LOOP in GEMM_RELU
    text = _front_end(GEMM_RELU, {"BN": 256})
    assert "for s" not in text
    stores = re.findall(r"st\.shared (sc\[.*?\]) = bf16\(relu\((acc\[.*?\])\)\)  # t.hk:(\d+)", text)
    assert stores == [("sc[wg of 4]", "acc[:, 0:64]", "24"), ("sc[2 + wg of 4]", "acc[:, 64:128]", "24"),
                      ("sc[wg of 4]", "acc[:, 128:192]", "24"),
                      ("sc[2 + wg of 4]", "acc[:, 192:256]", "24")]
    copies = re.findall(r"tma\.store C\[.*?, (.*?)\] <- .*  # t.hk:(\d+)", text)
    assert copies == [("4 * tile.n * 64", "25"), ("(4 * tile.n + 1) * 64", "25"),
                      ("(4 * tile.n + 2) * 64", "25"), ("(4 * tile.n + 3) * 64", "25")]


def test_the_unrolled_loop_gets_the_syncs_written_by_hand():
    """Proxy fences, warpgroup barriers, bulk commits and the `.read` waits before a
    plane is rewritten: the same CUDA as the four copies written out."""
    loop = driver.generate(source(GEMM_RELU), {"BN": 256}).cuda
    by_hand = driver.generate(source(GEMM_RELU.replace(LOOP, BY_HAND)), {"BN": 256}).cuda
    assert "cp.async.bulk.wait_group.read" in loop
    assert _without_lines(loop) == _without_lines(by_hand)


def test_negative_a_constant_main_loop_stays_a_loop():
    """`for k in 0 .. 4` over the operands' stage: its variable indexes no register
    tile or plane, so it stays a loop."""
    text = _front_end(GEMM_RELU.replace("for k in 0 .. K / BK", "for k in 0 .. 4"))
    assert "for k in 0 .. 4:" in text


def test_a_loop_that_needs_unrolling_but_names_a_ring_is_an_error_at_the_loop():
    """A ring's stages are pipelined over a loop, so a loop that names one stays a
    loop; when its variable also picks a plane the loop is refused at its header,
    naming what needs the constant and, in a note, the ring (not the plane's index
    further on)."""
    ring = GEMM_RELU.replace("shared sa: bf16[BM, BK] swizzle 128B",
                             "shared sa: bf16[BM, BK] stages 2 swizzle 128B")
    error = edit_error(ring, "for k in 0 .. K / BK {\n", "for k in 0 .. 2 {\n"
                       "        sc[2 * (k % 2) + wg] = bf16(acc[:, 0 : 64])\n")
    assert (error.span.line, error.span.col) == (18, 5)
    assert "this loop must be unrolled ('k' picks columns" in error.message
    assert "'sc[...]' at line 19" in error.message and "names the ring 'sa'" in error.message
    assert error.notes == ("t.hk:20:13: the ring 'sa' (2 stages) is named here",)


def test_negative_an_epilogue_that_names_a_ring_is_refused_at_its_loop():
    """The subtile loop of the epilogue with a product of the ring inside: the loop,
    not the plane index `sc[2 * (s % 2) + wg]`, carries the error."""
    ring = GEMM_RELU.replace("shared sa: bf16[BM, BK] swizzle 128B",
                             "shared sa: bf16[BM, BK] stages 2 swizzle 128B")
    error = edit_error(ring, LOOP, LOOP.replace(
        "        sc[2 * (s % 2) + wg] =", "        acc += sa[wg] @ sb^T\n"
        "        sc[2 * (s % 2) + wg] =", 1))
    assert (error.span.line, error.span.col) == (23, 5)
    assert "'sc[...]' at line 25" in error.message and "names the ring 'sa'" in error.message
    assert "constant multiple" not in error.message
    assert error.notes[0].startswith("t.hk:24:")


def test_unrolling_past_the_limit_is_an_error_at_the_loop():
    long = ("    for s in 0 .. 300 {\n"
            "        sc[2 * (s % 2) + wg] = bf16(acc[:, 0 : 64])\n"
            "        tma C[2 * tile.m + wg, 2 * tile.n + s % 2] <- sc[2 * (s % 2) + wg]\n"
            "    }\n")
    error = edit_error(GEMM_RELU, LOOP, long)
    assert (error.span.line, error.span.col) == (23, 5)
    assert f"more than {MAX_UNROLLED_STATEMENTS} statements" in error.message
    assert "'s' picks columns of a tile or a warpgroup's plane" in error.message
    assert "into 300 copies" in error.message


def test_turns_on_an_unrolled_loop_is_an_error_at_the_loop():
    error = edit_error(GEMM_RELU, "for s in 0 .. BN / 64 {", "for s in 0 .. BN / 64 turns {")
    assert (error.span.line, error.span.col) == (23, 5)
    assert "'turns' orders a loop's products; this loop is unrolled" in error.message


def test_a_run_time_bound_on_an_unrolled_loop_is_an_error_at_the_loop():
    error = edit_error(GEMM_RELU, "for s in 0 .. BN / 64", "for s in 0 .. N / 64")
    assert (error.span.line, error.span.col) == (23, 5)
    assert "so its bounds must be compile-time constants" in error.message


def test_a_range_longer_than_the_limit_is_refused_before_its_copies_are_made():
    """Copies that hold no statement (a zero-trip inner loop) still may not run
    for a billion iterations."""
    nested = ("    for s in 0 .. 1000000000 {\n"
              "        for t in 0 .. 0 {\n"
              "            sc[2 * (s % 2) + wg] = bf16(acc[:, 0 : 64])\n"
              "        }\n"
              "    }\n")
    error = edit_error(GEMM_RELU, LOOP, nested)
    assert (error.span.line, error.span.col) == (23, 5)
    assert "into 1000000000 copies" in error.message


def test_a_tile_declared_in_the_body_is_declared_once_and_assigned_in_later_copies():
    """The kernel keeps one register tile per name: the second copy assigns `t`
    (C++ would refuse a second declaration in one scope)."""
    body = ("        t: f32[64, 64] = relu(acc[:, 64 * s : 64 * s + 64])\n"
            "        sc[2 * (s % 2) + wg] = bf16(t)\n")
    text = GEMM_RELU.replace(
        "        sc[2 * (s % 2) + wg] = bf16(relu(acc[:, 64 * s : 64 * s + 64]))\n", body)
    ir_text = _front_end(text)
    assert "t: f32[64, 64] wgmma = relu(acc[:, 0:64])  # t.hk:24" in ir_text
    assert "t = relu(acc[:, 64:128])  # t.hk:24" in ir_text
    assert driver.generate(source(text)).cuda.count("float u_t[") == 1
