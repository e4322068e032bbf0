"""Every mutant of the small kernels is caught by `check` with the category and
line its mutation calls for, or is argued equivalent in equivalent.toml
(`make mutate` scores every kernel; docs/sim.md has the figures)."""
from __future__ import annotations

import pytest

from hopperc import driver
from tests.mutation.score import ALL, SMALL, equivalents, score_kernel

# `check`'s seeded schedules (among them one starving each role: some ring
# bugs show only when that ring's producer is slow), a smaller search.
SEEDS, SEARCH = driver.DEFAULT_SEEDS, 300


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_every_mutant_is_caught(path):
    score = score_kernel(path, SEEDS, SEARCH, equivalents())
    failures = [f"{o.verdict}: {o.mutant.id} ({o.mutant.description})"
                + (f": {o.first.headline()}" if o.first else "")
                for o in score.outcomes if o.verdict in ("missed", "elsewhere")]
    assert not failures, "\n".join(failures)
    assert score.count("caught") > 0


def test_every_equivalence_names_a_mutant_that_exists():
    """A reason left behind by a changed kernel would silently excuse nothing."""
    from fnmatch import fnmatchcase
    from tests.mutation.engine import mutants
    ids = set()
    for path in ALL:
        ids |= {m.id for m in mutants(driver.lower(driver.check(driver.read_source(path))),
                                      path.name)}
    stale = {pattern for pattern in equivalents()
             if not any(fnmatchcase(i, pattern) for i in ids)}
    assert not stale, stale
