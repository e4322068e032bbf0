"""The shared buffers one role fills with async loads and another reads: where
each side uses them (checked), and how they split into rings.

A hand-off is every buffer one producer role loads, and one consumer role
reads, in the same pair of loops. It splits into rings, each with its own full
and empty barriers, where the consumer has other work between the first reads
of two buffers: a wait for a full stage gates everything after it, so a buffer
read after the softmax (V in attention) gets a barrier of its own and the
softmax runs while it arrives, instead of the first read waiting for every
buffer of the iteration. Buffers first read by wgmma issued back to back stay
in one ring (the tensor cores would wait for the later one anyway).
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, Proxy, bodies, leaf_accesses, leaves

Path = tuple[tuple[int, int], ...]  # (statement index, body index) from the role body


@dataclass(frozen=True)
class Use:
    role: ir.RoleInfo
    site: Path  # the block holding the leaf
    top: int  # the index of the role-level statement holding the leaf
    leaf: ir.Stmt
    access: Access


def uses(role: ir.RoleBlock) -> list[Use]:
    """Every buffer access of `role`'s code (manual code excluded)."""
    out: list[Use] = []

    def visit(block: ir.Block, path: Path, top: int | None) -> None:
        for i, stmt in enumerate(block.stmts):
            for b, body in enumerate(bodies(stmt)):
                if not isinstance(stmt, ir.ManualRegion):
                    visit(body, path + ((i, b),), i if top is None else top)
            if not bodies(stmt):
                out.extend(Use(role.role, path, i if top is None else top, stmt, a)
                           for a in leaf_accesses(stmt))

    visit(role.body, (), None)
    return out


def sides(name: str, role_names: list[str], buffer_uses: list[Use]) -> tuple[list[Use], list[Use]]:
    """(producer uses, consumer uses) of a buffer two roles share, checked."""
    loaders = [n for n in role_names if any(u.role.name == n and u.access.proxy is Proxy.ASYNC
                                            and u.access.write for u in buffer_uses)]
    if len(role_names) > 2 or len(loaders) != 1:
        first = buffer_uses[0]
        raise CompileError(first.access.span, f"'{name}' is used by roles "
                                              f"{', '.join(repr(n) for n in role_names)}; a "
                                              "buffer handed between roles is filled by one role "
                                              "with tma/bulk loads and read by one other role")
    producer = [u for u in buffer_uses if u.role.name == loaders[0]]
    consumer = [u for u in buffer_uses if u.role.name != loaders[0]]
    for u in producer:
        if not isinstance(u.leaf, ir.AsyncLoad):
            raise CompileError(u.access.span, f"role '{u.role.name}' fills '{name}' with async "
                                              f"loads for role '{consumer[0].role.name}', so it "
                                              "may not also access it otherwise")
    for u in consumer:
        if u.access.write or isinstance(u.leaf, ir.AsyncStore):
            raise CompileError(u.access.span, f"role '{u.role.name}' reads '{name}' from role "
                                              f"'{producer[0].role.name}'; it may "
                                              "read it with wgmma or element-wise code, not "
                                              "write it or store it with TMA")
    # The consumer may read it at several sites (ir/read_sites), the producer loads it in one.
    if any(u.site != producer[0].site for u in producer):
        other = next(u for u in producer if u.site != producer[0].site)
        raise CompileError(other.access.span, f"'{name}' is loaded in two places of role "
                                              f"'{other.role.name}'; a buffer handed between "
                                              "roles is loaded once per iteration of one loop")
    if len(producer) > 1:
        raise CompileError(producer[1].access.span, f"'{name}' is loaded twice per iteration; each "
                                                 "stage of a handed-over buffer is loaded once")
    return producer, consumer


def controls(body: ir.Block, site: Path) -> list[ir.ForLoop | ir.IfThen]:
    """The loops and conditions from a role's body down to the block at `site`."""
    out, block = [], body
    for index, branch in site:
        stmt = block.stmts[index]
        out.append(stmt)
        block = bodies(stmt)[branch]
    return out


def shape(control: ir.ForLoop | ir.IfThen) -> tuple:
    """What two roles' loops or conditions must share to run in step."""
    if isinstance(control, ir.ForLoop):
        return ("for", control.start, control.stop)
    return ("if", control.cond)


def block_at(body: ir.Block, site: Path) -> ir.Block:
    block = body
    for index, branch in site:
        block = bodies(block.stmts[index])[branch]
    return block


