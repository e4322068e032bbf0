"""Every sample on the GPU, on tile multiples and on ragged shapes (TMA
clipping and zero fill), against the reference of its own statements and
against a PyTorch expression written here by hand from the sample's comment."""
import pytest

from hopperc import driver
from hopperc.harness.check import compare, run_check
from hopperc.harness.torch_bridge import to_host
from hopperc.ir.dtypes import DType
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import SAMPLES

pytestmark = pytest.mark.gpu


def _relu_mm(torch, a, b):
    return torch.relu(a.float() @ b.float().T)


def _attention(torch, t):
    """samples/attention_fwd.hk by hand, [B, H, L, D]: O and the natural log-sum-exp
    of each query row's scaled scores."""
    q, k, v = (t[n].float() for n in "QKV")
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return {"O": (torch.softmax(s, dim=-1) @ v).bfloat16(), "LSE": torch.logsumexp(s, dim=-1)}


def _attention_bwd(torch, t):
    """samples/attention_bwd.hk by hand from its inputs (LSE and DELTA as given):
    P = exp(s Q K^T - LSE), dV = P^T dO, dS = P * (dO V^T - Delta), dK = s dS^T Q,
    and dQ = s dS K added to DQ's values before the run; P and s dS rounded to
    bf16 before their products, as the kernel rounds them."""
    q, k, v, do = (t[n].float() for n in ("Q", "K", "V", "DO"))
    scale = q.shape[-1] ** -0.5
    p = torch.exp(q @ k.transpose(-1, -2) * scale - t["LSE"][..., None])
    ds = (p * (do @ v.transpose(-1, -2) - t["DELTA"][..., None]) * scale).bfloat16().float()
    return {"DV": (p.bfloat16().float().transpose(-1, -2) @ do).bfloat16(),
            "DK": (ds.transpose(-1, -2) @ q).bfloat16(),
            "DQ": (t["DQ_before"].double() + (ds @ k).double()).float()}


def _attention_varlen(torch, t, g=2, d=128):
    """samples/attention_varlen.hk by hand: head h's columns h*d .. of Q and O,
    kv head h // g's of K and V, per sequence CU[b] .. CU[b + 1]; O and LSE
    stay 0 outside every sequence."""
    cu = [int(x) for x in t["CU"].tolist()]
    heads = t["LSE"].shape[0]
    q, k, v = (t[n].float() for n in "QKV")
    o, lse = torch.zeros_like(q), torch.zeros_like(t["LSE"])
    for s, e in zip(cu[:-1], cu[1:]):
        for h in range(heads if e > s else 0):
            kv = h // g
            scores = q[s:e, h * d:(h + 1) * d] @ k[s:e, kv * d:(kv + 1) * d].T / d ** 0.5
            lse[h, s:e] = torch.logsumexp(scores, dim=1)
            o[s:e, h * d:(h + 1) * d] = torch.softmax(scores, dim=1) @ v[s:e, kv * d:(kv + 1) * d]
    return {"O": o.bfloat16(), "LSE": lse}


def _cross_entropy(torch, t):
    """torch's cross_entropy(reduction='none', ignore_index=...) where the label is
    inside the row or the ignore_index; a label outside 0 .. V-1 picks no logit."""
    x, labels = t["X"].float(), t["T"].long()
    inside = (labels >= 0) & (labels < x.shape[1])
    loss = torch.nn.functional.cross_entropy(x, torch.where(inside, labels, t["ignore_index"]),
                                             reduction="none", ignore_index=t["ignore_index"])
    return {"Loss": torch.where(inside | (labels == t["ignore_index"]), loss,
                                torch.logsumexp(x, dim=1))}


def _grouped(torch, t):
    """Expert g's rows OFFS[g] .. OFFS[g + 1] - 1 of A times B[g]; C's other rows
    as the kernel left them (the reference of its statements checks those)."""
    c, offsets = t["C"].clone(), t["OFFS"].tolist()
    for g in range(min(t["B"].shape[0], len(offsets) - 1)):
        rows = slice(offsets[g], max(offsets[g], offsets[g + 1]))
        c[rows] = (t["A"][rows].float() @ t["B"][g].float().T).bfloat16()
    return {"C": c}


def _grouped_masked(torch, t):
    """The first CNT[g] rows of A[g] times B[g]; C's other rows as the kernel left them."""
    c = t["C"].clone()
    for g, count in enumerate(t["CNT"].tolist()):
        rows = slice(0, max(count, 0))
        c[g, rows] = (t["A"][g, rows].float() @ t["B"][g].float().T).bfloat16()
    return {"C": c}


