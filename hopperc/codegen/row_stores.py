"""Operands of a register row vector's store to global memory (ir.GlobalRowStore,
`GlobalRowStore` macro): each thread computes the vector's value at each of its
slots (warp-collective shuffles of a row reduction included, so every lane
runs them), keeps the one it stores, and one predicated st.global writes it."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen import names
from hopperc.codegen.cexpr import (ExprRenderer, RoleContext, from_float, scalar,
                                   shared_store)
from hopperc.codegen.elements import ROWS_ROW, thread_among
from hopperc.codegen.integers import computes_in_integers, integer_value
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.layout import ROW_SLOTS

_STORE_KIND = {DType.F32: "f32", DType.I32: "i32", DType.BF16: "u16", DType.F16: "u16"}


@dataclass(frozen=True)
class RowStoreCode:
    """Slot hk_k of thread hk_t holds row `slot_row`; the thread stores the slot
    where `stores_slot` holds, which is row `row`, at `address` when `predicate`."""

    thread: str
    slots: int
    slot_row: str
    value: str
    stores_slot: str
    row: str
    start: str
    kind: str
    address: str
    stored: str  # hk_v converted to the tensor's dtype
    predicate: str
    value_type: str  # hk_v's: int where the value is computed in integers, else float


@dataclass(frozen=True)
class SharedRowStoreCode:
    """A row vector into a 1-D shared view (ir.SharedStore with a row_layout): as
    RowStoreCode, thread hk_t keeps slot `stores_slot`, row `row`, and where
    `mine` runs `store` (st.shared of hk_v to element hk_r)."""

    thread: str
    slots: int
    slot_row: str
    value: str
    stores_slot: str
    row: str
    mine: str
    store: str
    value_type: str


def _storing_slots(layout: ir.Layout, rows: int) -> tuple[int, str, str, str, str]:
    """(slots, a slot's row, which slot the thread stores, its row, whether it
    stores one) of a row vector of `layout` and `rows`."""
    if layout is ir.Layout.ROWS:
        # A quad's 4 lanes hold its 2 rows: lane q < 2 of the quad stores slot q, so
        # a warp's 16 rows go out in one instruction.
        return (ROW_SLOTS, ROWS_ROW, "hk_t % 4 == hk_k",
                "16 * (hk_t / 32) + (hk_t % 32) / 4 + 8 * (hk_t % 4)", "hk_t % 4 < 2")
    # every thread holds every row: thread t stores row t
    return rows, "hk_k", "hk_t == hk_k", "hk_t", f"hk_t < {rows}"


def shared_row_store(stmt: ir.SharedStore, kernel: ir.Kernel, exprs: ExprRenderer,
                     role: RoleContext) -> SharedRowStoreCode:
    buf = kernel.buffer(stmt.dst.buffer)
    rows = buf.shape[-1] // (stmt.dst.part.count if stmt.dst.part else 1)
    slots, slot_row, stores, row, mine = _storing_slots(stmt.row_layout, rows)
    integer = computes_in_integers(buf.dtype, stmt.value, exprs)
    value = integer_value(exprs, stmt.value, role) if integer else exprs.value(stmt.value, role)
    address = f"{exprs.view_base(stmt.dst, role)} + static_cast<unsigned>(hk_r * {buf.dtype.nbytes})"
    stored = "hk_v" if integer else from_float(buf.dtype, "hk_v")
    return SharedRowStoreCode(thread_among(role, stmt.row_threads), slots, slot_row, value,
                              stores, row, mine, shared_store(buf.dtype, address, stored) + ";",
                              "int" if integer else "float")


def row_store(stmt: ir.GlobalRowStore, kernel: ir.Kernel, exprs: ExprRenderer,
              role: RoleContext) -> RowStoreCode:
    tensor = kernel.tensor(stmt.tensor)
    dims = [str(d) if isinstance(d, int) else names.user(d) for d in tensor.dims]
    slots, slot_row, stores, row, mine = _storing_slots(stmt.layout, stmt.rows)
    bounds = [mine, "hk_e >= 0", f"hk_e < {dims[-1]}"]
    for index, dim in zip(stmt.index, dims):
        bounds += [f"({scalar(index, role)}) >= 0", f"({scalar(index, role)}) < {dim}"]
    offset = _row_major(stmt.index, dims, role) if stmt.index else "0LL"
    if stmt.end is not None:
        bounds.append(f"hk_e < ({scalar(stmt.end, role)})")
    integer = computes_in_integers(tensor.dtype, stmt.value, exprs)
    value = integer_value(exprs, stmt.value, role) if integer else exprs.value(stmt.value, role)
    return RowStoreCode(
        thread_among(role, stmt.threads), slots, slot_row, value,
        stores, row, scalar(stmt.start, role), _STORE_KIND[tensor.dtype],
        f"{names.user(stmt.tensor)} + {offset} + hk_e",
        "hk_v" if integer else from_float(tensor.dtype, "hk_v"), " && ".join(bounds),
        "int" if integer else "float")


def _row_major(index: tuple[ir.ScalarExpr, ...], dims: list[str], role: RoleContext) -> str:
    """The offset of element (index..., 0) of a row-major tensor, in 64 bits."""
    text = f"static_cast<long long>({scalar(index[0], role)})"
    for i, dim in zip(index[1:], dims[1:]):
        text = f"({text} * {dim} + ({scalar(i, role)}))"
    return f"{text} * {dims[-1]}"