def rings(buffers: list[str], consumer: ir.Block, producer: ir.Block) -> list[tuple[str, ...]]:
    """`buffers` (one hand-off) in rings, in the order the consumer first reads
    them: a ring ends where the consumer runs anything but wgmma issue (and
    the declarations of their accumulators) from one buffer's first read up
    to the next one's. Rings whose loads the producer interleaves are merged, since one
    issue arms a ring's barrier for all its loads."""
    first = {b: _first_touch(consumer, b) for b in buffers}
    order = sorted(buffers, key=lambda b: first[b])
    groups = [[order[0]]]
    for previous, name in zip(order, order[1:]):
        # From the previous first read (an element-wise read is work too) up to this one.
        between = consumer.stmts[first[previous]:first[name]]
        if any(not _issues_wgmma(s) for s in between):
            groups.append([name])
        else:
            groups[-1].append(name)
    loads = {b: _first_touch(producer, b) for b in buffers}
    merged: list[list[str]] = []
    for group in sorted(groups, key=lambda g: min(loads[b] for b in g)):
        if merged and min(loads[b] for b in group) < max(loads[b] for b in merged[-1]):
            merged[-1].extend(group)
        else:
            merged.append(list(group))
    merged.sort(key=lambda g: min(first[b] for b in g))
    return [tuple(sorted(g, key=lambda b: first[b])) for g in merged]


def touches(stmt: ir.Stmt, buffers: tuple[str, ...] | list[str]) -> bool:
    """Whether `stmt` (or a statement in it) accesses one of `buffers`."""
    return any(a.buffer in buffers for leaf in leaves(stmt) for a in leaf_accesses(leaf))


def _first_touch(block: ir.Block, buffer: str) -> int:
    return next(i for i, s in enumerate(block.stmts) if touches(s, (buffer,)))


def _issues_wgmma(stmt: ir.Stmt) -> bool:
    return isinstance(stmt, ir.Mma) or (isinstance(stmt, ir.TileDef) and stmt.init is None)


def check_same_stages(kernel: ir.Kernel, buffers: tuple[str, ...] | list[str], how: str) -> int:
    """The rings `buffers`, filled in one loop, share its stage index: one `stages`.
    Where they differ, the error is at the declaration of a buffer that departs from
    the count most of them have, naming one that has it."""
    decls = [kernel.buffer(b) for b in buffers]
    counts = [d.stages for d in decls]
    common = max(counts, key=lambda n: (counts.count(n), -counts.index(n)))
    odd = next((d for d in decls if d.stages != common), None)
    if odd is not None:
        usual = next(d for d in decls if d.stages == common)
        raise CompileError(odd.span, f"'{odd.name}' has stages {odd.stages} but "
                                     f"'{usual.name}' (line {usual.span.line}) has stages "
                                     f"{common}, and both are {how} in the same loop; rings "
                                     "of one loop share its stage index: give them the same "
                                     "'stages'")
    return common


def check_reused_memory(kernel: ir.Kernel, uses: list[Use],
                        rings: list[tuple[ir.Pipeline, tuple[Use, ...]]]) -> None:
    """A buffer placed in another's memory is used by one role; in a pipelined
    buffer's memory, by the consumer after the loop that reads the pipeline
    (then the producer is done with it and the passes order the consumer), and
    never in a persistent kernel, whose producer refills the ring for the next
    tile while a tile's epilogue runs."""
    for buf in kernel.buffers:
        if buf.reuses is None:
            continue
        mine = [u for u in uses if u.access.buffer == buf.name]
        if not mine:
            continue
        ring = next((r for r in rings if buf.reuses in r[0].buffers), None)
        # Every buffer in that memory counts: the one reused and the others reusing it.
        sharers = [u for u in uses if u.access.memory == buf.reuses]
        last_read = max((u.top for u in ring[1]), default=-1) if ring else -1
        for u in mine:
            if ring is not None and kernel.persistent:
                raise CompileError(u.access.span, f"'{buf.name}' reuses the memory of pipelined "
                                                  f"'{buf.reuses}', which the producer refills "
                                                  "for the next tile while this tile's "
                                                  f"epilogue runs: give '{buf.name}' memory of "
                                                  "its own")
            other = next((v for v in sharers if v.role.name != u.role.name), None)
            if ring is None and other is not None:
                raise CompileError(u.access.span, f"'{buf.name}' reuses the memory of "
                                                  f"'{buf.reuses}', which role "
                                                  f"'{other.role.name}' uses (as "
                                                  f"'{other.access.buffer}'); reuse memory within "
                                                  "one role")
            if ring is not None and (u.role.name != ring[0].consumer or u.top <= last_read):
                raise CompileError(u.access.span, f"'{buf.name}' reuses the memory of pipelined "
                                                  f"'{buf.reuses}': use it in role "
                                                  f"'{ring[0].consumer}' after the loop that "
                                                  f"reads '{buf.reuses}'")
