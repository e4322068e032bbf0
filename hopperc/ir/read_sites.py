"""A ring read at several sites: the k-th read takes the k-th fill.

A consumer's read site of a ring is a run of its reads in one block, ended
where a read in another block (a loop's body) comes between. One site is the
usual hand-off (iteration i of the consumer's loop reads what iteration i of
the producer's loop filled). Several sites, as FlashAttention-3 reads K before
its key loop (S_0) and in it (S_j), and V in it (P_{j-1} V_{j-1}) and after it,
are read in program order: every execution of a site takes the next fill. A
site is straight-line code in one block (one read) or the body of a loop
directly in that block (one read per iteration), and the reads of all sites
must balance the producer's fills: its loop's trip count, compared
symbolically (`stop - start` of each loop, so a loop that would run a negative
number of times is outside what the comparison shows).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import groupby

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies
from hopperc.ir.handoffs import Path, Use, block_at, controls, shape
from hopperc.ir.index_algebra import difference
from hopperc.ir.printer import scalar
from hopperc.ir.raster import turn_warpgroups
from hopperc.ir.rewrite import at_stage, scalar_op


@dataclass(frozen=True)
class ReadSite:
    """One read site: the block at `path` and the reads in it (in order)."""

    path: Path
    uses: tuple[Use, ...]
    loop: ir.ForLoop | None = None  # a loop site: the loop whose body `path` is

    def reads(self) -> ir.ScalarExpr:
        """How many fills the site takes: 1, or the loop's trip count."""
        if self.loop is None:
            return ir.const(1)
        return scalar_op("-", self.loop.stop, self.loop.start)

    @property
    def line(self) -> int:
        return self.uses[0].access.span.line


def split_sites(consumer_uses: list[Use]) -> list[tuple[Use, ...]]:
    """The consumer's uses of a ring (in program order) grouped into sites."""
    return [tuple(group) for _, group in groupby(consumer_uses, key=lambda u: u.site)]


def read_sites(body: ir.Block, groups: list[tuple[Use, ...]], buffer: str,
               producer: ir.RoleBlock, p_site: Path) -> tuple[Path, list[ReadSite]]:
    """(the block holding the sites, the sites) of a ring read at several
    sites, checked: each site straight-line in that block or a loop's body
    directly in it, the block under the same loops and conditions as the
    producer's loop, and as many reads as fills."""
    first = groups[0][0]
    role = first.role.name
    paths = [g[0].site for g in groups]
    base = _common_prefix(paths)
    sites = []
    for group in groups:
        path = group[0].site
        loop = None
        if path != base:
            parent = block_at(body, path[:-1]).stmts[path[-1][0]] if path[:-1] == base else None
            if not isinstance(parent, ir.ForLoop):
                raise CompileError(group[0].access.span, _shape_error(buffer, role, paths))
            loop = parent
        sites.append(ReadSite(path, group, loop))
    p_controls = controls(producer.body, p_site)
    outer = controls(body, base)
    if not p_controls or not isinstance(p_controls[-1], ir.ForLoop):
        raise CompileError(first.access.span, f"role '{role}' reads '{buffer}' at "
                                              f"{len(sites)} sites, so role "
                                              f"'{producer.role.name}' fills it in a loop, "
                                              "one fill per iteration, that its reads take "
                                              "in turn")
    if any(turn_warpgroups(c) for c in outer):
        raise CompileError(first.access.span, f"role '{role}' reads '{buffer}' at several "
                                              "sites inside a pingpong turn; read it in one "
                                              "loop there")
    if [shape(c) for c in outer] != [shape(c) for c in p_controls[:-1]]:
        raise CompileError(first.access.span, f"role '{role}' reads '{buffer}' at several "
                                              "sites under other loops or conditions than "
                                              f"role '{producer.role.name}''s loop that fills "
                                              f"it (line {p_controls[-1].span.line}); the "
                                              "block holding the sites and that loop must "
                                              "sit in the same loops and conditions")
    _check_balance(buffer, role, sites, producer.role.name, p_controls[-1])
    return base, sites


