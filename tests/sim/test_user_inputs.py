"""`hopperc.simulate` and `hopperc sim --inputs/--save`: the samples run on arrays a
test chooses and match references written here in float64 (not the simulator's
own), within what bf16 rounding and f32 accumulation allow; every mistake in the
inputs is a located error, and a finding raises instead of returning outputs.

Tolerances: an input is rounded to bf16 on the way in, as the GPU's would be, so
the references start from the same bf16 values. A bf16 output is rounded once
to nearest: off by at most half an ulp, 2^-8 of its magnitude (`BF16_EPS`: bf16
keeps 8 significant bits). f32 arithmetic before it adds 2^-24 per operation;
a K-term f32 sum in any order is within K * 2^-24 * sum |a_k b_k| of the exact
one. Each bound below is twice the sum of those, so an error past it is a wrong
result, not rounding."""
from __future__ import annotations

import math
import os
import re
import shlex
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import hopperc
from hopperc.cli import main
from hopperc.diagnostics import CompileError
from hopperc.sim.findings import Category
from tests.conftest import ROOT
from tests.runtime.helpers import SCALED_COPY
from tests.sim.test_manual_kernels import variant

SAMPLES = ROOT / "samples"
BF16_EPS = 2.0 ** -8  # unit roundoff of bf16 (half an ulp, relative)
F32_EPS = 2.0 ** -24  # unit roundoff of f32


def bf16(x: np.ndarray) -> np.ndarray:
    """`x` rounded to bf16, as float64."""
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def assert_within(got: np.ndarray, want: np.ndarray, bound) -> None:
    excess = np.abs(got.astype(np.float64) - want) - bound
    where = np.unravel_index(excess.argmax(), excess.shape)
    assert got.shape == want.shape and excess.max() <= 0, \
        f"off by {excess.max():.3g} more than the bound at {where}"


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(7)


def test_scale_rows_against_float64(rng):
    # M = 100, N = 96: partial tiles along both axes (BM = BN = 64).
    x = rng.standard_normal((100, 96)).astype(np.float32)
    s = rng.uniform(-4, 4, 100).astype(np.float32)
    out = hopperc.simulate(SAMPLES / "scale_rows.hk", {"X": x, "S": s})
    assert set(out) == {"Y"} and out["Y"].dtype == ml_dtypes.bfloat16
    want = bf16(x) * s[:, None].astype(np.float64)
    # one f32 product, then the bf16 rounding
    assert_within(out["Y"], want, 2 * (BF16_EPS + F32_EPS) * np.abs(want))
    # bf16 arrays go in as they are: the same values, the same result
    again = hopperc.simulate(SAMPLES / "scale_rows.hk",
                             {"X": x.astype(ml_dtypes.bfloat16), "S": s})
    assert np.array_equal(again["Y"], out["Y"])


def test_rmsnorm_against_float64(rng):
    x = rng.standard_normal((70, 200)).astype(np.float32)
    w = rng.uniform(0.5, 2, 200).astype(np.float32)
    out = hopperc.simulate(SAMPLES / "rmsnorm.hk", {"X": x, "W": w})
    xs = bf16(x)
    want = xs / np.sqrt((xs * xs).mean(axis=1, keepdims=True) + 1e-6) * bf16(w)
    # 200-term f32 sum of squares, rsqrt and two products in f32, then bf16
    assert_within(out["Y"], want, 2 * (BF16_EPS + 210 * F32_EPS) * np.abs(want))


