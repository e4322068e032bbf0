"""Semantic checks: resolve names, evaluate sizes, check types, shapes and
hardware limits, and build the kernel IR. The first error stops the compile.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType, Swizzle
from hopperc.frontend import ast, header, limits, persistent, unroll
from hopperc.frontend.control_flow import ControlFlow
from hopperc.frontend.copies import lower_copy
from hopperc.frontend.manual import lower_sync, refuse_divergent_reduction
from hopperc.frontend.mma import lower_mma
from hopperc.frontend.global_reads import check_global_reads
from hopperc.frontend.overlap import check_store_reads
from hopperc.frontend.register_tiles import RegisterTiles, accumulator_names, settled_copies
from hopperc.frontend.row_stores import (is_tensor_target, lower_row_store,
                                         lower_shared_row_store, vector_into_tile)
from hopperc.frontend.semaphores import lower_signal
from hopperc.frontend.specialize import specialize
from hopperc.frontend.scope import Scope, ScalarSymbol, TileSymbol, const_value, did_you_mean
from hopperc.frontend.scalars import scalar_decl
from hopperc.frontend.views import buffer_view, require_warpgroup_view
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import issued_per_warpgroup
from hopperc.ir.layout import register_layout, shared_layout


def analyze(kernel: ast.Kernel, defines: dict[str, int] | None = None) -> ir.Kernel:
    """Check `kernel` and lower it to IR; `defines` override tile constants (-D)."""
    if not kernel.specialize:
        return _Analyzer(kernel, dict(defines or {})).run()
    return replace(_Analyzer(specialize(kernel), dict(defines or {})).run(), specialized=True)


class _Analyzer(RegisterTiles, ControlFlow):
    def __init__(self, kernel: ast.Kernel, defines: dict[str, int]):
        self.kernel = kernel
        self.defines = defines
        self.scope = Scope(kernel)
        self.buffers: list[ir.SharedBuffer] = []
        self.barriers: list[ir.MBarrierArray] = []
        self.accumulators = accumulator_names(kernel.body)
        self.role: ir.RoleInfo | None = None
        self.threads = header.DEFAULT_THREADS
        self.manual = kernel.manual
        # The innermost condition, loop bound or elect the threads may take
        # differently (what a row reduction across warps cannot run in).
        self.divergent: tuple[Span, str] | None = None
        self.stores: dict[str | None, ir.AsyncStore] = {}  # a role's first automatic store
        self.loaded_copies: set[str] = set()  # register copies of loaded vectors (RegisterTiles)

    # ---------------------------------------------------------------- kernel
    def run(self) -> ir.Kernel:
        k = self.kernel
        consts = header.consts(k, self.defines, self.scope)
        tensors, scalars = header.params(k, self.scope, dict(consts))
        grid = header.grid(k, self.scope)
        roles = header.roles(k)
        if roles:
            if k.threads is not None:
                raise CompileError(k.clause_span("threads"),
                                   "'threads' is implied by the roles; remove it")
            self.threads = sum(r.threads for r in roles)
        elif k.threads is not None:
            self.threads = k.threads
        if self.threads % 32 or not 32 <= self.threads <= limits.MAX_THREADS:
            raise CompileError(k.clause_span("threads"), f"a block of {self.threads} threads is "
                                                         f"not possible: use a multiple of 32 up "
                                                         f"to {limits.MAX_THREADS}")
        turning = (persistent.turning_role(roles, k.persistent, k.clause_span("pingpong"))
                   if k.pingpong else None)
        body = settled_copies(self._top_level(k.body, roles, turning), self.loaded_copies)
        limits.check_tile_registers(body, roles, self.threads)
        check_global_reads(body, grid, self.threads, self.scope.element_reads)
        if self.manual:
            body = ir.Block((ir.ManualRegion(body, k.body.span),))
        _, smem = shared_layout(tuple(self.buffers), sum(b.count for b in self.barriers))
        limits.check_shared_memory(smem, k.span, tuple(self.buffers))
        cluster = tuple(k.cluster or ()) + (1,) * (3 - len(k.cluster or ()))
        if len(cluster) != 3 or any(c < 1 for c in cluster) or cluster[0] * cluster[1] * cluster[2] > 16:
            raise CompileError(k.clause_span("cluster"),
                               "a cluster has 1 to 3 dimensions of at most 16 blocks")
        if k.persistent:
            persistent.check(grid, cluster, k.manual, k.clause_span("persistent"))
            body = _per_tile(body, grid, cluster[0], k.span, turning)
        return ir.Kernel(k.name, tensors, scalars, consts, grid, cluster, self.threads,
                         roles, tuple(self.buffers), tuple(self.barriers), body, k.span,
                         persistent=k.persistent, pingpong=k.pingpong)

    def _top_level(self, block: ast.Block, roles: tuple[ir.RoleInfo, ...],
                   turning: ir.RoleInfo | None) -> ir.Block:
        out = []
        for stmt in block.stmts:
            if isinstance(stmt, ast.SharedDecl):
                self._shared(stmt)
            elif isinstance(stmt, ast.MBarrierDecl):
                self._mbarrier(stmt)
            elif isinstance(stmt, ast.ScalarDecl):  # every role after it may use it
                self.scope.declare(stmt.name, scalar_decl(stmt, self.scope, self._warpgroups),
                                   stmt.span)
            elif isinstance(stmt, ast.Role):
                role = next(r for r in roles if r.span == stmt.span)
                self.role, self.scope.turns = role, role == turning
                out.append(ir.RoleBlock(role, self._block(stmt.body), stmt.span))
                self.role, self.scope.turns = None, False
            elif roles:
                raise CompileError(stmt.span, "with roles, every statement belongs to a role; "
                                              "move this into one")
            else:
                out.extend(self._stmt(stmt))
        return ir.Block(tuple(unroll.one_definition(out)))

    def _check_store_issuers(self, store: ir.AsyncStore) -> None:
        """A role's automatic stores are all issued per warpgroup (they name `wg`)
        or all by its one thread: bulk groups are counted per thread, and a wait
        computed for one issuer would be wrong for the other."""
        key = self.role.name if self.role is not None else None
        first = self.stores.setdefault(key, store)
        if issued_per_warpgroup(first) != issued_per_warpgroup(store):
            per, whole = (first, store) if issued_per_warpgroup(first) else (store, first)
            raise CompileError(store.span, f"this {_where(self.role)} stores per warpgroup "
                                           f"(line {per.span.line} names 'wg') and as a whole "
                                           f"(line {whole.span.line}); name 'wg' in every store, "
                                           "or in none")

    # ---------------------------------------------------------------- declarations
    def _shared(self, d: ast.SharedDecl) -> None:
        shape = tuple(const_value(e, self.scope, "a buffer dimension") for e in d.shape)
        for extent, e in zip(shape, d.shape):
            if extent <= 0:
                raise CompileError(e.span, f"buffer dimension must be positive, not {extent}")
        stages = 1 if d.stages is None else const_value(d.stages, self.scope, "'stages'")
        if stages < 1:
            raise CompileError(d.stages.span, f"'stages' must be at least 1, not {stages}")
        buf = ir.SharedBuffer(d.name, DType.parse(d.dtype), shape, stages,
                              Swizzle.parse(d.swizzle), d.span)
        limits.check_swizzled_rows(buf)
        if d.reuses is not None:
            target = self.scope.lookup(d.reuses.id, d.reuses.span)
            if not isinstance(target, ir.SharedBuffer):
                buffers = self.scope.names_of(ir.SharedBuffer)
                raise CompileError(d.reuses.span, f"'{d.reuses.id}' is not a shared buffer"
                                                  f"{did_you_mean(d.reuses.id, buffers)}")
            limits.check_reuse(buf, target, d.reuses.span)
            buf = replace(buf, reuses=target.name)
        self.scope.declare(d.name, buf, d.span)
        self.buffers.append(buf)

    def _mbarrier(self, d: ast.MBarrierDecl) -> None:
        count = const_value(d.count, self.scope, "the mbarrier count")
        if count < 1:
            raise CompileError(d.count.span, "an mbarrier array needs at least one barrier")
        bar = ir.MBarrierArray(d.name, count, d.span)
        self.scope.declare(d.name, bar, d.span)
        self.barriers.append(bar)

    # ---------------------------------------------------------------- statements
    def _block(self, block: ast.Block) -> ir.Block:
        self.scope.push()
        try:
            return ir.Block(tuple(unroll.one_definition(
                [s for stmt in block.stmts for s in self._stmt(stmt)])))
        finally:
            self.scope.pop()

    @property
    def _warpgroups(self) -> int:
        if self.role is not None:
            return self.role.active_warps // 4
        return self.threads // 128

    def _stmt(self, stmt: ast.Stmt) -> list[ir.Stmt]:
        running = self.role.active_warps * 32 if self.role is not None else self.threads
        if running % 128:
            wg = _find_name(stmt, "wg")
            if wg is not None:
                raise CompileError(wg.span, f"'wg' needs whole warpgroups, but {running} "
                                            "threads run this code; make it a multiple of 128")
        match stmt:
            case ast.SharedDecl() | ast.MBarrierDecl() | ast.Role():
                raise CompileError(stmt.span, "declare shared buffers, mbarriers and roles at "
                                              "the top level of the kernel")
            case ast.For():
                return self._for(stmt)
            case ast.If():
                return [self._if(stmt)]
            case ast.Copy():
                copy = lower_copy(stmt, self.scope, self._warpgroups, self.manual)
                if isinstance(copy, ir.AsyncStore) and not self.manual:
                    self._check_store_issuers(copy)
                return [copy]
            case ast.TileDecl():
                return self._after_row_partials(running, lambda: self._tile_decl(stmt))
            case ast.ScalarDecl():
                self.scope.declare(stmt.name, scalar_decl(stmt, self.scope, self._warpgroups),
                                   stmt.span)
                return []
            case ast.Assign():
                return self._after_row_partials(running, lambda: self._assign(stmt))
            case ast.Elect():
                self._require_manual(stmt.span, "'elect'")
                return [ir.ElectLane(self._divergent_block(stmt.body, (stmt.span, "elect")),
                                     stmt.span)]
            case ast.Manual():
                if self.manual:
                    raise CompileError(stmt.span, "this code is already manual")
                self.manual = True
                try:
                    return [ir.ManualRegion(self._block(stmt.body), stmt.span)]
                finally:
                    self.manual = False
            case ast.SyncStmt():
                self._require_manual(stmt.span, f"'{stmt.op}'")
                return [lower_sync(stmt, self.scope, self.threads)]
            case ast.Signal() | ast.Wait():
                return [lower_signal(stmt, self.scope, self.role, self.manual, self.divergent,
                                     tuple(self.kernel.cluster or ()))]
        raise CompileError(stmt.span, "unsupported statement")

    def _after_row_partials(self, running: int, lower) -> list[ir.Stmt]:
        """A statement after the RowPartials its row reductions of row-major tiles
        need, whose partials' buffers join the kernel's."""
        self.scope.running, self.scope.row_partials = running, []
        stmts = lower()
        partials, self.scope.row_partials = self.scope.row_partials, []
        if partials and self.divergent is not None:
            refuse_divergent_reduction(partials[0][0], self.divergent, running)
        self.buffers.extend(buf for _, buf in partials)
        return [stmt for stmt, _ in partials] + stmts

    def _assign(self, stmt: ast.Assign) -> list[ir.Stmt]:
        target = stmt.target
        if isinstance(target, ast.Name):
            symbol = self.scope.lookup(target.id, target.span)
            if isinstance(symbol, ScalarSymbol):
                raise CompileError(stmt.span, f"'{target.id}' is a scalar (line "
                                              f"{symbol.span.line}), which cannot change; "
                                              "declare a new one")
            if isinstance(symbol, TileSymbol):
                if isinstance(stmt.value, ast.BinOp) and stmt.value.op == "@":
                    converted, product = self._converted_a(stmt.value)
                    return converted + [lower_mma(target.id, symbol, product, stmt.op == "+=",
                                                  self.scope, self.role, self._warpgroups,
                                                  stmt.span)]
                if target.id in self.accumulators and stmt.op == "+=":
                    raise CompileError(stmt.span, "'+=' on an accumulator takes a matrix "
                                                  "product: acc += a @ b")
                value = stmt.value
                if stmt.op == "+=":
                    value = ast.BinOp("+", target, stmt.value, stmt.span)
                return [ir.TileAssign(target.id, self._tile_value(value, symbol.dtype,
                                                                  symbol.shape, stmt.span,
                                                                  symbol.layout, symbol.threads),
                                      stmt.span)]
        if is_tensor_target(target, self.scope):
            return [lower_row_store(stmt, self.scope, self._warpgroups,
                                    self._element_threads(), self._running_threads())]
        view = buffer_view(target, self.scope, self._warpgroups)
        if view is None:
            raise CompileError(target.span, "can only assign to a register tile, a shared "
                                            "buffer or a tensor (from a row vector)")
        if stmt.op != "=":
            raise CompileError(stmt.span, "a shared buffer is written with '='")
        if view.view.transposed:
            raise CompileError(target.span, "write a shared buffer without ^T")
        require_warpgroup_view(view, self._warpgroups, target.span)
        row_store = lower_shared_row_store(stmt, view, self.scope, self._warpgroups,
                                           self._element_threads())
        if row_store is not None:
            return [row_store]
        threads = self._element_threads()
        layout = register_layout(view.shape, threads) if len(view.shape) == 2 else None
        try:
            value = self._tile_value(stmt.value, view.buffer.dtype, view.shape, stmt.span,
                                     layout, threads)
        except CompileError as error:
            raise vector_into_tile(stmt, view, self.scope, self._warpgroups) or error
        store = ir.SharedStore(view.view, value, stmt.span)
        check_store_reads(store, lambda name: self.scope.lookup(name, stmt.span))
        return [store]


def _where(role: ir.RoleInfo | None) -> str:
    return f"role '{role.name}'" if role is not None else "kernel"


def _find_name(node, name: str) -> ast.Name | None:
    """The first use of `name` in an AST node (nested blocks excluded: their
    statements are checked on their own)."""
    if isinstance(node, ast.Name):
        return node if node.id == name else None
    if isinstance(node, ast.Block):
        return None
    children = node if isinstance(node, (list, tuple)) else (
        [getattr(node, f.name) for f in fields(node)] if is_dataclass(node) else [])
    for child in children:
        found = _find_name(child, name)
        if found is not None:
            return found
    return None


def _per_tile(body: ir.Block, grid: tuple[ir.GridAxis, ...], cluster: int, span,
              turning: ir.RoleInfo | None) -> ir.Block:
    """Each role's body (or the whole body, without roles) in the tile loop;
    the body of the `turning` role run by its warpgroups in turn (pingpong)."""
    if any(isinstance(s, ir.RoleBlock) for s in body.stmts):
        return ir.Block(tuple(replace(s, body=persistent.tile_loop(
            s.body, grid, cluster, s.span, s.role.warpgroups if s.role == turning else 0))
            for s in body.stmts))
    return persistent.tile_loop(body, grid, cluster, span)
