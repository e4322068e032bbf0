"""Accesses still in flight from earlier iterations of a loop, kept comparable
with the accesses of the current one (complete_bulk_stores).

Across a loop's back edge, an index `j` of an access made in the previous
iteration is `j - 1` in the next one; an access in flight when the loop starts
is in flight on its first iteration only (`j == start`, then `j == start + 1`
seen one back edge later); after the loop, `j` is `stop - 1`. Compared at one
point this way, `sd[j]` and the store of `sd[j - 1]` still in flight are
different planes. A global box that crossed MAX_AGE back edges stays where it
was then, as a bound (`j - 4` or earlier: past it along each axis that moves
with `j`, ir/index_algebra.py); any other access that old, and one whose
indices name a tile coordinate across the persistent tile loop (which takes a
new tile each iteration), falls back to its whole buffer or tensor (the latter
remembered as of an earlier tile).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from hopperc.ir import index_algebra
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, may_overlap
from hopperc.ir.index_algebra import GlobalBox
from hopperc.ir.raster import TILE_LOOP

MAX_AGE = 3
LOOP = ir.ScalarKind.LOOP


def first_iteration(access: Access, loop: ir.ForLoop) -> Access:
    return replace(access, when=access.when + ((loop.var, loop.start),))


def next_iteration(access: Access, loop: ir.ForLoop) -> Access | None:
    """None: the access would be from an iteration before the first (the loop
    has constant bounds and fewer iterations)."""
    names = _names(access, LOOP)
    guarded = any(var == loop.var for var, _ in access.when)
    if loop.var == TILE_LOOP and _names(access, ir.ScalarKind.TILE):
        return replace(_whole(access, loop.var), ages=_set(access.ages, loop.var, 1))
    if loop.var not in names and not guarded:
        return access
    age = dict(access.ages).get(loop.var, 0) + 1
    trips = _trips(loop)
    if trips is not None and age >= trips:
        return None
    if age > MAX_AGE:
        unguarded = replace(access, when=tuple(w for w in access.when if w[0] != loop.var))
        if loop.var not in names:
            return unguarded
        region = access.region
        if access.view is None and region is not None and region.older in ((), (loop.var,)):
            # A box keeps its place MAX_AGE iterations back, as the bound of
            # where it (or an older one) lies along each axis.
            return replace(unguarded, ages=_set(access.ages, loop.var, MAX_AGE + 1),
                           region=replace(region, older=(loop.var,)))
        return _whole(access, loop.var)
    previous = ir.ScalarOp("-", ir.Scalar(LOOP, loop.var), ir.const(1))
    aged = _map(access, lambda e: index_algebra.substitute(e, LOOP, loop.var, previous))
    return replace(aged, ages=_set(access.ages, loop.var, age), when=tuple(
        (var, ir.ScalarOp("+", value, ir.const(1)) if var == loop.var else value)
        for var, value in access.when))


def of_an_earlier_tile(access: Access) -> bool:
    """Whether the access, indexed by tile coordinates, was made for a tile the
    persistent tile loop took before the current one."""
    return dict(access.ages).get(TILE_LOOP, 0) > 0


def last_iteration(access: Access, loop: ir.ForLoop) -> Access:
    last = ir.ScalarOp("-", loop.stop, ir.const(1))
    if access.region is not None and loop.var in access.region.older:
        access = _whole(access, loop.var)  # where older boxes lie is lost with the variable
    left = _map(access, lambda e: index_algebra.substitute(e, LOOP, loop.var, last))
    return replace(left, when=tuple(w for w in access.when if w[0] != loop.var),
                   ages=tuple(a for a in access.ages if a[0] != loop.var))


def in_flight_overlap(prior: Access, access: Access) -> bool:
    """Whether `prior`, in flight, may touch what `access` touches now: at the
    iterations its guards leave (`access`'s indices taken there)."""
    for var, value in prior.when:
        access = _map(access, lambda e: index_algebra.substitute(e, LOOP, var, value))
    return may_overlap(prior, access, same_point=True)


def _trips(loop: ir.ForLoop) -> int | None:
    start, stop = loop.start, loop.stop
    if all(isinstance(e, ir.Scalar) and e.kind is ir.ScalarKind.CONST for e in (start, stop)):
        return max(0, int(stop.value) - int(start.value))
    return None


def _set(ages: tuple[tuple[str, int], ...], var: str, age: int) -> tuple[tuple[str, int], ...]:
    return tuple(sorted({**dict(ages), var: age}.items()))


def _whole(access: Access, var: str) -> Access:
    view, region = access.view, access.region
    return replace(
        access, issued=access.issued or view, when=tuple(w for w in access.when if w[0] != var),
        view=view and ir.BufferView(view.buffer, transposed=view.transposed,
                                    storage=view.storage),
        region=region and GlobalBox(region.tensor, region.coords, None))


def _map(access: Access, f: Callable[[ir.ScalarExpr], ir.ScalarExpr]) -> Access:
    view, region = access.view, access.region
    if view is not None:
        part = view.part and replace(view.part, index=f(view.part.index))
        view = replace(view, stage=view.stage and f(view.stage), part=part)
    if region is not None:
        region = replace(region, coords=tuple(map(f, region.coords)))
    return replace(access, view=view, region=region, issued=access.issued or access.view)


def loop_variables(access: Access) -> set[str]:
    """The loop variables the access's indices name."""
    return _names(access, LOOP)


def _names(access: Access, kind: ir.ScalarKind) -> set[str]:
    view, region = access.view, access.region
    exprs = list(region.coords) if region is not None else []
    if view is not None:
        exprs += [e for e in (view.stage, view.part and view.part.index) if e is not None]
    return {n for e in exprs for n in index_algebra.names(e, kind)}
