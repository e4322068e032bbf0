"""stmatrix.x4 as hopperc's generated code uses it to store a warpgroup's
[64, N] wgmma-layout tile, against CuTe's SM90_U32x4_STSM_N traits: the lane
whose address names each matrix row, and the register bits stored into it.
Every element of the tile must land at its own (row, col), exactly once."""
from __future__ import annotations

import re

from tests.oracle.layout_cases import WIDE
from hopperc import driver
from hopperc.diagnostics import SourceFile


def _python(expr: str):
    """A generated C++ integer expression over non-negative ints, as a function."""
    return eval(f"lambda hk_t, hk_k=0, hk_i=0: {expr.replace('/', '//')}")


def test_stmatrix_stores_each_element_where_the_layout_puts_it(gmma):
    cuda = driver.generate(SourceFile("wide.hk", WIDE)).cuda
    # the lane's matrix row and column (its address), then the value lambda's slot
    # row and column, in the stmatrix loop's body
    body = cuda[:cuda.index("hk_stmatrix_x4(hk_smem_base")]
    body = body[body.rindex("for (int hk_i = 0;"):]
    (address_row, address_col), (value_row, value_col) = re.findall(
        r"hk_r = ([^,]+), hk_c = ([^;]+);", body)
    columns = int(re.search(r"hk_i < (\d+);", cuda[:cuda.index("const auto hk_value")]
                            [-400:]).group(1)) * 16
    call = cuda[cuda.index("hk_stmatrix_x4(hk_smem_base"):]
    call = call[:call.index(";")]
    pairs = [tuple(int(x) for x in p) for p in
             re.findall(r"hk_value\(8 \* hk_i \+ (\d+)\), hk_value\(8 \* hk_i \+ (\d+)\)", call)]
    assert len(pairs) == 4 and columns == 128  # wide.hk's v: f16[64, 128]
    slot_row, slot_col = _python(value_row), _python(value_col)
    lane_row, lane_col = _python(address_row), _python(address_col)
    src, dst = gmma.output.stsm_src, gmma.output.stsm_dst
    assert len(src) == len(dst) == 32 and all(bits == 128 for _, bits in dst)
    addressing = {first // 128: lane for lane, (first, _) in enumerate(dst)}  # stacked row -> lane
    stored = {}
    for warp in range(4):
        for i in range(columns // 16):
            for lane in range(32):
                t = 32 * warp + lane
                for register, slots in enumerate(pairs):
                    for half, slot in enumerate(slots):
                        bit = src[lane][32 * register + 16 * half]
                        row_lane = addressing[bit // 128]
                        at = (lane_row(32 * warp + row_lane, hk_i=i),
                              lane_col(32 * warp + row_lane, hk_i=i) + (bit % 128) // 16)
                        k = 8 * i + slot
                        held = (slot_row(t, hk_k=k), slot_col(t, hk_k=k))
                        assert at == held, (warp, i, lane, register, half)
                        stored[at] = stored.get(at, 0) + 1
    assert sorted(stored) == [(r, c) for r in range(64) for c in range(columns)]
    assert set(stored.values()) == {1}
