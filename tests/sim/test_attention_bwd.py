"""samples/attention_bwd.hk and samples/attention_bwd_delta.hk through the CPU
model on chosen inputs, against attention's gradient written out in float64:
P = softmax(s Q K^T) (causal: keys past the query masked), dV = P^T dO,
dP = dO V^T, dS = P * (dP - Delta), dQ = s dS K, dK = s dS^T Q, s = 1/sqrt(128).

Tolerance: the kernel rounds P and dS to bf16 (relative 2^-9 each) before the
products that use them, and accumulates in f32; every other rounding is f32's.
So each output element is within 2^-9 of the float64 product of the magnitudes
of its terms (|P|^T |dO|, s |dS|^T |Q|, s |dS| |K|), plus dS's own rounding
carried through dP's f32 error; the bound below is four times 2^-9 of that
product, so an error past it is a wrong result, not rounding."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hopperc
from tests.conftest import ROOT

BWD = ROOT / "samples" / "attention_bwd.hk"
DELTA = ROOT / "samples" / "attention_bwd_delta.hk"
D = 128
SCALE = D ** -0.5


def _bf16(x):
    return x.astype(ml_dtypes.bfloat16)


def _f64(x):
    return np.asarray(x).astype(np.float64)


def _forward(q, k, v, causal):
    """P, O and the natural log-sum-exp of each row's scaled scores, float64."""
    s = q @ np.swapaxes(k, -1, -2) * SCALE
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j > i, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    lse = top + np.log(np.exp(s - top).sum(axis=-1, keepdims=True))
    p = np.exp(s - lse)
    return p, p @ v, lse[..., 0]


def _gradient(q, k, v, do, p, delta):
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - delta[..., None])
    dq = ds @ k * SCALE
    dk = np.swapaxes(ds, -1, -2) @ q * SCALE
    bound = {
        "DV": np.swapaxes(p, -1, -2) @ np.abs(do),
        "DQ": np.abs(ds) @ np.abs(k) * SCALE,
        "DK": np.swapaxes(np.abs(ds), -1, -2) @ np.abs(q) * SCALE,
    }
    return {"DQ": dq, "DK": dk, "DV": dv}, bound


def _inputs(length, causal, seed):
    rng = np.random.default_rng(seed)
    shape = (1, 2, length, D)
    q, k, v, do = (_bf16(rng.normal(0, 1.5, shape)) for _ in range(4))
    # Head 1, query 5: every score about -110, so its LSE is too and exp(-LSE)
    # overflows f32: a key past L left unmasked would put inf * 0 into dQ.
    kf = _f64(k)
    kf[0, 1, :, 0] = 30 + np.abs(kf[0, 1, :, 0])
    k = _bf16(kf)
    qf = _f64(q)
    qf[0, 1, 5] = 0.0
    qf[0, 1, 5, 0] = -40.0
    q = _bf16(qf)
    p, o, lse = _forward(_f64(q), _f64(k), _f64(v), causal)
    delta = (_f64(_bf16(o)) * _f64(do)).sum(axis=-1)
    return q, k, v, do, p, o, lse, delta


@pytest.mark.parametrize("length, causal", [(100, 0), (200, 0), (200, 1)])
def test_gradient_against_float64(length, causal):
    """L = 100: one key block (keys 100 .. 127 zero rows, masked), two query
    blocks, the second partial (queries past L add nothing). L = 200: two key
    blocks, each adding its dQ into every query block's rows (the second from
    its first query block on, when causal: the loop starts at the diagonal and
    masks keys past each query). DQ starts at values of its own, which the adds
    keep."""
    q, k, v, do, p, _, lse, delta = _inputs(length, causal, seed=7 + causal)
    start = np.random.default_rng(1).normal(0, 1, q.shape).astype(np.float32)
    inputs = {"Q": q, "K": k, "V": v, "DO": do, "LSE": lse.astype(np.float32),
              "DELTA": delta.astype(np.float32), "DQ": start}
    out = hopperc.simulate(BWD, inputs, {"CAUSAL": causal})
    want, bound = _gradient(_f64(q), _f64(k), _f64(v), _f64(do), p,
                            _f64(delta.astype(np.float32)))
    want["DQ"] = want["DQ"] + start
    bound["DQ"] = bound["DQ"] + np.abs(start)
    for name in ("DQ", "DK", "DV"):
        got = _f64(out[name])
        limit = 4 * 2.0 ** -9 * bound[name] + 1e-6
        error = np.abs(got - want[name])
        worst = np.unravel_index((error - limit).argmax(), error.shape)
        assert (error <= limit).all(), (f"{name}{worst}: {got[worst]:.6g}, want "
                                        f"{want[name][worst]:.6g} (bound {limit[worst]:.3g})")


def test_delta_against_float64():
    """Delta = rowsum(dO * O) for L = 100: the second row block partial (its rows
    past L not written), each row's 128 products summed in f32 (error below 128
    f32 roundings of the sum of magnitudes)."""
    rng = np.random.default_rng(3)
    o, do = (_bf16(rng.normal(0, 1.5, (2, 1, 100, D))) for _ in range(2))
    out = hopperc.simulate(DELTA, {"O": o, "DO": do})
    terms = _f64(o) * _f64(do)
    error = np.abs(_f64(out["DELTA"]) - terms.sum(axis=-1))
    assert (error <= 2 * D * 2.0 ** -24 * np.abs(terms).sum(axis=-1)).all()
