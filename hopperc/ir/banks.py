"""Shared-memory bank conflicts of a warpgroup tile's stores, replayed from the
addresses the layout gives (the same the generated code computes; the CuTe
oracle checks that). Shared memory serves 32 banks of 4 bytes per wavefront:
an access needs as many wavefronts as the most distinct 4-byte words any one
bank holds among its addresses."""
from __future__ import annotations

from collections import defaultdict

from hopperc.ir import nodes as ir
from hopperc.ir.layout import STMATRIX_COLS, WGMMA_M, element_offset

BANKS = 32
BANK_BYTES = 4


def wavefronts(accesses: list[tuple[int, int]]) -> int:
    """Wavefronts for one warp-wide access of (address, bytes) pairs."""
    words = defaultdict(set)
    for address, size in accesses:
        for word in range(address // BANK_BYTES, -(-(address + size) // BANK_BYTES)):
            words[word % BANKS].add(word)
    return max(len(w) for w in words.values())


def tile_store_wavefronts(buf: ir.SharedBuffer, base: int, columns: int, by_matrix: bool) -> int:
    """Wavefronts one warp needs to store its 16 rows of a warpgroup's [64, columns]
    wgmma-layout tile into `buf` from byte address `base`: with stmatrix.x4
    (`by_matrix`: each 8x8 matrix is an access of 8 rows of 16 bytes, lane i
    addressing row i), else one st.shared per element slot (32 lanes at once)."""

    def address(row: int, col: int) -> int:
        return buf.swizzle.of_address(base + int(element_offset(buf, row, col)))

    total = 0
    if by_matrix:
        for first in range(0, columns, STMATRIX_COLS):
            for matrix in range(4):
                rows = [address(i + 8 * (matrix % 2), first + 8 * (matrix // 2)) for i in range(8)]
                total += wavefronts([(a, 16) for a in rows])
        return total
    for slot in range(WGMMA_M * columns // 128):
        total += wavefronts([(address(lane // 4 + 8 * ((slot // 2) % 2),
                                      8 * (slot // 4) + 2 * (lane % 4) + slot % 2), buf.dtype.nbytes)
                             for lane in range(32)])
    return total
