"""wgmma register fragments: CuTe's CLayout (accumulator D) and ALayout
(register A, 16-bit and fp8) of the SM90 MMA atoms against the (row, col)
hopperc's generated code gives each slot of each thread, the registers it
passes to each instruction, and the lanes the simulator gives each element."""
from __future__ import annotations

import pytest

from hopperc.sim.views import element_lanes
from tests.oracle.gmma_cases import FRAGMENT_PRODUCTS

REGISTER_A = [p for p in FRAGMENT_PRODUCTS if p.a_register and p.k_step == 16]
FP8_REGISTER_A = [p for p in FRAGMENT_PRODUCTS if p.a_register and p.k_step == 32]
IDS = [p.name for p in FRAGMENT_PRODUCTS]


@pytest.mark.parametrize("product", FRAGMENT_PRODUCTS, ids=IDS)
def test_accumulator_slots_match_cute_clayout(gmma, product):
    """Slot k of thread t is the instruction's k-th D register: CuTe's value k."""
    cute = gmma.output.fragments[(product.name, "C")]
    hopperc = gmma.output.slots[product.name]
    n = product.b.mn
    assert len(cute) == len(hopperc) == 128
    for t in range(128):
        assert len(cute[t]) == n // 2
        assert hopperc[t][:n // 2] == cute[t], f"thread {t}"
    for step in gmma.generated[product.name].steps:
        assert step.d_registers == tuple(range(n // 2))


@pytest.mark.parametrize("product", REGISTER_A, ids=[p.name for p in REGISTER_A])
def test_register_a_matches_cute_alayout(gmma, product):
    """k-step s passes 4 registers, each two 16-bit slots (low half first, as
    CuTe recasts values 2j, 2j+1 to 32-bit register j); value v of CuTe's
    64x16 A fragment is column 16s + (its column) of hopperc's tile."""
    cute = gmma.output.fragments[(product.name, "A")]
    hopperc = gmma.output.slots[product.name]
    steps = gmma.generated[product.name].steps
    assert len(steps) == product.a.k // 16
    for s, step in enumerate(steps):
        assert len(step.a_registers) == 4
        for t in range(128):
            assert len(cute[t]) == 8
            for v, (row, col) in enumerate(cute[t]):
                slot = 2 * step.a_registers[v // 2] + v % 2
                assert hopperc[t][slot] == (row, 16 * s + col), f"step {s} thread {t} value {v}"


@pytest.mark.parametrize("product", FP8_REGISTER_A, ids=[p.name for p in FP8_REGISTER_A])
def test_fp8_register_a_matches_cute_alayout(gmma, product):
    """k-step s passes 4 registers of 4 fp8 bytes each (CuTe recasts values
    4j .. 4j+3 to 32-bit register j, low byte first); after the quad exchange of
    the prelude (run on the host, each shuffle answered by its source lane),
    byte b of register j holds what CuTe's 64x32 A fragment value 4j + b names,
    column 32s + (its column) of hopperc's tile."""
    cute = gmma.output.fragments[(product.name, "A")]
    hopperc = gmma.output.fp8_registers[product.name]
    steps = gmma.generated[product.name].steps
    assert len(steps) == product.a.k // 32 and len(hopperc) == 128
    for s, step in enumerate(steps):
        assert len(step.a_registers) == 4
        for t in range(128):
            assert len(cute[t]) == 16
            for v, (row, col) in enumerate(cute[t]):
                held = hopperc[t][step.a_registers[v // 4]][v % 4]
                assert held == (row, 32 * s + col), f"step {s} thread {t} value {v}"


@pytest.mark.parametrize("product", FRAGMENT_PRODUCTS, ids=IDS)
def test_simulator_lanes_match_cute(gmma, product):
    """The simulator's owner of each accumulator element is CuTe's thread."""
    n = product.b.mn
    lanes = {w: element_lanes((64, n), 128, w) for w in range(4)}
    seen = set()
    for t, values in enumerate(gmma.output.fragments[(product.name, "C")]):
        for row, col in values:
            assert lanes[t // 32][row, col] == t % 32, (t, row, col)
            seen.add((row, col))
    assert len(seen) == 64 * n


@pytest.mark.parametrize("product", FRAGMENT_PRODUCTS, ids=IDS)
def test_row_reduction_layout_matches_cute(gmma, product):
    """Row reductions (rowmax / rowsum) over CuTe's CLayout: the D values k of
    thread t with (k/2)%2 == j are all row ROWS_ROW(t, j) (the row vector's slot
    j, ir.Layout.ROWS); a row's values lie in the 4 lanes of one quad (the xor 1
    and 2 shuffles reach them all) and cover every column; the simulator gives
    each warp those rows."""
    from hopperc.codegen.elements import ROWS_ROW
    from hopperc.sim.views import owned_rows
    n = product.b.mn
    fragment = gmma.output.fragments[(product.name, "C")]
    holders: dict[int, set[tuple[int, int]]] = {}
    for t, values in enumerate(fragment):
        for k, (row, col) in enumerate(values):
            slot = (k // 2) % 2
            assert row == eval(ROWS_ROW.replace("/", "//"), {}, {"hk_t": t, "hk_k": slot}), (t, k)
            holders.setdefault(row, set()).add((t, col))
    for row, held in holders.items():
        threads = {t for t, _ in held}
        assert len(threads) == 4 and len({t // 4 for t in threads}) == 1, row
        assert sorted(col for _, col in held) == list(range(n)), row
        warp = min(threads) // 32
        assert owned_rows(64, 128, warp, tuple(range(32)))[row]
