"""pipeline_one_role_rings

Requires: rings handed between roles connected (connect_role_pipelines).
Establishes: a ring (a buffer with `stages` S > 1) that one role both loads
and reads, in one loop whose body loads it first and reads it after, is
software-pipelined in that role. Before the loop, the role's one thread issues
the loads of the first S - 1 iterations; in iteration k, after the reads of
stage k % S and their release, it issues the loads of iteration k + S - 1
into the stage iteration k - 1 read. Stage and phase are a pipeline's: a full
barrier per stage (the issuer's arrive.expect_tx of all the iteration's
bytes) that the readers wait for, an empty barrier per stage that every
reading warp (wgmma readers, after the batch that read it completed: the
previous iteration's stage, and the last one after the loop) or thread
(element-wise readers) releases, and that the issuer waits for before it
refills the stage, with a proxy fence first where the readers used ld.shared.
These loads are ordered against the readers by those barriers alone, as a
producer role's are (`AsyncLoad.ahead`): the passes that order a role's own
accesses leave them, and the arms of the ring's full barriers, out.

Hardware rule: a TMA load completes only on an mbarrier, and overwrites its
stage only safely once every reader is done with it: the empty barrier's phase
completes when the last reading warp arrives, each after wgmma.wait_group (or
its last ld.shared) for that stage; the issuer's wait then orders the refill
after every read (PTX ISA, mbarrier, cp.async.bulk.tensor, wgmma.wait_group).
A load issued S - 1 iterations ahead overlaps S - 1 iterations of the reads.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Proxy, leaf_accesses, leaves, walk
from hopperc.ir.handoffs import check_same_stages
from hopperc.ir.rewrite import at_stage, fresh_name, map_bodies, scalar_op


def pipeline_one_role_rings(kernel: ir.Kernel) -> ir.Kernel:
    rings = {b.name for b in kernel.buffers if b.stages > 1}
    if not any(isinstance(s, ir.AsyncLoad) and s.barrier is None and s.dst.buffer in rings
               for s in walk(kernel.body)):
        return kernel
    rewriter = _Rings(kernel, rings)
    body: list[ir.Stmt] = []
    for stmt in kernel.body.stmts:
        rewriter.role = stmt.role if isinstance(stmt, ir.RoleBlock) else None
        if isinstance(stmt, ir.RoleBlock):
            body.append(replace(stmt, body=rewriter.block(stmt.body)))
        else:
            body.extend(rewriter.block(ir.Block((stmt,))).stmts)
    piped = {b for p in rewriter.pipelines for b in p.buffers}
    for stmt in walk(ir.Block(tuple(body))):
        for access in leaf_accesses(stmt):
            if access.buffer in piped and access.view.stage is None:
                raise CompileError(access.span, f"'{access.buffer}' is a ring filled one stage "
                                                "per iteration of the loop that loads it; use "
                                                "it only inside that loop")
    return replace(kernel, body=ir.Block(tuple(body)), barriers=kernel.barriers + rewriter.arrays,
                   carried=kernel.carried + rewriter.carried,
                   pipelines=kernel.pipelines + rewriter.pipelines)


class _Rings:
    def __init__(self, kernel: ir.Kernel, rings: set[str]):
        self.kernel = kernel
        self.rings = rings
        self.role: ir.RoleInfo | None = None
        self.depth = 0  # loops around the one being rewritten
        self.taken = {b.name for b in kernel.barriers} | {b.name for b in kernel.buffers} | \
            set(kernel.carried)
        self.arrays: tuple[ir.MBarrierArray, ...] = ()
        self.carried: tuple[str, ...] = ()
        self.pipelines: tuple[ir.Pipeline, ...] = ()

    def block(self, block: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for stmt in block.stmts:
            if isinstance(stmt, ir.ForLoop) and self._ring_loads(stmt.body):
                out.extend(self.pipeline(stmt))
                continue
            if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is None and \
                    stmt.dst.buffer in self.rings:
                raise _outside_loop(stmt, self.kernel.buffer(stmt.dst.buffer).stages)
            if isinstance(stmt, ir.ManualRegion):
                out.append(stmt)
                continue
            self.depth += isinstance(stmt, ir.ForLoop)
            out.append(map_bodies(stmt, self.block))
            self.depth -= isinstance(stmt, ir.ForLoop)
        return ir.Block(tuple(out))

    def _ring_loads(self, body: ir.Block) -> list[ir.AsyncLoad]:
        return [s for s in body.stmts if isinstance(s, ir.AsyncLoad) and s.barrier is None
                and s.dst.buffer in self.rings]

    # ------------------------------------------------------------ one loop
    def pipeline(self, loop: ir.ForLoop) -> list[ir.Stmt]:
        stmts = loop.body.stmts
        loads = self._ring_loads(loop.body)
        buffers = tuple(dict.fromkeys(load.dst.buffer for load in loads))
        reads = [i for i, s in enumerate(stmts) if _reads(s, buffers)]
        _check(loop, loads, buffers, reads, self.kernel)
        again_in = next((b for p in self.pipelines for b in p.buffers if b in buffers), None)
        if again_in is not None:  # its first fills would not wait for the other loop's reads
            raise CompileError(loads[0].span, f"'{again_in}' is a ring of an earlier loop; a "
                                              "ring loaded and read by one role is filled by "
                                              "one loop")
        stages = self.kernel.buffer(buffers[0]).stages
        name = fresh_name(f"{self.role.name}_ring" if self.role else "ring", self.taken)
        full, empty = (fresh_name(f"{name}_{x}", self.taken) for x in ("full", "empty"))
        readers = [stmts[i] for i in reads]
        per_warp = all(isinstance(s, ir.Mma) for s in readers)
        warps = self.role.active_warps if self.role else self.kernel.threads // 32
        nbytes = sum(load.nbytes for load in loads)
        pipe = ir.Pipeline(name, self._role_name(), self._role_name(), buffers, stages, full, empty,
                           warps * (1 if per_warp else 32), nbytes, loads[0].span)
        ps, pph, cs, cph = (fresh_name(f"{name}_{x}", self.taken)
                            for x in ("load_stage", "load_phase", "read_stage", "read_phase"))
        self.arrays += (ir.MBarrierArray(full, stages, loads[0].span, 1),
                        ir.MBarrierArray(empty, stages, loads[0].span, pipe.consumer_arrivals))
        self.carried += (ps, pph, cs, cph)
        self.pipelines += (pipe,)
        var = ir.Scalar(ir.ScalarKind.LOOP, loop.var)
        generic = next((a for s in readers for leaf in leaves(s) for a in leaf_accesses(leaf)
                        if a.buffer in buffers and a.proxy is Proxy.GENERIC), None)
        issue = _Issue(pipe, loads, ps, pph, generic, readers[0], var)

        # Iterations start .. start + S - 2 are loaded before the loop. Unless
        # the loop runs again (inside another loop), those are each stage's
        # first fill, which waits for no release, and no stage is refilled after
        # the loop, so its last stage is not released.
        again = self.depth > 0
        ahead = scalar_op("+", loop.start, ir.const(stages - 1))
        prologue = ir.ForLoop(loop.var, loop.start, ahead, ir.Block((ir.IfThen(
            ir.ScalarOp("<", var, loop.stop), issue.block(var, again), ir.Block(), loop.span),)),
            loop.span)
        stage, parity = ir.Scalar(ir.ScalarKind.CARRIED, cs), ir.Scalar(ir.ScalarKind.CARRIED, cph)
        previous = scalar_op("%", scalar_op("+", stage, ir.const(stages - 1)), ir.const(stages))
        first, last = reads[0], reads[-1]
        wait = ir.MBarrierWait(ir.BarrierRef(full, stage), parity, stmts[first].span, ir.Reason(
            ir.Hazard.ASYNC_WRITE_READ, ", ".join(buffers), "written by async loads ahead",
            loads[0].span, _what(stmts[first]), stmts[first].span))
        body: list[ir.Stmt] = []
        loaded = {id(load) for load in loads}
        for i, stmt in enumerate(stmts):
            if id(stmt) in loaded:
                continue
            if i == first:
                body.append(wait)
            body.append(at_stage(stmt, buffers, stage))
            if i == last:
                if per_warp:  # the previous iteration's batch completes after this one's issue
                    body.append(ir.IfThen(ir.ScalarOp(">", var, loop.start), ir.Block((
                        _release(pipe, previous, 1, stmt, loads[0], True),)), ir.Block(),
                        stmt.span))
                else:
                    body.append(_release(pipe, stage, 0, stmt, loads[0], False))
                later = scalar_op("+", var, ir.const(stages - 1))
                body.append(ir.IfThen(ir.ScalarOp("<", later, loop.stop), issue.block(later),
                                      ir.Block(), loads[0].span))
        body.append(ir.StageAdvance(cs, cph, stages, loop.span))
        out = [prologue, replace(loop, body=ir.Block(tuple(body)))]
        if per_warp and again:  # the last iteration's stage, once its batch completed
            out.append(ir.IfThen(ir.ScalarOp(">", loop.stop, loop.start), ir.Block((
                _release(pipe, previous, 0, stmts[last], loads[0], True),)), ir.Block(),
                stmts[last].span))
        return out

    def _role_name(self) -> str:
        return self.role.name if self.role else ""


class _Issue:
    """The one thread's refill of a stage: wait until every reader released it,
    fence after ld.shared readers, arm the full barrier, load."""

    def __init__(self, pipe: ir.Pipeline, loads: list[ir.AsyncLoad], stage: str, phase: str,
                 generic, reader: ir.Stmt, var: ir.Scalar):
        self.pipe, self.loads, self.generic, self.reader = pipe, loads, generic, reader
        self.stage, self.phase, self.var = stage, phase, var

    def block(self, iteration: ir.ScalarExpr, refill: bool = True) -> ir.Block:
        """The loads of `iteration`; `refill` False: the stage's first fill."""
        p, first = self.pipe, self.loads[0]
        stage = ir.Scalar(ir.ScalarKind.CARRIED, self.stage)
        full = ir.BarrierRef(p.full, stage)
        subject = ", ".join(p.buffers)
        head: list[ir.Stmt] = [ir.MBarrierWait(
            ir.BarrierRef(p.empty, stage),
            ir.ScalarOp("-", ir.const(1), ir.Scalar(ir.ScalarKind.CARRIED, self.phase)),
            first.span, ir.Reason(ir.Hazard.STAGE_HANDOFF, subject, "stage released by its readers",
                                  self.reader.span, "refilled ahead", first.span))] if refill else []
        if self.generic is not None and refill:
            head.append(ir.ProxyFence(first.span, ir.Reason(
                ir.Hazard.GENERIC_READ_ASYNC_WRITE, self.generic.buffer, self.generic.what,
                self.generic.span, f"overwritten by {first.engine.label} load", first.span)))
        head.append(ir.MBarrierExpectTx(full, ir.const(p.tx_bytes), first.span, ir.Reason(
            ir.Hazard.ASYNC_WRITE_READ, subject, f"{p.tx_bytes} bytes written by async loads",
            first.span, "awaited by their readers", self.reader.span)))
        loads = [replace(load, dst=replace(load.dst, stage=stage), barrier=full,
                         coords=tuple(_substitute(c, self.var, iteration) for c in load.coords),
                         ragged=load.ragged and replace(load.ragged, end=_substitute(
                             load.ragged.end, self.var, iteration)),
                         ahead=p.stages - 1) for load in self.loads]
        return ir.Block((ir.OneThread(ir.Block((*head, *loads)), first.span),
                         ir.StageAdvance(self.stage, self.phase, p.stages, first.span)))


