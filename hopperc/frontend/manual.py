"""Hand-written synchronization primitives (manual code): arity and operands."""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.frontend import ast
from hopperc.frontend.copies import barrier_ref
from hopperc.frontend.scope import Scope, const_value, scalar_expr
from hopperc.ir import nodes as ir

# op -> number of operands
ARITY = {
    "fence.proxy.async": 0, "fence.mbarrier_init": 0,
    "mbarrier.init": 2, "mbarrier.arrive": 1, "mbarrier.expect_tx": 2,
    "mbarrier.wait": 2, "mbarrier.inval": 1,
    "bar.sync": 2, "wgmma.fence": 0, "wgmma.commit": 0, "wgmma.wait": 1,
    "bulk.commit": 0, "bulk.wait_read": 1, "bulk.wait": 1,
}
NAMED_BARRIERS = 16  # bar.sync ids 0..15


def lower_sync(stmt: ast.SyncStmt, scope: Scope, block_threads: int) -> ir.SyncStmt:
    if len(stmt.args) != ARITY[stmt.op]:
        n = ARITY[stmt.op]
        raise CompileError(stmt.span, f"'{stmt.op}' takes {n} operand{'s' * (n != 1)}, "
                                      f"not {len(stmt.args)}")
    args, span = stmt.args, stmt.span
    match stmt.op:
        case "fence.proxy.async":
            return ir.ProxyFence(span)
        case "fence.mbarrier_init":
            return ir.MBarrierInitFence(span)
        case "mbarrier.init":
            count = const_value(args[1], scope, "an mbarrier arrival count")
            if not 1 <= count < 2 ** 20:
                raise CompileError(args[1].span, f"arrival count {count} is out of range "
                                                 "(1 to 2^20 - 1)")
            return ir.MBarrierInit(barrier_ref(args[0], scope), count, span)
        case "mbarrier.arrive":
            return ir.MBarrierArrive(barrier_ref(args[0], scope), span)
        case "mbarrier.expect_tx":
            return ir.MBarrierExpectTx(barrier_ref(args[0], scope), scalar_expr(args[1], scope), span)
        case "mbarrier.wait":
            return ir.MBarrierWait(barrier_ref(args[0], scope), scalar_expr(args[1], scope), span)
        case "mbarrier.inval":
            return ir.MBarrierInval(barrier_ref(args[0], scope), span)
        case "bar.sync":
            bar_id = const_value(args[0], scope, "a barrier id")
            threads = const_value(args[1], scope, "a barrier thread count")
            if not 0 <= bar_id < NAMED_BARRIERS:
                raise CompileError(args[0].span, f"barrier id {bar_id} is out of range (0 to 15)")
            if threads % 32 or not 32 <= threads <= block_threads:
                raise CompileError(args[1].span, f"bar.sync needs a multiple of 32 threads up to "
                                                 f"the block's {block_threads}, not {threads}")
            return ir.NamedBarrier(bar_id, threads, span)
        case "wgmma.fence":
            return ir.WgmmaFence(span)
        case "wgmma.commit":
            return ir.WgmmaCommit(span)
        case "wgmma.wait":
            return ir.WgmmaWait(_pending(args[0], scope), span)
        case "bulk.commit":
            return ir.BulkCommit(span)
        case "bulk.wait_read":
            return ir.BulkWaitRead(_pending(args[0], scope), span)
        case "bulk.wait":
            return ir.BulkWaitRead(_pending(args[0], scope), span, read=False)
    raise CompileError(span, f"unknown primitive '{stmt.op}'")


def _pending(expr: ast.Expr, scope: Scope) -> int:
    value = const_value(expr, scope, "the number of pending groups")
    if not 0 <= value <= 7:
        raise CompileError(expr.span, f"pending group count {value} is out of range (0 to 7)")
    return value


def refuse_divergent_reduction(partials: ir.RowPartials, divergent: tuple[Span, str],
                               running: int) -> None:
    """A row reduction of a row-major tile stores every warp's partials and
    combines them after a barrier of all `running` threads, which the compiler
    writes (manual code too): it cannot run where the threads may go different
    ways (`divergent`: the span of a condition, loop or elect naming the thread,
    and which of those it is)."""
    span, what = divergent
    raise CompileError(partials.span, f"row{partials.op}({partials.tile}) combines the partials of "
                                      f"every warp after a barrier of all {running} threads, "
                                      "which the compiler writes; it cannot run inside the "
                                      f"{what} at line {span.line}, which the threads may take "
                                      "differently: reduce outside it")
