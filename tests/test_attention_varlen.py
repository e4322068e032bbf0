"""samples/attention_varlen.hk: attention over packed sequences (cu_seqlens),
grouped-query heads, causal or not, checked against float64 numpy attention
(O and the natural log-sum-exp per row) with offsets drawn here: an empty
sequence, one shorter than a tile, one not a multiple of the tile, and rows
before the first sequence and after the last that every tile leaves alone."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hopperc import driver
from hopperc.sim.explore import program, simulate
from hopperc.sim.problem import make_problem
from hopperc.sim.schedule import Chooser, run_cluster
from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "attention_varlen.hk"
D = 128
G = 2  # query heads per kv head (the sample's default)
SENTINEL = 7.0  # what O and LSE hold before the kernel runs


def _problem(causal: int, lengths: list[int], heads: int, first: int = 5, tail: int = 11):
    """The lowered kernel and a problem whose sequences have `lengths`, packed
    from row `first`, with `tail` rows after the last one. Q is scaled by 4
    (exact in bf16) so the scores spread over a few units: a row's max moves
    from key tile to key tile, and O rescaled wrongly shows."""
    front_end = driver.check(driver.read_source(SAMPLE), {"CAUSAL": causal})
    lowered = driver.lower(front_end)
    cu = np.cumsum([first, *lengths])
    dims = {"T": int(cu[-1]) + tail, "DQ": heads * D, "DKV": heads // G * D,
            "B1": len(cu), "HQ": heads}
    problem = make_problem(lowered, dims)
    inputs = {**problem.inputs, "CU": cu.astype(np.float32), "Q": 4 * problem.inputs["Q"],
              "O": np.full(problem.inputs["O"].shape, SENTINEL, np.float32),
              "LSE": np.full(problem.inputs["LSE"].shape, SENTINEL, np.float32)}
    problem = dataclasses.replace(problem, inputs=inputs, element_sets=())
    return front_end, lowered, problem


def _attention(problem, causal: int):
    """O and LSE in float64, SENTINEL outside every sequence."""
    q, k, v = (problem.inputs[n].astype(np.float64) for n in "QKV")
    cu = problem.inputs["CU"].astype(int)
    o = np.full(q.shape, SENTINEL)
    lse = np.full(problem.inputs["LSE"].shape, SENTINEL)
    for s, e in zip(cu[:-1], cu[1:]):
        for h in range(problem.dims["HQ"]):
            kv = h // G
            qh, kh, vh = (x[s:e, c * D:(c + 1) * D] for x, c in ((q, h), (k, kv), (v, kv)))
            scores = qh @ kh.T / np.sqrt(D)
            if causal:
                i, j = np.indices(scores.shape)
                scores = np.where(j > i, -np.inf, scores)
            top = scores.max(axis=1, keepdims=True) if e > s else 0
            p = np.exp(scores - top)
            total = p.sum(axis=1, keepdims=True)
            o[s:e, h * D:(h + 1) * D] = p / total @ vh
            lse[h, s:e] = (np.log(total) + top)[:, 0]
    return o, lse


def _run(lowered, problem, seed: int = 0):
    tensors = problem.fresh_tensors()
    prog = program(lowered)
    for n, cluster in enumerate(problem.clusters()):
        run_cluster(prog, [problem.env(block) for block in cluster], tensors,
                    Chooser("random", seed), n)
    return tensors


@pytest.mark.parametrize("causal", [0, 1])
def test_matches_attention_in_float64(causal):
    """Four query heads over two kv heads (G = 2: heads 0, 1 read kv head 0,
    heads 2, 3 kv head 1); sequences of 300 rows (three query tiles, the last
    partial, over three key tiles: the key loop runs twice and the 2-stage rings
    wrap inside a tile), 0 (no tile), 50 (shorter than a tile: zero-filled keys
    masked, no loop iteration) and 130 (a tile and two rows). Rows 0 .. 4 and
    the last 11 belong to no sequence."""
    _, lowered, problem = _problem(causal, [300, 0, 50, 130], heads=4)
    got = _run(lowered, problem)
    want_o, want_lse = _attention(problem, causal)
    np.testing.assert_allclose(got["O"], want_o, atol=3e-3 * np.abs(want_o).max())
    np.testing.assert_allclose(got["LSE"], want_lse, atol=2e-3)
    cu = problem.inputs["CU"].astype(int)
    for rows in (slice(0, cu[0]), slice(cu[-1], None)):  # outside every sequence
        assert (got["O"][rows] == SENTINEL).all() and (got["LSE"][:, rows] == SENTINEL).all()


@pytest.mark.parametrize("causal", [0, 1])
def test_every_schedule_is_right(causal):
    """Syncs and data on seeded schedules and a short search, on a problem
    whose tiles outnumber the blocks (each block walks several sequences)."""
    front_end, lowered, problem = _problem(causal, [70, 0, 129, 1], heads=2)
    report = simulate(lowered, front_end, problem, 2, 40)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]


@pytest.fixture(scope="module")
def sass():
    """(attention_fwd's, attention_varlen's) SASS, normal and causal."""
    from hopperc.backend import sass_metrics as sm
    out = {}
    for causal in (0, 1):
        for path in (ROOT / "samples" / "attention_fwd.hk", SAMPLE):
            built = driver.build(driver.read_source(path), {"CAUSAL": causal})
            (code,) = sm.functions(built.result.cubin).values()
            out[path.stem, causal] = (code, built.result.resources)
    return out


@pytest.mark.parametrize("causal", [0, 1])
def test_sass_key_loop_is_attention_fwds(sass, causal):
    """An iteration of the key loop issues tile j's S (8 m64n128k16 over the
    head's 128 columns) and tile j - 1's P V (8 more over its 128 keys): 16
    HGMMA after 2 fences, then waits for S (`1`: P V stays in flight under the
    masks and the max) and for P V (`0`, before O is rescaled); with `turns`
    one BAR.SYNC takes the tensor cores and one BAR.ARV hands them on. The
    sequence's offsets are read before the loop (no global load in it) and its
    end is a register, so the loop is attention_fwd's within 5% (attention_fwd
    601 / 739 instructions in this form, varlen 622 / 755 when written)."""
    from hopperc.backend import sass_metrics as sm
    lengths = {}
    for name in ("attention_fwd", "attention_varlen"):
        code, _ = sass[name, causal]
        lengths[name] = len(sm.loop_holding(code, "HGMMA").body(code))
    code, _ = sass["attention_varlen", causal]
    body = sm.loop_holding(code, "HGMMA").body(code)
    assert [i.opcode for i in body if i.base == "HGMMA"] == ["HGMMA.64x128x16.F32.BF16"] * 16
    assert sum(i.opcode == "WARPGROUP.ARRIVE" for i in body) == 2
    waits = [i.operands.replace(" ", "") for i in body
             if i.opcode.startswith("WARPGROUP.DEPBAR")]
    assert waits == ["gsb0,0x1", "gsb0,0x0"]
    assert [i.opcode for i in body if i.base == "BAR"] == ["BAR.SYNC.DEFER_BLOCKING", "BAR.ARV"]
    assert not any(i.base in ("LDG", "LDL", "STL") for i in body)
    assert lengths["attention_varlen"] <= 1.05 * lengths["attention_fwd"], lengths


@pytest.mark.parametrize("causal", [0, 1])
def test_sass_registers_within_the_roles_budgets(sass, causal):
    """No spills; the producer gives its registers back down to 24, as
    attention_fwd's (the walk over the sequences, whose count is not unrolled,
    and the ragged boxes' coordinates fit), and every register it names is
    below that; the consumers take 240."""
    import re
    code, resources = sass["attention_varlen", causal]
    assert resources.spill_stores == resources.spill_loads == 0
    ops = [(i.opcode, i.operands.replace(" ", "")) for i in code]
    dealloc = ops.index(("USETMAXREG.DEALLOC.CTAPOOL", "0x18"))
    alloc = next(k for k, (op, args) in enumerate(ops)
                 if op == "USETMAXREG.TRY_ALLOC.CTAPOOL" and args.endswith(",0xf0"))
    producer = [int(r) for _, args in ops[dealloc:alloc] for r in re.findall(r"\bR(\d+)\b", args)]
    assert dealloc < alloc and max(producer) < 24


def test_bench_says_what_it_needs_without_a_gpu():
    """bench/attention_varlen.py exits 2 with one line on a machine without a GPU."""
    import subprocess
    import sys

    from hopperc.runtime import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present: bench/gpu_check.py runs the benchmark")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "attention_varlen.py"),
                           "--runs", "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("bench/attention_varlen.py: ")
    assert "Traceback" not in proc.stderr


def test_check_draws_adversarial_sequences_and_is_clean():
    """`check`'s own offsets (three data sets) hold an empty sequence, one
    shorter than a tile and one longer than a tile and not a multiple of it;
    the causal variant checks clean on them (seeded schedules, every data set)."""
    front_end = driver.check(driver.read_source(SAMPLE), {"CAUSAL": 1})
    lowered = driver.lower(front_end)
    from hopperc.sim.problem import default_dims
    problem = make_problem(lowered, default_dims(lowered))
    sizes = {int(n) for i in range(problem.data_sets)
             for n in np.diff(problem.data_set(i).inputs["CU"])}
    assert 0 in sizes and any(0 < n < 128 for n in sizes) and any(
        n > 128 and n % 128 for n in sizes), sizes
    report = simulate(lowered, front_end, problem, problem.data_sets, 0)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]
