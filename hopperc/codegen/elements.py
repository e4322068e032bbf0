"""Operands of the statements that run per element of a tile: the loop over a
thread's slots (`per_element` macro) and a warpgroup tile's stmatrix stores
(`SharedStore` macro), as C++ text."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen.argmax import argmax_keep, argmax_shuffle
from hopperc.codegen.cexpr import (ExprRenderer, from_float, reduction, shared_load,
                                   shared_store, tile_store, to_float)
from hopperc.codegen import names
from hopperc.codegen.integers import computes_in_integers, integer_value
from hopperc.codegen.launch import vector_tensors
from hopperc.codegen.scalars import RoleContext, local_thread
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.layout import (ROW_SLOTS, STMATRIX_COLS, element_grid, element_threads,
                               holds_fp8_fragment, packs_pairs, plane_rows, register_layout,
                               part_shape, stores_by_matrix)

# Element (row, col) of slot hk_k of thread hk_t in the wgmma layout (ir.Layout.WGMMA).
WGMMA_ROW = "16 * (hk_t / 32) + (hk_t % 32) / 4 + 8 * ((hk_k / 2) % 2)"
WGMMA_COL = "8 * (hk_k / 4) + 2 * (hk_t % 4) + (hk_k % 2)"
# Row of slot hk_k of a register row vector (ir.Layout.ROWS): WGMMA_ROW's rows.
ROWS_ROW = "16 * (hk_t / 32) + (hk_t % 32) / 4 + 8 * hk_k"


@dataclass(frozen=True)
class PerElement:
    """Operands of the per-element loop macro: slot k of this thread is element (row, col)."""

    slots: int
    thread: str
    row: str
    col: str
    assign: str
    hoisted: str = ""  # declarations ahead of the loop (row vectors' values)
    gather: str = ""  # after the loop: the values it staged, exchanged into the tile


@dataclass(frozen=True)
class MatrixStore:
    """Operands of a warpgroup tile's stmatrix stores (see `SharedStore` macro):
    the value at slot hk_k (element (row, col)) and the address of row (hk_r, hk_c)."""

    instructions: int
    thread: str
    row: str
    col: str
    value: str
    pack: str
    address: str
    hoisted: str = ""  # declarations ahead of the stores (see PerElement)
    # a 16-bit tile of the buffer's dtype stored whole: its packed registers are
    # stmatrix's operands as they are (register 4 hk_i + m holds slots 8 hk_i + 2m
    # and + 1), with no unpacking and repacking
    registers: str = ""


def matrix_store(stmt: ir.SharedStore, kernel: ir.Kernel, exprs: ExprRenderer,
                 role: RoleContext) -> MatrixStore | None:
    """stmatrix operands for a store every lane of each warp runs (the caller
    knows), where the layout allows it."""
    buf = kernel.buffer(stmt.dst.buffer)
    threads = element_threads(role.threads)
    if not stores_by_matrix(buf, stmt.dst, threads):
        return None
    if vector_tensors(stmt):
        # ptxas hoists every vector load of the unrolled stores above the first
        # stmatrix; beside a 128-register accumulator under the launch's
        # register limit, that spills. Element-wise stores keep them apart.
        return None
    columns = _view_shape(buf, stmt.dst)[1]
    thread = thread_among(role, threads)
    tile = exprs.tiles.get(stmt.value.name) if isinstance(stmt.value, ir.TileRef) else None
    if (tile is not None and stmt.value.columns is None and packs_pairs(tile)
            and tile.dtype is buf.dtype):
        return MatrixStore(columns // STMATRIX_COLS, thread, WGMMA_ROW, WGMMA_COL, "", "",
                           exprs.element_address(stmt.dst, role),
                           registers=names.user(tile.name))
    hoisted, names_of = _hoisted_reads(stmt.value, exprs, role, thread)
    pairs, pair_names = _paired_reads(stmt.value, exprs, role, thread, columns // 2)
    hoisted, names_of = hoisted + pairs, {**names_of, **pair_names}
    value = exprs.value(_unrounded(stmt.value, buf.dtype), role, hoisted=names_of)
    return MatrixStore(columns // STMATRIX_COLS, thread, WGMMA_ROW, WGMMA_COL, value,
                       f"hk_pack_{buf.dtype.text}x2", exprs.element_address(stmt.dst, role),
                       hoisted)


def thread_among(role: RoleContext, threads: int) -> str:
    """This thread's index among the `threads` that share a tile."""
    local = local_thread(role)
    return local if threads == role.threads else f"({local} % {threads})"


