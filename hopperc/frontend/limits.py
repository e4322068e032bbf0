"""Hopper hardware limits, checked where the construct is declared or used.

Each check raises a located `CompileError` that names the limit and the
number that broke it, so the user can fix the kernel without the PTX ISA.
"""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType, Swizzle
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies
from hopperc.ir.layout import (REGISTER_FILE, WGMMA_M, launch_registers, part_bytes,
                               shared_layout, tile_registers, wgmma_k)

SHARED_MEMORY_LIMIT = 227 * 1024  # bytes of dynamic shared memory per block on sm_90
TMA_MAX_BOX = 256
WGMMA_MAX_N = 256
MAX_THREADS = 1024
MOST_NOTED = 3  # contributors a resource note lists


class ResourceLimitError(CompileError):
    """The kernel needs more than an SM has (registers, shared memory, threads)."""

    rule = "resource-limit"


def check_tma_box(box: tuple[int, ...], dtype: DType, swizzle: Swizzle, span: Span) -> None:
    """cuTensorMapEncodeTiled: each box dim in [1, 256]; inner bytes % 16 == 0 and
    within the swizzle span (the swizzle pattern repeats every span bytes)."""
    for extent in box:
        if not 1 <= extent <= TMA_MAX_BOX:
            raise ResourceLimitError(span, f"TMA box dimension {extent} is out of range: each box "
                                     f"dimension must be between 1 and {TMA_MAX_BOX}")
    inner_bytes = box[-1] * dtype.nbytes
    if inner_bytes % 16:
        raise ResourceLimitError(span, f"TMA inner box dimension is {inner_bytes} bytes "
                                 f"({box[-1]} x {dtype}); it must be a multiple of 16 bytes")
    if swizzle is not Swizzle.NONE and inner_bytes > swizzle.span:
        raise ResourceLimitError(span, f"TMA inner box dimension is {inner_bytes} bytes, wider than "
                                 f"the {swizzle} swizzle span; use at most "
                                 f"{swizzle.span // dtype.nbytes} {dtype} elements")


def check_swizzled_rows(buf: ir.SharedBuffer) -> None:
    """Rows wider than the swizzle span are laid out in column blocks one span wide
    (`layout.column_blocks`), so they must be a whole number of spans."""
    row_bytes = buf.shape[-1] * buf.dtype.nbytes
    span = buf.swizzle.span
    if len(buf.shape) >= 2 and span and row_bytes > span and row_bytes % span:
        raise ResourceLimitError(buf.span, f"'{buf.name}' has rows of {row_bytes} bytes "
                                 f"({buf.shape[-1]} x {buf.dtype}), wider than the {buf.swizzle} "
                                 f"swizzle span but not a multiple of it: such rows are laid out "
                                 f"in blocks of {span} bytes; make the last dimension a multiple "
                                 f"of {span // buf.dtype.nbytes}")


def check_bulk_copy(nbytes: int, span: Span) -> None:
    """cp.async.bulk moves a multiple of 16 bytes between 16-byte aligned addresses."""
    if nbytes % 16:
        raise ResourceLimitError(span, f"a bulk copy moves {nbytes} bytes; it must be a multiple of 16")


# Shared-memory alignment a copy's engine needs (PTX ISA): cp.async.bulk.tensor
# 128 bytes, cp.async.bulk 16. Buffers start at least 128-byte aligned.
COPY_ALIGNMENT = {"tma": 128, "bulk": 16}


def check_copy_alignment(buf: ir.SharedBuffer, part_count: int | None, engine: str,
                         span: Span) -> None:
    """Every stage and part a copy may address starts on its engine's alignment."""
    need = COPY_ALIGNMENT[engine]
    steps = [("stage", buf.stage_bytes)] if buf.stages > 1 else []
    if part_count is not None:
        steps.append(("part", part_bytes(buf, part_count)))
    for what, size in steps:
        if size % need:
            raise ResourceLimitError(span, f"a {engine} copy needs a shared address aligned to {need} "
                                     f"bytes, but each {what} of '{buf.name}' is {size} bytes, "
                                     f"so some start off that alignment; make it a multiple "
                                     f"of {need} bytes")


def check_wgmma(shape: tuple[int, int, int], dtype: DType, span: Span) -> None:
    """wgmma.mma_async: M = 64 per warpgroup, N a multiple of 8 up to 256,
    K a multiple of the instruction K (16 for 16-bit inputs, 32 for fp8, 8 for tf32)."""
    m, n, k = shape
    if m != WGMMA_M:
        raise ResourceLimitError(span, f"wgmma computes {WGMMA_M} rows per warpgroup, but this product "
                                 f"has M = {m}; give each warpgroup its rows with buf[wg]")
    if n % 8 or not 8 <= n <= WGMMA_MAX_N:
        raise ResourceLimitError(span, f"wgmma N = {n} is not supported: N must be a multiple of 8 "
                                 f"between 8 and {WGMMA_MAX_N}")
    k_step = wgmma_k(dtype)
    if k % k_step:
        raise ResourceLimitError(span, f"wgmma K = {k} is not a multiple of the instruction K "
                                 f"({k_step} for {dtype})")


