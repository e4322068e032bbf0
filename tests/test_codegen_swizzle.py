"""Generic shared-memory addresses of swizzled buffers follow the swizzle of the
address itself (as TMA and wgmma do), also for stages and planes that do not
start on the swizzle's repeat. The rendered address expression is evaluated
here element by element against that rule."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile

RING = """kernel ring(X: bf16[M, N], Y: bf16[M, N]) tile(BM = ROWS, BN = COLS) grid(m: M / BM, n: N / BN)
{
    shared pad: bf16[4, 64]
    shared sx: bf16[BM, BN] stages 2 swizzle SWIZZLE
    shared sy: bf16[BM, BN]
    role load: warp {
        for k in 0 .. 4 {
            tma sx <- X[tile.m, tile.n * 4 + k]
        }
    }
    role math: warpgroup {
        for k in 0 .. 4 {
            sy = bf16(f32(sx) * 2.0)
            tma Y[tile.m, tile.n * 4 + k] <- sy
        }
    }
}
"""
MASKS = {"32B": 1, "64B": 3, "128B": 7}
COLUMNS = {"32B": 16, "64B": 32, "128B": 64}  # one swizzle span of bf16 per row


def swizzled(address: int, mask: int) -> int:
    """TMA's placement: the 16-byte chunk XOR the 128-byte row, of the address."""
    return address ^ (((address >> 7) & mask) << 4)


def loaded_address(cuda: str) -> str:
    """The address argument of the element-wise read of sx, as Python."""
    start = cuda.index("hk_ld_shared_u16(hk_smem_base") + len("hk_ld_shared_u16(")
    depth, end = 0, start
    while depth or cuda[end] != ")":
        depth += {"(": 1, ")": -1}.get(cuda[end], 0)
        end += 1
    text = cuda[start:end].replace("static_cast<unsigned>", "")
    return re.sub(r"\b(\d+)u\b", r"\1", text)


@pytest.mark.parametrize("rows", [4, 8], ids=["stages_off_repeat", "stages_on_repeat"])
@pytest.mark.parametrize("swizzle", sorted(MASKS))
def test_every_element_of_every_stage_is_where_tma_put_it(swizzle, rows):
    cols = COLUMNS[swizzle]
    text = RING.replace("SWIZZLE", swizzle).replace("COLS", str(cols)).replace("ROWS", str(rows))
    built = driver.generate(SourceFile("ring.hk", text))
    offset = dict(built.launch.buffer_offsets)["sx"]
    stage_bytes = rows * cols * 2
    expression = loaded_address(built.cuda)
    mask = MASKS[swizzle]
    off_repeat = 0
    (stage,) = set(re.findall(r"\bhk_reg_\w+_stage\b", expression))  # the carried counter
    for k in range(2):  # the ring's stage is k % 2
        start = offset + k * stage_bytes
        off_repeat += start % (8 * cols * 2) != 0
        for r in range(rows):
            for c in range(cols):
                names = {"hk_smem_base": 0, stage: k, "hk_r": r, "hk_c": c,
                         "hk_swizzle": swizzled}
                got = eval(expression, {}, names)  # noqa: S307 - our own generated arithmetic
                assert got == swizzled(start + (r * cols + c) * 2, mask), (k, r, c)
    assert off_repeat == (1 if rows == 4 else 0)  # 8 rows of one span are the repeat
