"""samples/attention_fwd.hk, attention_bwd_delta.hk and attention_bwd.hk chained
on the GPU (forward for O and LSE, Delta, backward) against PyTorch's autograd
of scaled_dot_product_attention in float32 over the same bf16 inputs, at a
ragged length, causal and not."""
import pytest

import hopperc
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu
SAMPLES = ROOT / "samples"


@pytest.mark.parametrize("causal", [0, 1])
def test_backward_matches_autograd(torch, causal):
    gen = torch.Generator(device="cuda").manual_seed(5 + causal)
    shape = (2, 3, 300, 128)  # 3 key blocks, the last partial; 5 query blocks
    q, k, v, do = (torch.randn(shape, device="cuda", generator=gen).bfloat16()
                   for _ in range(4))
    o, lse = torch.empty_like(q), torch.empty(shape[:3], device="cuda")
    hopperc.compile(SAMPLES / "attention_fwd.hk", {"CAUSAL": causal})(Q=q, K=k, V=v, O=o, LSE=lse)
    delta = torch.empty_like(lse)
    hopperc.compile(SAMPLES / "attention_bwd_delta.hk")(O=o, DO=do, DELTA=delta)
    dq = torch.zeros(shape, device="cuda")
    dk, dv = torch.empty_like(q), torch.empty_like(q)
    hopperc.compile(SAMPLES / "attention_bwd.hk", {"CAUSAL": causal})(
        Q=q, K=k, V=v, DO=do, LSE=lse, DELTA=delta, DQ=dq, DK=dk, DV=dv)
    torch.cuda.synchronize()

    leaves = [t.float().requires_grad_() for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=bool(causal))
    out.backward(do.float())
    for name, got, leaf in (("dQ", dq, leaves[0]), ("dK", dk, leaves[1]), ("dV", dv, leaves[2])):
        want = leaf.grad
        error = (got.float() - want).abs().max().item()
        # P and dS are rounded to bf16 before their products, and O to bf16
        # before Delta: a few bf16 units of the gradient's magnitude.
        assert error <= 2e-2 * want.abs().max().item(), f"{name}: max error {error}"
