"""Operands of a register tile's add to global memory (ir.GlobalRowStore with
`columns`, the `TileAdd` macro): each thread computes the value of its
wgmma-layout slots two at a time, slots 2i and 2i + 1 being adjacent columns
of one row (PTX ISA, wgmma register fragments), and adds the pair with one
`red.global.add.v2.f32` / `.noftz.bf16x2` / `.noftz.f16x2`. A tile that lies
wholly inside the tensor and its ends, every pair aligned, adds them untested
(prelude's hk_red_global_add_x2_*); another tests each pair against the ragged
ends, the tensor's extents and its alignment (hk_red_global_add_pair_*)."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen import names
from hopperc.codegen.cexpr import ExprRenderer, from_float
from hopperc.codegen.elements import WGMMA_COL, WGMMA_ROW, thread_among
from hopperc.codegen.scalars import RoleContext, holds_data, scalar
from hopperc.ir import nodes as ir


@dataclass(frozen=True)
class TileAddCode:
    """Thread hk_t's slots hk_k (element (row, col), `value` there) in pairs; `add`
    adds slots hk_k and hk_k + 1 at row hk_r, columns hk_c and hk_c + 1, testing
    the pair; `inner` adds them untested, where `whole` holds."""

    thread: str
    slots: int
    row: str
    col: str
    value: str
    whole: str
    inner: str
    add: str


def tile_add(stmt: ir.GlobalRowStore, kernel: ir.Kernel, exprs: ExprRenderer,
             role: RoleContext) -> TileAddCode:
    tensor = kernel.tensor(stmt.tensor)
    dims = [str(d) if isinstance(d, int) else names.user(d) for d in tensor.dims]
    leading = []
    for index, dim in zip(stmt.index, dims):
        leading += [f"({scalar(index, role)}) >= 0", f"({scalar(index, role)}) < {dim}"]
    row_end, column_end = scalar(stmt.row_end, role), scalar(stmt.end, role)
    inside = ["hk_gr >= 0", f"hk_gr < {dims[-2]}", f"hk_gr < ({row_end})", *leading]

    def column(c: str) -> str:
        return f"hk_in && {c} >= 0 && {c} < {dims[-1]} && {c} < ({column_end})"

    base = names.user(stmt.tensor)
    # hk_c = WGMMA_COL: the pair's column is the thread's first plus a constant once
    # unrolled, added last so that ptxas folds it into the instruction's offset
    address = (f"{base} + {_row_major(stmt.index, dims, role)} + "
               f"static_cast<long long>({scalar(stmt.start, role)}) + 2 * (hk_t % 4) "
               "+ 8 * (hk_k / 4)")
    place = (f"const int hk_gr = {_offset(stmt.row_start, 'hk_r', role)}, "
             f"hk_gc = {_offset(stmt.start, 'hk_c', role)}; ")
    pair = [from_float(tensor.dtype, f"hk_value(hk_k + {k})") for k in (0, 1)]
    add = (f"{place}const bool hk_in = {' && '.join(inside)}; "
           f"hk_red_global_add_pair_{tensor.dtype}({address}, {pair[0]}, {pair[1]}, "
           f"{column('hk_gc')}, {column('(hk_gc + 1)')});")
    inner = (f"const int hk_gr = {_offset(stmt.row_start, 'hk_r', role)}; "
             f"hk_red_global_add_x2_{tensor.dtype}({address}, {pair[0]}, {pair[1]});")
    # Every pair inside and aligned to its size: the tile's first element is, and
    # each row starts an even number of elements after the last.
    row0, col0 = scalar(stmt.row_start, role), scalar(stmt.start, role)
    whole = [f"({row0}) >= 0", f"({col0}) >= 0", f"({col0}) % 2 == 0", f"{dims[-1]} % 2 == 0",
             f"reinterpret_cast<unsigned long long>({base}) % {2 * tensor.dtype.nbytes} == 0",
             *(f"static_cast<long long>({start}) + {extent} <= {end}"
               for start, extent, ends in ((row0, stmt.rows, (dims[-2], f"({row_end})")),
                                           (col0, stmt.columns, (dims[-1], f"({column_end})")))
               for end in ends), *leading]
    slots = stmt.rows * stmt.columns // stmt.threads
    return TileAddCode(thread_among(role, stmt.threads), slots, WGMMA_ROW, WGMMA_COL,
                       exprs.value(stmt.value, role), " && ".join(whole), inner, add)


def _offset(start: ir.ScalarExpr, within: str, role: RoleContext) -> str:
    """START + the element's place in the tile: START from data (an element, a
    parameter) may sit anywhere in the i32 range, so its sum wraps (below 0, the
    element is skipped), never overflows."""
    text = scalar(start, role)
    return f"hk_wrap_add({text}, {within})" if holds_data(start) else f"({text}) + {within}"


def _row_major(index: tuple[ir.ScalarExpr, ...], dims: list[str], role: RoleContext) -> str:
    """The offset of element (index..., hk_gr, 0) of a row-major tensor, in 64 bits."""
    text = "static_cast<long long>(hk_gr)"
    if index:
        text = f"static_cast<long long>({scalar(index[0], role)})"
        for i, dim in zip(index[1:], dims[1:]):
            text = f"({text} * {dim} + ({scalar(i, role)}))"
        text = f"({text} * {dims[-2]} + hk_gr)"
    return f"{text} * {dims[-1]}"
