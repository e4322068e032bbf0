"""Operands of a register row vector's store to global memory (ir.GlobalRowStore,
`GlobalRowStore` macro): each thread computes the vector's value at each of its
slots (warp-collective shuffles of a row reduction included, so every lane
runs them), keeps the one it stores, and one predicated st.global writes it."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen import names
from hopperc.codegen.cexpr import ExprRenderer, RoleContext, from_float, scalar
from hopperc.codegen.elements import ROWS_ROW, thread_among
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.layout import ROW_SLOTS

_STORE_KIND = {DType.F32: "f32", DType.I32: "i32", DType.BF16: "u16", DType.F16: "u16"}
# red.global.add's type per dtype (`T[...] += v`): the 16-bit ones take the bits.
_ADD_KIND = {DType.F32: "f32", DType.I32: "s32", DType.BF16: "bf16", DType.F16: "f16"}


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
    operation: str  # hk_st_global (`=`) or hk_red_global_add (`+=`)


def row_store(stmt: ir.GlobalRowStore, kernel: ir.Kernel, exprs: ExprRenderer,
              role: RoleContext) -> RowStoreCode:
    tensor = kernel.tensor(stmt.tensor)
    dims = [str(d) if isinstance(d, int) else names.user(d) for d in tensor.dims]
    if stmt.layout is ir.Layout.ROWS:
        # A quad's 4 lanes hold its 2 rows: lane q < 2 of the quad stores slot q, so
        # a warp's 16 rows go out in one instruction.
        slots, slot_row, stores = ROW_SLOTS, ROWS_ROW, "hk_t % 4 == hk_k"
        row, mine = "16 * (hk_t / 32) + (hk_t % 32) / 4 + 8 * (hk_t % 4)", "hk_t % 4 < 2"
    else:  # every thread holds every row: thread t stores row t
        slots, slot_row, stores = stmt.rows, "hk_k", "hk_t == hk_k"
        row, mine = "hk_t", f"hk_t < {stmt.rows}"
    bounds = [mine, "hk_e >= 0", f"hk_e < {dims[-1]}"]
    for index, dim in zip(stmt.index, dims):
        bounds += [f"({scalar(index, role)}) >= 0", f"({scalar(index, role)}) < {dim}"]
    offset = _row_major(stmt.index, dims, role) if stmt.index else "0LL"
    if stmt.end is not None:
        bounds.append(f"hk_e < ({scalar(stmt.end, role)})")
    return RowStoreCode(
        thread_among(role, stmt.threads), slots, slot_row, exprs.value(stmt.value, role),
        stores, row, scalar(stmt.start, role),
        (_ADD_KIND if stmt.atomic else _STORE_KIND)[tensor.dtype],
        f"{names.user(stmt.tensor)} + {offset} + hk_e", from_float(tensor.dtype, "hk_v"),
        " && ".join(bounds), "hk_red_global_add" if stmt.atomic else "hk_st_global")


def _row_major(index: tuple[ir.ScalarExpr, ...], dims: list[str], role: RoleContext) -> str:
    """The offset of element (index..., 0) of a row-major tensor, in 64 bits."""
    text = f"static_cast<long long>({scalar(index[0], role)})"
    for i, dim in zip(index[1:], dims[1:]):
        text = f"({text} * {dim} + ({scalar(i, role)}))"
    return f"{text} * {dims[-1]}"