def _check_balance(buffer: str, role: str, sites: list[ReadSite], producer: str,
                   loop: ir.ForLoop) -> None:
    reads = ir.const(0)
    for site in sites:
        reads = scalar_op("+", reads, site.reads())
    fills = scalar_op("-", loop.stop, loop.start)
    extra = difference(reads, fills)
    if extra == 0:
        return
    counts = " + ".join(_count(s) for s in sites)
    lines = ", ".join(str(s.line) for s in sites)
    where = sites[-1].uses[0].access.span
    if extra is None:
        raise CompileError(where, f"role '{role}' reads '{buffer}' {counts} times (sites at "
                                  f"lines {lines}) and role '{producer}' fills it "
                                  f"{scalar(fills)} times (line {loop.span.line}): the "
                                  "compiler cannot show these equal; the k-th read of a ring "
                                  "takes the k-th fill, so write the loops' bounds in the same "
                                  "terms, with as many reads as fills")
    more, then = ("more", "the last reads would wait for fills that never come") \
        if extra > 0 else ("fewer", "the last fills would never be read (and the producer "
                                    "may wait forever for their stages)")
    raise CompileError(where, f"role '{role}' reads '{buffer}' {counts} times (sites at lines "
                              f"{lines}), {abs(extra)} {more} than role '{producer}' fills it "
                              f"({scalar(fills)} times, line {loop.span.line}); the k-th read "
                              f"of a ring takes the k-th fill, so {then}")


def _count(site: ReadSite) -> str:
    text = scalar(site.reads())
    return f"({text})" if site.loop is not None and " " in text else text


