"""Row kernels beside Triton's: samples/layernorm.hk and samples/cross_entropy.hk
next to Liger's LayerNorm and cross-entropy forward kernels
(`liger_kernel.ops.layer_norm._layer_norm_forward_kernel`,
`liger_kernel.ops.cross_entropy.liger_cross_entropy_kernel`), which Triton
compiles for sm_90a here without a GPU. Liger's Triton source is read from the
installed liger-kernel wheel (its modules import torch, so the kernel and the
module constants it names are taken out with `ast` and compiled on their own);
`make peer-sass` installs Triton and the wheel.

The work decompositions differ: Liger (as Triton's tutorial) takes one row per
program, the whole row in registers when it fits (LayerNorm: BLOCK_SIZE =
next_power_of_2(N), no loop) or a loop over BLOCK_SIZE-column chunks
(cross-entropy); the samples take 64 rows per block in 64 x 64 tiles. The fair
unit is SASS instructions a thread runs per element it holds: a loop's
instructions per iteration over the elements each thread holds in one
iteration (the samples' 64 x 64 tile over 128 threads: 32; Liger's BLOCK_SIZE
over 32 * num_warps), or a kernel without a loop's instructions over its
elements per thread. Registers and spills from `cuobjdump -res-usage`.
Needs the SASS tools (`pip install 'hopperc[sass]'`); no GPU.

Usage: python bench/triton_sass.py [--hidden N] [--vocab V]
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hopperc import driver  # noqa: E402
from hopperc.backend import sass_metrics as sm  # noqa: E402
from hopperc.backend.cubin_tools import resource_usage  # noqa: E402
from hopperc.ir import nodes as ir  # noqa: E402
from hopperc.ir.accesses import walk  # noqa: E402

# The libdevice functions Liger's kernels call (its modules import them the same way).
PRELUDE = ("import triton\nimport triton.language as tl\n"
           "from triton.language.extra.libdevice import rsqrt, tanh\n")


@dataclass(frozen=True)
class Pointer:
    dtype: str  # Triton's name: bf16, fp32, i64


@dataclass(frozen=True)
class PeerKernel:
    """A Liger kernel and one launch of it: the arguments its wrapper passes
    (a Pointer, an int, a float), its constexprs, and its warps."""
    module: str  # path of the module inside the liger_kernel package
    function: str
    globals: tuple[str, ...]  # module-level constants the kernel names
    arguments: dict[str, object]
    constexprs: dict[str, object]
    warps: int

    @property
    def per_thread(self) -> float:
        """Elements each thread holds in one iteration (one BLOCK_SIZE chunk)."""
        return self.constexprs["BLOCK_SIZE"] / (32 * self.warps)


def next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def liger_layernorm(hidden: int) -> PeerKernel:
    """layer_norm_forward's launch for bf16 X of `hidden` columns: its
    calculate_settings (BLOCK_SIZE the next power of 2; 4 warps, 8 from 2048
    columns, 16 from 8192, 32 from 32768)."""
    block = next_power_of_2(hidden)
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    stride = hidden
    arguments = {"Y_ptr": Pointer("bf16"), "Y_row_stride": stride, "X_ptr": Pointer("bf16"),
                 "X_row_stride": stride, "W_ptr": Pointer("bf16"), "W_row_stride": 1,
                 "B_ptr": Pointer("bf16"), "B_row_stride": 1, "Mean_ptr": Pointer("fp32"),
                 "Mean_row_stride": 1, "RSTD_ptr": Pointer("fp32"), "RSTD_row_stride": 1,
                 "n_cols": hidden, "eps": 1e-5}
    return PeerKernel("ops/layer_norm.py", "_layer_norm_forward_kernel", (), arguments,
                      {"BLOCK_SIZE": block}, warps)


def liger_cross_entropy(vocab: int) -> PeerKernel:
    """cross_entropy_forward's launch for bf16 logits and int64 targets, the
    loss per row ("none"), forward only (no gradient written into X), no
    weight, softcap, label smoothing or z-loss: BLOCK_SIZE the next power of 2
    up to 32768, 32 warps (its Hopper setting)."""
    arguments = {"X_ptr": Pointer("bf16"), "X_stride": vocab, "Y_ptr": Pointer("i64"),
                 "Y_stride": 1, "weight_ptr": Pointer("fp32"), "loss_ptr": Pointer("fp32"),
                 "z_loss_ptr": Pointer("fp32"), "loss_stride": 1,
                 "token_accuracy_ptr": Pointer("fp32"), "token_accuracy_stride": 0,
                 "predicted_tokens_ptr": Pointer("i64"), "predicted_tokens_stride": 0,
                 "n_cols": vocab, "n_non_ignore": 1.0, "sum_non_ignore_weight": 1.0,
                 "weight_sum": 0.0, "ignore_index": -100, "softcap": 0.0}
    constexprs = {"lse_square_scale": 0.0, "label_smoothing": 0.0, "reduction": "none",
                  "RETURN_Z_LOSS": False, "RETURN_TOKEN_ACCURACY": False,
                  "RETURN_PREDICTED_TOKENS": False,
                  "BLOCK_SIZE": min(32768, next_power_of_2(vocab)), "HAS_WEIGHT": False,
                  "HAS_SOFTCAPPING": False, "HAS_GRADIENTS": False}
    return PeerKernel("ops/cross_entropy.py", "liger_cross_entropy_kernel", ("LOG2_E",),
                      arguments, constexprs, 32)


def liger_root() -> Path | None:
    spec = importlib.util.find_spec("liger_kernel")  # located, not imported (needs torch)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def kernel_source(path: Path, names: set[str]) -> str:
    """The module's top-level statements that define `names` (a kernel with its
    decorator, a constant), after the prelude."""
    text = path.read_text()
    lines = text.splitlines()
    parts = [PRELUDE]
    for node in ast.parse(text).body:
        defined = ({node.name} if isinstance(node, ast.FunctionDef) else
                   {t.id for t in node.targets if isinstance(t, ast.Name)}
                   if isinstance(node, ast.Assign) else set())
        if defined & names:
            start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
            parts.append("\n".join(lines[start - 1:node.end_lineno]) + "\n")
    missing = names - {n for p in parts for n in names if f"def {n}(" in p or f"{n} =" in p}
    if missing:
        raise SystemExit(f"{path}: no {', '.join(sorted(missing))}")
    return "\n\n".join(parts)


def specialize(peer: PeerKernel) -> tuple[dict[str, str], dict[str, object], dict]:
    """(signature, constexprs, attrs) as Triton's launcher specializes these
    arguments: 16-byte aligned pointers and integers that are multiples of 16
    get `tt.divisibility` 16, integers equal to 1 become constants."""
    signature, constexprs, attrs = {}, dict(peer.constexprs), {}
    for index, (name, value) in enumerate(peer.arguments.items()):
        if isinstance(value, Pointer):
            signature[name] = f"*{value.dtype}"
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        elif value == 1:
            constexprs[name] = 1
        else:
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
    for name in constexprs:
        signature[name] = "constexpr"
    return signature, constexprs, attrs


def compile_peer(peer: PeerKernel, root: Path) -> bytes:
    """The sm_90a cubin Triton compiles for this launch."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, said aloud
    cache = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRITON_CACHE_DIR"] = str(Path(tmp) / "cache")  # the user's cache untouched
        try:
            return _compile(peer, root, Path(tmp))
        finally:
            if cache is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = cache


