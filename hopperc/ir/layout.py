"""Where register-tile elements live: which threads share a tile, and how its
elements map to their registers. Shared by the front end (which assigns a
layout) and code generation (which indexes by it)."""
from __future__ import annotations

from hopperc.ir.dtypes import DType, Swizzle
from hopperc.ir import nodes as ir

WGMMA_M = 64  # rows of a wgmma product per warpgroup
REGISTER_FILE = 64 * 1024  # 32-bit registers per SM, shared by all warps of the block
MBARRIER_BYTES = 8
MAX_REGISTERS = 255  # per thread


def launch_registers(threads: int) -> int:
    """Registers per thread at launch with one block per SM (`__launch_bounds__(threads,
    1)`): the thread's share of the register file, rounded down to a multiple of 8."""
    return min(MAX_REGISTERS, REGISTER_FILE // threads) // 8 * 8


def wgmma_k(dtype: DType) -> int:
    """K of one wgmma instruction: 32 bytes of K, i.e. 16 for 16-bit inputs, 32 for
    fp8, 8 for f32 (read as tf32)."""
    return 32 // dtype.nbytes


def element_threads(running: int) -> int:
    """Threads that share one register tile: a warpgroup when whole warpgroups run
    (each warpgroup has its own tile, as wgmma gives each its own accumulator)."""
    return 128 if running % 128 == 0 else running


def register_layout(shape: tuple[int, int], threads: int) -> ir.Layout:
    """A warpgroup's [64, N] tiles (N % 8 == 0) take the wgmma fragment layout, so
    accumulators, register A operands and everything computed from them agree
    slot for slot; other tiles are spread row-major over their threads."""
    if threads == 128 and shape[0] == WGMMA_M and shape[1] % 8 == 0:
        return ir.Layout.WGMMA
    return ir.Layout.ROW_MAJOR


def element_grid(shape: tuple[int, ...]) -> tuple[int, int]:
    """The 2-D grid element-wise code spreads over its threads: a view of rank 3
    or more is its 2-D planes stacked along the rows (the order they lie in
    memory), a 1-D view is one row."""
    rows = 1
    for extent in shape[:-1]:
        rows *= extent
    return rows, shape[-1]


def plane_rows(shape: tuple[int, ...]) -> int:
    """Rows of one 2-D plane of a view: what a row vector (v[:, None]) indexes."""
    return shape[-2] if len(shape) >= 2 else 1


def packs_pairs(tile: ir.TileDef) -> bool:
    """16-bit tiles in the wgmma layout hold two elements per 32-bit register
    (slots 2i and 2i+1 in register i, low half first), the form wgmma takes a
    register A in: no packing instructions between the fence and the wgmma."""
    return tile.layout is ir.Layout.WGMMA and tile.dtype.nbytes == 2


def holds_fp8_fragment(tile: ir.TileDef) -> bool:
    """fp8 tiles in the wgmma layout are held as wgmma's register A fragment
    (PTX ISA, wgmma .m64nNk32 register fragment of A for .e4m3/.e5m2): four
    8-bit elements per 32-bit register, register j of k-step s of lane l holding
    row 16w + l/4 + 8(j%2), columns 32s + 16(j/2) + 4(l%4) .. +3. Their values
    are computed slot by slot in the accumulator's layout, then exchanged
    within each quad into that fragment (prelude: hk_fp8_a_fragment); they are
    read only as a wgmma's A."""
    return tile.layout is ir.Layout.WGMMA and tile.dtype.is_fp8


FP8_FRAGMENT_COLUMNS = 32  # columns of one k-step of an fp8 A fragment


ROW_SLOTS = 2  # rows of a warpgroup's wgmma tile each thread holds (Layout.ROWS)
MAX_EVERY_ROW = 64  # rows of a Layout.EVERY_ROW vector, each a register of every thread


def tile_registers(tile: ir.TileDef) -> int:
    """Storage elements of a tile per thread (32-bit registers when packed)."""
    if tile.layout in (ir.Layout.ROWS, ir.Layout.ROW_PARTS):
        return ROW_SLOTS
    if tile.layout is ir.Layout.EVERY_ROW:
        return tile.shape[0]
    slots = tile.shape[0] * tile.shape[1] // tile.threads
    if holds_fp8_fragment(tile):
        return slots // 4
    return slots // 2 if packs_pairs(tile) else slots


def shared_layout(buffers: tuple[ir.SharedBuffer, ...], barrier_count: int) -> tuple[dict[str, int], int]:
    """Offsets of each buffer (aligned for its swizzle) and the total bytes with mbarriers."""
    offsets, cursor = {}, 0
    for buf in buffers:
        if buf.reuses is not None:
            offsets[buf.name] = offsets[buf.reuses]
            continue
        cursor = -(-cursor // buf.alignment) * buf.alignment
        offsets[buf.name] = cursor
        cursor += buf.stage_bytes * buf.stages
    cursor = -(-cursor // MBARRIER_BYTES) * MBARRIER_BYTES
    return offsets, cursor + barrier_count * MBARRIER_BYTES


def column_blocks(buf: ir.SharedBuffer) -> int:
    """A swizzled buffer whose rows are wider than its swizzle span is laid out in
    column blocks one span wide, each holding every row of its plane (CuTe's
    tile_to_shape of the 8-row swizzle atom, atoms stacked down the rows first):
    a block is what one TMA box with that swizzle moves, and 8 consecutive rows
    of a 16-byte column fall in 8 different bank groups. Other buffers are one
    block, row-major."""
    row_bytes = buf.shape[-1] * buf.dtype.nbytes
    if len(buf.shape) < 2 or buf.swizzle is Swizzle.NONE or row_bytes <= buf.swizzle.span:
        return 1
    return row_bytes // buf.swizzle.span


def row_pitch(buf: ir.SharedBuffer) -> int:
    """Bytes from one row of a column block to the next."""
    row_bytes = buf.shape[-1] * buf.dtype.nbytes
    return row_bytes // column_blocks(buf)


def block_bytes(buf: ir.SharedBuffer) -> int:
    """Bytes of one column block of a plane."""
    return buf.shape[-2] * row_pitch(buf) if len(buf.shape) >= 2 else row_pitch(buf)


def part_bytes(buf: ir.SharedBuffer, count: int, columns: bool = False) -> int:
    """Offset from one of `count` parts of a stage to the next: a whole plane of a
    rank-3+ buffer, else a block of rows (inside each column block), or with
    `columns` a run of whole column blocks (the front end checks they are)."""
    if columns:
        return buf.shape[-1] // count * buf.dtype.nbytes // row_pitch(buf) * block_bytes(buf)
    if len(buf.shape) >= 3 or column_blocks(buf) == 1:
        return buf.stage_bytes // count
    return buf.shape[0] // count * row_pitch(buf)


def element_offset(buf: ir.SharedBuffer, row, col):
    """Byte offset, before the swizzle, of element (row, col) of a view's element
    grid (rows of a rank-3+ buffer's planes stacked) from the view's first byte
    (ints or integer arrays)."""
    pitch = row_pitch(buf)
    width = pitch // buf.dtype.nbytes
    rows = buf.shape[-2] if len(buf.shape) >= 2 else 1
    plane_bytes = column_blocks(buf) * block_bytes(buf)
    return ((row // rows) * plane_bytes + (col // width) * block_bytes(buf)
            + (row % rows) * pitch + (col % width) * buf.dtype.nbytes)


def copy_box(buf: ir.SharedBuffer, box: tuple[int, ...]) -> tuple[int, ...]:
    """The box of each TMA instruction copying `box` (a rank-2 view of `buf`): one
    column block wide, the rest as `box`."""
    blocks = column_blocks(buf)
    return box[:-1] + (box[-1] // blocks,)


def multicast_slice(buf: ir.SharedBuffer, load: ir.AsyncLoad, rank: int) -> tuple[int, int]:
    """(first row of the box, byte offset in the stage) of the slice of a
    multicast load that the block of cluster rank `rank` issues: the box's rows
    split in `load.multicast` equal runs, rank r the r-th (as CuTe's
    make_tma_copy with a multicast count partitions a box)."""
    rows = load.issued_box[0]
    return rank * rows, rank * rows * row_pitch(buf)


STMATRIX_COLS = 16  # columns of a warpgroup tile one stmatrix.x4 stores per warp


def stores_by_matrix(buf: ir.SharedBuffer, view: ir.BufferView, threads: int) -> bool:
    """Whether a warpgroup's [64, N] tile in the wgmma layout is stored to `view`
    with stmatrix.x4: each warp's 16 rows, 16 columns at a time, as four 8x8
    matrices of 16-bit elements whose rows the lanes address. The fragment of an
    8x8 matrix (lane l: row l/4, columns 2(l%4), +1) is the wgmma layout's, and
    every matrix row must be 16 contiguous, 16-byte aligned bytes: a rank-2
    buffer, or one plane of a rank-3 one, of 16-bit elements, rows a multiple of 8
    elements, not transposed."""
    shape = part_shape(buf, view.part)
    return (buf.dtype.nbytes == 2 and len(shape) == 2 and not view.transposed
            and shape[1] % STMATRIX_COLS == 0 and row_pitch(buf) % 16 == 0
            and register_layout(shape, threads) is ir.Layout.WGMMA)


def part_shape(buf: ir.SharedBuffer, part: ir.ViewPart | None) -> tuple[int, ...]:
    """Shape of a view's stage or part of `buf` (before any transposition)."""
    if part is None:
        return buf.shape
    return view_shape(buf, part.count, part.columns)


def view_shape(buf: ir.SharedBuffer, parts: int | None, columns: bool = False) -> tuple[int, ...]:
    """Shape of one stage of `buf`, or of one of its `parts`: a plane of a rank-3+
    buffer, a block of rows of a rank-2 one, or with `columns` a block of its
    columns (before any transposition)."""
    if parts is None:
        return buf.shape
    if columns:
        return buf.shape[:-1] + (buf.shape[-1] // parts,)
    if len(buf.shape) >= 3:
        return buf.shape[1:]
    return (buf.shape[0] // parts,) + buf.shape[1:]
