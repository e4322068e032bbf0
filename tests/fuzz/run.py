"""`make fuzz`: a long campaign, mutations of the samples and grammar-generated
kernels (four to one), with a summary and one reproducer file per failure class.

    python -m tests.fuzz.run --inputs 100000 --out fuzz-failures --seed 0
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzz.campaign import Campaign
from tests.fuzz.generate import kernels
from tests.fuzz.mutate import mutated_inputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"),
                        help="directory for the reproducers, one .hk per failure class")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nvrtc-rate", type=float, default=0.02,
                        help="share of accepted kernels also compiled with NVRTC")
    args = parser.parse_args(argv)
    generated = args.inputs // 5
    with tempfile.TemporaryDirectory() as work:
        campaign = Campaign(Path(work), seed=args.seed, nvrtc_rate=args.nvrtc_rate,
                            nvrtc_max=args.inputs)
        campaign.run_all(mutated_inputs(args.seed, args.inputs - generated))
        if generated:
            @seed(args.seed)
            @settings(max_examples=generated, deadline=None, database=None,
                      phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
            @given(kernels())
            def one(text):
                campaign.run("generated", text)

            one()
        print(campaign.report(args.out))
    return 1 if campaign.failures else 0


if __name__ == "__main__":
    sys.exit(main())
