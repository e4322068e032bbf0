"""What the node macros of `nodes.cu.j2` call back into: a leaf statement's
operands as C++ text (scalars, barrier and copy addresses, element-wise code,
wgmma steps, tiles to pin). A mixin of `render._Context`, whose walk state it
reads: the kernel, the running role, the tiles in scope, whether only some lanes
of a warp run the statement, and the loops being rendered."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen import names
from hopperc.codegen.copies import CopyOperands, copy_operands, ragged_end
from hopperc.codegen.elements import (MatrixStore, PerElement, RowPartialsCode, matrix_store,
                                      per_element, row_partials)
from hopperc.codegen.row_stores import RowStoreCode, row_store, shared_row_store
from hopperc.codegen.scalars import scalar
from hopperc.codegen.semaphores import flag_address
from hopperc.codegen.tile_adds import TileAddCode, tile_add
from hopperc.codegen.wgmma import SharedOperand, WgmmaStep
from hopperc.codegen.wgmma import steps as wgmma_steps
from hopperc.ir import nodes as ir
from hopperc.ir import raster
from hopperc.ir.layout import holds_fp8_fragment, packs_pairs, tile_registers
from hopperc.ir.printer import explain, statement


@dataclass(frozen=True)
class PinnedTile:
    """A register tile pinned in place next to a wgmma fence or wait."""

    name: str
    slots: int
    constraint: str


class MacroOperands:
    def why(self, stmt) -> str:
        """`fence.proxy.async.shared::cta: sc written by st.shared (k.hk:31), ...`."""
        text = f"{statement(stmt).split()[0]}: {explain(stmt.reason)}"
        return " ".join(text.splitlines())  # a file name cannot end the comment

    def warpgroup(self) -> str:
        """The running thread's warpgroup within its role."""
        return scalar(ir.Scalar(ir.ScalarKind.BUILTIN, "wg"), self.role)

    def lane(self) -> str:
        return scalar(ir.Scalar(ir.ScalarKind.BUILTIN, "lane"), self.role)

    def scalar(self, expr: ir.ScalarExpr) -> str:
        return scalar(expr, self.role)

    def barrier(self, ref: ir.BarrierRef) -> str:
        base = f"hk_smem_base + {self.launch.barrier_offsets[ref.array]}u"
        index = scalar(ref.index, self.role)
        return base if index == "0" else f"{base} + ({index}) * 8u"

    def copies(self, stmt: ir.AsyncLoad | ir.AsyncStore) -> list[CopyOperands]:
        barrier = self.barrier(stmt.barrier) if isinstance(stmt, ir.AsyncLoad) else ""
        return copy_operands(stmt, self.kernel, self.launch, self.exprs, self.role, barrier)

    def ragged_end(self, stmt: ir.AsyncLoad | ir.AsyncStore) -> str:
        return ragged_end(stmt, self.kernel, self.role)

    def matrix_store(self, stmt: ir.SharedStore) -> MatrixStore | None:
        if self.divergent:  # stmatrix is .sync.aligned: every lane of the warp stores
            return None
        return matrix_store(stmt, self.kernel, self.exprs, self.role)

    def per_element(self, stmt: ir.TileDef | ir.TileAssign | ir.SharedStore) -> PerElement:
        return per_element(stmt, self.kernel, self.exprs, self.role)

    def row_store(self, stmt: ir.GlobalRowStore) -> RowStoreCode:
        return row_store(stmt, self.kernel, self.exprs, self.role)

    def tile_add(self, stmt: ir.GlobalRowStore) -> TileAddCode:
        return tile_add(stmt, self.kernel, self.exprs, self.role)

    def shared_row_store(self, stmt: ir.SharedStore) -> RowStoreCode:
        return shared_row_store(stmt, self.kernel, self.exprs, self.role)

    def flag(self, stmt: ir.Signal | ir.Wait | ir.Count) -> str:
        return flag_address(stmt, self.kernel, self.role)

    def row_partials(self, stmt: ir.RowPartials) -> RowPartialsCode:
        return row_partials(stmt, self.kernel, self.exprs, self.role)

    def wgmma_steps(self, mma: ir.Mma) -> list[WgmmaStep]:
        acc = self.tiles[mma.acc]
        b = self._shared_operand(mma.b, k_major=mma.b.transposed)
        if isinstance(mma.a, ir.TileRef):
            a, a_dtype = names.user(mma.a.name), self.tiles[mma.a.name].dtype
        else:
            a = self._shared_operand(mma.a, k_major=not mma.a.transposed)
            a_dtype = a.buffer.dtype
        overwrites = mma.overwrite_when is not None and self.first_iteration[mma.overwrite_when]
        out = wgmma_steps(mma, names.user(mma.acc), tile_registers(acc), a, a_dtype, b,
                          overwrites)
        self.wgmma_forms.update(dict.fromkeys(step.form for step in out))
        return out

    def _shared_operand(self, view: ir.BufferView, k_major: bool) -> SharedOperand:
        window = "hk_loop_window" if self.loop_windows else "(hk_smem_base >> 4)"
        return SharedOperand(self.exprs.view_base_16(view, self.role, window),
                             self.kernel.buffer(view.buffer), k_major)

    def pinned(self, stmt: ir.WgmmaFence | ir.WgmmaWait | ir.TileDef | ir.TileAssign
               ) -> list[PinnedTile]:
        """Register tiles to pin at `stmt`, with their asm constraint: those a wgmma
        fence or wait names (still in scope), and a wgmma operand just written by
        element-wise code, so the C++ compiler materializes it there instead of
        copying it into each path that reaches the wgmma (ptxas would then
        serialize the wgmma, C7515)."""
        if isinstance(stmt, (ir.TileDef, ir.TileAssign)):
            pinned = (stmt.name,) if stmt.name in self.wgmma_operands else ()
        elif stmt.reason is None:  # written by hand: it may concern any wgmma operand
            pinned = tuple(sorted(self.wgmma_operands))
        else:
            pinned = stmt.tiles
        live = set().union(*self.declared)
        out = []
        for name in pinned:
            if name in live:
                tile = self.tiles[name]
                out.append(PinnedTile(names.user(name), tile_registers(tile), _constraint(tile)))
        return out

    def tile_storage(self, tile: ir.TileDef) -> str:
        """The C++ declaration of a register tile."""
        ctype = "unsigned" if packs_pairs(tile) or holds_fp8_fragment(tile) else tile.dtype.storage
        return f"{ctype} {names.user(tile.name)}[{tile_registers(tile)}];"

    def take_tile(self, stmt: ir.TakeTile) -> str:
        """C++ setting the grid coordinates to those of tile `stmt.index`."""
        targets = tuple(names.grid_coordinate(axis.name) for axis in self.kernel.grid)
        if stmt.walk is not None:
            return raster.walk_cxx(stmt.walk, self.scalar(stmt.index), self.scalar, targets)
        extents = tuple(self.scalar(e) for e in raster.run_extents(self.kernel))
        return raster.coordinates_cxx(self.scalar(stmt.index), extents, targets,
                                      self.kernel.cluster[0], "static_cast<int>(hk_cluster_rank())")

    def start_tile_walk(self, stmt: ir.StartTileWalk) -> str:
        """C++ declaring a ragged walk's registers (its tiles counted)."""
        return raster.count_cxx(stmt.walk, self.scalar)

    def carried(self, register: str) -> str:
        return names.carried(register)


def _constraint(tile: ir.TileDef) -> str:
    if packs_pairs(tile) or holds_fp8_fragment(tile):
        return "+r"
    return "+f" if tile.dtype is ir.DType.F32 else "+h"