def _blockscaled(torch, t):
    """Dequantize, then multiply: A times its 1 x 128 scales SA[k / 128, m], B
    times its 128 x 128 scales SB[n / 128, k / 128]."""
    a, b = t["A"].float(), t["B"].float()
    (m, k), n = a.shape, b.shape[0]
    sa = t["SA"].T.repeat_interleave(128, 1)[:, :k]
    sb = t["SB"].repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
    return {"C": ((a * sa) @ (b * sb).T).bfloat16()}


def _tf32_mm(torch, t):
    """A @ B^T of the inputs as a .tf32 wgmma reads them (docs/language.md § 10:
    the low 13 mantissa bits dropped), summed in float64, stored as f32."""
    a, b = (t[n].view(torch.int32).bitwise_and(-8192).view(torch.float32).double()
            for n in "AB")
    return {"C": (a @ b.T).float()}


def _splitk(torch, t):
    """C's values before the run plus A @ B^T: the kernel adds every split's
    partial into C (the splits' f32 adds land in any order)."""
    return {"C": (t["C_before"].double() + t["A"].double() @ t["B"].double().T).float()}


def _layernorm(torch, t):
    """torch's layer_norm (eps 1e-5) and the statistics it saves, in float64."""
    x = t["X"].double()
    var, mean = torch.var_mean(x, dim=1, unbiased=False)
    y = torch.nn.functional.layer_norm(x, x.shape[1:], t["W"].double(), t["B"].double(), 1e-5)
    return {"Y": y.bfloat16(), "Mean": mean.float(), "Rstd": torch.rsqrt(var + 1e-5).float()}


TORCH_REFERENCE = {
    "tma_copy": lambda torch, t: {"Y": t["X"]},
    "scale_rows": lambda torch, t: {"Y": (t["X"].float() * t["S"][:, None]).bfloat16()},
    "gemm_relu": lambda torch, t: {"C": _relu_mm(torch, t["A"], t["B"]).bfloat16()},
    "gemm_bf16": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_persistent": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_pipelined": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_one_role": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_pingpong": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_multicast": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_streamk": lambda torch, t: {"C": (t["A"].float() @ t["B"].float().T).bfloat16()},
    "gemm_bias_relu": lambda torch, t: {"C": torch.relu(
        t["A"].float() @ t["B"].float().T + t["bias"][None, :]).bfloat16()},
    "gemm_bias_gelu": lambda torch, t: {"C": torch.nn.functional.gelu(
        t["A"].float() @ t["B"].float().T + t["bias"][None, :]).bfloat16()},
    "mlp_two_mma": lambda torch, t: {"H": (_relu_mm(torch, t["X"], t["Wg"]) * (
        t["X"].float() @ t["Wu"].float().T)).bfloat16()},
    "gemm_chain": lambda torch, t: {"D1": _relu_mm(torch, t["A1"], t["B1"]).bfloat16(),
                                    "D2": _relu_mm(torch, t["A2"], t["B2"]).bfloat16()},
    "two_producers": lambda torch, t: {"Z": (t["X"].float() + t["Y"].float()).bfloat16()},
    "softmax": lambda torch, t: {"Y": torch.softmax(t["X"].float(), dim=1).bfloat16()},
    "softmax_wide": lambda torch, t: {"Y": torch.softmax(t["X"].float(), dim=1).bfloat16()},
    "cross_entropy": _cross_entropy,
    "attention_fwd": lambda torch, t: _attention(torch, t),
    "attention_varlen": _attention_varlen,
    "attention_bwd": _attention_bwd,
    "attention_bwd_delta": lambda torch, t: {
        "DELTA": (t["O"].float() * t["DO"].float()).sum(dim=-1)},
    "grouped_gemm": _grouped,
    "grouped_gemm_masked": _grouped_masked,
    "gemm_fp8_blockscaled": _blockscaled,
    "gemm_tf32": _tf32_mm,
    "gemm_splitk": _splitk,
    "rmsnorm": lambda torch, t: {"Y": (t["X"].float() * torch.rsqrt(
        (t["X"].float() ** 2).mean(dim=1, keepdim=True) + 1e-6) * t["W"].float()).bfloat16()},
    "layernorm": _layernorm,
    "sum_slices": lambda torch, t: {"Y": t["X"].double().sum(dim=0).float()},
}