def test_layernorm_against_float64(rng):
    # rows far from zero against their spread (mean 40, deviation 2): a one-pass
    # E[x^2] - mean^2 cancels ~1604 - 1600 here and its Rstd falls outside the bound
    # below (tried); 70 x 200 leaves a partial row tile and a partial column tile,
    # whose zero-filled columns the squared deviations must mask (tried unmasked)
    m, n = 70, 200
    x = rng.normal(40, 2, (m, n)).astype(np.float32)
    w = rng.uniform(0.5, 2, n).astype(np.float32)
    b = rng.normal(0, 1, n).astype(np.float32)
    out = hopperc.simulate(SAMPLES / "layernorm.hk", {"X": x, "W": w, "B": b})
    assert set(out) == {"Y", "Mean", "Rstd"}
    xs = bf16(x)
    mean = xs.mean(axis=1)
    dev = xs - mean[:, None]
    rstd = 1 / np.sqrt((dev * dev).mean(axis=1) + 1e-5)
    want = dev * rstd[:, None] * bf16(w) + bf16(b)
    # the mean: a 200-term f32 sum and a division
    mean_err = (n + 1) * F32_EPS * np.abs(xs).mean(axis=1)
    assert_within(out["Mean"], mean, 2 * mean_err)
    # rstd: 200 f32 subtractions, squares and sums, a division, the eps and the
    # rsqrt (the mean's error adds only its square, n mean_err^2, to the sum)
    rstd_rel = (n + 6) * F32_EPS
    assert_within(out["Rstd"], rstd, 2 * rstd_rel * rstd)
    # y: the subtraction carries the mean's error, the products and the add one
    # rounding each (and rstd's), then bf16
    scaled = np.abs(dev * rstd[:, None] * bf16(w)) + np.abs(bf16(b))
    bound = (BF16_EPS * np.abs(want) + (mean_err * rstd)[:, None] * bf16(w)
             + (rstd_rel + 4 * F32_EPS) * scaled)
    assert_within(out["Y"], want, 2 * bound)


def test_softmax_against_float64(rng):
    x = rng.normal(0, 3, (70, 200)).astype(np.float32)
    out = hopperc.simulate(SAMPLES / "softmax.hk", {"X": x})
    xs = bf16(x)
    e = np.exp(xs - xs.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    # exp2 of an f32 argument up to |x| log2(e) ~ 30 (2^-24 of it, times ln 2, is
    # relative in the result), a 200-term f32 sum, a division, then bf16
    bound = 2 * (BF16_EPS + (30 + 210) * F32_EPS) * np.abs(want)
    assert_within(out["Y"], want, bound)


def test_gemm_bf16_against_float64(rng):
    # M = 130, N = 264, K = 96: partial tiles in M and N, a partial last k-tile.
    a = rng.standard_normal((130, 96)).astype(np.float32)
    b = rng.standard_normal((264, 96)).astype(np.float32)
    out = hopperc.simulate(SAMPLES / "gemm_bf16.hk", {"A": a, "B": b})
    want = bf16(a) @ bf16(b).T
    # f32 accumulation in any order over K = 96 terms, then bf16
    magnitude = np.abs(bf16(a)) @ np.abs(bf16(b)).T
    assert_within(out["C"], want, 2 * (BF16_EPS * np.abs(want) + 96 * F32_EPS * magnitude))


def test_gemm_bias_gelu_against_float64(rng):
    # M = 130, N = 264, K = 96 as gemm_bf16's; y = A @ B^T + bias spread over about
    # [-10, 10] so that GELU's tail, its bend and its linear part all occur.
    a = rng.standard_normal((130, 96)).astype(np.float32)
    b = rng.normal(0, 0.3, (264, 96)).astype(np.float32)
    bias = rng.uniform(-2, 2, 264).astype(np.float32)
    out = hopperc.simulate(SAMPLES / "gemm_bias_gelu.hk", {"A": a, "B": b, "bias": bias})
    y = bf16(a) @ bf16(b).T + bias.astype(np.float64)[None, :]
    erf = np.vectorize(math.erf)
    want = y * 0.5 * (1.0 + erf(y / math.sqrt(2.0)))
    # y: f32 accumulation over K = 96 terms and the bias add; GELU's slope is at most
    # 1.13, so y's error passes on at most that; erf's argument rounding, erff's 2 ulps
    # and the f32 products and sum add a few f32 ulps of |y| times (1 + |y|); then bf16
    magnitude = np.abs(bf16(a)) @ np.abs(bf16(b)).T + np.abs(bias)[None, :]
    y_error = (96 + 1) * F32_EPS * magnitude
    gelu_error = 8 * F32_EPS * np.abs(y) * (1 + np.abs(y))
    assert_within(out["C"], want, 2 * (BF16_EPS * np.abs(want) + 1.2 * y_error + gelu_error))

def test_attention_fwd_against_float64(rng):
    # L = 200: two query tiles and two key tiles (BM = BN = 128), the last partial.
    q, k, v = (rng.standard_normal((1, 2, 200, 64)).astype(np.float32) for _ in range(3))
    out = hopperc.simulate(SAMPLES / "attention_fwd.hk", {"Q": q, "K": k, "V": v},
                           {"HEAD_DIM": 64})
    scores = bf16(q) @ np.swapaxes(bf16(k), -1, -2) / np.sqrt(64)
    top = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - top)
    want_o = p @ bf16(v) / p.sum(axis=-1, keepdims=True)
    want_lse = (top + np.log(p.sum(axis=-1, keepdims=True)))[..., 0]
    # P is rounded to bf16 before P V (BF16_EPS of each term p |v|), O to bf16
    # at the end; f32 scores (64 terms), exp2 and the sums add far less.
    spread = p @ np.abs(bf16(v)) / p.sum(axis=-1, keepdims=True)
    assert_within(out["O"], want_o, 2 * BF16_EPS * (np.abs(want_o) + spread))
    # LSE in f32: each score within 64 * 2^-24 * sum |q k| / 8 (it moves the LSE
    # by as much at most), then a 200-term sum, log2 and two products
    assert out["LSE"].dtype == np.float32
    score_error = 64 * F32_EPS * (np.abs(bf16(q)) @ np.swapaxes(np.abs(bf16(k)), -1, -2)
                                  / 8).max(axis=-1)
    assert_within(out["LSE"], want_lse, 2 * (score_error + 210 * F32_EPS * np.abs(want_lse)))