def _substitute(expr: ir.ScalarExpr, var: ir.Scalar, value: ir.ScalarExpr) -> ir.ScalarExpr:
    """`expr` with the loop variable `var` replaced by `value`."""
    if expr == var:
        return value
    return ir.with_operands(expr, lambda operand: _substitute(operand, var, value))


def _release(pipe: ir.Pipeline, stage: ir.ScalarExpr, lag: int, reader: ir.Stmt,
             load: ir.AsyncLoad, per_warp: bool) -> ir.Stmt:
    reason = ir.Reason(ir.Hazard.STAGE_HANDOFF, ", ".join(pipe.buffers), _what(reader),
                       reader.span, "refilled ahead", load.span)
    release = ir.StageRelease(pipe.name, ir.BarrierRef(pipe.empty, stage), lag, reader.span,
                              reason)
    return ir.ElectLane(ir.Block((release,)), reader.span) if per_warp else release


def _reads(stmt: ir.Stmt, buffers: tuple[str, ...]) -> bool:
    return any(a.buffer in buffers and not a.write for leaf in leaves(stmt)
               for a in leaf_accesses(leaf))


def _what(stmt: ir.Stmt) -> str:
    return "read by wgmma" if isinstance(stmt, ir.Mma) else "read by ld.shared"


def _check(loop: ir.ForLoop, loads: list[ir.AsyncLoad], buffers: tuple[str, ...],
           reads: list[int], kernel: ir.Kernel) -> None:
    stmts = loop.body.stmts
    loaded = {id(load) for load in loads}
    last_load = max(i for i, s in enumerate(stmts) if id(s) in loaded)
    if not reads or reads[0] < last_load:
        raise CompileError(loads[0].span, f"a ring loaded and read by one role is pipelined "
                                          f"when one loop's body loads '{buffers[0]}' first and "
                                          "reads it after, at the top level of the body")
    check_same_stages(kernel, buffers, "loaded")
    for stmt in (s for s in stmts if id(s) not in loaded):
        nested = any(isinstance(s, ir.AsyncLoad) and s.dst.buffer in buffers
                     for s in walk(ir.Block((stmt,))))
        writes = any(a.buffer in buffers and a.write for leaf in leaves(stmt)
                     for a in leaf_accesses(leaf))
        if nested or writes or (isinstance(stmt, (ir.IfThen, ir.ForLoop)) and _reads(stmt, buffers)):
            raise CompileError(stmt.span, f"a ring loaded and read by one role is pipelined when "
                                          f"its loop's body reads '{buffers[0]}' in statements of "
                                          "its own, not inside a nested loop or condition, and "
                                          "never writes it")
    if len({s.dst.buffer for s in loads}) != len(loads):
        raise CompileError(loads[-1].span, "each stage of a ring is loaded once per iteration")


def _outside_loop(load: ir.AsyncLoad, stages: int) -> CompileError:
    return CompileError(load.span, f"'{load.dst.buffer}' has {stages} stages, so it is filled "
                                   "one stage per iteration of a loop whose body loads it "
                                   "first, in statements of its own, and reads it after; this "
                                   "load is not one of those (or use stages 1)")
