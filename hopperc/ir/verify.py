"""The IR verifier, run after the front end and after every pass.

It checks what every stage may rely on: names resolve, barrier references are
in range, carried registers exist, sync nodes sit where they can execute, a
ragged walk's registers are declared (StartTileWalk) before a TakeTile moves them,
a row sum's per-thread parts (Layout.ROW_PARTS) are read only by their own
updates and their quad sum.
A failure is a compiler bug (exit code 2), never a user error.
"""
from __future__ import annotations

from hopperc.diagnostics import ToolchainError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, issued_per_warpgroup, tile_operands, walk
from hopperc.ir.elements import tensor_elements_in

ISSUE_ONLY = (ir.AsyncLoad, ir.AsyncStore, ir.MBarrierExpectTx, ir.BulkCommit, ir.BulkWaitRead,
              ir.MBarrierInit, ir.MBarrierInval)


class VerifyError(ToolchainError):
    pass


def verify(kernel: ir.Kernel, stage: str, *, loads_bound: bool = False,
           elected: bool = False) -> None:
    """Raise VerifyError naming `stage` if the IR is malformed.

    With `loads_bound`, every async load outside manual code names its mbarrier;
    with `elected`, async issue outside manual code must sit in a OneThread,
    per warpgroup exactly for the stores that name `wg`.
    """
    buffers = {b.name for b in kernel.buffers}
    barriers = {b.name: b.count for b in kernel.barriers}
    problems: list[str] = []

    def check_barrier(ref: ir.BarrierRef, where: ir.Stmt) -> None:
        if ref.array not in barriers:
            problems.append(f"{type(where).__name__} uses unknown mbarrier '{ref.array}'")
        elif isinstance(ref.index, ir.Scalar) and ref.index.kind is ir.ScalarKind.CONST and not (
                0 <= ref.index.value < barriers[ref.array]):
            problems.append(f"mbarrier index {ref.index.value} out of range for '{ref.array}'")

    def visit(block: ir.Block, issuer: ir.OneThread | None, manual: bool,
              walks: frozenset[ir.TileWalk] = frozenset()) -> None:
        for stmt in block.stmts:
            if isinstance(stmt, ir.StartTileWalk):
                walks |= {stmt.walk}
            if isinstance(stmt, ir.TakeTile) and stmt.walk is not None and stmt.walk not in walks:
                problems.append(f"TakeTile at {stmt.span} walks tile.{stmt.walk.slowest} with no "
                                "StartTileWalk before its loop")
            for field in ("dst", "src", "a", "b"):
                view = getattr(stmt, field, None)
                if isinstance(view, ir.BufferView) and view.buffer not in buffers:
                    problems.append(f"{type(stmt).__name__} uses unknown buffer '{view.buffer}'")
            barrier = getattr(stmt, "barrier", None)
            if isinstance(barrier, ir.BarrierRef):
                check_barrier(barrier, stmt)
            elif isinstance(stmt, ir.AsyncLoad) and not manual and loads_bound:
                problems.append(f"async load at {stmt.span} has no mbarrier")
            carried = ((stmt.phase,) if isinstance(stmt, ir.PhaseFlip) else
                       (stmt.stage, stmt.phase) if isinstance(stmt, ir.StageAdvance) else ())
            for register in carried:
                if register not in kernel.carried:
                    problems.append(f"carried register '{register}' is not declared")
            ragged = getattr(stmt, "ragged", None)
            if ragged is not None and not (
                    0 <= ragged.dim < len(stmt.coords) - 1 and len(stmt.coords) <= 3
                    and stmt.engine is ir.Engine.TMA and getattr(stmt, "multicast", 1) == 1):
                problems.append(f"bad ragged bound on dimension {ragged.dim} of the copy at "
                                f"{stmt.span}")
            if isinstance(stmt, ir.NamedBarrier) and not (
                    0 <= stmt.id < 16 and stmt.threads % 32 == 0 and stmt.threads <= kernel.threads
                    and (not stmt.per_warpgroup or stmt.threads == 128)):
                problems.append(f"bad named barrier {stmt.id}, {stmt.threads}")
            if elected and not manual and isinstance(stmt, ISSUE_ONLY):
                if issuer is None:
                    problems.append(f"{type(stmt).__name__} at {stmt.span} is not elected")
                elif isinstance(stmt, ir.AsyncStore) and \
                        issued_per_warpgroup(stmt) != issuer.per_warpgroup:
                    problems.append(f"store at {stmt.span} names 'wg' but one thread of its role "
                                    "issues it" if not issuer.per_warpgroup else
                                    f"store at {stmt.span} names no 'wg' but is issued once per "
                                    "warpgroup")
            for body in bodies(stmt):
                visit(body, stmt if isinstance(stmt, ir.OneThread) and issuer is None else issuer,
                      manual or isinstance(stmt, ir.ManualRegion), walks)

    visit(kernel.body, None, False)
    problems += _row_parts_problems(kernel)
    ranks = {t.name: len(t.dims) for t in kernel.tensors}
    for element in tensor_elements_in((kernel.body, kernel.grid)):
        if ranks.get(element.tensor) != len(element.indices):
            problems.append(f"element {element.tensor}[{len(element.indices)} indices] does not "
                            "index a tensor of the kernel by its rank")
    if problems:
        raise VerifyError(f"internal error: IR invalid after {stage}: " + "; ".join(problems))


def _row_parts_problems(kernel: ir.Kernel) -> list[str]:
    """A Layout.ROW_PARTS vector holds each lane's part of a row sum: only a
    statement writing such parts reads them as values (its own update) or takes
    a thread's part of a row sum (ThreadRowSum, of a wgmma-layout tile), and
    only one writing a Layout.ROWS vector sums them across the quad (RowPartsSum)."""
    tiles = {s.name: s for s in walk(kernel.body) if isinstance(s, ir.TileDef)}
    problems = []
    for stmt in walk(kernel.body):
        match stmt:
            case ir.TileDef(name=name, init=value) | ir.TileAssign(name=name, value=value):
                target = tiles[name].layout
            case ir.SharedStore(value=value) | ir.GlobalRowStore(value=value):
                target = None
            case _:
                continue
        for e in tile_operands(value):
            match e:
                case ir.ThreadRowSum(name=name):
                    fine = target is ir.Layout.ROW_PARTS and \
                        tiles[name].layout is ir.Layout.WGMMA
                case ir.RowPartsSum(name=name):
                    fine = target is ir.Layout.ROWS and tiles[name].layout is ir.Layout.ROW_PARTS
                case ir.TileRef(name=name) | ir.RowValues(name=name):
                    fine = tiles[name].layout is not ir.Layout.ROW_PARTS or (
                        target is ir.Layout.ROW_PARTS and isinstance(e, ir.TileRef))
                case _:
                    continue
            if not fine:
                problems.append(f"{type(e).__name__} of '{name}' at {stmt.span} in a statement "
                                f"writing {target.value if target else 'memory'}")
    return problems