def test_grouped_gemm_offsets_and_an_output_passed_in(rng):
    """i32 offsets are data (expert 1 has no rows); C is passed in, so the rows no
    expert owns (200..209) keep their values, as on the GPU."""
    a = rng.standard_normal((210, 64)).astype(np.float32)
    b = rng.standard_normal((3, 200, 64)).astype(np.float32)
    offs = np.array([0, 150, 150, 200], np.int32)
    out = hopperc.simulate(SAMPLES / "grouped_gemm.hk",
                           {"A": a, "B": b, "OFFS": offs, "C": np.full((210, 200), 7.0)})
    want = np.full((210, 200), 7.0)
    magnitude = np.zeros_like(want)
    for g in range(3):
        rows = slice(offs[g], offs[g + 1])
        want[rows] = bf16(a[rows]) @ bf16(b[g]).T
        magnitude[rows] = np.abs(bf16(a[rows])) @ np.abs(bf16(b[g])).T
    assert_within(out["C"], want, 2 * (BF16_EPS * np.abs(want) + 64 * F32_EPS * magnitude))
    assert np.all(out["C"][200:].astype(np.float64) == 7.0)


def test_scalar_arguments_and_adversarial_schedules(rng):
    x = rng.standard_normal((64, 128)).astype(np.float32)
    out = hopperc.simulate(SCALED_COPY, {"X": x, "alpha": 0.5, "shift": np.int32(3)},
                           schedules=4, search=20)
    assert np.array_equal(out["Y"].astype(np.float64), bf16(x) * 0.5)  # exact: a power of 2


def test_a_finding_raises_with_its_located_text(rng):
    broken = variant(28, "fence.proxy.async", None)  # the st.shared -> TMA store hand-off
    with pytest.raises(hopperc.SimulationFailed) as info:
        hopperc.simulate(broken, {"X": rng.standard_normal((64, 192)).astype(np.float32)})
    assert info.value.findings[0].category is Category.MISSING_FENCE
    assert re.search(r"manual_pipe\.hk:27:\d+: missing proxy fence", str(info.value))


