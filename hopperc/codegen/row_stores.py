"""Operands of a register row vector's store to global memory (ir.GlobalRowStore)
or to a 1-D shared view (ir.SharedStore with a row_layout), the `RowStore`
macro: each thread computes the vector's value at each of its slots
(warp-collective shuffles of a row reduction included, so every lane runs
them), keeps those it stores, and one predicated st.global (red.global.add
for `T[...] += v`; st.shared into a buffer) per kept row writes it."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen import names
from hopperc.codegen.cexpr import ExprRenderer, from_float, shared_store
from hopperc.codegen.elements import ROWS_ROW, thread_among
from hopperc.codegen.integers import computes_in_integers, integer_value
from hopperc.codegen.scalars import RoleContext, holds_data, scalar
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.layout import ROW_SLOTS

_STORE_KIND = {DType.F32: "f32", DType.I32: "i32", DType.BF16: "u16", DType.F16: "u16"}
# red.global.add's type per dtype (`T[...] += v`): the 16-bit ones take the bits.
_ADD_KIND = {DType.F32: "f32", DType.I32: "s32", DType.BF16: "bf16", DType.F16: "f16"}


@dataclass(frozen=True)
class RowStoreCode:
    """A register row vector's store (ir.GlobalRowStore to global memory, or
    ir.SharedStore with a row_layout into a 1-D shared view; the `RowStore`
    macro): thread hk_t computes the value of each of its `slots` (slot hk_k is
    row `slot_row`), keeps in hk_v[`kept`] those where `stores_slot` holds, then
    for each of its `rounds` stores (hk_j) takes row `row` (hk_r) and runs `store`,
    which writes hk_v[hk_j]."""

    thread: str
    slots: int
    slot_row: str
    value: str
    value_type: str  # hk_v's: int where the value is computed in integers, else float
    stores_slot: str
    kept: str
    rounds: int
    row: str
    store: str


@dataclass(frozen=True)
class _Storing:
    """Which slots a thread keeps of a row vector, and which rows it stores."""

    slots: int
    slot_row: str
    stores_slot: str
    kept: str
    rounds: int
    row: str
    mine: str  # whether round hk_j's row hk_r is one to store


def _storing(layout: ir.Layout, rows: int, threads: int) -> _Storing:
    if layout is ir.Layout.ROWS:
        # A quad's 4 lanes hold its 2 rows: lane q < 2 of the quad stores slot q, so
        # a warp's 16 rows go out in one instruction.
        return _Storing(ROW_SLOTS, ROWS_ROW, "hk_t % 4 == hk_k", "0", 1,
                        "16 * (hk_t / 32) + (hk_t % 32) / 4 + 8 * (hk_t % 4)", "hk_t % 4 < 2")
    # Every thread holds every row: thread t stores rows t, t + threads, ... (a
    # vector may have more rows than threads), the j-th of them kept in hk_v[j].
    rounds = -(-rows // threads)
    return _Storing(rows, "hk_k", f"hk_k % {threads} == hk_t", f"hk_k / {threads}", rounds,
                    f"hk_t + {threads} * hk_j", f"hk_r < {rows}")


def _code(role: RoleContext, threads: int, storing: _Storing, value: str, integer: bool,
          store: str) -> RowStoreCode:
    return RowStoreCode(thread_among(role, threads), storing.slots, storing.slot_row, value,
                        "int" if integer else "float", storing.stores_slot, storing.kept,
                        storing.rounds, storing.row, store)


def shared_row_store(stmt: ir.SharedStore, kernel: ir.Kernel, exprs: ExprRenderer,
                     role: RoleContext) -> RowStoreCode:
    buf = kernel.buffer(stmt.dst.buffer)
    rows = buf.shape[-1] // (stmt.dst.part.count if stmt.dst.part else 1)
    storing = _storing(stmt.row_layout, rows, stmt.row_threads)
    integer = computes_in_integers(buf.dtype, stmt.value, exprs)
    value = integer_value(exprs, stmt.value, role) if integer else exprs.value(stmt.value, role)
    address = f"{exprs.view_base(stmt.dst, role)} + static_cast<unsigned>(hk_r * {buf.dtype.nbytes})"
    stored = "hk_v[hk_j]" if integer else from_float(buf.dtype, "hk_v[hk_j]")
    store = f"if ({storing.mine}) {shared_store(buf.dtype, address, stored)};"
    return _code(role, stmt.row_threads, storing, value, integer, store)


def row_store(stmt: ir.GlobalRowStore, kernel: ir.Kernel, exprs: ExprRenderer,
              role: RoleContext) -> RowStoreCode:
    tensor = kernel.tensor(stmt.tensor)
    dims = [str(d) if isinstance(d, int) else names.user(d) for d in tensor.dims]
    storing = _storing(stmt.layout, stmt.rows, stmt.threads)
    bounds = [storing.mine, "hk_e >= 0", f"hk_e < {dims[-1]}"]
    for index, dim in zip(stmt.index, dims):
        bounds += [f"({scalar(index, role)}) >= 0", f"({scalar(index, role)}) < {dim}"]
    offset = _row_major(stmt.index, dims, role) if stmt.index else "0LL"
    if stmt.end is not None:
        bounds.append(f"hk_e < ({scalar(stmt.end, role)})")
    integer = computes_in_integers(tensor.dtype, stmt.value, exprs)
    value = integer_value(exprs, stmt.value, role) if integer else exprs.value(stmt.value, role)
    stored = "hk_v[hk_j]" if integer else from_float(tensor.dtype, "hk_v[hk_j]")
    # START from data (an element, a parameter) may sit anywhere in the i32 range:
    # its sum wraps (a row past 2^31 - 1 is then below 0 and skipped), never overflows
    start = scalar(stmt.start, role)
    first = f"hk_wrap_add({start}, hk_r)" if holds_data(stmt.start) else f"({start}) + hk_r"
    operation = (f"hk_red_global_add_{_ADD_KIND[tensor.dtype]}" if stmt.atomic
                 else f"hk_st_global_{_STORE_KIND[tensor.dtype]}")
    store = (f"const int hk_e = {first}; "
             f"{operation}({names.user(stmt.tensor)} + {offset} + "
             f"hk_e, {stored}, {' && '.join(bounds)});")
    return _code(role, stmt.threads, storing, value, integer, store)


def _row_major(index: tuple[ir.ScalarExpr, ...], dims: list[str], role: RoleContext) -> str:
    """The offset of element (index..., 0) of a row-major tensor, in 64 bits."""
    text = f"static_cast<long long>({scalar(index[0], role)})"
    for i, dim in zip(index[1:], dims[1:]):
        text = f"({text} * {dim} + ({scalar(i, role)}))"
    return f"{text} * {dims[-1]}"
