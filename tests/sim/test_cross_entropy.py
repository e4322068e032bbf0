"""samples/cross_entropy.hk on chosen logits and labels against a float64
reference: loss[m] = logsumexp(X[m]) - X[m, T[m]], 0 where T[m] is the
ignore_index argument (torch's reduction='none'), another label outside 0 .. V-1
picking no logit (that row's loss is its log-sum-exp).

Tolerance, in units of f32's unit roundoff (2^-24) and in base 2 before the
product by ln 2 (the inputs are bf16; the reference starts from the same
values): x log2(e) rounds twice (the product, the constant), 2 |x2| for the
maximum (the picked logit is exact: a bf16 value in f32, one nonzero term a
row); exp2 of an argument up to 2 max |x2| is off, relative, by ln 2 times that
argument's rounding plus its own; the V-term f32 sum l and one rescale per
column block add V + 2 blocks, relative, which log2 turns into that over ln 2,
plus its own rounding of log2 l <= log2 V; m + log2 l, the product by ln 2 and
the subtraction of the logit round |lse| (in base 2) three times. The bound is
twice the sum, so an error past it is a wrong result, not rounding."""
from __future__ import annotations

import ml_dtypes
import numpy as np

import hopperc
from tests.conftest import ROOT

F32_EPS = 2.0 ** -24
LOG2E = 1.4426950408889634


def _expected(x: np.ndarray, labels: np.ndarray, ignore_index: int):
    """The loss per row in float64 and the bound of its f32 error (above)."""
    m_rows, v = x.shape
    xs = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    top = xs.max(axis=1)
    lse = top + np.log(np.exp(xs - top[:, None]).sum(axis=1))
    inside = (labels >= 0) & (labels < v)
    picked = np.where(inside, xs[np.arange(m_rows), np.clip(labels, 0, v - 1)], 0.0)
    want = np.where(labels == ignore_index, 0.0, lse - picked)
    x2 = np.abs(xs).max(axis=1) * LOG2E
    blocks = -(-v // 64)
    base2 = (2 * x2 + (np.log(2) * 2 * x2 + 1) + (v + 2 * blocks) / np.log(2)
             + np.log2(v) + 3 * np.abs(lse * LOG2E))
    return want, 2 * np.log(2) * base2 * F32_EPS


def test_cross_entropy_against_float64():
    rng = np.random.default_rng(11)
    # M = 100 (a partial row tile), V = 160: three column blocks of 64, the last
    # partial, so the online maximum and sum cross block boundaries.
    m_rows, v = 100, 160
    x = rng.normal(0, 3, (m_rows, v)).astype(np.float32)
    x[1] = np.linspace(-20, 20, v)       # the maximum grows in every block: rescales
    x[2] = np.linspace(20, -20, v)       # the maximum is in the first block
    labels = rng.integers(0, v, m_rows).astype(np.int32)
    labels[:6] = [0, v - 1, 0, 63, 64, v - 1]   # the first and last columns, block edges
    labels[6:8] = [-1, v]                # outside the row (v: a padded column of the
                                         # last block): no logit picked
    labels[[8, 63, 64, 99]] = -100       # ignored: the first tile's last row, the
                                         # second's first, the last row of all
    out = hopperc.simulate(ROOT / "samples" / "cross_entropy.hk",
                           {"X": x, "T": labels, "ignore_index": -100})
    assert set(out) == {"Loss"} and out["Loss"].dtype == np.float32
    want, bound = _expected(x, labels, -100)
    assert (out["Loss"][[8, 63, 64, 99]] == 0).all()
    error = np.abs(out["Loss"].astype(np.float64) - want)
    worst = (error - bound).argmax()
    assert (error <= bound).all(), \
        f"row {worst}: off by {error[worst]:.3g}, bound {bound[worst]:.3g}"


def test_ignore_index_is_the_argument_not_a_fixed_value():
    """With ignore_index 3, label 3 gives 0 and -100 is only a label outside the
    row (its loss the log-sum-exp), as torch's cross_entropy(ignore_index=3)."""
    rng = np.random.default_rng(5)
    x = rng.normal(0, 2, (70, 72)).astype(np.float32)
    labels = rng.integers(0, 72, 70).astype(np.int32)
    labels[[0, 33, 69]] = 3
    labels[[1, 65]] = -100
    out = hopperc.simulate(ROOT / "samples" / "cross_entropy.hk",
                           {"X": x, "T": labels, "ignore_index": 3})
    want, bound = _expected(x, labels, 3)
    assert (out["Loss"][labels == 3] == 0).all() and (out["Loss"][[1, 65]] > 0).all()
    assert (np.abs(out["Loss"].astype(np.float64) - want) <= bound).all()
