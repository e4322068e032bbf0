"""The anchor measurements' counting (docs/perf.md): cross-block reductions by
kind (bench/cutlass_sass.py's CUTLASS split-K / stream-K fix-up), FA3's backward
kernel picked from its demangled name and counted per tile of five products
(bench/attention_bwd_sass.py), and Liger's Triton kernels taken from their module
and specialized as Triton's launcher would (bench/triton_sass.py). Synthetic
listings and sources; the tests that read the peers' own files skip where
`make peer-sass` has not installed them."""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest

from bench import attention_bwd_sass, cutlass_sass, triton_sass
from bench.attention_sass import key_loops
from hopperc.backend import sass_metrics as sm
from tests.conftest import ROOT


def _code(*listing: tuple[str, str, str]) -> list[sm.Instruction]:
    return [sm.Instruction(*fields) for fields in listing]


def test_reductions_by_kind_and_the_flag_polling_loop():
    code = _code(("UTMAREDG.2D.ADD", "", "[UR8],[UR4]"),
                 ("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU", "", "desc[UR4][R2.64],R5"),
                 ("ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU", "PT", "RZ,desc[UR4][R2.64],R6"),
                 ("REDG.E.ADD.S32.STRONG.GPU", "", "desc[UR4][R8.64],R9"),
                 ("MEMBAR.ALL.GPU", "", ""), ("MEMBAR.ALL.CTA", "", ""),
                 ("LDG.E.STRONG.GPU", "", "R6,desc[UR4][R8.64]"),  # 6: the poll's body
                 ("ISETP.NE.AND", "", "P0,PT,R6,R7,PT"),
                 ("BRA", "@P0", "0x60"),
                 ("STG.E", "", "desc[UR4][R2.64],R24"), ("LDG.E", "", "R25,desc[UR4][R2.64]"),
                 ("UBLKRED.G.S.ADD.F32.RN", "", "[UR4],[UR6],UR8"),
                 ("BRA", "@P1", "0x0"))  # an outer loop around everything
    assert sm.reduction_counts(code) == {
        "TMA reduce": {"UTMAREDG.2D.ADD": 1, "UBLKRED.G.S.ADD.F32.RN": 1},
        "element reduce": {"REDG.E.ADD.F32.FTZ.RN.STRONG.GPU": 1,
                           "ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU": 1},
        "flag": {"REDG.E.ADD.S32.STRONG.GPU": 1}, "flag wait": {"LDG.E.STRONG.GPU": 1},
        "GPU fence": {"MEMBAR.ALL.GPU": 1}, "global store": {"STG.E": 1},
        "global load": {"LDG.E": 1}}
    (poll,) = sm.flag_waits(code)  # innermost only: not the outer loop that holds it
    assert (poll.start, poll.end) == (6, 8)


def test_cutlass_figures_name_each_kind_and_a_samples_global_traffic():
    code = _code(("ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU", "PT", "RZ,desc[UR4][R2.64],R6"),
                 ("LDG.E.STRONG.GPU", "", "R6,desc[UR4][R8.64]"), ("BRA", "@P0", "0x10"))
    assert cutlass_sass.describe_reductions(code) == [
        "  element reduce: 1 ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU",
        "  flag wait: 1 LDG.E.STRONG.GPU", "  flag-polling loops: 1, of 2 instructions"]
    # scale_rows: no wgmma, and its only global traffic besides TMA is the row scales' loads
    first, *rest = cutlass_sass.sample_lines(ROOT / "samples" / "scale_rows.hk")
    assert first.startswith("scale_rows: consumer None") and first.endswith("spills 0/0")
    assert [line.split(":")[0] for line in rest] == ["  global load"]


# A demangled FA3 backward kernel name, cut to the parts parse_kernel reads.
_FA3 = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<"
        "flash::CollectiveMainloopBwdSm90<2, 2, 2, cute::tuple<cute::C<1>, cute::C<1>, "
        "cute::C<1> >, cute::tuple<cute::C<{bm}>, cute::C<128>, cute::C<128> >, "
        "cutlass::bfloat16_t, float, cutlass::arch::Sm90, {flags}, 2, 1, 2, 1, false>, "
        "flash::{epilogue}<cute::tuple<cute::C<128> > > > > >(int)")


def _fa3(bm: int, epilogue: str = "CollectiveEpilogueBwd", **on: bool):
    flags = ", ".join("true" if on.get(f) else "false" for f in attention_bwd_sass.FLAGS)
    name = _FA3.format(bm=bm, flags=flags, epilogue=epilogue)
    return attention_bwd_sass.parse_kernel(f"k{bm}{sorted(on)}{epilogue}", name)


