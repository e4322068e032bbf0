"""The SASS figures of every sample beside CUTLASS's cooperative 128x256x64
kernel: instructions per k-step of the consumer (HGMMA) and producer (TMA load)
main loops, instructions from the wgmma wait to the next HGMMA, the
epilogue's shared-memory stores per thread, its instructions per output
element a thread holds, and the shared-memory wavefronts one warp's stores of
the epilogue tile take (replayed from the layout's addresses, ir/banks.py).

"Per k-step" is per iteration of the source loop: the SASS loop's length times
the HGMMA (or TMA loads) one source iteration issues, over those in the SASS
loop; a loop split at its boundary iterations shows its interior, then its
boundary parts in parentheses. Needs the SASS tools (`pip install 'hopperc[sass]'`); no GPU.

Usage: python bench/sass.py [SAMPLE.hk ...]   (default: every sample)
"""
from __future__ import annotations

import sys
from pathlib import Path

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import read_source
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, walk
from hopperc.ir.banks import tile_store_wavefronts

ROOT = Path(__file__).resolve().parent.parent
CUTLASS = {"consumer": 48, "producer": None, "wait_to_mma": 21, "stores": "16 STSM.16.M88.4",
           "wavefronts": 64}
COLUMNS = ("consumer", "producer", "wait_to_mma", "stores", "per_element", "wavefronts")


def innermost_loops(block: ir.Block):
    """Every loop of `block` (nested ones included) with no loop inside it."""
    for stmt in block.stmts:
        inner = [b for b in bodies(stmt) if not isinstance(stmt, ir.ManualRegion)]
        nested = [lp for b in inner for lp in innermost_loops(b)]
        yield from nested
        if isinstance(stmt, ir.ForLoop) and not nested:
            yield stmt


def per_source_iteration(kernel: ir.Kernel) -> tuple[int, int]:
    """(HGMMA, TMA loads) one iteration of the consumer and producer loops issues."""
    mmas = loads = 0
    for loop in innermost_loops(kernel.body):
        hgmma, tma = sm.issued_per_iteration(loop, kernel)
        mmas = mmas or hgmma
        loads = loads or (tma if not hgmma else 0)
    return mmas, loads


def split_loop(code: list[sm.Instruction], kernel: ir.Kernel, bases: tuple[str, ...]
               ) -> str | None:
    """The interior's instructions per iteration and, in parentheses, the
    boundary parts', of a split loop whose body issues `bases`; None if unsplit."""
    parts = [s for s in sm.source_loops(code, kernel) if any(i.base in bases for i in s.own)]
    interior = [s for s in parts if s.part == "interior"]
    if not interior:
        return None
    boundary = ", ".join(f"boundary {s.per_iteration:g}" for s in parts if s.part == "boundary")
    return f"{interior[0].per_iteration:g} ({boundary})"


def figures(path: Path) -> dict[str, object]:
    built = driver.build(read_source(path))
    hgmma, loads = per_source_iteration(built.generated.kernel)
    (code,) = sm.functions(built.result.cubin).values()
    kernel = built.generated.kernel
    consumer = (split_loop(code, kernel, sm.WGMMA) or sm.per_iteration(code, sm.WGMMA, hgmma)
                if hgmma else None)
    producer = (split_loop(code, kernel, ("UTMALDG",)) or sm.per_iteration(code, "UTMALDG", loads)
                if loads else None)
    stores = sm.epilogue_stores(code) if hgmma else {}
    tiles = epilogue_tiles(built.generated.kernel)
    per_element = wavefronts = None
    if hgmma and tiles:
        columns = sum(c for _, c in tiles)
        # each consumer thread holds 64 * columns / 128 elements of its warpgroup's rows
        per_element = round(sm.epilogue_length(code) / (columns // 2), 2)
        matrix = any(op.startswith("STSM") for op in stores)
        wavefronts = sum(tile_store_wavefronts(buf, 0, c, matrix) for buf, c in tiles)
    return {"consumer": consumer, "producer": producer,
            "wait_to_mma": sm.wait_to_mma(code) if hgmma else None,
            "stores": ", ".join(f"{n} {op}" for op, n in sorted(stores.items())) or None,
            "per_element": per_element, "wavefronts": wavefronts}


def epilogue_tiles(kernel: ir.Kernel) -> list[tuple[ir.SharedBuffer, int]]:
    """The buffer and columns of each warpgroup-tile store (`buf[wg] = ...`, a
    subtile `buf[c + wg] = acc[:, a : b]`) after the last product."""
    found: list[tuple[ir.SharedBuffer, int]] = []
    for stmt in walk(kernel.body):
        if isinstance(stmt, ir.Mma):
            found = []
        elif isinstance(stmt, ir.SharedStore) and stmt.dst.part is not None:
            buf = kernel.buffer(stmt.dst.buffer)
            found.append((buf, buf.shape[-1]))
    return found


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or sorted((ROOT / "samples").glob("*.hk"))
    rows = [("sample", "consumer/k-step", "producer/k-step", "wait->HGMMA", "epilogue stores",
             "epilogue instr/element", "store wavefronts/warp")]
    for path in paths:
        f = figures(path)
        rows.append((path.stem, *(_cell(f[k]) for k in COLUMNS)))
    rows.append(("CUTLASS coop 128x256x64", *(_cell(CUTLASS.get(k)) for k in COLUMNS)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths)))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


if __name__ == "__main__":
    main(sys.argv[1:])
