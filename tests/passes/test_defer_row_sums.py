"""defer_row_sums: a row sum a loop accumulates (`l = l * alpha + rowsum(p)`) is
kept as each thread's part in the loop and summed across the quad once after
it; the simulator holds the parts per lane, so a read of the parts as the row's
value (no quad sum, or a sum deferred past a read in the loop) is a finding."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.verify import VerifyError, verify
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.tile_values import thread_row_sums
from hopperc.sim.views import element_lanes
from tests.conftest import filecheck, ir_after
from tests.sim import mutations as m

PASS = "defer_row_sums"

# One warpgroup's online softmax over 64-key tiles, the scale fused into the
# exp2 argument (the max taken on the unscaled scores).
ATTENTION = """kernel attn(Q: bf16[L, 64], K: bf16[L, 64], V: bf16[L, 64], O: bf16[L, 64])
    tile(BM = 64, BN = 64) grid(m: L / BM)
{
    shared sq: bf16[BM, 64] swizzle 128B
    shared sk: bf16[BN, 64] stages 2 swizzle 128B
    shared sv: bf16[BN, 64] stages 2 swizzle 128B
    shared so: bf16[BM, 64] swizzle 128B

    role math: warpgroup regs 240 {
        tma sq <- Q[tile.m, 0]
        o: f32[64, 64] = 0
        m: f32[64] = -inf
        l: f32[64] = 0.0
        for j in 0 .. L / BN {
            s: f32[64, BN] = sq @ sk^T
            m_new: f32[64] = max(m, rowmax(s))
            p: f32[64, BN] = exp2(s * 0.125 - m_new[:, None] * 0.125)
            alpha: f32[64] = exp2(m * 0.125 - m_new * 0.125)
            l = l * alpha + rowsum(p)
            o = o * alpha[:, None]
            pb: bf16[64, BN] = bf16(p)
            o += pb @ sv
            m = m_new
        }
        so = bf16(o / l[:, None])
        tma O[tile.m, 0] <- so
    }
    role load: warp regs 24 {
        for j in 0 .. L / BN {
            tma sk <- K[j, 0]
            tma sv <- V[j, 0]
        }
    }
}
"""
UPDATE = "l = l * alpha + rowsum(p)"


def _source(text: str = ATTENTION) -> SourceFile:
    return SourceFile("attn.hk", text)


def test_the_loops_row_sum_is_kept_as_parts_and_summed_after_it(tmp_path):
    filecheck(ir_after(ATTENTION, PASS), """
