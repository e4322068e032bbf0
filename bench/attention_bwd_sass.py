"""Attention's backward loop counted the same way for hopperc and FlashAttention-3:
the SASS instructions of each innermost loop holding HGMMAs, per 64 query rows x
64 keys of one consumer warpgroup, as bench/attention_sass.py counts the
forward. A backward tile's work is five products of 64 * 64 * D multiply-adds
(S = Q K^T, dP = dO V^T, dV += P^T dO, dK += dS^T Q, dQ = dS K), so a loop's
tiles are its HGMMA multiply-adds over 5 * 64 * 64 * D, whatever its tile shape
or which operand it swaps.

hopperc: the sample given (samples/attention_bwd.hk by default; skipped where
absent), built with the -D values given.
FlashAttention-3: the sm_90a cubin `flash_bwd_hdim128_bf16_sm90` of the
`flash-attn3-jax` wheel (FA3's Hopper backward for head dimension 128; `make
peer-sass` installs the wheel without its JAX dependency; skipped where absent),
its plainest kernel of the case: not local, no softcap, not varlen, not
deterministic, one KV head per query head (`CollectiveEpilogueBwd`), picked by
the demangled template arguments of `CollectiveMainloopBwdSm90`.
Needs the SASS tools (`pip install 'hopperc[sass]'`) and c++filt; no GPU.

Usage: python bench/attention_bwd_sass.py [SAMPLE.hk] [-D NAME=VALUE ...] [--causal]
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

from bench.attention_sass import LoopFigures, describe, key_loops  # noqa: E402
from hopperc import driver  # noqa: E402
from hopperc.backend import sass_metrics as sm  # noqa: E402
from hopperc.backend.cubin_tools import find_tool, resource_usage  # noqa: E402

PRODUCTS = 5  # S, dP, dV, dK, dQ
FA3_HEAD_DIM = 128  # the wheel's only head dimension
FA3_CUBIN = "flash_bwd_hdim128_bf16_sm90.sm_90a.cubin"
# CollectiveMainloopBwdSm90<Stages, Stages_dO, Stages_dS, ClusterShape,
# TileShape_MNK, Element, ElementAccum, ArchTag, then the flags below, ...>
_MAINLOOP = re.compile(r"CollectiveMainloopBwdSm90<\d+, \d+, \d+, cute::tuple<cute::C<1>, "
                       r"cute::C<1>, cute::C<1> >, cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, "
                       r"cute::C<(\d+)> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, "
                       r"((?:(?:true|false)(?:, )?){8}).*?>, flash::(CollectiveEpilogueBwd\w*)<")
FLAGS = ("causal", "local", "softcap", "varlen", "deterministic", "sdp_swapab", "dkv_swapab",
         "dq_swapab")


@dataclass(frozen=True)
class Fa3BwdKernel:
    symbol: str
    tile: tuple[int, int, int]  # query rows, keys, head dimension
    flags: dict[str, bool]
    epilogue: str  # CollectiveEpilogueBwd, or ...GQA (dK, dV summed over query heads)


def parse_kernel(symbol: str, name: str) -> Fa3BwdKernel | None:
    """The tile and flags of a demangled FA3 backward kernel name (None: another kernel)."""
    match = _MAINLOOP.search(name)
    if match is None:
        return None
    bm, bn, d = (int(g) for g in match.groups()[:3])
    flags = dict(zip(FLAGS, (f == "true" for f in match.group(4).split(", "))))
    return Fa3BwdKernel(symbol, (bm, bn, d), flags, match.group(5))


def plainest(kernels: list[Fa3BwdKernel], causal: bool) -> Fa3BwdKernel | None:
    """The kernel a plain (B, H, L, D) backward of this case runs."""
    return next((k for k in kernels if k.flags["causal"] == causal
                 and not any(k.flags[f] for f in ("local", "softcap", "varlen", "deterministic"))
                 and k.epilogue == "CollectiveEpilogueBwd"), None)


def fa3_library() -> Path | None:
    spec = importlib.util.find_spec("flash_attn3_jax_lib")
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(Path(next(iter(spec.submodule_search_locations))).glob("flash_api*.so"), None)


def fa3_cubin(workdir: Path) -> bytes | None:
    """The backward cubin of the installed flash-attn3-jax wheel (None if absent)."""
    library = fa3_library()
    if library is None:
        return None
    subprocess.run([find_tool("cuobjdump"), "-xelf", FA3_CUBIN, str(library)], cwd=workdir,
                   check=True, capture_output=True)
    return (workdir / FA3_CUBIN).read_bytes()


def fa3_loops(cubin: bytes, causal: bool
              ) -> tuple[Fa3BwdKernel, list[LoopFigures], dict, list[sm.Instruction]] | None:
    functions = sm.functions(cubin)
    names = subprocess.run(["c++filt"], input="\n".join(functions), capture_output=True,
                           text=True, check=True).stdout.splitlines()
    kernels = [k for k in (parse_kernel(s, n) for s, n in zip(functions, names)) if k]
    kernel = plainest(kernels, causal)
    if kernel is None:
        return None
    usage = resource_usage(cubin)[kernel.symbol]
    code = functions[kernel.symbol]
    return kernel, key_loops(code, kernel.tile[2], PRODUCTS), usage, code


def hopperc_loops(path: Path, defines: dict[str, int]
                  ) -> tuple[list[LoopFigures], object, list[sm.Instruction]]:
    built = driver.build(driver.read_source(path), defines)
    (code,) = sm.functions(built.result.cubin).values()
    loops = key_loops(code, defines.get("HEAD_DIM", FA3_HEAD_DIM), PRODUCTS)
    return loops, built.result.resources, code


def report(label: str, loops: list[LoopFigures], code: list[sm.Instruction]) -> str:
    """describe's lines, each loop's followed by its instructions per tile by
    class, then how the kernel adds dQ into global memory (its reduction
    instructions by kind, the whole kernel)."""
    header, *per_loop = describe(label, loops)
    lines = [header]
    for line, lp in zip(per_loop, loops):
        lines += [line, "    per tile by class: " + ", ".join(
            f"{name} {n / lp.tiles:.3g}" for name, n in sm.class_counts(list(lp.body)).items())]
    kinds = sm.reduction_counts(code)
    lines.append("  reductions: " + ("; ".join(
        f"{kind} " + ", ".join(f"{n} {op}" for op, n in sorted(ops.items()))
        for kind, ops in kinds.items()) or "none"))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sample", nargs="?", type=Path,
                        default=ROOT / "samples" / "attention_bwd.hk")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--causal", action="store_true", help="FA3's causal kernel (and "
                        "-D CAUSAL=1 for the sample unless -D names CAUSAL)")
    options = parser.parse_args()
    defines = {k: int(v) for k, v in (d.split("=", 1) for d in options.defines)}
    if options.causal:
        defines.setdefault("CAUSAL", 1)
    case = "causal" if options.causal else "non-causal"
    if options.sample.is_file():
        loops, res, code = hopperc_loops(options.sample, defines)
        print(report(f"hopperc {options.sample.stem} {defines or ''} registers "
                     f"{res.registers}, spills {res.spill_stores}/{res.spill_loads}", loops, code))
    else:
        print(f"{options.sample} is absent: FA3 only")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = fa3_cubin(Path(tmp))
    if cubin is None:
        print("flash-attn3-jax is not installed (`make peer-sass` installs it)")
        return 0
    found = fa3_loops(cubin, options.causal)
    if found is None:
        print(f"no plain {case} FA3 backward kernel in {FA3_CUBIN}")
        return 1
    kernel, loops, usage, code = found
    bm, bn, d = kernel.tile
    swapped = [f for f in FLAGS[5:] if kernel.flags[f]]
    print(report(f"FA3 backward D={d} {case} {bm}x{bn} (swapped: {', '.join(swapped) or 'none'}) "
                 f"registers {usage['REG']}, local memory {usage['LOCAL']} B", loops, code))
    return 0


if __name__ == "__main__":
    sys.exit(main())
