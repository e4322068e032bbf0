"""Register tile adds (`C[R0 : R1, C0 : C1] += acc`) on the GPU against torch:
split-K partials from every block summed into C, whole tiles (untested vector
reds) and ragged ones with an odd row length (each pair tested: the vector red
or the scalar fallback), and bf16 pairs (red.global.add.noftz.bf16x2)."""
import pytest

import hopperc
from tests.test_atomic_tile_adds import ADD, SPLIT_K, SPLIT_K_LOOP

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m, n, k", [(256, 128, 512), (150, 71, 328)])
def test_split_k_tile_adds_sum_every_split(torch, m, n, k):
    kernel = hopperc.compile(SPLIT_K_LOOP)
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16)
    c = torch.randn(m, n, device="cuda", generator=gen)
    want = c + a.double() @ b.double().T
    kernel(A=a, B=b, C=c)
    torch.cuda.synchronize()
    bound = 8 * 2 ** -24 * (want.abs() + a.double().abs() @ b.double().abs().T) * k / 64
    assert bool(((c.double() - want).abs() <= bound).all())


@pytest.mark.parametrize("m, n", [(130, 67), (128, 64)], ids=["tested", "whole"])
def test_bf16_pairs(torch, m, n):
    kernel = hopperc.compile(SPLIT_K.replace("C: f32[M, N]", "C: bf16[M, N]").replace(
        ADD, "C[BM * tile.m + 64 * wg : M, BN * tile.n : N] += bf16(acc)"))
    gen = torch.Generator(device="cuda").manual_seed(6)
    a = torch.randn(m, 128, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(n, 128, device="cuda", generator=gen).to(torch.bfloat16)
    c = torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)
    kernel(A=a, B=b, C=c)
    torch.cuda.synchronize()
    want = a.double() @ b.double().T
    bound = 2 ** -6 * (a.double().abs() @ b.double().abs().T)  # two bf16 roundings
    assert bool(((c.double() - want).abs() <= bound).all())