def per_element(stmt: ir.TileDef | ir.TileAssign | ir.SharedStore, kernel: ir.Kernel,
                exprs: ExprRenderer, role: RoleContext) -> PerElement:
    """Operands of the loop over this thread's elements (see `per_element` macro).

    Element (hk_r, hk_c) is a position in the statement's element grid: a view of
    rank 3 or more is its 2-D planes stacked along the rows, as they lie in
    memory, so the row-major address of (hk_r, hk_c) is the element's."""
    if isinstance(stmt, ir.SharedStore):
        buf = kernel.buffer(stmt.dst.buffer)
        shape, dtype, value = _view_shape(buf, stmt.dst), buf.dtype, stmt.value
        threads = element_threads(role.threads)
    else:
        definition = stmt if isinstance(stmt, ir.TileDef) else exprs.tiles[stmt.name]
        shape, dtype, threads = definition.shape, definition.dtype, definition.threads
        value = stmt.init if isinstance(stmt, ir.TileDef) else stmt.value
    rows, cols = element_grid(shape)
    in_plane = plane_rows(shape)
    plane_row = "hk_r" if in_plane == rows else f"(hk_r % {in_plane})"
    thread = thread_among(role, threads)
    wgmma = register_layout((rows, cols), threads) is ir.Layout.WGMMA and (
        isinstance(stmt, ir.SharedStore) or definition.layout is ir.Layout.WGMMA)
    stacked = in_plane if in_plane != rows else None
    hoisted, names_of = _hoisted_reads(value, exprs, role, thread, stacked) if wgmma \
        else ("", {})
    if wgmma:
        pairs, pair_names = _paired_reads(value, exprs, role, thread, -(-rows * cols // threads))
        hoisted, names_of = hoisted + pairs, {**names_of, **pair_names}
    text = integer_value(exprs, value, role, plane_row) if computes_in_integers(
        dtype, value, exprs) else from_float(dtype, exprs.value(_unrounded(value, dtype), role,
                                                               plane_row, names_of))
    if not isinstance(stmt, ir.SharedStore) and holds_fp8_fragment(definition):
        return _fp8_fragment(definition, thread, exprs.value(_unrounded(value, dtype), role,
                                                             plane_row, names_of), hoisted)
    if isinstance(stmt, ir.SharedStore):
        assign = shared_store(dtype, exprs.element_address(stmt.dst, role), text) + ";"
    else:
        assign = tile_store(definition, text)
    elements = rows * cols
    if not isinstance(stmt, ir.SharedStore) and definition.layout in (ir.Layout.ROWS,
                                                                      ir.Layout.ROW_PARTS):
        return PerElement(ROW_SLOTS, thread, ROWS_ROW, "0", assign)
    if not isinstance(stmt, ir.SharedStore) and definition.layout is ir.Layout.EVERY_ROW:
        return PerElement(shape[0], thread, "hk_k", "0", assign)
    if wgmma:
        return PerElement(-(-elements // threads), thread, WGMMA_ROW, WGMMA_COL, assign, hoisted)
    if register_layout((rows, cols), threads) is ir.Layout.WGMMA:
        row, col = WGMMA_ROW, WGMMA_COL
    else:
        row = f"(hk_k * {threads} + hk_t) / {cols}"
        col = f"(hk_k * {threads} + hk_t) % {cols}"
        if elements % threads:  # the last slot holds elements for some threads only
            assign = f"if (hk_k * {threads} + hk_t < {elements}) {{ {assign} }}"
    return PerElement(-(-elements // threads), thread, row, col, assign)


def _fp8_fragment(tile: ir.TileDef, thread: str, value: str, hoisted: str) -> PerElement:
    """An fp8 tile's values, computed at this thread's slots of the accumulator
    layout into `hk_fp8_values`, then rounded and exchanged within each quad
    into wgmma's register A fragment (layout.holds_fp8_fragment)."""
    slots = tile.shape[0] * tile.shape[1] // tile.threads
    staged = f"float hk_fp8_values[{slots}];"
    gather = (f"hk_fp8_a_fragment<{slots}, hk_pack_{tile.dtype.text}x2>("
              f"{names.user(tile.name)}, hk_fp8_values);")
    return PerElement(slots, thread, WGMMA_ROW, WGMMA_COL, f"hk_fp8_values[hk_k] = {value};",
                      f"{hoisted} {staged}".strip(), gather)


def _hoisted_reads(value: ir.TileExpr, exprs: ExprRenderer, role: RoleContext,
                   thread: str, plane_rows: int | None = None
                   ) -> tuple[str, dict[ir.TileExpr, str]]:
    """Row vectors a thread reads once ahead of the loop over its slots of a
    wgmma-layout grid rather than once per slot: slot k lies in row WGMMA_ROW, which
    takes (k / 2) % 2, so a row vector from shared memory is two values per thread
    (ptxas keeps each volatile shared load); where a view's planes of `plane_rows`
    rows are stacked, a vector indexes the row in its plane. Tensor elements are
    read once before the statement already (render.py)."""
    reads = list(dict.fromkeys(_row_vector_reads(value)))
    first_row = f"16 * (({thread}) / 32) + (({thread}) % 32) / 4"
    lines, names_of = [], {}
    for i, read in enumerate(reads):
        name = f"hk_row_vector{i}"
        rows = [f"{first_row} + {8 * j}" for j in range(2)]
        if plane_rows is not None:
            rows = [f"({row}) % {plane_rows}" for row in rows]
        pair = ", ".join(exprs.vector_element(read, role, row) for row in rows)
        lines.append(f"const float {name}[2] = {{ {pair} }};")
        names_of[read] = f"{name}[(hk_k / 2) % 2]"
    return " ".join(lines), names_of


def _paired_reads(value: ir.TileExpr, exprs: ExprRenderer, role: RoleContext, thread: str,
                  slots: int) -> tuple[str, dict[ir.TileExpr, str]]:
    """The 16-bit shared views a wgmma-layout grid reads, one 32-bit load per pair of
    slots ahead of the loop over the slots rather than a 16-bit load per slot:
    slots 2i and 2i + 1 are columns c and c + 1 (c even) of one row, adjacent
    in memory and in one 4-byte word, which a 16-byte swizzle chunk never
    splits (the swizzle permutes whole 16-byte chunks of a row)."""
    reads = [read for read in dict.fromkeys(_tile_reads(value))
             if exprs.kernel.buffer(read.view.buffer).dtype.nbytes == 2
             and not read.view.transposed]
    lines, names_of = [], {}
    for i, read in enumerate(reads):
        name, dtype = f"hk_pairs{i}", exprs.kernel.buffer(read.view.buffer).dtype
        word = shared_load(DType.I32, exprs.element_address(read.view, role))
        lines.append(f"unsigned {name}[{slots // 2}];\n#pragma unroll\n"
                     f"for (int hk_k = 0; hk_k < {slots}; hk_k += 2) {{ "
                     f"[[maybe_unused]] const int hk_t = {thread}; "
                     f"[[maybe_unused]] const int hk_r = {WGMMA_ROW}, hk_c = {WGMMA_COL}; "
                     f"{name}[hk_k / 2] = static_cast<unsigned>({word}); }}\n")
        names_of[read] = to_float(dtype, f"hk_half({name}[hk_k / 2], hk_k % 2)")
    return "".join(lines), names_of


def _tile_reads(value: ir.TileExpr):
    match value:
        case ir.SharedRead(broadcast=None):
            yield value
        case ir.Elementwise(args=args):
            for arg in args:
                yield from _tile_reads(arg)
        case ir.Convert(operand=operand):
            yield from _tile_reads(operand)


def _row_vector_reads(value: ir.TileExpr):
    match value:
        case ir.SharedRead(broadcast="rows"):
            yield value
        case ir.Elementwise(args=args):
            for arg in args:
                yield from _row_vector_reads(arg)
        case ir.Convert(operand=operand):
            yield from _row_vector_reads(operand)


def _unrounded(value: ir.TileExpr, target: ir.DType) -> ir.TileExpr:
    """A cast to the target's own dtype is the rounding the write does anyway."""
    return value.operand if isinstance(value, ir.Convert) and value.dtype is target else value


def _view_shape(buf: ir.SharedBuffer, view: ir.BufferView) -> tuple[int, ...]:
    return part_shape(buf, view.part)


@dataclass(frozen=True)
class RowPartialsCode:
    """Operands of the RowPartials macro: for each row hk_k of the tile, this
    thread's `per_row` slots of it reduced, then the warp's lanes (xor 16 .. 1),
    and lane 0's result stored at `address` (the partial of warp `warp`)."""

    rows: int
    per_row: int
    slot: str  # slot hk_s of the tile, as C++
    start: str  # the identity of the reduction
    combine: str  # hk_v combined with {}
    address: str
    # argmax: the column of slot hk_s of row hk_k, the statements keeping slot hk_s's
    # pair and each shuffle's, and the byte offset from a warp's partial value to its
    # column (the warps' values, then their columns as f32)
    column: str | None = None
    keep: str = ""
    shuffles: tuple[str, ...] = ()
    columns_offset: int = 0


def row_partials(stmt: ir.RowPartials, kernel: ir.Kernel, exprs: ExprRenderer,
                 role: RoleContext) -> RowPartialsCode:
    tile = exprs.tiles[stmt.tile]
    rows, cols = tile.shape
    width = kernel.buffer(stmt.partials.buffer).shape[1]
    warp = f"(({local_thread(role)} / 32) % {tile.threads // 32})"  # in its warpgroup's part
    base = exprs.view_base(stmt.partials, role)
    address = f"{base} + static_cast<unsigned>(({warp} * {width} + hk_k) * 4)"
    per_row, slot = cols // tile.threads, f"{names.user(stmt.tile)}[hk_s]"
    if stmt.op == "argmax":  # element (r, c) lies in thread c % threads
        column = (f"((hk_s - hk_k * {per_row}) * {tile.threads} + "
                  f"{local_thread(role)} % {tile.threads})")
        return RowPartialsCode(rows, per_row, slot, "", "", address, column,
                               argmax_keep(slot, column),
                               tuple(argmax_shuffle(lane) for lane in (16, 8, 4, 2, 1)),
                               tile.threads // 32 * width * 4)
    combine, start = reduction(stmt.op)
    return RowPartialsCode(rows, per_row, slot, start, combine, address)