@pytest.mark.parametrize("inputs,shapes,message", [
    ({"X": np.ones((64, 64))}, None, "no array for input tensor 'S' (f32[M]): the kernel reads it"),
    ({"X": np.ones((64, 64)), "S": np.ones(63)}, None,
     "tensor 'S' (f32[M]) has M = 63 (shape (63,)), but 'X' has M = 64 (shape (64, 64))"),
    ({"X": np.ones(64), "S": np.ones(64)}, None,
     "tensor 'X' (bf16[M, N]) has 2 dimensions, but its array has shape (64,)"),
    ({"X": np.ones((64, 64), np.int64), "S": np.ones(64)}, None,
     "tensor 'X' (bf16[M, N]) holds floating-point values: pass a float array (rounded to "
     "bf16), not int64"),
    ({"X": np.ones((64, 64)), "S": np.ones(64), "Xs": np.ones(3)}, None,
     "the inputs have 'Xs', which is no tensor or scalar argument of kernel scale_rows (it "
     "has: X, S, Y); did you mean 'X'?"),
    ({"X": np.ones((64, 64)), "S": np.ones(64)}, {"N": 128},
     "tensor 'X' (bf16[M, N]) has N = 64 (shape (64, 64)), but the shape given says N=128"),
    ({"X": np.ones((64, 60)), "S": np.ones(64)}, None,
     "pad dimension 1 (now 60) to a multiple of 8"),
])
def test_input_errors_name_the_tensor_and_dimension(inputs, shapes, message):
    with pytest.raises(CompileError) as info:
        hopperc.simulate(SAMPLES / "scale_rows.hk", inputs, shapes=shapes)
    assert message in info.value.message
    if "Xs" not in inputs:  # at the tensor's declaration
        assert info.value.span.line == 5 and info.value.span.col > 1


@pytest.mark.parametrize("count,message", [
    (np.array([-2 ** 63]), "holds -9223372036854775808, which is not an i32"),
    (np.array([2 ** 64 - 1], np.uint64), "holds 18446744073709551615, which is not an i32"),
    (np.array([2 ** 31], np.int64), "holds 2147483648, which is not an i32"),
])
def test_integer_values_are_checked_before_any_conversion(count, message):
    """Compared as Python integers: np.abs(-2^63) and uint64 -> int64 wrap."""
    arrays = {"A": np.ones((1, 128, 64)), "B": np.ones((1, 256, 64)), "CNT": count}
    with pytest.raises(CompileError) as info:
        hopperc.simulate(SAMPLES / "grouped_gemm_masked.hk", arrays)
    assert f"tensor 'CNT' (i32[E]) {message}" in info.value.message
    assert info.value.rule == "input" and info.value.span.line == 8


def test_scalar_argument_errors():
    x = np.ones((64, 64))
    with pytest.raises(CompileError, match="no value for scalar argument 'shift' \\(i32\\)"):
        hopperc.simulate(SCALED_COPY, {"X": x, "alpha": 1.0})
    for shift in (1.5, np.uint64(2 ** 64 - 1), 2 ** 31):
        with pytest.raises(CompileError, match="'shift' is i32: pass an integer of 32 bits"):
            hopperc.simulate(SCALED_COPY, {"X": x, "alpha": 1.0, "shift": shift})
    with pytest.raises(CompileError, match="takes one number, not an array of shape \\(2,\\)"):
        hopperc.simulate(SCALED_COPY, {"X": x, "alpha": [1.0, 2.0], "shift": 1})


