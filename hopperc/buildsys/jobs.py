"""One kernel build as `hopperc build` runs it, in this process or in a worker:
the driver's build, its launch metadata, its summary and its warnings, as a
`CachedBuild` (what the cache stores and the outputs are written from) or the
problems that stopped it. Problems come back as values, not exceptions, so a
worker process hands them to the parent to report in order.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from hopperc.buildsys.cache import CachedBuild
from hopperc.diagnostics import SourceFile, Span
from hopperc.diagnostics.problems import Problem, describe, warning

if TYPE_CHECKING:
    from hopperc.driver import Built


def compile_source(source: SourceFile, defines: dict[str, int], arch: str,
                   recorded_name: str) -> tuple[CachedBuild | None, tuple[Problem, ...]]:
    try:
        entry, warnings, _ = build_entry(source, defines, arch, recorded_name)
    except Exception as exc:  # noqa: BLE001 - every failure is reported, in order, by the parent
        return None, (describe(exc, source),)
    return entry, warnings


def build_entry(source: SourceFile, defines: dict[str, int], arch: str,
                recorded_name: str) -> tuple[CachedBuild, tuple[Problem, ...], Built]:
    """The build and its cache entry; the compiler's exceptions propagate (the
    Python API raises them, `compile_source` reports them)."""
    from hopperc import driver
    from hopperc.buildsys.metadata import launch_metadata

    built = driver.build(source, defines, arch, recorded_name, reproducible=True)
    warnings = _warnings(built, source, recorded_name) + _spills(built, source)
    res = built.result.resources
    meta = launch_metadata(built.generated.kernel, built.generated.launch, recorded_name,
                           arch, defines, res)
    meta["cubin_sha256"] = hashlib.sha256(built.result.cubin).hexdigest()
    summary = {"kernel": built.generated.kernel.name, "symbol": meta["symbol"],
               "registers": res.registers if res else None,
               "spills": [res.spill_stores, res.spill_loads] if res else None,
               "shared_bytes": built.generated.launch.dynamic_shared_bytes,
               "nvrtc_ms": round(built.result.seconds * 1000)}
    entry = CachedBuild(built.result.cubin, (json.dumps(meta, indent=2) + "\n").encode(),
                        summary, tuple(w.record() for w in warnings))
    return entry, warnings, built


def _warnings(built, source: SourceFile, recorded_name: str) -> tuple[Problem, ...]:
    """NVRTC's and ptxas's warnings, located at the .hk line (ptxas numbers PTX
    lines: the PTX's `.loc` directives lead back to the .hk line). ptxas's
    reports of serialized wgmma name no line: they are shown at the kernel's."""
    from hopperc.backend.nvrtc import (PTX_DIAGNOSTIC_FILE, PTXAS_PERFORMANCE_FILE,
                                       parse_diagnostics, ptx_source_line)
    from hopperc.codegen.names import source_warning

    found = []
    for diagnostic in parse_diagnostics(built.result.log):
        if diagnostic.severity != "warning":
            continue
        line, message = diagnostic.line, diagnostic.message
        rule = "nvrtc-warning"
        if diagnostic.file == PTX_DIAGNOSTIC_FILE:
            rule = "ptxas-warning"
            line = ptx_source_line(built.result.ptx, diagnostic.line, recorded_name)
        elif diagnostic.file == PTXAS_PERFORMANCE_FILE:
            rule = "ptxas-performance"
            line = built.generated.kernel.span.line
        elif diagnostic.file != recorded_name:
            line = None
        else:
            located = source_warning(message, line,
                                     _declarations(built.generated.kernel, line))
            if located is None:
                continue  # about code the compiler made: nothing in the source to change
            message, line = located
        span = Span(source.name, line, 1, line, 1) if line else None
        found.append(warning(rule, message, span, source.name, source))
    return tuple(found)


def _spills(built, source: SourceFile) -> tuple[Problem, ...]:
    """ptxas's spill stores and loads (its `-v` report, summed over the kernel's
    functions) as a warning at the kernel's line: the kernel is right but its
    registers overflow to local memory. ptxas reports them per function, not per
    role or loop, so the note names the largest register tiles instead."""
    from hopperc.ir import nodes as ir
    from hopperc.ir.accesses import walk
    from hopperc.ir.layout import MAX_REGISTERS, REGISTER_FILE, tile_registers

    res, kernel = built.result.resources, built.generated.kernel
    if res is None or not (res.spill_stores or res.spill_loads):
        return ()
    budgets = ", ".join(f"role '{r.name}' regs {r.regs}" for r in kernel.roles
                        if r.regs is not None)
    # ptxas's limit at launch (__launch_bounds__(threads, 1)), as it reports it
    at_launch = min(MAX_REGISTERS, REGISTER_FILE // kernel.threads // 8 * 8)
    limit = budgets or f"at most {at_launch} for {kernel.threads} threads"
    message = (f"ptxas spills registers to local memory: {res.spill_stores} bytes stored, "
               f"{res.spill_loads} bytes loaded, at {res.registers} registers per thread "
               f"({limit}); use smaller register tiles (a smaller tile constant), or give "
               "the role that holds them more registers (`regs`)")
    tiles = sorted({(-tile_registers(t), t.span.line, t.name) for t in walk(kernel.body)
                    if isinstance(t, ir.TileDef)})[:3]
    notes = ("the largest register tiles: " + ", ".join(
        f"'{name}' (line {line}) {-need} per thread" for need, line, name in tiles),) \
        if tiles else ()
    line = kernel.span.line
    return (warning("ptxas-spill", message, Span(source.name, line, 1, line, 1), source.name,
                    source, notes),)


def _declarations(kernel, line: int) -> dict[str, int]:
    """The line declaring each name of the kernel (parameters, tiles, loop
    variables) as seen from `line`. A name may be declared again in a sibling
    scope (a tile `t` in each of two loops; never in a nested one): the
    declaration whose scope holds `line` is the last at or before it."""
    from hopperc.ir import nodes as ir
    from hopperc.ir.accesses import walk

    found: dict[str, list[int]] = {}
    for p in (*kernel.tensors, *kernel.scalars):
        found.setdefault(p.name, []).append(p.span.line)
    for stmt in walk(kernel.body):
        name = stmt.name if isinstance(stmt, ir.TileDef) else \
            stmt.var if isinstance(stmt, ir.ForLoop) else None
        if name is not None:
            found.setdefault(name, []).append(stmt.span.line)
    return {name: max((d for d in lines if d <= line), default=min(lines))
            for name, lines in found.items()}


def replayed_warnings(entry: CachedBuild, source: SourceFile) -> tuple[Problem, ...]:
    """A cached build's warnings, shown again on a hit as on the first build."""
    shown = []
    for record in entry.warnings:
        line = record.get("line")
        span = Span(source.name, line, 1, line, 1) if line else None
        shown.append(warning(record["rule"], record["message"], span, source.name, source,
                             tuple(record.get("notes", ()))))
    return tuple(shown)