def _compile(peer: PeerKernel, root: Path, tmp: Path) -> bytes:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    source = tmp / f"liger_{peer.function.strip('_')}.py"
    source.write_text(kernel_source(root / peer.module, {peer.function, *peer.globals}))
    spec = importlib.util.spec_from_file_location(source.stem, source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, peer.function)
    signature, constexprs, attrs = specialize(peer)
    ordered = {name: signature[name] for name in kernel.arg_names}
    compiled = triton.compile(ASTSource(kernel, ordered, constexprs, attrs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": peer.warps})
    return compiled.asm["cubin"]


def straight_line_length(code: list[sm.Instruction]) -> int:
    """Instructions up to the last EXIT (the padding after it is not run)."""
    return max(k for k, i in enumerate(code) if i.base == "EXIT") + 1


@dataclass(frozen=True)
class Part:
    label: str
    instructions: float  # per iteration (the whole kernel where it has no loop)
    per_thread: float  # elements a thread holds in that iteration
    classes: dict[str, int]

    @property
    def per_element(self) -> float:
        return self.instructions / self.per_thread


def peer_parts(peer: PeerKernel, cubin: bytes) -> tuple[list[Part], dict[str, int]]:
    """The loops holding the kernel's arithmetic over a chunk (those with a float
    add, multiply or exp), or the whole kernel if it has none."""
    ((symbol, code),) = sm.functions(cubin).items()
    usage = resource_usage(cubin)[symbol]
    math = {"FADD", "FMUL", "FFMA", "MUFU"}
    found = [lp for lp in sm.loops(code) if any(i.base in math for i in lp.body(code))]
    if not found:
        body = code[:straight_line_length(code)]
        return [Part("whole kernel (no loop)", len(body), peer.per_thread,
                     sm.class_counts(body))], usage
    return [Part(f"loop at {lp.start}", len(lp), peer.per_thread, sm.class_counts(lp.body(code)))
            for lp in sorted(found, key=lambda lp: lp.start)], usage


def tile_per_thread(loop: ir.ForLoop, kernel: ir.Kernel) -> float:
    """Elements each thread holds of the tile the loop loads per iteration."""
    loads = [s for s in walk(loop.body) if isinstance(s, ir.AsyncLoad)]
    shape = kernel.buffer(loads[0].dst.buffer).shape
    elements = 1
    for extent in shape[-2:]:
        elements *= extent
    return elements / kernel.threads


def sample_parts(path: Path) -> tuple[list[Part], object]:
    built = driver.build(driver.read_source(path))
    kernel = built.generated.kernel
    (code,) = sm.functions(built.result.cubin).values()
    loops = {s.span.line: s for s in walk(kernel.body) if isinstance(s, ir.ForLoop)}
    parts = [Part(f"loop at line {found.line} ({found.part})", found.per_iteration,
                  tile_per_thread(loops[found.line], kernel),
                  {k: v * found.per_iteration / len(found.own)
                   for k, v in sm.class_counts(found.own).items()})
             for found in sm.source_loops(code, kernel)]
    return parts, built.result.resources


def describe(label: str, parts: list[Part]) -> list[str]:
    lines = [label]
    for part in parts:
        lines.append(f"  {part.label}: {part.instructions:g} instructions, "
                     f"{part.per_thread:g} elements per thread: {part.per_element:.2f} per element")
        lines.append("    per element by class: " + ", ".join(
            f"{k} {v / part.per_thread:.3g}" for k, v in part.classes.items() if v))
    counted = [p for p in parts if "boundary" not in p.label]
    if len(counted) > 1:
        lines.append(f"  all loops but boundary parts: "
                     f"{sum(p.per_element for p in counted):.2f} per element")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=4096, help="LayerNorm's N (Liger's launch)")
    parser.add_argument("--vocab", type=int, default=32000, help="cross-entropy's V")
    options = parser.parse_args()
    root = liger_root()
    if root is None or importlib.util.find_spec("triton") is None:
        print("triton or liger-kernel is not installed (`make peer-sass` installs them): "
              "hopperc only")
    for sample, peer in (("layernorm", liger_layernorm(options.hidden)),
                         ("cross_entropy", liger_cross_entropy(options.vocab))):
        parts, res = sample_parts(ROOT / "samples" / f"{sample}.hk")
        print("\n".join(describe(f"hopperc {sample}: registers {res.registers}, spills "
                                 f"{res.spill_stores}/{res.spill_loads}", parts)))
        if root is None or importlib.util.find_spec("triton") is None:
            continue
        parts, usage = peer_parts(peer, compile_peer(peer, root))
        print("\n".join(describe(
            f"Liger {peer.function} (Triton, BLOCK_SIZE {peer.constexprs['BLOCK_SIZE']}, "
            f"{peer.warps} warps): registers {usage['REG']}, local memory {usage['LOCAL']} B",
            parts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