def _common_prefix(paths: list[Path]) -> Path:
    prefix = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(prefix), len(path)) and prefix[n] == path[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def _shape_error(buffer: str, role: str, paths: list[Path]) -> str:
    return (f"role '{role}' reads '{buffer}' at {len(paths)} sites; a ring read at several "
            "sites is read in straight-line code of one block and in the bodies of loops "
            "directly in that block (the k-th read takes the k-th fill), not under an 'if' "
            "or a nested loop")


def previous_read(sites: list[ReadSite], index: int) -> ir.ScalarExpr | None:
    """Whether a read of the ring came before site `index` (None: never)."""
    ran: ir.ScalarExpr | None = None
    for site in sites[:index]:
        here = ir.const(1) if site.loop is None else \
            scalar_op(">", site.loop.stop, site.loop.start)
        ran = here if ran is None else either(ran, here)
    return ran


def either(a: ir.ScalarExpr | None, b: ir.ScalarExpr | None) -> ir.ScalarExpr | None:
    if a is None or b is None:
        return b if a is None else a
    if ir.const(1) in (a, b):
        return ir.const(1)
    return scalar_op("or", a, b)


def multi_site_buffers(found: list[Use]) -> dict[str, list[tuple[Use, ...]]]:
    """Buffers handed between roles that one role reads at several sites:
    buffer -> its site groups (the reference interpreter versions them by read)."""
    out = {}
    by_buffer: dict[str, list[Use]] = {}
    for use in found:
        by_buffer.setdefault(use.access.buffer, []).append(use)
    for name, buffer_uses in by_buffer.items():
        if len({u.role.name for u in buffer_uses}) != 2:
            continue
        readers = [u for u in buffer_uses if not u.access.write]
        groups = split_sites(readers)
        if len(groups) > 1 and len({u.role.name for u in readers}) == 1:
            out[name] = groups
    return out


# ---------------------------------------------------------------- the consumer's code
@dataclass(frozen=True)
class SiteRing:
    """How a consumer steps through a ring it reads at several sites: its own
    stage and phase registers, stepped at each read (after a straight-line
    site, at the end of each iteration of a loop site)."""

    buffers: tuple[str, ...]
    base: Path  # the block holding the straight-line sites and the loops
    sites: tuple[ReadSite, ...]
    advance: ir.StageAdvance
    deferred: bool  # wgmma readers, 2+ stages: release the previous read's stage at each read
    again: bool  # the sites run again (an outer loop): the last read's stage is released too

    @property
    def stage(self) -> ir.Scalar:
        return ir.Scalar(ir.ScalarKind.CARRIED, self.advance.stage)

    @property
    def phase(self) -> ir.Scalar:
        return ir.Scalar(ir.ScalarKind.CARRIED, self.advance.phase)

    @property
    def previous(self) -> ir.ScalarExpr:
        """The stage of the previous read (the register has stepped past it)."""
        n = self.advance.stages
        return scalar_op("%", scalar_op("+", self.stage, ir.const(n - 1)), ir.const(n))


def consume(stmts: tuple[ir.Stmt, ...], path: Path, ring: SiteRing, touches, wait,
            release) -> tuple[ir.Stmt, ...]:
    """`stmts` (the block at `path`) with the ring's waits, stages, releases and
    steps. `touches(stmt)`: whether it reads the ring; `wait(user)`: the wait
    for the current stage's fill before `user`; `release(stage, lag, last)`:
    the release of `stage`, read `lag` steps ago, last by `last`."""
    for index, site in enumerate(ring.sites):
        if site.loop is not None and site.path == path:
            stmts = _loop_site(stmts, ring, index, touches, wait, release)
    if path != ring.base:
        return stmts
    segments = _segments(stmts, touches)
    assert [isinstance(s, int) for s in segments] == [s.loop is not None for s in ring.sites]
    out: list[ir.Stmt] = []
    at = 0
    for index, segment in enumerate(segments):
        if isinstance(segment, int):  # the loop of a loop site
            out.extend(stmts[at:segment + 1])
            at = segment + 1
            if index == len(segments) - 1 and ring.again and ring.deferred:
                out.extend(_guarded(previous_read(list(ring.sites), len(ring.sites)),
                                    release(ring.previous, 1, ring.sites[index].uses[-1].leaf)))
            continue
        first, last = segment
        out.extend(stmts[at:first])
        out.append(wait(stmts[first]))
        out.extend(at_stage(s, ring.buffers, ring.stage) if touches(s) else s
                   for s in stmts[first:last + 1])
        # After the last read of sites that do not run again no fill follows: the
        # stages stay as they are (as a loop's last stage does).
        if index < len(segments) - 1 or ring.again:
            out.extend(_releases(ring, index, None, stmts[last], release))
            out.append(replace(ring.advance, span=stmts[first].span))
        at = last + 1
    out.extend(stmts[at:])
    return tuple(out)


def _loop_site(stmts, ring: SiteRing, index: int, touches, wait, release):
    reading = [i for i, s in enumerate(stmts) if touches(s)]
    first, last = reading[0], reading[-1]
    loop = ring.sites[index].loop
    later = scalar_op(">", ir.Scalar(ir.ScalarKind.LOOP, loop.var), loop.start)
    out = [*stmts[:first], wait(stmts[first])]
    out.extend(at_stage(s, ring.buffers, ring.stage) if touches(s) else s
               for s in stmts[first:last + 1])
    out.extend(_releases(ring, index, later, stmts[last], release))
    out.extend(stmts[last + 1:])
    return (*out, replace(ring.advance, span=loop.span))


def _releases(ring: SiteRing, index: int, later, last: ir.Stmt, release) -> list[ir.Stmt]:
    """After a site's reads: element-wise readers (or one stage) release the
    stage they read; wgmma readers the previous read's (its products are
    older, the wait pass completes them first), and, where the sites run
    again, the last site its own stage too."""
    if not ring.deferred:
        return [release(ring.stage, 0, last)]
    out = _guarded(either(previous_read(list(ring.sites), index), later),
                   release(ring.previous, 1, last))
    if index == len(ring.sites) - 1 and ring.again and later is None:
        out.append(release(ring.stage, 0, last))
    return out


def _guarded(cond: ir.ScalarExpr | None, stmt: ir.Stmt) -> list[ir.Stmt]:
    if cond is None:
        return []
    if cond == ir.const(1):
        return [stmt]
    return [ir.IfThen(cond, ir.Block((stmt,)), ir.Block(), stmt.span)]


def _segments(stmts: tuple[ir.Stmt, ...], touches) -> list:
    """The straight-line sites ((first, last) statement indices) and loop sites
    (the loop's index) of the block holding them, in order."""
    out: list = []
    for i, stmt in enumerate(stmts):
        if not touches(stmt):
            continue
        if bodies(stmt):
            out.append(i)
        elif out and isinstance(out[-1], tuple):
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out
