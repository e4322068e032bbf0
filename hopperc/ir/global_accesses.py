"""Which global memory a statement touches: a store's async write of its box,
a load's async read of its box (by the issuing thread), ld.global of a vector
(by the running threads). complete_bulk_stores orders them within a block;
nothing orders them between blocks (frontend/global_reads.py)."""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, Proxy, issued_per_warpgroup, leaves, tile_operands, walk
from hopperc.ir.index_algebra import GlobalBox, boxes_overlap, copy_box, substitute


def global_memory(tensor: str) -> str:
    """The memory a global tensor's accesses are decided on (not a buffer name:
    it has a space)."""
    return f"global {tensor}"


def written_tensors(body: ir.Block) -> frozenset[str]:
    """The global tensors some statement of `body` (the kernel's, manual code
    included) writes: stores and reduce-adds (TMA or bulk), stores and atomic adds
    from registers, flags and counters (signalled, or waited on while other blocks
    signal them). Only the others are read-only for the whole kernel: the condition
    for reading them through the non-coherent path (`ld.global.nc`, `__ldg`, a
    `const __restrict__` pointer: PTX ISA, ld.global.nc; CUDA C++ Programming
    Guide, __restrict__ and __ldg), which may return a stale value of what the
    kernel wrote even after the wait that completed it, and for reading a loaded
    vector once into registers where it is declared. A statement kind that
    writes a tensor belongs here."""
    return frozenset(s.tensor for s in walk(body) if isinstance(
        s, (ir.AsyncStore, ir.GlobalRowStore, ir.Signal, ir.Wait, ir.Count)))


def global_vectors(expr: ir.TileExpr) -> Iterator[ir.GlobalVector]:
    """Slices of 1-D global tensors an element-wise expression reads (ld.global)."""
    return (e for e in tile_operands(expr) if isinstance(e, ir.GlobalVector))


def global_accesses(stmt: ir.Stmt) -> list[Access]:
    """Accesses of global memory by `stmt` and everything nested in it (manual
    code as any thread's): a store's async write of its box, a load's async
    read of its box (by the issuing thread), ld.global of a vector's slice (by
    the running threads)."""
    manual = [s for region in walk(ir.Block((stmt,))) if isinstance(region, ir.ManualRegion)
              for s in walk(region.body)]
    return [a for leaf in leaves(stmt) for a in _global(leaf)] + \
        [replace(a, single_thread=False) for leaf in manual for a in _global(leaf)]


def _global(stmt: ir.Stmt) -> list[Access]:
    match stmt:
        case ir.AsyncStore(tensor=tensor, engine=engine, span=span):
            return [Access(global_memory(tensor), Proxy.ASYNC, True, True,
                           f"written by {engine.label} {stmt.verb}", span,
                           per_warpgroup=issued_per_warpgroup(stmt), region=copy_box(stmt),
                           adds=stmt.reduce_add)]
        case ir.AsyncLoad(tensor=tensor, engine=engine, span=span):
            return [Access(global_memory(tensor), Proxy.ASYNC, False, True,
                           f"read by {engine.label} load", span, region=copy_box(stmt))]
        case ir.SharedStore(value=value, span=span) | ir.TileDef(init=value, span=span) | \
                ir.TileAssign(value=value, span=span):
            return [Access(global_memory(v.tensor), Proxy.GENERIC, False, False,
                           "read by ld.global", span, region=GlobalBox(v.tensor, (v.start,),
                                                      v.length and (v.length,)))
                    for v in global_vectors(value)]
    return []


def own_boxes(a: Access, b: Access, warpgroups: int) -> bool:
    """Whether the global boxes of `a` and `b` move with `wg` so that warpgroup
    w's box of `a` and warpgroup w + d's box of `b` are apart for every other
    of the `warpgroups` (d != 0): where they meet, one warpgroup made both."""
    if a.region is None or b.region is None:
        return False
    wg = ir.Scalar(ir.ScalarKind.BUILTIN, "wg")

    def moved(box: GlobalBox, d: int) -> GlobalBox:
        other = ir.ScalarOp("+", wg, ir.const(d))
        return replace(box, coords=tuple(substitute(c, ir.ScalarKind.BUILTIN, "wg", other)
                                         for c in box.coords))
    return all(not boxes_overlap(a.region, moved(b.region, d), same_point=True)
               for d in range(1 - warpgroups, warpgroups) if d)