def test_fa3_backward_is_picked_by_its_flags_and_epilogue():
    kernels = [_fa3(80, "CollectiveEpilogueBwdGQA", sdp_swapab=True),
               _fa3(80, deterministic=True), _fa3(80, varlen=True),
               _fa3(80, sdp_swapab=True, dq_swapab=True), _fa3(64, local=True),
               _fa3(64, causal=True, sdp_swapab=True)]
    plain = attention_bwd_sass.plainest(kernels, causal=False)
    assert plain is kernels[3] and plain.tile == (80, 128, 128)
    assert plain.flags["sdp_swapab"] and plain.flags["dq_swapab"] and not plain.flags["causal"]
    assert attention_bwd_sass.plainest(kernels, causal=True) is kernels[5]
    assert attention_bwd_sass.parse_kernel("x", "flash::FlashAttnBwdPreprocess<>") is None


def test_a_backward_tile_is_five_products():
    # one 80-query x 128-key iteration of one of two warpgroups: 40 x 128 per
    # warpgroup and product, 8 k16 steps over D = 128 -> 5 products of 64 x 80 x 128
    code = _code(*[("HGMMA.64x80x16.F32.BF16", "", "")] * 40, ("BRA", "@P0", "0x0"))
    (loop,) = key_loops(code, 128, attention_bwd_sass.PRODUCTS)
    assert loop.tiles == 1.25 and loop.per_tile == 41 / 1.25


def test_a_liger_kernel_is_taken_out_of_its_module(tmp_path):
    module = tmp_path / "ops.py"
    module.write_text("import torch\nimport triton\n\nLOG2_E = tl.constexpr(1.44)\n"
                      "OTHER = 2\n\n\n@triton.jit\ndef kernel(X_ptr, n):\n    pass\n\n\n"
                      "def wrapper(x):\n    return torch.empty(1)\n")
    text = triton_sass.kernel_source(module, {"kernel", "LOG2_E"})
    assert text.startswith(triton_sass.PRELUDE)
    assert "LOG2_E = tl.constexpr(1.44)" in text and "@triton.jit\ndef kernel(X_ptr, n):" in text
    assert "torch" not in text and "OTHER" not in text and "wrapper" not in text
    with pytest.raises(SystemExit, match="no missing"):
        triton_sass.kernel_source(module, {"kernel", "missing"})


def test_arguments_are_specialized_as_tritons_launcher_does():
    peer = triton_sass.liger_cross_entropy(32000)
    signature, constexprs, attrs = triton_sass.specialize(peer)
    names = list(peer.arguments)
    assert signature["X_ptr"] == "*bf16" and signature["Y_ptr"] == "*i64"
    assert attrs[(names.index("X_ptr"),)] == [["tt.divisibility", 16]]
    assert attrs[(names.index("X_stride"),)] == [["tt.divisibility", 16]]  # 32000 = 16 * 2000
    assert (names.index("ignore_index"),) not in attrs
    assert constexprs["Y_stride"] == 1 and signature["Y_stride"] == "constexpr"
    assert signature["n_non_ignore"] == "fp32" and constexprs["BLOCK_SIZE"] == 32768
    assert peer.per_thread == 32  # 32768 columns over 32 warps
    layernorm = triton_sass.liger_layernorm(4096)
    assert (layernorm.constexprs["BLOCK_SIZE"], layernorm.warps, layernorm.per_thread) == \
        (4096, 8, 16)
    assert triton_sass.liger_layernorm(8192).warps == 16


def test_cross_entropy_is_counted_per_element_of_its_tile():
    parts, resources = triton_sass.sample_parts(ROOT / "samples" / "cross_entropy.hk")
    assert [p.label.split("(")[1] for p in parts] == ["interior)", "boundary)"]
    assert all(p.per_thread == 32 for p in parts)  # 64 x 64 over 128 threads
    interior, boundary = parts
    assert interior.classes["MUFU"] / 32 > 1  # an exp2 per element, and the rescale's
    assert boundary.instructions > interior.instructions
    assert resources.spill_stores == 0


_NO_TRITON = importlib.util.find_spec("triton") is None or triton_sass.liger_root() is None


@pytest.mark.skipif(_NO_TRITON, reason="triton and liger-kernel are not installed "
                    "(`make peer-sass`)")
def test_liger_cross_entropy_compiles_for_sm90a_with_one_softmax_loop():
    peer = triton_sass.liger_cross_entropy(32000)
    parts, usage = triton_sass.peer_parts(peer, triton_sass.compile_peer(
        peer, triton_sass.liger_root()))
    (loop,) = parts  # forward only: the ignored row's gradient loop holds no arithmetic
    assert loop.classes["MUFU"] >= 32 and loop.classes["SHFL"] > 0
    assert usage["LOCAL"] == 0 and usage["REG"] > 0


@pytest.mark.skipif(attention_bwd_sass.fa3_library() is None,
                    reason="flash-attn3-jax is not installed (`make peer-sass`)")
def test_fa3_backward_loop_holds_five_products_per_tile():
    with tempfile.TemporaryDirectory() as tmp:
        cubin = attention_bwd_sass.fa3_cubin(Path(tmp))
    kernel, (loop,), usage, _ = attention_bwd_sass.fa3_loops(cubin, causal=False)
    assert kernel.tile == (80, 128, 128) and loop.tiles == 1.25
    assert 300 < loop.per_tile < 600 and usage["LOCAL"] == 0
