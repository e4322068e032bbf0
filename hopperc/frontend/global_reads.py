"""Reads of global memory that another block may have written.

Nothing in a kernel orders one block's global writes before another block's
reads (short of flags with release/acquire, which the language does not
have): a block that loads a box of a tensor the kernel stores must read only
boxes no other block (no other tile) stores. Accepted: reading a tensor the
kernel never stores, and reading boxes that move with the tile coordinates
the way the stores do, a whole box per tile along every grid axis (a block's
own tile, `Y[tile.m, j]` in a kernel whose grid is `m`), loop variables with
constant bounds and `wg` moving them less than that. The block's own
stores are then ordered before its reads by complete_bulk_stores, within the
role that stores them: another role may read only boxes apart from every box
the storing role stores. A ragged copy's box (`START : END`) is taken as
anywhere along its clipped axis: nothing is proven apart there.

A kernel that waits on flags (`wait F[i] >= n`) or counts (`n: i32 = signal
F[i]`, frontend/semaphores.py: an acquire too) may
read with TMA what other blocks wrote (by TMA store or from registers) and
signalled: whether a signal orders each such write before its read is for
`check` to find, which runs all of that kernel's blocks interleaved. Vector
and element reads (`ld.global.nc`, the read-only path, not coherent with
writes during the kernel) stay refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from hopperc.diagnostics import CompileError, Span
from hopperc.ir import index_algebra
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, scalars_in, walk
from hopperc.ir.global_accesses import global_vectors
from hopperc.ir.index_algebra import GlobalBox, copy_box

Ranges = dict[ir.Scalar, tuple[int, int]]  # loop variable or `wg` -> (first, last)
BOUNDED = (ir.ScalarKind.LOOP, ir.ScalarKind.BUILTIN)  # terms with a known range


@dataclass(frozen=True)
class _Box:
    box: GlobalBox
    span: Span
    ranges: Ranges  # of the loops around it
    role: ir.RoleInfo | None


def check_global_reads(body: ir.Block, grid: tuple[ir.GridAxis, ...], threads: int,
                       element_reads: dict[str, Span]) -> None:
    """Refuse, at the read, a read of a box another block may store, and a read
    of elements (`element_reads`: tensor -> its first element read) of a tensor
    the kernel stores."""
    stores: dict[str, list[_Box]] = {}
    reads: list[_Box] = []
    wg = {ir.Scalar(ir.ScalarKind.BUILTIN, "wg"): (0, max(1, threads // 128) - 1)}
    flags = any(isinstance(s, (ir.Wait, ir.Count)) for s in walk(body))
    for stmt, ranges, role in _leaves(body, wg, None):
        for box, write in _boxes(stmt):
            if write:
                stores.setdefault(box.tensor, []).append(_Box(box, stmt.span, ranges, role))
            elif not (flags and isinstance(stmt, ir.AsyncLoad)):  # `check` decides
                reads.append(_Box(box, stmt.span, ranges, role))
    _refuse_row_stored(body, reads, element_reads)
    for tensor, span in element_reads.items():
        if tensor in stores:
            raise CompileError(span, f"this reads an element of '{tensor}', which the kernel "
                                     f"stores (line {stores[tensor][0].span.line}): elements "
                                     "are read as scalars that steer control flow and "
                                     "coordinates, and nothing orders a block's stores before "
                                     "them; read elements only of tensors the kernel does not "
                                     "write")
    axes = [g for g in grid if g.extent != ir.const(1)]
    for read in reads:
        for store in stores.get(read.box.tensor, ()):
            if store.role != read.role and not _apart_in_block(store, read):
                raise CompileError(read.span, (
                    f"this reads '{read.box.tensor}', which role '{store.role.name}' stores "
                    f"(line {store.span.line}): nothing orders one role's global writes "
                    "before another role's reads; read it in the role that stores it")
                    if store.role is not None else _message(read, store, axes, []))
            apart = [g for g in axes if _apart_across_tiles(store, read, g.name)]
            if len(apart) < len(axes):
                raise CompileError(read.span, _message(read, store, axes, apart))


def _refuse_row_stored(body: ir.Block, reads: list[_Box], element_reads: dict[str, Span]) -> None:
    """A tensor written by st.global from registers (ir.GlobalRowStore) is only
    written that way: no pass orders those generic writes of many threads before
    a read of them (ld.global, or a TMA load through the async proxy, which
    would need a fence.proxy.async besides), nor against a TMA or bulk store of
    the same elements. Refused at the read, or at the second kind of write."""
    row_stored: dict[str, Span] = {}
    bulk_stored: dict[str, Span] = {}
    for stmt, _, _ in _leaves(body, {}, None):
        if isinstance(stmt, ir.GlobalRowStore):
            row_stored.setdefault(stmt.tensor, stmt.span)
            if stmt.tensor in bulk_stored:
                raise CompileError(stmt.span, _mixed(stmt.tensor, bulk_stored[stmt.tensor]))
        elif isinstance(stmt, ir.AsyncStore):
            bulk_stored.setdefault(stmt.tensor, stmt.span)
            if stmt.tensor in row_stored:
                raise CompileError(stmt.span, _mixed(stmt.tensor, row_stored[stmt.tensor]))
    read_spans = [(read.box.tensor, read.span) for read in reads] + list(element_reads.items())
    for tensor, span in read_spans:
        if tensor in row_stored:
            raise CompileError(span, (
                f"this reads '{tensor}', which the kernel stores from registers "
                f"(line {row_stored[tensor].line}): nothing orders those stores "
                "before a read; write the values to a tensor the kernel does not read"))


def _mixed(tensor: str, first: Span) -> str:
    return (f"'{tensor}' is also written at line {first.line} by the other kind of store "
            "(st.global from registers, or a TMA or bulk store through the async proxy): "
            "nothing orders the two; write each tensor one way")


def _message(read: _Box, store: _Box, axes, apart) -> str:
    axis = next(g.name for g in axes if g not in apart)
    return (f"this reads a box of '{read.box.tensor}' that another block may store (the store "
            f"at line {store.span.line}, for another tile.{axis}): nothing in a kernel orders "
            "one block's global writes before another block's reads. Read only the boxes "
            "this block stores (the same tile coordinates), or split the work into two "
            "kernels")


def _apart_across_tiles(store: _Box, read: _Box, axis: str) -> bool:
    """Whether, for any two tiles whose coordinate `axis` differs, the store of
    one and the read of the other touch different boxes: on some tensor axis
    both coordinates are a * tile.axis plus the same block-invariant terms and
    loop terms that move less than |a| minus a box."""
    tile = ir.Scalar(ir.ScalarKind.TILE, axis)
    for s, r, extent_s, extent_r in zip(store.box.coords, read.box.coords, store.box.extents,
                                        read.box.extents):
        ls, lr = index_algebra.linear(s), index_algebra.linear(r)
        if ls is None or lr is None or extent_s is None or extent_r is None:
            continue
        a = ls[0].get(tile, 0)
        if a == 0 or lr[0].get(tile, 0) != a:
            continue
        span_s, span_r = _loop_span(ls, store.ranges, tile), _loop_span(lr, read.ranges, tile)
        invariant = _invariant(ls, tile)
        # a term naming another tile coordinate moves between tiles: nothing proven here
        if span_s is None or span_r is None or invariant is None or \
                invariant != _invariant(lr, tile):
            continue
        low, high = span_s[0] - span_r[1], span_s[1] - span_r[0]  # store - read, same tile
        if all(low + step >= extent_r or high + step <= -extent_s for step in (a, -a)):
            return True
    return False


def _apart_in_block(store: _Box, read: _Box) -> bool:
    """Whether, in one block, the store and the read never touch the same box
    whatever iterations each is at (two roles run unordered): on some tensor
    axis both coordinates are the same terms outside loops plus loop terms
    whose ranges keep them a box apart."""
    for s, r, extent_s, extent_r in zip(store.box.coords, read.box.coords, store.box.extents,
                                        read.box.extents):
        ls, lr = index_algebra.linear(s), index_algebra.linear(r)
        if ls is None or lr is None or extent_s is None or extent_r is None or \
                _unbounded(ls) != _unbounded(lr):
            continue
        span_s, span_r = _loop_span(ls, store.ranges, None), _loop_span(lr, read.ranges, None)
        if span_s is not None and span_r is not None and (
                span_s[0] - span_r[1] >= extent_r or span_s[1] - span_r[0] <= -extent_s):
            return True
    return False


def _unbounded(form: index_algebra.Linear) -> dict:
    """The terms with no loop variable or `wg` in them."""
    return {leaf: c for leaf, c in form[0].items()
            if not {s.kind for s in scalars_in(leaf)} & set(BOUNDED)}


def _invariant(form: index_algebra.Linear, tile: ir.Scalar) -> dict | None:
    """The terms that are the same for every tile and iteration; None if a term
    names another tile coordinate."""
    terms = {}
    for leaf, coefficient in form[0].items():
        kinds = {s.kind for s in scalars_in(leaf)}
        if leaf == tile or kinds & set(BOUNDED):
            continue
        if ir.ScalarKind.TILE in kinds:
            return None
        terms[leaf] = coefficient
    return terms


def _loop_span(form: index_algebra.Linear, ranges: Ranges, tile: ir.Scalar | None
               ) -> tuple[int, int] | None:
    """The least and greatest value of the constant and loop terms."""
    low = high = form[1]
    for leaf, coefficient in form[0].items():
        if leaf == tile or not {s.kind for s in scalars_in(leaf)} & set(BOUNDED):
            continue
        if leaf not in ranges:
            return None
        first, last = ranges[leaf]
        ends = (coefficient * first, coefficient * last)
        low, high = low + min(ends), high + max(ends)
    return low, high


def _boxes(stmt: ir.Stmt) -> list[tuple[GlobalBox, bool]]:
    match stmt:
        case ir.AsyncStore():
            return [(copy_box(stmt), True)]
        case ir.AsyncLoad():
            return [(copy_box(stmt), False)]
        case ir.SharedStore(value=value) | ir.TileDef(init=value) | ir.TileAssign(value=value) | \
                ir.GlobalRowStore(value=value):
            return [(GlobalBox(v.tensor, (v.start,), (v.length or 1 << 30,)), False)
                    for v in global_vectors(value)]
    return []


def _leaves(block: ir.Block, ranges: Ranges, role: ir.RoleInfo | None
            ) -> Iterator[tuple[ir.Stmt, Ranges, ir.RoleInfo | None]]:
    """Every statement without a body (manual code included), with the constant
    ranges of the loops around it (a loop with other bounds is left out) and
    its role."""
    for stmt in block.stmts:
        inner, inner_role = ranges, stmt.role if isinstance(stmt, ir.RoleBlock) else role
        if isinstance(stmt, ir.ForLoop):
            bounds = [b.value for b in (stmt.start, stmt.stop)
                      if isinstance(b, ir.Scalar) and b.kind is ir.ScalarKind.CONST]
            var = ir.Scalar(ir.ScalarKind.LOOP, stmt.var)
            inner = {**ranges, var: (int(bounds[0]), int(bounds[1]) - 1)} \
                if len(bounds) == 2 else {k: v for k, v in ranges.items() if k != var}
        nested = bodies(stmt)
        if not nested:
            yield stmt, ranges, role
        for body in nested:
            yield from _leaves(body, inner, inner_role)