def test_simulate_leaves_the_environment_alone(monkeypatch):
    """numpy is loaded before the call: OPENBLAS_NUM_THREADS would change nothing
    here, only the caller's later subprocesses (docs/sim.md, "BLAS threads")."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    hopperc.simulate(SAMPLES / "scale_rows.hk", {"X": np.ones((64, 64)), "S": np.ones(64)})
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_numpy_integers_are_counts():
    out = hopperc.simulate(SAMPLES / "scale_rows.hk", {"X": np.ones((64, 64)), "S": np.ones(64)},
                           shapes={"M": np.int64(64)}, schedules=np.int32(1))
    assert out["Y"].shape == (64, 64)


def test_a_run_past_its_budget_raises_incomplete():
    with pytest.raises(hopperc.SimulationIncomplete, match="stopped at its work budget of 10 "
                                                           "steps after 0 of 1 schedules"):
        hopperc.simulate(SAMPLES / "scale_rows.hk", {"X": np.ones((64, 64)), "S": np.ones(64)},
                         steps=10)


@pytest.mark.parametrize("arguments,error,message", [
    ({"shapes": {"M": "128"}}, TypeError, "shapes: M must be an int, not str ('128')"),
    ({"shapes": {"M": 0}}, ValueError, "shapes: M must be at least 1, not 0"),
    ({"defines": {"BM": "64"}}, TypeError, "defines: BM must be an int, not str"),
    ({"search": -3}, ValueError, "search must be at least 0, not -3"),
    ({"jobs": 0}, ValueError, "jobs must be at least 1, not 0"),
    ({"steps": 0}, ValueError, "steps must be at least 1, not 0"),
    ({"schedules": True}, TypeError, "schedules must be an int, not bool"),
    ({"jobs": 1.0}, TypeError, "jobs must be an int, not float"),
    ({"inputs": [np.ones((64, 64))]}, TypeError, "inputs must be a mapping of tensor and "
                                                 "scalar names"),
])
def test_wrong_arguments_are_python_errors(arguments, error, message):
    call = {"inputs": {"X": np.ones((64, 64)), "S": np.ones(64)}, **arguments}
    with pytest.raises(error) as info:
        hopperc.simulate(SAMPLES / "scale_rows.hk", **call)
    assert message in str(info.value)


# ---------------------------------------------------------------- the command line
def _sim(*args: str):
    return CliRunner().invoke(main, ["sim", *args])


def test_cli_saves_every_output_of_a_clean_run(tmp_path, rng):
    x = rng.standard_normal((100, 96)).astype(np.float32)
    s = rng.standard_normal(100).astype(np.float32)
    np.savez(tmp_path / "in.npz", X=x, S=s)
    result = _sim(str(SAMPLES / "scale_rows.hk"), "--inputs", str(tmp_path / "in.npz"),
                  "--save", str(tmp_path / "out.npz"))
    assert result.exit_code == 0, result.output
    assert "schedules: 1 seeded, no exhaustive search" in result.output
    assert f"saved: Y to {tmp_path / 'out.npz'}" in result.output
    with np.load(tmp_path / "out.npz") as saved:
        assert saved.files == ["Y"] and saved["Y"].dtype == np.float32  # bf16 values
        want = hopperc.simulate(SAMPLES / "scale_rows.hk", {"X": x, "S": s})["Y"]
        assert np.array_equal(saved["Y"], want.astype(np.float32))


@pytest.mark.parametrize("arrays,extra,message", [
    ({"X": np.ones((64, 64)), "S": np.ones(63)}, (), "has M = 63 (shape (63,)), but 'X' has M"),
    ({"X": np.ones((64, 64))}, (), "no array for input tensor 'S'"),
    ({"X": np.ones((64, 64)), "S": np.ones(64), "Q": np.ones(1)}, (), "the inputs have 'Q'"),
    ({"X": np.ones((64, 64)), "S": np.ones(64)}, ("--shape", "M=128"),
     "has M = 64 (shape (64, 64)), but the shape given says M=128"),
    ({"X": np.ones((64, 64)), "S": np.ones(64)}, ("--seeds", "0"),
     "--inputs needs --seeds 1 or more"),
])
def test_cli_input_errors_leave_no_file(tmp_path, arrays, extra, message):
    np.savez(tmp_path / "in.npz", **arrays)
    result = _sim(str(SAMPLES / "scale_rows.hk"), "--inputs", str(tmp_path / "in.npz"),
                  "--save", str(tmp_path / "out.npz"), *extra)
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out.npz").exists()


def test_cli_refuses_what_is_not_an_archive(tmp_path):
    (tmp_path / "text.npz").write_text("X = 1\n")
    np.save(tmp_path / "one.npy", np.ones(3))
    for name, message in [("text.npz", "is not a .npz archive (np.savez writes one)"),
                          ("one.npy", "holds one array (.npy), not a .npz archive"),
                          ("missing.npz", "no such file")]:
        result = _sim(str(SAMPLES / "scale_rows.hk"), "--inputs", str(tmp_path / name))
        assert result.exit_code == 1 and f"{tmp_path / name}: error: {message}" in result.output
    result = _sim(str(SAMPLES / "scale_rows.hk"), "--save", str(tmp_path / "out.npz"))
    assert result.exit_code == 1 and "--save needs --inputs" in result.output
    result = _sim(str(SAMPLES / "scale_rows.hk"), "--inputs", str(tmp_path / "one.npy"),
                  "--save", str(tmp_path / "one.npy"))
    assert result.exit_code == 1 and "would overwrite the input" in result.output


@pytest.mark.parametrize("args,message", [
    (["--save", "{d}/same.json", "--trace", "{d}/./same.json"],
     "--trace {d}/./same.json would overwrite the output of --save {d}/same.json"),
    (["--save", "{d}/out.npz", "--trace", "{d}/in.npz"],
     "--trace {d}/in.npz would overwrite the input {d}/in.npz"),
    (["--trace", "{d}/k.hk"], "--trace {d}/k.hk would overwrite the input {d}/k.hk"),
    (["--trace", "{d}/link.hk"], "would overwrite the input {d}/k.hk"),
])
def test_cli_outputs_are_distinct_from_each_other_and_the_inputs(tmp_path, args, message):
    """Real paths compared, before anything runs: every file stays as it was."""
    kernel = tmp_path / "k.hk"
    kernel.write_text((SAMPLES / "scale_rows.hk").read_text())
    (tmp_path / "link.hk").symlink_to(kernel)
    np.savez(tmp_path / "in.npz", X=np.ones((64, 64)), S=np.ones(64))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = _sim(str(kernel), "--inputs", str(tmp_path / "in.npz"),
                  *[a.format(d=tmp_path) for a in args])
    assert result.exit_code == 1 and message.format(d=tmp_path) in result.output, result.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    result = CliRunner().invoke(main, ["check", str(tmp_path / "link.hk"), "--trace",
                                       str(kernel)])
    assert result.exit_code == 1 and f"would overwrite the input {tmp_path}/link.hk" \
        in result.output, result.output


def test_cli_finding_exits_1_without_a_file(tmp_path, rng):
    broken = tmp_path / "manual_pipe.hk"
    broken.write_text(variant(28, "fence.proxy.async", None).text)
    np.savez(tmp_path / "in.npz", X=rng.standard_normal((64, 192)))
    result = _sim(str(broken), "--inputs", str(tmp_path / "in.npz"), "--save",
                  str(tmp_path / "out.npz"))
    assert result.exit_code == 1 and "missing proxy fence" in result.output
    assert "FAILED: 1 finding" in result.output and not (tmp_path / "out.npz").exists()


def test_the_documented_example_runs(tmp_path, monkeypatch):
    """docs/sim.md, "Running your own inputs": its Python block, and its shell
    commands as a user runs them from a checkout."""
    page = (ROOT / "docs" / "sim.md").read_text()
    section = page.split("## Running your own inputs\n", 1)[1].split("\n## ", 1)[0]
    blocks = dict(re.findall(r"```(\w+)\n(.*?)```", section, re.S))
    monkeypatch.chdir(ROOT)
    exec(compile(blocks["python"], "docs/sim.md", "exec"), {})
    (tmp_path / "samples").symlink_to(SAMPLES)
    for command in blocks["sh"].strip().splitlines():
        program, *args = shlex.split(command)
        prefix = [sys.executable] if program == "python" else [sys.executable, "-m", "hopperc"]
        proc = subprocess.run(prefix + args, cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["Y"].shape == (100, 96)
