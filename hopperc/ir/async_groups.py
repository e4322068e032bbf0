"""Asynchronous groups in flight, oldest first: wgmma batches (wgmma.commit_group /
wait_group) and bulk store groups (cp.async.bulk.commit_group / wait_group.read).
Both waits count groups from the youngest: `wait N` completes all but the N most
recent. The passes that place those waits share this bookkeeping."""
from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")
Groups = tuple[frozenset[T], ...]

MAX_TRACKED = 8  # older groups merge into the oldest tracked one (waits stay safe)


def append(groups: Groups, group: frozenset[T]) -> Groups:
    """`groups` after a commit closes `group`."""
    return _cap(groups + (group,))


def join(a: Groups, b: Groups) -> Groups:
    """Two paths' groups aligned from the youngest: position p from the young end has
    p groups after it on every path, so a wait count computed from it is safe."""
    n = max(len(a), len(b))
    pa = (frozenset(),) * (n - len(a)) + a
    pb = (frozenset(),) * (n - len(b)) + b
    return _cap(tuple(x | y for x, y in zip(pa, pb)))


def split(groups: Groups, pending: int) -> tuple[Groups, Groups]:
    """(completed, still in flight) by a wait that leaves `pending` groups running."""
    cut = max(0, len(groups) - pending)
    return groups[:cut], groups[cut:]


def _cap(groups: Groups) -> Groups:
    while len(groups) > MAX_TRACKED:
        groups = (groups[0] | groups[1],) + groups[2:]
    return groups
