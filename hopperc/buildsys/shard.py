"""`hopperc build --shard I/N`: the part of a build that CI job I of N makes.

Every job of the command line is dealt to exactly one shard by a rule that
reads nothing but the jobs' output names (the cubin's file name, unique within
one command: two jobs writing one output are refused before this), never their
order on the command line or in a directory listing, nor absolute paths: so the
same library splits the same way on every machine and in every checkout. The
names are sorted by their SHA-256 and dealt round-robin, which keeps the shards'
sizes within one of each other (a build takes as long as its largest shard) and
spreads a library's variants, which sort together by name, over the shards.

I counts from 1, as GitLab's CI_NODE_INDEX does (with CI_NODE_TOTAL as N).
"""
from __future__ import annotations

import hashlib
import re
from typing import NamedTuple, Sequence, TypeVar

Job = TypeVar("Job")
_SHARD = re.compile(r"\s*(?P<index>\d+)\s*/\s*(?P<total>\d+)\s*")


class Shard(NamedTuple):
    index: int  # 1 .. total
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str) -> Shard:
    """`I/N` with 1 <= I <= N; anything else is a ValueError saying what is expected."""
    match = _SHARD.fullmatch(text)
    if match is None:
        raise ValueError(f"expected I/N (shard I of N, counting from 1), got {text!r}")
    index, total = int(match["index"]), int(match["total"])
    if total < 1 or not 1 <= index <= total:
        raise ValueError(f"{text!r}: the shard I of I/N counts from 1 to N "
                         f"(1/{max(total, 1)} .. {max(total, 1)}/{max(total, 1)})")
    return Shard(index, total)


def shard_of_each(names: Sequence[str], total: int) -> dict[str, int]:
    """The shard (1 .. total) of each of the distinct `names`."""
    ranked = sorted(set(names), key=lambda name: (hashlib.sha256(name.encode()).digest(), name))
    return {name: position % total + 1 for position, name in enumerate(ranked)}


def select(jobs: Sequence[Job], shard: Shard, name_of) -> list[Job]:
    """The jobs of `shard`, in the order given; `name_of(job)` is its output name."""
    shards = shard_of_each([name_of(job) for job in jobs], shard.total)
    return [job for job in jobs if shards[name_of(job)] == shard.index]