def shapes(path) -> dict[str, dict[str, int]]:
    """Tile multiples (the simulator's defaults and 4x them), ragged sizes 24
    short of them (still multiples of 8, as TMA strides need 16 bytes), and
    8 everywhere: one partial tile per axis."""
    dims = default_dims(driver.lower(driver.check(driver.read_source(path))))
    kinds = {"tiles": dims, "large": {d: 4 * v for d, v in dims.items()},
             "ragged": {d: v - 24 for d, v in dims.items()}, "tiny": {d: 8 for d in dims}}
    derive = DERIVED.get(path.stem, lambda d: d)
    return {kind: derive(d) for kind, d in kinds.items()}


# Dimensions that follow from others: the fp8 sample's scale blocks (K / 128 and
# N / 128, rounded up), and its e4m3 rows' K a multiple of 16 (16-byte TMA strides).
def _fp8_blocks(d: dict[str, int]) -> dict[str, int]:
    k = -(-d["K"] // 16) * 16
    return {**d, "K": k, "KB": -(-k // 128), "NB": -(-d["N"] // 128)}


# attention_varlen's head columns: 128 per query head, 128 per kv head (G = 2),
# at least one head and one sequence.
def _varlen_heads(d: dict[str, int]) -> dict[str, int]:
    heads = max(d["HQ"], 1)
    return {**d, "HQ": heads, "B1": max(d["B1"], 2), "DQ": 128 * heads,
            "DKV": 128 * -(-heads // 2)}


# gemm_streamk's grid of P blocks (all resident at once: a block waits for a later
# one) and one flag per 128 x 128 output tile.
def _streamk_blocks(d: dict[str, int]) -> dict[str, int]:
    m, n = max(d["M"], 8), max(d["N"], 8)
    return {**d, "M": m, "N": n, "P": min(max(d["P"], 2), 16),
            "T": -(-m // 128) * -(-n // 128)}


# sum_slices' counters: one per 64 x 64 tile of Y (no block waits on another, so
# the grid need not be resident at once); at least one slice and one part (the
# ragged and tiny kinds shrink them).
def _slice_counters(d: dict[str, int]) -> dict[str, int]:
    return {**d, "P": max(d["P"], 3), "PARTS": max(d["PARTS"], 2),
            "TM": -(-d["M"] // 64), "TN": -(-d["N"] // 64)}


DERIVED = {"gemm_fp8_blockscaled": _fp8_blocks, "attention_varlen": _varlen_heads,
           "gemm_streamk": _streamk_blocks, "sum_slices": _slice_counters}


# Tensors a sample adds into (TMA reduce-adds): its reference starts from their
# values before the run, NAME_before.
ADDED_INTO = {"gemm_splitk": ("C",), "attention_bwd": ("DQ",)}


# Outputs summed from values the kernel rounds to 16 bits after approximate math
# (attention_bwd's dQ = s dS K, with dS in bf16 and P from ex2.approx): where the
# GPU's value of a term lies at a rounding boundary it may round the other way than
# numpy's, by one bf16 unit of that term, so such an output is compared at the
# precision of the rounded terms.
ROUNDED_THROUGH = {"attention_bwd": {"DQ": DType.BF16}}


CASES = [(p, kind) for p in SAMPLES for kind in ("tiles", "large", "ragged", "tiny")]


@pytest.mark.parametrize("path, kind", CASES, ids=[f"{p.stem}-{k}" for p, k in CASES])
def test_sample_matches_references(path, kind, torch):
    dims = shapes(path)[kind]
    result = run_check(driver.read_source(path), shapes=dims, seed=len(kind))
    assert result.reference is not None, result.unchecked
    coarse = ROUNDED_THROUGH.get(path.stem, {})
    for out in result.outputs:
        assert out.tensor in coarse or out.mismatches == 0, out
    source = driver.read_source(path)
    if coarse:
        lowered = driver.lower(driver.check(source))
        want = expected_outputs(driver.check(source),
                                make_problem(lowered, result.dims, len(kind)))
        for name, dtype in coarse.items():
            check = compare(name, to_host(result.tensors[name]), want[name], dtype)
            assert check.mismatches == 0, check
    before = {f"{name}_before": torch.from_numpy(result.inputs[name]).to(
        result.tensors[name].device) for name in ADDED_INTO.get(path.stem, ())}
    by_hand = TORCH_REFERENCE[path.stem](torch, {**result.tensors, **before, **result.scalars})
    for name, want in by_hand.items():
        dtype = coarse.get(name, driver.check(source).tensor(name).dtype)
        check = compare(name, to_host(result.tensors[name]), to_host(want), dtype)
        assert check.mismatches == 0, check
