"""What P's trip from the accumulator into an fp8 wgmma A costs, in SASS, for
hopperc and FlashAttention-3: per key loop of the FP8 attention forward (head
dimension 128, not causal), its instructions, QGMMA, and the conversion's
F2FP, SHFL, PRMT and SEL, each also per 64 keys of one consumer warpgroup.

hopperc: bench/kernels/attention_fp8.hk (V given transposed, TMA-loaded, so P's
values are exchanged within each quad: one SHFL, one PRMT and one SEL per
register of P). FlashAttention-3: the e4m3 forward kernels of the installed
`fa3-fwd` wheel (`make peer-sass` installs it; skipped where absent), picked as
bench/attention_sass.py picks the bf16 ones. Needs the SASS tools and c++filt;
no GPU.

Usage: python bench/attention_fp8_sass.py
"""
from __future__ import annotations

import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import attention_sass  # noqa: E402
from hopperc import driver  # noqa: E402
from hopperc.backend import sass_metrics as sm  # noqa: E402

COUNTED = ("QGMMA", "F2FP", "SHFL", "PRMT", "SEL")


def describe(label: str, code: list[sm.Instruction], keys_per_iteration: int) -> list[str]:
    """Each innermost loop holding QGMMA: its counts, and per 64 keys."""
    lines = [label]
    found = [lp for lp in sm.loops(code) if any(i.base == "QGMMA" for i in lp.body(code))]
    for lp in found:
        if any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in found):
            continue
        body = lp.body(code)
        counts = Counter(i.base for i in body)
        per = 64 / keys_per_iteration
        figures = ", ".join(f"{name} {counts[name]} ({counts[name] * per:.1f})"
                            for name in COUNTED)
        lines.append(f"  loop at {lp.start:5}: {len(body)} instructions "
                     f"({len(body) * per:.1f} per 64 keys); {figures}")
    return lines


def main() -> int:
    built = driver.build(driver.read_source(ROOT / "bench" / "kernels" / "attention_fp8.hk"))
    (code,) = sm.functions(built.result.cubin).values()
    print("\n".join(describe("hopperc attention_fp8 (D=128, 128 keys an iteration)", code, 128)))
    with tempfile.TemporaryDirectory() as tmp:
        kernels = fa3_fp8_kernels(Path(tmp))
        if not kernels:
            print("fa3-fwd is not installed (`make peer-sass` installs it): hopperc only")
        for kernel in kernels:
            fa3 = sm.functions(kernel.cubin.read_bytes())[kernel.symbol]
            on = ", ".join(f for f, v in kernel.flags.items() if v)
            print("\n".join(describe(f"FA3 e4m3 D=128 {kernel.tile[0]}x{kernel.tile[1]} ({on})",
                                     fa3, kernel.tile[1])))
    return 0


# FA3's e4m3 forward mainloop: the bf16 pattern of attention_sass with the element type
_MAINLOOP = re.compile(attention_sass._MAINLOOP.pattern.replace("cutlass::bfloat16_t",
                                                                "cutlass::float_e4m3_t"))


def fa3_fp8_kernels(workdir: Path) -> list[attention_sass.Fa3Kernel]:
    """FA3's plainest e4m3 forward kernels of head dimension 128 (none of the
    optional features), from the installed wheel's cubins."""
    extras = ("causal", "local", "softcap", "varlen", "paged_kv", "append_kv", "qv", "split",
              "pack_gqa")
    return [k for k in attention_sass.fa3_kernels(workdir, _MAINLOOP)
            if k.tile[2] == 128 and not any(k.flags[f] for f in extras)]


if __name__ == "__main__":
    sys.exit(main())