CHECK: l_parts: f32[64] row_parts = 0
CHECK: for j in
CHECK: l_parts = ((l_parts * alpha) + thread_rowsum(p))
CHECK-NOT: rowsum(p)
CHECK: l: f32[64] rows = quad_sum(l_parts)
CHECK-NEXT: st.shared so = bf16((o / l[:, None]))
""", tmp_path)


@pytest.mark.parametrize("update", ["l = l + rowsum(p)", "l = rowsum(p) + alpha * l",
                                    "l = l * (alpha * 0.5 + 0.5) + rowsum(p)",
                                    "if j > 0 { l = l * alpha + rowsum(p) }"])
def test_each_form_of_update_by_a_row_uniform_factor_is_deferred(update):
    text = ir_after(ATTENTION.replace(UPDATE, update), PASS)
    assert "quad_sum(l_parts)" in text and "thread_rowsum(p)" in text
    assert "rowsum(p)" not in text.replace("thread_rowsum(p)", "")


@pytest.mark.parametrize("old, new", [
    # read in the loop: every read there would need the quad's sum
    ("o = o * alpha[:, None]", "o = o * alpha[:, None] / l[:, None]"),
    # a start other than 0 would have to go to one lane of each quad
    ("l: f32[64] = 0.0", "l: f32[64] = 1.0"),
    # a factor that differs between the lanes of a row (or reads l itself)
    (UPDATE, "l = l * l + rowsum(p)"),
    (UPDATE, "l = l * rowmax(s) + rowsum(s)"),
    # not a sum of a tile
    (UPDATE, "l = l * alpha + m_new"),
    # one update of two is something else
    (UPDATE, "if j > 0 { l = l * alpha + rowsum(p) } else { l = rowsum(p) }"),
])
def test_negative_other_uses_keep_the_row_sum_as_written(old, new):
    text = ATTENTION.replace(old, new)
    assert text != ATTENTION
    assert ir_after(text, PASS) == ir_after(text, "fold_zero_into_first_product")


def test_a_row_sum_start_is_split_into_the_lanes_parts():
    """`l = rowsum(w)` before the loop (an online softmax's first tile, FA3's
    form) starts each lane's part at its own slots of w's rows, so no lane is
    chosen; O / l then needs the whole sum (the check's reference)."""
    text = ATTENTION.replace("l: f32[64] = 0.0",
                             "w: f32[64, 64] = 0.5\n        l: f32[64] = rowsum(w)")
    out = ir_after(text, PASS)
    assert "l_parts: f32[64] row_parts = thread_rowsum(w)" in out
    assert "l: f32[64] rows = quad_sum(l_parts)" in out
    report = driver.simulate(_source(text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def test_a_lanes_part_is_its_columns_of_the_row():
    """Lane q of a row's quad holds (ir.Layout.WGMMA) the columns whose lane
    (element_lanes) is 4 * (row % 8) + q: its part sums exactly those."""
    values = np.random.default_rng(0).integers(-64, 64, (64, 64)).astype(np.float32)
    parts = thread_row_sums(values)
    for warp in range(4):
        lanes = element_lanes((64, 64), 128, warp)
        for row in range(16 * warp, 16 * warp + 16):
            for q in range(4):
                mine = lanes[row] == 4 * (row % 8) + q
                assert mine.sum() == 16
                assert parts[row, q] == values[row, mine].sum()  # small integers: exact


def test_every_schedule_is_right():
    report = driver.simulate(_source(), seeds=3, search=50)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.reference == "numpy reference"


def test_updates_in_both_branches_of_a_condition_are_right():
    """The sums stay parts through an `if` the lanes share (a loop split into
    interior and boundary iterations has its updates in several places)."""
    text = ATTENTION.replace(UPDATE, "if j > 0 { l = l * alpha + rowsum(p) } "
                                     "else { l = l + rowsum(p) }")
    assert "quad_sum(l_parts)" in ir_after(text, PASS)
    report = driver.simulate(_source(text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def _lowered():
    front_end = driver.check(_source())
    return front_end, driver.lower(front_end)


def _first_finding(front_end: ir.Kernel, broken: ir.Kernel):
    report = simulate(broken, front_end, make_problem(broken, default_dims(broken)), 2, 20,
                      first_finding=True)
    return report.findings[0] if report.findings else None


def test_without_the_quad_sum_check_finds_a_wrong_result():
    """The vector after the loop read from the parts themselves: each lane would
    see its own part as the row's sum."""
    front_end, lowered = _lowered()
    broken = m.edit(lowered, lambda s: [replace(s, init=ir.TileRef(s.init.name))]
                    if isinstance(s, ir.TileDef) and isinstance(s.init, ir.RowPartsSum) else None)
    finding = _first_finding(front_end, broken)
    assert finding is not None and finding.category.value == "wrong result"
    assert "'l_parts'" in finding.message and "no quad sum" in finding.message


def test_the_verifier_refuses_parts_read_as_a_rows_value():
    """What `check` finds in a mutant, the verifier finds in a pass that would
    make it (a compiler bug: exit 2)."""
    _, lowered = _lowered()
    verify(lowered, PASS)
    broken = m.edit(lowered, lambda s: [replace(s, init=ir.TileRef(s.init.name))]
                    if isinstance(s, ir.TileDef) and isinstance(s.init, ir.RowPartsSum) else None)
    with pytest.raises(VerifyError, match="TileRef of 'l_parts' at .* writing rows"):
        verify(broken, PASS)


def test_a_read_of_the_parts_inside_the_loop_is_a_finding():
    """A sum deferred past a read in the loop: that read sees a lane's part."""
    front_end, lowered = _lowered()
    update = next(s for s in walk(lowered.body)
                  if isinstance(s, ir.TileAssign) and s.name == "l_parts")
    read = ir.TileDef("probe", ir.DType.F32, (64,), ir.Layout.ROWS, 128,
                      ir.Elementwise("*", (ir.TileRef("l_parts"), ir.Literal(2.0))), update.span)
    broken = m.edit(lowered, lambda s: [s, read] if s is update else None)
    finding = _first_finding(front_end, broken)
    assert finding is not None and finding.category.value == "wrong result"


def test_the_loop_shuffles_only_for_the_max_and_fuses_the_scale():
    """Per iteration and thread: 32 elements of p in 2 rows. The row maximum's
    shuffles (2 per row) are the loop's only ones; each exp2 argument
    `s * c - m_new * c` is one FFMA (m_new * c once per row: 2 FMUL, beside O's
    32-element rescale); each row's part is 15 FADD of its 16 slots."""
    built = driver.build(_source())
    (code,) = sm.functions(built.result.cubin).values()
    body = sm.loop_holding(code, sm.WGMMA).body(code)
    count = {op: sum(i.base == op for i in body) for op in ("SHFL", "FMUL", "FFMA", "FADD",
                                                           "MUFU")}
    assert count["SHFL"] == 4
    assert count["MUFU"] == 32 + 2
    assert count["FMUL"] == 32 + 2
    assert count["FFMA"] >= 32 + 2
    assert count["FADD"] <= 2 * 15
    assert "__shfl_xor_sync" not in _update_code(built.generated.cuda)


def _update_code(cuda: str) -> str:
    """The C++ of the parts' update: from its line directive to the next one."""
    start = cuda.index("u_l_parts[hk_k] = ")
    return cuda[cuda.rindex("#line", 0, start):cuda.index("#line", start)]


def test_the_parts_take_a_name_no_value_of_the_kernel_has():
    text = ATTENTION.replace("O: bf16[L, 64])", "O: bf16[L, 64], l_parts: i32)")
    assert "l_parts2: f32[64] row_parts = 0" in ir_after(text, PASS)
