"""Fuzzing in the suite: about 2,000 seeded inputs (mutated samples and
grammar-generated kernels) must all keep the CLI's promises (see harness.py);
the regression files keep each class of bug the fuzzer found."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.campaign import Campaign
from tests.fuzz.generate import kernels
from tests.fuzz.harness import run_input
from tests.fuzz.mutate import mutated_inputs

MUTATION_SEEDS = range(4)
MUTATIONS_PER_SEED = 320
GENERATED = 600
REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.hk"))
_EXPECT = re.compile(r"^#.*\bexpect: (builds|error at line (\d+))$", re.M)


def _explain(campaign: Campaign) -> str:
    return "\n\n".join(f"{' | '.join(c.key)} ({c.count}x): {c.failure}\nreproducer {c.name}:\n"
                       f"{c.reproducer[:600]!r}" for c in campaign.failures.values())


@pytest.mark.parametrize("seed", MUTATION_SEEDS)
def test_mutated_samples(seed, tmp_path):
    campaign = Campaign(tmp_path, seed=seed, nvrtc_rate=0.02, nvrtc_max=3)
    campaign.run_all(mutated_inputs(seed, MUTATIONS_PER_SEED))
    assert campaign.inputs == MUTATIONS_PER_SEED
    if campaign.failures:
        pytest.fail(_explain(campaign), pytrace=False)
    # Mutations stay close to the samples: a good share still reaches the renderer.
    assert campaign.accepted >= MUTATIONS_PER_SEED // 10


def test_generated_kernels(tmp_path_factory):
    campaign = Campaign(tmp_path_factory.mktemp("fuzz"), nvrtc_rate=0.05, nvrtc_max=3)

    @settings(max_examples=GENERATED, derandomize=True, deadline=None, database=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(kernels())
    def one(text):
        outcome = campaign.run("generated", text)
        assert outcome.failure is None, outcome.failure

    one()
    # The generator is steered: a good share of its kernels reach the renderer.
    assert campaign.accepted >= GENERATED // 10


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path, tmp_path):
    text = path.read_text(encoding="utf-8")
    expect = _EXPECT.search(text)
    assert expect, f"{path.name} has no comment line ending in 'expect: builds' or 'expect: error at line N'"
    outcome = run_input(text, tmp_path, nvrtc=expect.group(1) == "builds", name=path.name)
    assert outcome.failure is None, f"{outcome.failure}\n{outcome.stderr[-3000:]}"
    if expect.group(2) is None:
        assert outcome.exit_code == 0, outcome.stderr
    else:
        assert outcome.exit_code == 1, "expected an error, the kernel was accepted"
        assert f"{path.name}:{expect.group(2)}:" in outcome.stderr.split("\n", 1)[0], outcome.stderr