def check_wgmma_shared_operand(buf: ir.SharedBuffer, operand: str, k_major: bool,
                               span: Span) -> None:
    """wgmma reads a shared operand as swizzle atoms of 8 rows x the swizzle span
    (PTX ISA, wgmma shared memory layout), which is what a TMA load with that
    swizzle writes: rows of one span, or of several spans laid out in column
    blocks one span wide (`layout.column_blocks`), whose descriptors step from
    block to block (codegen/wgmma.py). Rows narrower than the span are not that
    layout; nor is a rank-3 buffer's wide plane, which no copy fills (a TMA box
    of column blocks is rank-2). The descriptors say the swizzle pattern starts
    at the operand (base offset 0), as it does: the swizzle is that of the
    address, and an operand is whole atoms of 8 rows (M = 64, N and K multiples
    of 8 and 16) in a buffer aligned to the pattern's repeat, so every stage,
    part and column block starts on it."""
    row_bytes = buf.shape[-1] * buf.dtype.nbytes
    major = "K" if k_major else ("M" if operand == "A" else "N")
    if buf.swizzle is Swizzle.NONE:
        hint = next((f"swizzle {s}" for s in (Swizzle.B128, Swizzle.B64, Swizzle.B32)
                     if row_bytes % s.span == 0), "a swizzle whose span divides its row width")
        raise ResourceLimitError(span, f"wgmma reads '{buf.name}' ({operand}, {major}-major) from "
                                 f"shared memory in a swizzled layout; declare it with {hint}")
    if row_bytes < buf.swizzle.span:
        raise ResourceLimitError(span, f"'{buf.name}' has rows of {row_bytes} bytes ({buf.shape[-1]} x "
                                 f"{buf.dtype}), but wgmma with {buf.swizzle} swizzle reads "
                                 f"rows of whole {buf.swizzle.span}-byte spans: make its last "
                                 f"dimension a multiple of {buf.swizzle.span // buf.dtype.nbytes}, "
                                 "or pick the swizzle that matches")
    if row_bytes > buf.swizzle.span and len(buf.shape) > 2:
        raise ResourceLimitError(span, f"'{buf.name}' has rows of {row_bytes} bytes, wider than the "
                                 f"{buf.swizzle} swizzle span, in planes: wgmma reads column "
                                 "blocks of such rows only from rank-2 buffers; split its planes "
                                 "into buffers of their own")


def check_tile_registers(body: ir.Block, roles: tuple[ir.RoleInfo, ...], threads: int) -> None:
    """A register tile lives in its threads' registers, so one that alone needs more
    per thread than its role may hold (its setmaxnreg budget, else the launch share)
    cannot be compiled (ptxas: insufficient registers). The error is at that tile; a
    note lists the largest tiles of its role with their total (tiles that fit one by
    one are no error: ptxas keeps those it can live at once, and spills the rest)."""
    at_launch = launch_registers(threads)

    def check(block: ir.Block, role: ir.RoleInfo | None, owner: ir.Block) -> None:
        for stmt in block.stmts:
            if isinstance(stmt, ir.RoleBlock):
                check(stmt.body, stmt.role, stmt.body)
                continue
            if isinstance(stmt, ir.TileDef):
                need = tile_registers(stmt)
                if role is not None and role.regs is not None:
                    have, why = role.regs, f"role '{role.name}' has (regs {role.regs})"
                else:
                    have, why = at_launch, (f"each of the block's {threads} threads has "
                                            f"({REGISTER_FILE} / {threads}, rounded down to 8)")
                if need > have:
                    raise ResourceLimitError(stmt.span, f"'{stmt.name}' needs {need} registers per "
                                                  f"thread, more than the {have} {why}; give the "
                                                  "role more registers or use a smaller tile",
                                             _largest_tiles(owner, role))
            for inner in bodies(stmt):
                check(inner, role, owner)

    check(body, None, body)


def _largest_tiles(owner: ir.Block, role: ir.RoleInfo | None) -> tuple[str, ...]:
    """A note: the largest register tiles `owner` declares (its roles' aside)."""
    tiles: dict[str, ir.TileDef] = {}

    def walk(block: ir.Block) -> None:
        for stmt in block.stmts:
            if isinstance(stmt, ir.TileDef):
                tiles.setdefault(stmt.name, stmt)
            if not isinstance(stmt, ir.RoleBlock):
                for inner in bodies(stmt):
                    walk(inner)
    walk(owner)
    largest = sorted(tiles.values(), key=lambda t: -tile_registers(t))[:MOST_NOTED]
    listed = ", ".join(f"'{t.name}' {tile_registers(t)} (line {t.span.line})" for t in largest)
    whose = f"role '{role.name}'" if role is not None else "the kernel"
    return (f"the largest register tiles of {whose}, in registers per thread: {listed}; "
            f"all {len(tiles)} together: {sum(tile_registers(t) for t in tiles.values())}",)


