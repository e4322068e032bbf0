"""`hopperc explain`: every sync the passes inserted, with its reason, in source order."""
from __future__ import annotations

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.printer import explain, statement


def inserted_syncs(kernel: ir.Kernel) -> list[str]:
    found = [s for s in walk(kernel.body) if getattr(s, "reason", None) is not None]
    found.sort(key=lambda s: (s.span.line, s.span.col))
    return [f"{s.span.file}:{s.span.line}: {statement(s)}\n    why: "
            f"{s.reason.hazard.value}: {explain(s.reason)}" for s in found]
