"""Attention's key loop counted the same way for hopperc and FlashAttention-3: the
SASS instructions of each loop that holds the HGMMAs (interior and boundary
loops apart), per 64 query rows x 64 keys of one consumer warpgroup. A loop's
work is its HGMMA multiply-adds over those of a 64x64 tile, 2 * 64 * 64 * D
(S = Q K^T and O += P V), so tiles of any shape compare.

hopperc: samples/attention_fwd.hk at each head dimension, causal or not.
FlashAttention-3: the sm_90a cubins of the `fa3-fwd` wheel (`make peer-sass`
installs it; skipped where absent), its bf16 non-varlen forward kernels of the
same head dimension, picked by the demangled template arguments of
`CollectiveMainloopFwdSm90`. Needs the SASS tools (`pip install 'hopperc[sass]'`)
and c++filt; no GPU.

Usage: python bench/attention_sass.py [--head-dim D ...] [--causal]
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hopperc import driver  # noqa: E402
from hopperc.backend import sass_metrics as sm  # noqa: E402
from hopperc.backend.cubin_tools import find_tool  # noqa: E402

MASK_OPCODES = ("FSEL", "FSETP")
_HGMMA_SHAPE = re.compile(r"\.(\d+)x(\d+)x(\d+)\.")


@dataclass(frozen=True)
class LoopFigures:
    start: int
    length: int
    tiles: float  # 64x64 tiles of work one iteration does
    masks: int  # FSEL and FSETP: the masks' selects and compares
    body: tuple[sm.Instruction, ...]

    @property
    def per_tile(self) -> float:
        return self.length / self.tiles


def multiply_adds(instruction: sm.Instruction) -> int:
    m, n, k = map(int, _HGMMA_SHAPE.search(instruction.opcode).groups())
    return m * n * k


def key_loops(code: list[sm.Instruction], head_dim: int,
              products: int = 2) -> list[LoopFigures]:
    """Every loop holding HGMMAs that holds no shorter such loop, in code order;
    a 64x64 tile's work is `products` products of 64 * 64 * head_dim."""
    found = [lp for lp in sm.loops(code) if any(i.is_wgmma for i in lp.body(code))]
    innermost = [lp for lp in found
                 if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in found)]
    figures = []
    for lp in sorted(innermost, key=lambda lp: lp.start):
        body = lp.body(code)
        work = sum(multiply_adds(i) for i in body if i.is_wgmma)
        figures.append(LoopFigures(lp.start, len(lp), work / (products * 64 * 64 * head_dim),
                                   sum(i.base in MASK_OPCODES for i in body), tuple(body)))
    return figures


def hopperc_loops(head_dim: int, causal: bool) -> list[LoopFigures]:
    built = driver.build(driver.read_source(ROOT / "samples" / "attention_fwd.hk"),
                         {"HEAD_DIM": head_dim, "CAUSAL": int(causal)})
    (code,) = sm.functions(built.result.cubin).values()
    return key_loops(code, head_dim)


_MAINLOOP = re.compile(r"CollectiveMainloopFwdSm90<(\d+), cute::tuple<cute::C<1>, cute::C<1>, "
                       r"cute::C<1> >, cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, "
                       r"cute::C<(\d+)> >, (\d+), cutlass::bfloat16_t, float, cutlass::arch::Sm90, "
                       r"((?:(?:true|false)(?:, )?){12})>")
# CollectiveMainloopFwdSm90's flags, in template order
FLAGS = ("causal", "local", "softcap", "varlen", "paged_kv", "append_kv", "qv", "pv_rs",
         "intra_wg_overlap", "pack_gqa", "split", "v_colmajor")


@dataclass(frozen=True)
class Fa3Kernel:
    cubin: Path
    symbol: str
    tile: tuple[int, int, int]
    flags: dict[str, bool]


def fa3_kernels(workdir: Path, mainloop: re.Pattern = _MAINLOOP) -> list[Fa3Kernel]:
    """The forward kernels of the installed fa3-fwd wheel whose name `mainloop`
    matches (bf16 by default; none if the wheel is absent)."""
    spec = importlib.util.find_spec("fa3_fwd")
    if spec is None or not spec.submodule_search_locations:
        return []
    library = next(Path(spec.submodule_search_locations[0]).glob("_C*.so"))
    cuobjdump = find_tool("cuobjdump")
    subprocess.run([cuobjdump, "-xelf", "all", str(library)], cwd=workdir, check=True,
                   capture_output=True)
    kernels = []
    for cubin in sorted(workdir.glob("*.sm_90a.cubin")):
        usage = subprocess.run([cuobjdump, "-res-usage", str(cubin)], capture_output=True,
                               text=True).stdout
        symbols = re.findall(r"Function (\S+):", usage)
        names = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True,
                               text=True).stdout.splitlines()
        for symbol, name in zip(symbols, names):
            match = mainloop.search(name)
            if match:
                bm, bn, d = (int(g) for g in match.groups()[1:4])
                flags = dict(zip(FLAGS, (f == "true" for f in match.group(6).split(", "))))
                kernels.append(Fa3Kernel(cubin, symbol, (bm, bn, d), flags))
    return kernels


def fa3_loops(kernels: list[Fa3Kernel], head_dim: int, causal: bool):
    """(kernel, its key loops) of FA3's plainest Hopper kernel for this case: no
    local window, softcap, varlen, paging, appended KV or Qv; its intra-warpgroup
    overlap on (the Hopper schedule; kernels without it serve other cases), not
    split, not packed GQA, the largest tile."""
    plain = [k for k in kernels if k.tile[2] == head_dim and k.flags["causal"] == causal
             and not any(k.flags[f] for f in ("local", "softcap", "varlen", "paged_kv",
                                               "append_kv", "qv"))]
    if not plain:
        return None
    kernel = min(plain, key=lambda k: (not k.flags["intra_wg_overlap"], k.flags["split"],
                                       k.flags["pack_gqa"], -k.tile[0] * k.tile[1]))
    code = sm.functions(kernel.cubin.read_bytes())[kernel.symbol]
    return kernel, key_loops(code, head_dim)


def describe(label: str, loops: list[LoopFigures]) -> list[str]:
    lines = [label]
    for lp in loops:
        kind = "unmasked" if lp.masks == 0 else f"masked ({lp.masks} FSEL/FSETP)"
        lines.append(f"  loop at {lp.start:5}: {lp.length:5} instructions, "
                     f"{lp.tiles:.3g} tiles of 64x64: {lp.per_tile:6.1f} per tile, {kind}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, action="append", choices=(64, 128, 256))
    parser.add_argument("--causal", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        peers = fa3_kernels(Path(tmp))
        if not peers:
            print("fa3-fwd is not installed (`make peer-sass` installs it): hopperc only")
        for head_dim in options.head_dim or (128,):
            case = f"D={head_dim}{' causal' if options.causal else ''}"
            print("\n".join(describe(f"hopperc attention_fwd {case}",
                                     hopperc_loops(head_dim, options.causal))))
            found = fa3_loops(peers, head_dim, options.causal) if peers else None
            if found:
                kernel, loops = found
                on = [f for f, v in kernel.flags.items() if v]
                print("\n".join(describe(f"FA3 {case} {kernel.tile[0]}x{kernel.tile[1]} "
                                         f"({', '.join(on)})", loops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
