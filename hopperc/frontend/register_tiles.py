"""Register tiles and vectors as declared (`x: f32[BM, BN] = ...`, `m: f32[BM] =
rowmax(x)`, `v: f32[BN] = bias[tile.n]`): their layout over the threads that hold
them, the checks of dtype, shape and split, and their lowered values. A mixin of
`semantic._Analyzer`, whose state it uses: the scope, the running role (or the
block's threads), the kernel's accumulators and the warpgroups that run."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType
from hopperc.frontend import ast
from hopperc.frontend.mma import lower_mma
from hopperc.frontend.rows import register_vector_layout, row_operands
from hopperc.frontend.scope import (TileSymbol, VectorSymbol, const_value, did_you_mean,
                                   scalar_expr)
from hopperc.frontend.tiles import lower_row_values, lower_tile_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import register_uses, walk
from hopperc.ir.global_accesses import written_tensors
from hopperc.ir.rewrite import map_bodies, map_operands
from hopperc.ir.layout import (FP8_FRAGMENT_COLUMNS, MAX_EVERY_ROW, element_threads,
                               register_layout)


class RegisterTiles:
    def _element_threads(self) -> int:
        """Threads that share a register tile where the statement runs."""
        return element_threads(self._running_threads())

    def _running_threads(self) -> int:
        """Threads that run the statement: its role's, else the block's."""
        return self.role.active_warps * 32 if self.role else self.threads

    def _tile_decl(self, d: ast.TileDecl) -> list[ir.Stmt]:
        dtype = DType.parse(d.dtype)
        shape = tuple(const_value(e, self.scope, "a tile dimension") for e in d.shape)
        for extent, e in zip(shape, d.shape):
            if extent <= 0:
                raise CompileError(e.span, f"tile dimension must be positive, not {extent}")
        if len(shape) == 1:
            return self._vector_decl(d, dtype, shape[0])
        if len(shape) != 2:
            raise CompileError(d.span, "register tiles are 2-D (vectors are 1-D)")
        is_acc = d.name in self.accumulators
        threads = self._element_threads()
        layout = register_layout(shape, threads)
        if is_acc and dtype is not DType.F32:
            raise CompileError(d.span, f"accumulator '{d.name}' is {dtype}; wgmma accumulates "
                                       "in f32")
        if not is_acc and (shape[0] * shape[1]) % threads:
            raise CompileError(d.span, f"a {shape[0]}x{shape[1]} tile does not split evenly "
                                       f"over the {threads} threads that hold it")
        _check_fp8_fragment(dtype, shape, layout, d.span)
        symbol = TileSymbol(dtype, shape, d.span, layout, threads)
        mma = isinstance(d.init, ast.BinOp) and d.init.op == "@"
        # A product that defines the tile overwrites it (scale-d 0): nothing to zero.
        init = None if mma else self._tile_value(d.init, dtype, shape, d.span, layout, threads)
        converted, product = self._converted_a(d.init) if mma else ([], d.init)
        self.scope.declare_tile(d.name, symbol, d.span)
        out: list[ir.Stmt] = converted + [ir.TileDef(d.name, dtype, shape, layout, threads, init,
                                                     d.span)]
        if mma:
            out.append(lower_mma(d.name, symbol, product, False, self.scope, self.role,
                                 self._warpgroups, d.span))
        return out

    def _converted_a(self, product: ast.BinOp) -> tuple[list[ir.Stmt], ast.BinOp]:
        """`acc (+)= bf16(x) @ b`: the converted A becomes a register tile of its
        own, as a user writes `a: bf16[64, K] = bf16(x)` then `acc += a @ b`
        (wgmma takes a register A as packed 16-bit pairs, converted before the
        wgmma.fence). Anything else is left to `lower_mma`."""
        a = product.left
        if not isinstance(a, ast.Cast):
            return [], product
        partials = len(self.scope.row_partials)
        shape = lower_tile_expr(a, self.scope, self._warpgroups).shape
        del self.scope.row_partials[partials:]  # the tile's own value lowers them again
        if shape is None or len(shape) != 2 or shape[0] == "vector":
            return [], product
        dtype = DType.parse(a.dtype)
        stem = a.operand.id if isinstance(a.operand, ast.Name) else "a"
        name = self.scope.compiler_name(f"{stem}_{dtype}")
        threads = self._element_threads()
        layout = register_layout(shape, threads)
        _check_fp8_fragment(dtype, shape, layout, a.span)
        init = self._tile_value(a, dtype, shape, a.span, layout, threads)
        self.scope.declare(name, TileSymbol(dtype, shape, a.span, layout, threads), a.span)
        return ([ir.TileDef(name, dtype, shape, layout, threads, init, a.span)],
                ast.BinOp("@", ast.Name(name, a.span), product.right, product.span))

    def _vector_decl(self, d: ast.TileDecl, dtype: DType, length: int) -> list[ir.Stmt]:
        src = d.init
        if not (isinstance(src, ast.Subscript) and isinstance(src.value, ast.Name)
                and len(src.indices) == 1):
            return self._row_vector(d, dtype, length)
        tensor = self.scope.lookup(src.value.id, src.value.span)
        if not isinstance(tensor, ir.TensorParam) or len(tensor.dims) != 1:
            vectors = {n for n in self.scope.names_of(ir.TensorParam)
                       if len(self.scope.lookup(n, src.value.span).dims) == 1}
            raise CompileError(src.value.span, f"'{src.value.id}' is not a 1-D tensor"
                                               f"{did_you_mean(src.value.id, vectors)}")
        if tensor.dtype is not dtype:
            raise CompileError(d.span, f"dtype mismatch: '{d.name}' is {dtype} but "
                                       f"'{tensor.name}' is {tensor.dtype}")
        block = scalar_expr(src.indices[0], self.scope)
        start = ir.ScalarOp("*", block, ir.const(length))
        copy = self._loaded_rows(d, dtype, ir.GlobalVector(tensor.name, start, "rows", length))
        self.scope.declare(d.name, VectorSymbol(tensor.name, dtype, start, length, d.span,
                                                copy[0].name if copy else None), d.span)
        return copy

    def _loaded_rows(self, d: ast.TileDecl, dtype: DType, rows: ir.GlobalVector
                     ) -> list[ir.TileDef]:
        """The register row vector holding a loaded vector's rows, read once here,
        where the kernel reads it one value per row (`t[:, None]`, or `t` alone in a
        row vector's statement): each thread loads the rows it holds (Layout.ROWS:
        its two rows of a warpgroup's [64, N] tiles; Layout.EVERY_ROW: every row)
        instead of every use loading them again for each element. None where no
        register vector can hold it (another dtype, more than 64 rows) or no use
        reads it per row."""
        if dtype not in (DType.F32, DType.I32) or rows.length > MAX_EVERY_ROW or \
                not _read_per_row(self.kernel.body, d):
            return []
        threads = self._element_threads()
        layout = register_vector_layout(threads, rows.length)
        name = self.scope.compiler_name(f"{d.name}_rows")
        self.loaded_copies.add(name)
        self.scope.declare_tile(name, TileSymbol(dtype, (rows.length,), d.span, layout, threads,
                                                 rows), d.span)
        return [ir.TileDef(name, dtype, (rows.length,), layout, threads, rows, d.span)]

    def _row_vector(self, d: ast.TileDecl, dtype: DType, length: int) -> list[ir.Stmt]:
        """`m: f32[64] = rowmax(s)` (or any expression of row vectors): one register
        value per row. Of a warpgroup's [64, N] tiles (wgmma layout), each thread
        holds its two rows (Layout.ROWS); of row-major tiles whose rows span all
        their threads, every thread holds every row (Layout.EVERY_ROW)."""
        threads = self._element_threads()
        layout = register_vector_layout(threads, length)
        if dtype not in (DType.F32, DType.I32) or length > MAX_EVERY_ROW:
            raise CompileError(d.span, f"a register vector is f32 or i32 with at most "
                                       f"{MAX_EVERY_ROW} values, one per row of the tiles it "
                                       "goes with (or it binds a slice of a 1-D tensor: v: "
                                       "f32[BN] = bias[tile.n])")
        symbol = TileSymbol(dtype, (length,), d.span, layout, threads)
        init = self._tile_value(d.init, dtype, (length,), d.span, layout, threads)
        self.scope.declare_tile(d.name, symbol, d.span)
        return [ir.TileDef(d.name, dtype, (length,), layout, threads, init, d.span)]

    def _tile_value(self, expr: ast.Expr, dtype: DType, shape: tuple[int, ...], span: Span,
                    layout: ir.Layout | None = None, threads: int = 128):
        """The lowered value of a statement whose elements lie in `layout`."""
        typed = lower_row_values(expr, self.scope, self._warpgroups,
                                 layout in (ir.Layout.ROWS, ir.Layout.EVERY_ROW))
        value = row_operands(typed.expr, layout, shape, threads,
                             lambda name: self.scope.lookup(name, span), span)
        if typed.dtype is not None and typed.dtype is not dtype:
            raise CompileError(span, f"dtype mismatch: the value is {typed.dtype} but the target "
                                     f"is {dtype}; convert it explicitly, e.g. {dtype}(...)")
        if typed.shape is not None and typed.shape[0] == "vector":
            raise CompileError(span, "a broadcast vector alone does not make a tile; combine "
                                     "it with one")
        if typed.shape is not None and typed.shape != shape:
            raise CompileError(span, f"shape mismatch: the value is {list(typed.shape)} but the "
                                     f"target is {list(shape)}")
        return value


def settled_copies(body: ir.Block, copies: set[str]) -> ir.Block:
    """`body` with the register copies of loaded vectors kept only where they are
    the tensor's value at every use. A loaded vector names the tensor's elements,
    read where used; its copy, read at the declaration, equals them only if
    nothing in the kernel writes the tensor (`written_tensors`, the condition of
    ld.global.nc): where something does, each use of the copy reads the tensor
    instead, and the copy goes. A copy no statement reads (every per-row use went
    with tiles whose rows its threads do not hold) goes too: its loads would be
    dead code, and the simulator would model reads that nothing uses."""
    defs = {s.name: s.init for s in walk(body) if isinstance(s, ir.TileDef) and s.name in copies}
    written = written_tensors(body)
    stale = {name for name, rows in defs.items() if rows.tensor in written}

    def reread(e: ir.TileExpr) -> ir.TileExpr:
        if isinstance(e, (ir.RowValues, ir.TileRef)) and e.name in stale:
            return defs[e.name]
        return e
    if stale:
        body = _each_stmt(body, lambda stmt: map_operands(stmt, reread))
    read = {use.tile for stmt in walk(body) for use in register_uses(stmt) if not use.write}
    dropped = copies - read
    if not dropped:
        return body
    return _each_stmt(body, lambda stmt: None if isinstance(stmt, ir.TileDef) and
                      stmt.name in dropped else stmt)


def _each_stmt(block: ir.Block, fn: Callable[[ir.Stmt], ir.Stmt | None]) -> ir.Block:
    """`block` with `fn` applied to every statement, nested ones first, manual code
    included (a loaded vector may be used there); None drops the statement."""
    out = []
    for stmt in block.stmts:
        stmt = map_bodies(stmt, lambda b: _each_stmt(b, fn))
        if isinstance(stmt, ir.ManualRegion):
            stmt = replace(stmt, body=_each_stmt(stmt.body, fn))
        stmt = fn(stmt)
        if stmt is not None:
            out.append(stmt)
    return ir.Block(tuple(out))


def _read_per_row(body: ast.Block, decl: ast.TileDecl) -> bool:
    """Whether a use in `decl`'s scope (the statements after it in its block,
    nested ones too: a visible name cannot be declared again) names the vector
    alone or broadcasts all of it along the rows (`name[:, None]`): a use that
    reads one value per row. Another block's declaration of the name is another
    vector."""
    block = next(b for b in ast.walk(body) if isinstance(b, ast.Block)
                 and any(s is decl for s in b.stmts))
    after = next(i for i, s in enumerate(block.stmts) if s is decl) + 1
    nodes = list(ast.walk(block.stmts[after:]))
    name = decl.name
    bases = {id(n.value) for n in nodes if isinstance(n, ast.Subscript)}
    for node in nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id == name and len(node.indices) == 2 and \
                isinstance(node.indices[0], ast.FullSlice) and \
                isinstance(node.indices[1], ast.NewAxis):
            return True
        if isinstance(node, ast.Name) and node.id == name and id(node) not in bases:
            return True
    return False


def accumulator_names(block: ast.Block) -> set[str]:
    """Register tiles that some wgmma writes: they take the accumulator layout."""
    names: set[str] = set()

    def visit(stmts):
        for s in stmts:
            if isinstance(s, (ast.Assign, ast.TileDecl)):
                value = s.value if isinstance(s, ast.Assign) else s.init
                target = s.target.id if isinstance(s, ast.Assign) and isinstance(
                    s.target, ast.Name) else getattr(s, "name", None)
                if isinstance(value, ast.BinOp) and value.op == "@" and target:
                    names.add(target)
            for child in ("body", "then", "orelse"):
                sub = getattr(s, child, None)
                if isinstance(sub, ast.Block):
                    visit(sub.stmts)

    visit(block.stmts)
    return names


def _check_fp8_fragment(dtype: DType, shape: tuple[int, ...], layout: ir.Layout,
                        span: Span) -> None:
    """A warpgroup's fp8 [64, N] tile is wgmma's register A fragment, whole
    k-steps of 32 columns (layout.holds_fp8_fragment)."""
    if layout is ir.Layout.WGMMA and dtype.is_fp8 and shape[1] % FP8_FRAGMENT_COLUMNS:
        raise CompileError(span, f"a warpgroup's {dtype} tile is held as wgmma's register A "
                                 f"fragment, in k-steps of {FP8_FRAGMENT_COLUMNS} columns; "
                                 f"[{shape[0]}, {shape[1]}] is not: make N a multiple of "
                                 f"{FP8_FRAGMENT_COLUMNS}")
