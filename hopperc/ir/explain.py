"""`hopperc explain`: what the compiler wrote around the kernel's code (the tile
loop of a persistent kernel, the turns of a pingpong one, the multicast loads
of a cluster, the rings pipelined in one role, the roles of a specialized one),
then every sync
the passes inserted, with its reason, in source order."""
from __future__ import annotations

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.printer import explain, statement
from hopperc.ir.raster import GROUP, ragged_walk, turn_warpgroups


def inserted_syncs(kernel: ir.Kernel) -> list[str]:
    found = [s for s in walk(kernel.body) if getattr(s, "reason", None) is not None]
    found.sort(key=lambda s: (s.span.line, s.span.col))
    return [f"{s.span.file}:{s.span.line}: {statement(s)}\n    why: "
            f"{s.reason.hazard.value}: {explain(s.reason)}" for s in found]


def schedule(kernel: ir.Kernel) -> list[str]:
    """The schedule the header asked for, as the compiler wrote it."""
    where = f"{kernel.span.file}:{kernel.span.line}"
    out = []
    if kernel.specialized:
        for p in kernel.pipelines:
            consumer = next(r for r in kernel.roles if r.name == p.consumer)
            out.append(f"{where}: specialize: role '{p.producer}' (one warp) issues the loads "
                       f"into {', '.join(p.buffers)}; role '{p.consumer}' ({consumer.warps // 4} "
                       f"warpgroups) runs the rest, through a {p.stages}-stage ring")
    size = kernel.cluster[0]
    if kernel.persistent and size > 1:
        out.append(f"{where}: persistent: cluster c takes runs of {size} tiles along "
                   f"{kernel.grid[0].name} c, c + clusters, ... (groups of {GROUP} rows of "
                   "runs), the block of rank r tile r of each run; each role's stage and phase "
                   "carry across tiles")
    elif kernel.persistent and ragged_walk(kernel.grid):
        slowest = kernel.grid[-1].name
        out.append(f"{where}: persistent over a ragged grid: each role counts the tiles (a "
                   f"loop over tile.{slowest}); block b takes tiles b, b + blocks, ... (every "
                   f"tile of {slowest} = 0 first, the first axis fastest), a cursor over "
                   f"tile.{slowest} moving forward to each; each role's stage and phase carry "
                   "across tiles")
    elif kernel.persistent:
        out.append(f"{where}: persistent: block b takes tiles b, b + blocks, ... (groups of "
                   f"{GROUP} rows of tiles); each role's stage and phase carry across tiles")
    for p in (p for p in kernel.pipelines if p.producer == p.consumer):
        who = f"role '{p.producer}'" if p.producer else "the block"
        out.append(f"{where}: pipelined in one role: {who} loads {', '.join(p.buffers)} "
                   f"(line {p.span.line}) {p.stages - 1} iteration"
                   f"{'s' if p.stages > 2 else ''} ahead of their reads through a "
                   f"{p.stages}-stage ring, one thread refilling each stage once its readers "
                   "released it")
    for load in (s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.multicast > 1):
        out.append(f"{where}: cluster: {load.tensor}'s loads into {load.dst.buffer} (line "
                   f"{load.span.line}) are multicast to the {load.multicast} blocks of each "
                   f"cluster, each block issuing {load.issued_box[0]} of the box's "
                   f"{load.box[0]} rows; each stage is released in every block at cluster "
                   "scope (the producer acquires at cluster scope), and the cluster meets after "
                   "the barrier setup and before exit")
    for load in (s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.unicast):
        out.append(f"{where}: cluster: {load.tensor}'s loads into {load.dst.buffer} (line "
                   f"{load.span.line}) are not multicast, each block loads its own: "
                   f"{load.unicast.because}, so they might not issue the same loads")
    for role in (s for s in kernel.body.stmts if isinstance(s, ir.RoleBlock)):
        turns = next((turn_warpgroups(s) for s in walk(role.body) if turn_warpgroups(s)), None)
        if turns:
            out.append(f"{where}: pingpong: role '{role.role.name}' takes tiles in turn, "
                       f"warpgroup w the tiles w, w + {turns}, ... of its block; each skips "
                       "the ring stages of the others' tiles, and named barriers hand the "
                       "tensor cores from one warpgroup's main loop to the next")
        for loop in (s for s in walk(role.body) if isinstance(s, ir.ForLoop) and s.turns):
            out.append(f"{where}: turns: in each iteration of the loop at line "
                       f"{loop.span.line}, the warpgroups of role '{role.role.name}' issue "
                       "their products in turn (warpgroup 0 first), handing the tensor cores on "
                       "with named barriers")
    return out
