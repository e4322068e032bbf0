"""The readable text form of the IR (`hopperc emit --ir`).

One statement a line, nested blocks indented, each inserted sync followed by
`# why: ...`, each statement ending with its source location.
"""
from __future__ import annotations

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies

_PRECEDENCE = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "//": 5, "%": 5}


def scalar(expr: ir.ScalarExpr, parent: int = 0) -> str:
    if isinstance(expr, ir.Scalar):
        match expr.kind:
            case ir.ScalarKind.CONST:
                return str(expr.value)
            case ir.ScalarKind.TILE:
                return f"tile.{expr.name}"
        return expr.name
    if isinstance(expr, ir.TensorElement):
        return f"{expr.tensor}[{', '.join(scalar(i) for i in expr.indices)}]"
    if expr.op == "not":
        return f"not {scalar(expr.left, 6)}"
    if expr.op in ("min", "max"):
        return f"{expr.op}({scalar(expr.left)}, {scalar(expr.right)})"
    prec = _PRECEDENCE[expr.op]
    text = f"{scalar(expr.left, prec)} {expr.op} {scalar(expr.right, prec + 1)}"
    return f"({text})" if prec < parent else text


def view(v: ir.BufferView) -> str:
    text = v.buffer + (f"(in {v.storage})" if v.storage else "")
    if v.stage is not None:
        text += f"{{stage {scalar(v.stage)}}}"
    if v.part is not None:
        text += f"[{scalar(v.part.index)} of {v.part.count}{' columns' if v.part.columns else ''}]"
    return text + ("^T" if v.transposed else "")


def tile(expr: ir.TileExpr) -> str:
    match expr:
        case ir.TileRef(name=name, columns=None):
            return name
        case ir.TileRef(name=name, columns=(start, stop)):
            return f"{name}[:, {start}:{stop}]"
        case ir.SharedRead(view=v, broadcast=str() as axis, elements=elements):
            part = "" if elements is None else f"[{elements[0]}:{elements[1]}]"
            return f"ld.shared({view(v)}{part}) per {axis[:-1]}"
        case ir.SharedRead(view=v):
            return f"ld.shared({view(v)})"
        case ir.GlobalVector(tensor=t, start=start, axis=axis):
            return f"{t}[{scalar(start)} ..] per {axis[:-1]}"
        case ir.Literal(value=value):
            return f"{value:g}"
        case ir.ScalarValue(expr=e):
            return scalar(e)
        case ir.Convert(dtype=dtype, operand=operand):
            return f"{dtype}({tile(operand)})"
        case ir.Elementwise(op=op, args=(a, b)) if op in INFIX:
            return f"({tile(a)} {op} {tile(b)})"
        case ir.ElementIndex(axis=axis):
            return f"{axis}()"
        case ir.RowReduce(name=name, partials=None):
            return f"{expr.function}({name})"
        case ir.RowReduce(op=op, partials=partials):
            return f"{op} over warps of {view(partials)}[:, row]"
        case ir.ThreadRowSum(name=name):
            return f"thread_rowsum({name})"
        case ir.RowPartsSum(name=name):
            return f"quad_sum({name})"
        case ir.RowValues(name=name):
            return f"{name}[:, None]"
        case ir.Elementwise(op=op, args=args):
            return f"{op}({', '.join(tile(a) for a in args)})"
    raise TypeError(expr)


