"""SASS figures of the row-reducing samples (softmax, softmax_wide, rmsnorm,
layernorm, cross_entropy, attention_fwd): for each loop of the kernel in
address order, the source loop it compiles (its line, and the part: the whole
loop, or the interior or a boundary of one split at its boundary iterations),
its instructions per source iteration (nested loops apart), how many are block
barriers, shuffles, MUFU, HGMMA and the masks' FSETP and FSEL, and all of them
by class (`sass_metrics.INSTRUCTION_CLASSES`: arithmetic, sync, address,
predicate, ...); then the registers and spills. Needs the SASS tools
(`pip install 'hopperc[sass]'`); no GPU.

Usage: python bench/rows.py [SAMPLE.hk ...] [-D NAME=VALUE ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hopperc import driver  # noqa: E402
from hopperc.backend import sass_metrics as sm  # noqa: E402

SAMPLES = ("softmax", "softmax_wide", "rmsnorm", "layernorm", "cross_entropy",
           "attention_fwd")
COUNTED = ("BAR", "SHFL", "MUFU", "HGMMA", "FSETP", "FSEL")


def figures(path: Path, defines: dict[str, int]) -> list[str]:
    built = driver.build(driver.read_source(path), defines)
    (code,) = sm.functions(built.result.cubin).values()
    res = built.result.resources
    lines = [f"{path.stem} {defines or ''}  registers {res.registers}, spills "
             f"{res.spill_stores}/{res.spill_loads}"]
    for found in sm.source_loops(code, built.generated.kernel):
        unrolled = len(found.own) / found.per_iteration
        counts = ", ".join(f"{op} {sum(i.base == op for i in found.own) / unrolled:g}"
                           for op in COUNTED)
        lines.append(f"  loop at {found.loop.start:5} (line {found.line} {found.part}): "
                     f"{found.per_iteration:5g} instructions per iteration ({counts})")
        lines.append("    by class: " + ", ".join(
            f"{name} {n / unrolled:g}" for name, n in sm.class_counts(found.own).items()))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="*", type=Path)
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    options = parser.parse_args()
    defines = {k: int(v) for k, v in (d.split("=", 1) for d in options.defines)}
    paths = options.samples or [ROOT / "samples" / f"{name}.hk" for name in SAMPLES]
    for path in paths:
        print("\n".join(figures(path, defines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