def check_role_registers(role: ir.RoleInfo) -> None:
    """setmaxnreg takes a multiple of 8 in [24, 256]."""
    if role.regs is not None and (role.regs % 8 or not 24 <= role.regs <= 256):
        raise ResourceLimitError(role.span, f"role '{role.name}' asks for {role.regs} registers; "
                                      "setmaxnreg needs a multiple of 8 between 24 and 256")


def check_register_file(roles: tuple[ir.RoleInfo, ...], span: Span) -> None:
    """The per-warpgroup budgets (x 128 threads) must fit the 64K-register file. The
    file is one pool that setmaxnreg divides among the warpgroups, in no order, so
    the error points at the role with the largest budget (the first such), where
    trimming frees the most; a note lists the largest budgets with their lines."""
    budgeted = [r for r in roles if r.regs is not None]
    total = sum(r.regs * r.threads for r in budgeted)
    if total <= REGISTER_FILE:
        return
    parts = " + ".join(f"{r.regs} x {r.threads} ({r.name})" for r in budgeted)
    largest = sorted(budgeted, key=lambda r: -r.regs * r.threads)[:MOST_NOTED]
    culprit = largest[0]
    noted = ", ".join(f"'{r.name}' {r.regs * r.threads} (line {r.span.line}, regs {r.regs} x "
                      f"{r.threads} threads)" for r in largest)
    raise ResourceLimitError(culprit.span or span,
                             f"register budgets need {total} registers ({parts}), more than "
                             f"the {REGISTER_FILE} of the register file; role "
                             f"'{culprit.name}' has the largest budget, "
                             f"{culprit.regs * culprit.threads}",
                             (f"the largest budgets, in registers: {noted}",))


def check_shared_memory(total: int, span: Span,
                        buffers: tuple[ir.SharedBuffer, ...] = ()) -> None:
    """The block's shared memory fits. Buffers are laid out in declaration order, so
    the error points at the buffer whose end crosses the limit (everything before
    it fits); where only the mbarriers and alignment padding cross it,
    at the largest buffer, the one to shrink. A note names the largest buffers (one
    that reuses another's memory takes none of its own)."""
    if total <= SHARED_MEMORY_LIMIT:
        return
    own = [b for b in buffers if b.reuses is None]
    offsets, _ = shared_layout(tuple(buffers), 0)

    def size(buf: ir.SharedBuffer) -> int:
        return buf.stage_bytes * buf.stages

    culprit = next((b for b in own if offsets[b.name] + size(b) > SHARED_MEMORY_LIMIT),
                   max(own, key=size, default=None))
    notes = ()
    if own:
        largest = ", ".join(f"'{b.name}' {size(b)} (line {b.span.line}"
                            + (f", {b.stages} stages of {b.stage_bytes})" if b.stages > 1 else ")")
                            for b in sorted(own, key=lambda b: -size(b))[:MOST_NOTED])
        notes = (f"the largest buffers, in bytes: {largest}",)
    where = ""
    if culprit is not None:
        end = offsets[culprit.name] + size(culprit)
        where = (f"; '{culprit.name}' ends at byte {end}" if end > SHARED_MEMORY_LIMIT else
                 f"; the buffers fit, but not with the mbarriers and alignment padding: "
                 f"'{culprit.name}' is the largest")
    raise ResourceLimitError(culprit.span if culprit is not None else span,
                             f"shared memory needs {total} bytes, more than the "
                             f"{SHARED_MEMORY_LIMIT} bytes (227 KB) a block can have{where}",
                             notes)


def check_wgmma_role_start(role: ir.RoleInfo, span: Span) -> None:
    """wgmma is issued by a warpgroup: 4 consecutive warps starting at a multiple of 4."""
    if role.first_warp % 4:
        raise ResourceLimitError(span, f"role '{role.name}' issues wgmma but starts at warp "
                                 f"{role.first_warp}, which is not a multiple of 4; put "
                                 "warpgroup roles first, or give every role a register "
                                 "budget so one-warp roles are padded to a warpgroup")


def check_reuse(buf: ir.SharedBuffer, target: ir.SharedBuffer, span: Span) -> None:
    """`buf` may take the memory of an earlier buffer that holds all its stages,
    is aligned at least as strictly, and lives in its own memory."""
    if target.reuses is not None:
        raise ResourceLimitError(span, f"'{target.name}' already reuses the memory of "
                                 f"'{target.reuses}'; reuse '{target.reuses}'")
    size, room = buf.stage_bytes * buf.stages, target.stage_bytes * target.stages
    if size > room:
        raise ResourceLimitError(buf.span, f"'{buf.name}' needs {size} bytes but '{target.name}' has "
                                     f"{room}; it cannot reuse that memory")
    if buf.alignment > target.alignment:
        raise ResourceLimitError(buf.span, f"'{buf.name}' needs {buf.alignment}-byte alignment but "
                                     f"'{target.name}' is only {target.alignment}-byte aligned; "
                                     f"give it a swizzle no wider than that of '{target.name}'")