INFIX = ("+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">=")


def barrier(ref: ir.BarrierRef) -> str:
    return f"{ref.array}[{scalar(ref.index)}]"


def explain(reason: ir.Reason | None) -> str:
    """`sc written by st.shared (k.hk:31), read by TMA store (k.hk:33)`."""
    if reason is None:
        return ""
    before = f" ({_loc(reason.before_span)})" if reason.before_span else ""
    after = f" ({_loc(reason.after_span)})" if reason.after_span else ""
    return f"{reason.subject} {reason.before}{before}, {reason.after}{after}"


def _loc(span) -> str:
    return f"{span.file.rsplit('/', 1)[-1]}:{span.line}"


def statement(stmt: ir.Stmt) -> str:
    """The head line of a statement (without nested blocks)."""
    match stmt:
        case ir.RoleBlock(role=r):
            regs = f" regs {r.regs}" if r.regs else ""
            return f"role {r.name} warps {r.first_warp}..{r.first_warp + r.warps - 1}{regs}:"
        case ir.ForLoop(var=var, start=start, stop=stop, turns=turns, split=split):
            head = f"for {var} in {scalar(start)} .. {scalar(stop)}{' turns' if turns else ''}:"
            if split is None:
                return head
            part = "interior" if split.interior else "boundary"
            return f"{head}  ({part} of {scalar(split.start)} .. {scalar(split.stop)})"
        case ir.IfThen(cond=cond):
            return f"if {scalar(cond)}:"
        case ir.OneThread(per_warpgroup=True):
            return "one_thread per warpgroup:"
        case ir.OneThread():
            return "one_thread:"
        case ir.ElectLane():
            return "elect:"
        case ir.TakeTile(index=index, walk=None):
            return f"take tile {scalar(index)}"
        case ir.TakeTile(index=index, walk=walk):
            return f"take tile {scalar(index)} walking tile.{walk.slowest}"
        case ir.StartTileWalk(walk=walk):
            return f"start walk over tile.{walk.slowest}"
        case ir.ManualRegion():
            return "manual:"
        case ir.AsyncLoad(engine=e, dst=dst, tensor=t, coords=c, nbytes=n, barrier=b):
            via = f" on {barrier(b)}" if b else ""
            if stmt.multicast > 1:
                via += (f", multicast to {stmt.multicast} blocks (each issues "
                        f"{stmt.issued_box[0]} rows)")
            elif stmt.unicast is not None:
                via += f", each block's own ({stmt.unicast.because})"
            return f"{e.value}.load {view(dst)} <- {t}[{_coords(stmt)}] ({n} B){via}"
        case ir.AsyncStore(engine=e, tensor=t, src=src):
            arrow = "+=" if stmt.reduce_add else "<-"
            return f"{e.value}.{stmt.verb} {t}[{_coords(stmt)}] {arrow} {view(src)}"
        case ir.TileDef(name=name, dtype=dtype, shape=shape, layout=layout, init=init):
            value = "undefined" if init is None else tile(init)
            return f"{name}: {dtype}{list(shape)} {layout.value} = {value}"
        case ir.TileAssign(name=name, value=value):
            return f"{name} = {tile(value)}"
        case ir.SharedStore(dst=dst, value=value, row_layout=None):
            return f"st.shared {view(dst)} = {tile(value)}"
        case ir.SharedStore(dst=dst, value=value):
            return f"st.shared {view(dst)} = {tile(value)} (one lane per row)"
        case ir.GlobalRowStore(tensor=t, index=index, start=start, end=end, value=value,
                               columns=columns, row_start=row_start,
                               row_end=row_end) if columns:
            lead = "".join(f"{scalar(i)}, " for i in index)
            return (f"red.global.add {t}[{lead}{scalar(row_start)} : {scalar(row_end)}, "
                    f"{scalar(start)} : {scalar(end)}] += {tile(value)} (pairs of columns "
                    "per thread)")
        case ir.GlobalRowStore(tensor=t, index=index, start=start, end=end, value=value,
                               atomic=atomic):
            until = "" if end is None else f" : {scalar(end)}"
            lead = "".join(f"{scalar(i)}, " for i in index)
            op, what = ("red.global.add", "+=") if atomic else ("st.global", "=")
            return (f"{op} {t}[{lead}{scalar(start)}{until}] {what} {tile(value)} "
                    "(one lane per row)")
        case ir.RowPartials(op=op, tile=name, partials=partials):
            return f"st.shared {view(partials)}[warp, row] = row{op}({name}) of the warp's elements"
        case ir.Mma(acc=acc, a=a, b=b, accumulate=acc_flag, shape=(m, n, k), overwrite_when=w):
            lhs = a.name if isinstance(a, ir.TileRef) else view(a)
            when = "" if w is None else f", overwrites when {scalar(w)}"
            return (f"wgmma {acc} {'+=' if acc_flag else '='} {lhs} @ {view(b)} "
                    f"(m{m}n{n}k{k}{when})")
        case ir.PhaseFlip(phase=phase):
            return f"flip {phase}"
        case ir.StageAdvance(stage=stage, phase=phase, stages=n, by=None):
            return f"advance {stage} mod {n} (flip {phase} on wrap)"
        case ir.StageAdvance(stage=stage, phase=phase, stages=n, by=by):
            return f"advance {stage} by {scalar(by)} mod {n} (flip {phase} per wrap)"
        case ir.StageRelease(barrier=b, lag=lag, blocks=1):
            return f"mbarrier.arrive {barrier(b)}  (release stage, lag {lag})"
        case ir.StageRelease(barrier=b, lag=lag, blocks=n, scope=scope):
            sem = ".release.cluster" if scope is ir.MemoryScope.CLUSTER else ""
            return (f"mbarrier.arrive{sem} {barrier(b)} in each of {n} blocks  (release stage, "
                    f"lag {lag})")
        case ir.ClusterBarrier():
            return "barrier.cluster.arrive.release + barrier.cluster.wait.acquire"
        case ir.SetMaxRegisters(regs=regs, increase=inc):
            return f"setmaxnreg.{'inc' if inc else 'dec'} {regs}"
        case ir.ProxyFence(cluster=True):
            return "fence.proxy.async.shared::cluster"
        case ir.ProxyFence():
            return "fence.proxy.async.shared::cta"
        case ir.NamedBarrier(id=i, threads=t, per_warpgroup=True):
            return f"bar.sync {i} + wg, {t}"
        case ir.NamedBarrier(id=i, threads=t):
            return f"bar.sync {i}, {t}"
        case ir.TurnBarrier(id=i, warpgroups=n, hand_over=True):
            return f"bar.arrive {i} + wg, 256  (turn of {n} warpgroups: hand over)"
        case ir.TurnBarrier(id=i, warpgroups=n):
            return f"bar.sync {i} + (wg + {n - 1}) % {n}, 256  (turn of {n} warpgroups: wait)"
        case ir.MBarrierInit(barrier=b, count=c):
            return f"mbarrier.init {barrier(b)}, {c}"
        case ir.MBarrierInitFence():
            return "fence.mbarrier_init.release.cluster"
        case ir.MBarrierArrive(barrier=b):
            return f"mbarrier.arrive {barrier(b)}"
        case ir.MBarrierExpectTx(barrier=b, nbytes=n):
            return f"mbarrier.arrive.expect_tx {barrier(b)}, {scalar(n)}"
        case ir.MBarrierWait(barrier=b, parity=p, scope=scope):
            sem = ".acquire.cluster" if scope is ir.MemoryScope.CLUSTER else ""
            return f"mbarrier.wait{sem} {barrier(b)}, parity {scalar(p)}"
        case ir.MBarrierInval(barrier=b):
            return f"mbarrier.inval {barrier(b)}"
        case ir.WgmmaFence():
            return "wgmma.fence"
        case ir.WgmmaCommit():
            return "wgmma.commit_group"
        case ir.WgmmaWait(pending=n):
            return f"wgmma.wait_group {n}"
        case ir.BulkCommit():
            return "cp.async.bulk.commit_group"
        case ir.BulkWaitRead(pending=n, read=read):
            return f"cp.async.bulk.wait_group{'.read' if read else ''} {n}"
        case ir.Signal(tensor=t, index=index):
            return f"red.release.gpu.global.add.s32 {t}[{', '.join(map(scalar, index))}], 1"
        case ir.Wait(tensor=t, index=index, count=n):
            return (f"spin ld.acquire.gpu.global {t}[{', '.join(map(scalar, index))}] until "
                    f">= {scalar(n)}")
        case ir.Count(tensor=t, index=index, result=result, acquire=acquire):
            return (f"{result} = atom.{'acq_rel' if acquire else 'release'}.gpu.global.add.s32 "
                    f"{t}[{', '.join(map(scalar, index))}], 1 -> slot")
        case ir.CountRead(result=result):
            return f"{result} = slot"
        case ir.GlobalProxyFence():
            return "fence.proxy.async.global"
    raise TypeError(stmt)


def print_kernel(kernel: ir.Kernel) -> str:
    lines = [f"kernel {kernel.name} threads {kernel.threads} cluster {list(kernel.cluster)}"
             + (" persistent" if kernel.persistent else "")
             + (" pingpong" if kernel.pingpong else "")]
    for t in kernel.tensors:
        lines.append(f"  tensor {t.name}: {t.dtype}{list(t.dims)}".replace("'", ""))
    for s in kernel.scalars:
        lines.append(f"  scalar {s.name}: {s.dtype}")
    for g in kernel.grid:
        lines.append(f"  grid tile.{g.name} < {scalar(g.extent)}")
    for b in kernel.buffers:
        reuses = f" reuses {b.reuses}" if b.reuses else ""
        lines.append(f"  shared {b.name}: {b.dtype}{list(b.shape)} stages {b.stages} "
                     f"swizzle {b.swizzle}{reuses}")
    for m in kernel.barriers:
        count = f" arrivals {m.arrivals}" if m.arrivals is not None else ""
        lines.append(f"  mbarrier {m.name}[{m.count}]{count}")
    for p in kernel.pipelines:
        roles = f"{p.producer} -> {p.consumer}" if p.producer != p.consumer else \
            f"within {p.producer or 'the block'}"
        lines.append(f"  pipeline {p.name}: {roles} "
                     f"[{', '.join(p.buffers)}] stages {p.stages} full {p.full} "
                     f"empty {p.empty} ({p.consumer_arrivals} arrivals) "
                     f"expect_tx {p.tx_bytes} B"
                     + (f", read at several sites (steps {p.read_counter})"
                        if p.read_counter else ""))
    for r in kernel.carried:
        lines.append(f"  carried {r}")
    _block(kernel.body, 1, lines)
    return "\n".join(lines) + "\n"


def _block(block: ir.Block, depth: int, lines: list[str]) -> None:
    for stmt in block.stmts:
        text = "  " * depth + statement(stmt)
        why = explain(getattr(stmt, "reason", None))
        span = getattr(stmt, "span", None)
        suffix = f"  # why: {why}" if why else (f"  # {_loc(span)}" if span else "")
        lines.append(text + suffix)
        for i, body in enumerate(bodies(stmt)):
            if i == 1 and body.stmts:
                lines.append("  " * depth + "else:")
            _block(body, depth + 1, lines)


def _coords(copy: ir.AsyncLoad | ir.AsyncStore) -> str:
    """A copy's element coordinates; a ragged dimension's as `START : END`."""
    texts = [scalar(x) for x in copy.coords]
    if copy.ragged is not None:
        texts[copy.ragged.dim] += f" : {scalar(copy.ragged.end)}"
    return ", ".join(texts)
