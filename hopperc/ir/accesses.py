"""Which shared buffers a statement touches, through which proxy, by whom.

The sync passes reason about these accesses only: a generic access is an
ordinary ld/st.shared by the running threads; an async access is a TMA/bulk
copy or a wgmma operand read. TMA and bulk copies are issued by one thread.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Iterator

from hopperc.diagnostics import Span
from hopperc.ir import index_algebra
from hopperc.ir import nodes as ir


class Proxy(Enum):
    GENERIC = "generic"
    ASYNC = "async"


@dataclass(frozen=True)
class Access:
    buffer: str
    proxy: Proxy
    write: bool
    single_thread: bool  # issued by the role's one elected thread
    what: str  # e.g. "written by st.shared", for explanations
    span: Span
    storage: str | None = None  # the buffer whose memory `buffer` reuses, if any
    view: ir.BufferView | None = None  # the part of the buffer, where known
    per_warpgroup: bool = False  # single_thread: one elected thread of each warpgroup
    warpgroup_ordered: bool = False  # ordered for its own warpgroup by a warpgroup barrier
    # Element-wise: which running thread touches which element, as a key equal for
    # two accesses exactly when each thread touches the same elements in both
    # (set by insert_barriers, which knows the shapes and threads).
    owner: tuple | None = None
    # single_thread, complete: mbarrier arrays on which the same thread then issued
    # a load. Waiting for that load's phase orders this access for the waiters: the
    # thread finished it before it issued the load the phase waits for.
    handed_on: frozenset[str] = frozenset()
    region: index_algebra.GlobalBox | None = None  # an access of global memory: its box
    adds: bool = False  # a reduce-add's write: commutes with the other adds of its memory
    # In flight from earlier iterations (ir/iterations.py): only where loop
    # variable v == e for each (v, e); how many back edges of each loop it
    # crossed; its view as issued (what a wait that completes it names).
    when: tuple[tuple[str, ir.ScalarExpr], ...] = ()
    ages: tuple[tuple[str, int], ...] = ()
    issued: ir.BufferView | None = None

    @property
    def memory(self) -> str:
        """What conflicts are decided on: two accesses of one memory may race."""
        return self.storage or self.buffer


def may_overlap(a: Access, b: Access, same_point: bool = False) -> bool:
    """Whether two accesses may touch the same bytes: any two of one memory,
    except views of one buffer that select different constant stages or parts,
    and global boxes apart by constant coordinates. `same_point`: both indices
    are evaluated with the same variables (see index_algebra), so indices that
    differ symbolically (`j` and `j - 1`) differ too."""
    if a.memory != b.memory:
        return False
    if a.region is not None and b.region is not None:
        return index_algebra.boxes_overlap(a.region, b.region, same_point)
    if a.view is None or b.view is None or a.buffer != b.buffer:
        return True
    x, y = a.view, b.view
    if _apart(x.stage, y.stage, same_point):
        return False
    return not (x.part and y.part and x.part.count == y.part.count
                and x.part.columns == y.part.columns
                and _apart(x.part.index, y.part.index, same_point))


def _apart(x: ir.ScalarExpr | None, y: ir.ScalarExpr | None, same_point: bool) -> bool:
    return _differ(x, y) or (same_point and x is not None and y is not None
                             and index_algebra.differ(x, y))


def own_rows(access: Access) -> bool:
    """Whether each warpgroup makes the access on its own rows only (`buf[wg]`,
    `buf[c + wg]`, by the running threads, a warpgroup's wgmma, or each
    warpgroup's issuing thread)."""
    part = access.view.part if access.view is not None else None
    return (part is not None and not part.columns and warpgroup_offset(part.index) is not None
            and (access.per_warpgroup or not access.single_thread))


def same_rows(a: Access, b: Access) -> bool:
    """Two accesses each warpgroup makes on its own rows, split alike: where they
    are the same bytes (the caller knows: one buffer, or one memory and layout),
    only threads of one warpgroup can meet on them."""
    return (own_rows(a) and own_rows(b) and a.view.part.count == b.view.part.count
            and warpgroup_offset(a.view.part.index) == warpgroup_offset(b.view.part.index))


def finished_by_issuer(access: Access) -> bool:
    """An access of the role's one issuing thread that is complete for it (not an
    async operation still running)."""
    return access.single_thread and not access.per_warpgroup and not in_flight(access)


def is_store_read(access: Access) -> bool:
    """A TMA store reading its shared source."""
    return access.proxy is Proxy.ASYNC and not access.write and access.single_thread \
        and access.region is None


def varies(access: Access) -> bool:
    """Whether the access's indices may differ between instances of its statement."""
    view, region = access.view, access.region
    exprs = list(region.coords) if region is not None else []
    if view is not None:
        exprs += [e for e in (view.stage, view.part and view.part.index) if e is not None]
    kinds = (ir.ScalarKind.LOOP, ir.ScalarKind.CARRIED, ir.ScalarKind.TILE)
    return any(index_algebra.names(e, kind) for e in exprs for kind in kinds)


def writes_global(access: Access) -> bool:
    """A store's write of global memory: complete for its issuer at a plain
    wait_group, and for the other threads after a barrier with it."""
    return access.proxy is Proxy.ASYNC and access.write and access.region is not None


def is_wgmma_read(access: Access) -> bool:
    return access.proxy is Proxy.ASYNC and not access.write and not access.single_thread


def in_flight(access: Access) -> bool:
    """Async operations a barrier does not complete."""
    return access.proxy is Proxy.ASYNC


def completed(read: Access) -> Access:
    """An async read known complete by the threads that waited for it (the store's
    issuer; each warpgroup for its own wgmma): still unordered for the others."""
    return replace(read, proxy=Proxy.GENERIC)


def warpgroup_offset(index: ir.ScalarExpr) -> int | None:
    """c for a part index `wg` (0) or `c + wg`, `wg + c` with c constant: each
    warpgroup its own part, c on from the first (the front end keeps c a multiple
    of the warpgroups, so two different offsets never share a part)."""
    if _is_wg(index):
        return 0
    if isinstance(index, ir.ScalarOp) and index.op == "+" and index.right is not None:
        for wg, c in ((index.left, index.right), (index.right, index.left)):
            if _is_wg(wg) and isinstance(c, ir.Scalar) and c.kind is ir.ScalarKind.CONST:
                return int(c.value)
    return None


def issued_per_warpgroup(stmt: ir.Stmt) -> bool:
    """A store whose source, coordinates or ragged END name `wg`: each
    warpgroup's thread issues its own."""
    return isinstance(stmt, ir.AsyncStore) and any(
        "wg" in builtins_in(e) for e in copy_indices(stmt.coords, stmt.src)
        + ([stmt.ragged.end] if stmt.ragged else []))


def copy_indices(coords: tuple[ir.ScalarExpr, ...], view: ir.BufferView
                 ) -> list[ir.ScalarExpr]:
    """Every index a copy evaluates: its tensor coordinates, stage and part."""
    return [*coords, *(e for e in (view.stage, view.part and view.part.index) if e is not None)]


def builtins_in(expr: ir.ScalarExpr) -> set[str]:
    """The per-thread builtins (`lane`, `wg`, ...) an index uses."""
    if isinstance(expr, ir.Scalar):
        return {expr.name} if expr.kind is ir.ScalarKind.BUILTIN else set()
    return set().union(*(builtins_in(e) for e in ir.operands(expr)))


def scalars_in(expr: ir.ScalarExpr) -> Iterator[ir.Scalar]:
    """Every leaf of a scalar expression (constants, dimensions, tile coordinates...,
    an element's indices' included), left to right, repeats included."""
    if isinstance(expr, ir.Scalar):
        yield expr
    for operand in ir.operands(expr):
        yield from scalars_in(operand)


def _is_wg(expr: ir.ScalarExpr) -> bool:
    return isinstance(expr, ir.Scalar) and expr.kind is ir.ScalarKind.BUILTIN and expr.name == "wg"


def _differ(x: ir.ScalarExpr | None, y: ir.ScalarExpr | None) -> bool:
    """Two indices known to be different: different constants, or warpgroup parts
    at different offsets (`wg`, `2 + wg`)."""
    if x is None or y is None:
        return False
    if (isinstance(x, ir.Scalar) and isinstance(y, ir.Scalar)
            and x.kind is ir.ScalarKind.CONST and y.kind is ir.ScalarKind.CONST):
        return x.value != y.value
    offsets = warpgroup_offset(x), warpgroup_offset(y)
    return None not in offsets and offsets[0] != offsets[1]


def source_order(access: Access) -> tuple:
    """Sort key: explanations name the earliest access, the same on every run."""
    return (access.span.line, access.span.col, access.buffer, access.what)


def tile_operands(expr: ir.TileExpr) -> Iterator[ir.TileExpr]:
    """The leaf operands of an element-wise expression (none of an undefined one)."""
    match expr:
        case None:
            return
        case ir.Elementwise(args=args):
            for arg in args:
                yield from tile_operands(arg)
        case ir.Convert(operand=operand):
            yield from tile_operands(operand)
        case _:
            yield expr


def tile_reads(expr: ir.TileExpr) -> Iterator[ir.BufferView]:
    """Views an element-wise expression reads from shared memory (a row
    reduction's partials included)."""
    for e in tile_operands(expr):
        if isinstance(e, ir.SharedRead):
            yield e.view
        elif isinstance(e, ir.RowReduce) and e.partials is not None:
            yield e.partials


def tile_refs(expr: ir.TileExpr) -> Iterator[str]:
    """Register tiles (and row vectors) an element-wise expression reads."""
    return (e.name for e in tile_operands(expr)
            if isinstance(e, (ir.TileRef, ir.RowValues, ir.ThreadRowSum, ir.RowPartsSum))
            or isinstance(e, ir.RowReduce) and e.partials is None)


@dataclass(frozen=True)
class RegisterUse:
    """A register tile read or written by a statement other than a wgmma."""

    tile: str
    write: bool
    span: Span

    @property
    def what(self) -> str:
        return "written by element-wise code" if self.write else "read by element-wise code"


def register_uses(stmt: ir.Stmt) -> list[RegisterUse]:
    """Register tiles a leaf statement other than a wgmma reads or writes."""
    match stmt:
        case ir.TileDef(init=None):
            return []
        case ir.TileDef(name=name, init=value, span=span) | \
                ir.TileAssign(name=name, value=value, span=span):
            return ([RegisterUse(t, False, span) for t in tile_refs(value)]
                    + [RegisterUse(name, True, span)])
        case ir.SharedStore(value=value, span=span) | ir.GlobalRowStore(value=value, span=span):
            return [RegisterUse(t, False, span) for t in tile_refs(value)]
        case ir.RowPartials(tile=tile, span=span):
            return [RegisterUse(tile, False, span)]
    return []


def mma_registers(mma: ir.Mma) -> tuple[str, ...]:
    """The register tiles a wgmma uses: its accumulator and a register A."""
    return (mma.acc,) + ((mma.a.name,) if isinstance(mma.a, ir.TileRef) else ())


def leaf_accesses(stmt: ir.Stmt) -> list[Access]:
    """Accesses of a statement that has no body."""
    match stmt:
        case ir.AsyncLoad(ahead=ahead) if ahead:
            return []  # ordered against its readers by its pipeline's barriers alone
        case ir.AsyncLoad(dst=dst, engine=engine, span=span):
            return [_access(dst, Proxy.ASYNC, True, True, f"written by {engine.label} load", span)]
        case ir.AsyncStore(src=src, engine=engine, span=span):
            read = _access(src, Proxy.ASYNC, False, True, f"read by {engine.label} {stmt.verb}",
                           span)
            return [replace(read, per_warpgroup=issued_per_warpgroup(stmt))]
        case ir.SharedStore(dst=dst, value=value, span=span):
            reads = [_access(v, Proxy.GENERIC, False, False, "read by ld.shared", span)
                     for v in tile_reads(value)]
            return reads + [_access(dst, Proxy.GENERIC, True, False, "written by st.shared", span)]
        case ir.TileDef(init=value, span=span) | ir.TileAssign(value=value, span=span) | \
                ir.GlobalRowStore(value=value, span=span):
            return [_access(v, Proxy.GENERIC, False, False, "read by ld.shared", span)
                    for v in tile_reads(value)]
        case ir.RowPartials(partials=partials, span=span):
            return [_access(partials, Proxy.GENERIC, True, False,
                            "written by a row reduction's partials", span)]
        case ir.Mma(a=a, b=b, span=span):
            views = [v for v in (a, b) if isinstance(v, ir.BufferView)]
            return [_access(v, Proxy.ASYNC, False, False, "read by wgmma", span) for v in views]
    return []


def _access(view: ir.BufferView, proxy: Proxy, write: bool, single_thread: bool, what: str,
            span: Span) -> Access:
    return Access(view.buffer, proxy, write, single_thread, what, span, view.storage, view)


def mbarrier_arms(stmt: ir.Stmt) -> list[Access]:
    """Arrive.expect_tx statements in `stmt`, as writes of their barrier's phase
    (the issuer starts the phase the next load completes)."""
    return [Access(phase_word(s.barrier.array), Proxy.GENERIC, True, True, "armed for the next phase by arrive.expect_tx",
                   s.span) for s in leaves(stmt) if isinstance(s, ir.MBarrierExpectTx)]


def mbarrier_waits(stmt: ir.Stmt, single_thread: bool) -> list[Access]:
    """Waits in `stmt` as reads of their barrier's phase, by the running threads
    (or by the one thread of an elected block)."""
    match stmt:
        case ir.MBarrierWait(barrier=barrier, span=span):
            return [Access(phase_word(barrier.array), Proxy.GENERIC, False, single_thread,
                           "waited on", span)]
        case ir.OneThread():
            single_thread = True
        case ir.ManualRegion():
            return []
    return [a for body in bodies(stmt) for inner in body.stmts
            for a in mbarrier_waits(inner, single_thread)]


def phase_word(array: str) -> str:
    """The memory an mbarrier array's phases live in (not a buffer name: it has a space)."""
    return f"mbarrier {array}"


def all_accesses(stmt: ir.Stmt) -> list[Access]:
    """Accesses of a statement and everything nested in it, hand-written code
    included (`manual_accesses`)."""
    return [access for leaf in leaves(stmt) for access in leaf_accesses(leaf)] + \
        manual_accesses(stmt)


def manual_accesses(stmt: ir.Stmt) -> list[Access]:
    """Accesses of the manual code in `stmt`: the passes write no sync into it,
    but order automatic code around it, as made by any of the running threads."""
    regions = [s for s in walk(ir.Block((stmt,))) if isinstance(s, ir.ManualRegion)]
    return [replace(access, single_thread=False) for region in regions
            for inner in walk(region.body) for access in leaf_accesses(inner)]


def bodies(stmt: ir.Stmt) -> tuple[ir.Block, ...]:
    match stmt:
        case ir.IfThen(then=then, orelse=orelse):
            return (then, orelse)
        case ir.ForLoop(body=body) | ir.RoleBlock(body=body) | ir.OneThread(body=body) | \
                ir.ElectLane(body=body) | ir.ManualRegion(body=body):
            return (body,)
    return ()


def walk(block: ir.Block) -> Iterator[ir.Stmt]:
    """Every statement, depth first, in program order."""
    for stmt in block.stmts:
        yield stmt
        for body in bodies(stmt):
            yield from walk(body)


def leaves(stmt: ir.Stmt) -> Iterator[ir.Stmt]:
    """The statements without bodies that `stmt` runs (manual code excluded)."""
    if isinstance(stmt, ir.ManualRegion):
        return
    nested = bodies(stmt)
    if not nested:
        yield stmt
    for body in nested:
        for inner in body.stmts:
            yield from leaves(inner)
