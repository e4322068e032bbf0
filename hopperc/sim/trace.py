"""A recorded run (`sim/recorder.py`) as a Chrome Trace Event Format file, the
JSON that ui.perfetto.dev and chrome://tracing open.

A process per simulated block; in it a track (thread) per warp, named with its
role and the role's warps, then the asynchronous units: TMA loads, bulk stores
and each warp's wgmma products, spread over as many tracks as they overlap
(a track's spans must nest). Spans are complete ("X") events; an arrival that
releases a wait is a flow ("s" on the arriving span, "f" bound to the wait's
enclosing span); a finding is an instant ("i") event. Timestamps are the
simulator's steps, written as microseconds (the unit of `ts`): Perfetto's "1 us"
is one step.

This module makes the JSON; the command line (`cli/trace.py`) decides where it
goes and writes it.
"""
from __future__ import annotations

import json

from hopperc.ir import nodes as ir
from hopperc.sim.findings import Finding
from hopperc.sim.recorder import Recording, Slice, where

TIME_UNIT = "simulator steps (1 us in the viewer is one scheduler step, not a time)"
_ASYNC_TRACKS = {"tma": "TMA loads", "stores": "bulk stores", "wgmma": "wgmma of warp {}"}
_ORDER = {"tma": 1000, "stores": 2000, "wgmma": 3000}


def chrome_trace(recording: Recording) -> dict:
    """The trace of `recording` as the JSON object the viewers load."""
    tids = _tracks(recording)
    events: list[dict] = []
    for number, name in recording.blocks:
        events += [_meta("process_name", number, 0, name=name),
                   _meta("process_sort_index", number, 0, sort_index=number)]
    for (number, tid), (name, order) in sorted(tids.names.items()):
        events += [_meta("thread_name", number, tid, name=name),
                   _meta("thread_sort_index", number, tid, sort_index=order)]
    spans = sorted(recording.slices, key=lambda s: (s.start, -(s.end - s.start)))
    finding = recording.finding
    if finding is not None and finding.related is not None:
        _mark_other_side(spans, finding)
    for piece in spans:
        pid, tid = tids.of(piece)
        events.append({"name": piece.name, "cat": piece.track[0], "ph": "X", "ts": piece.start,
                       "dur": piece.end - piece.start, "pid": pid, "tid": tid,
                       "args": piece.args})
    for ident, flow in enumerate(recording.flows, 1):
        pid, tid = tids.of(flow.source)
        events.append({"name": flow.name, "cat": "release", "ph": "s", "id": ident,
                       "ts": flow.at, "pid": pid, "tid": tid})
        pid, tid = tids.of(flow.target)
        events.append({"name": flow.name, "cat": "release", "ph": "f", "bp": "e", "id": ident,
                       "ts": flow.target.end - 1, "pid": pid, "tid": tid})
    if finding is not None:
        pid, tid = (tids.first(recording.finding_track) if recording.finding_track
                    else (recording.blocks[0][0], 0))
        events.append({"name": f"{finding.category.value}: {finding.message}",
                       "cat": "finding", "ph": "i", "s": "t" if recording.finding_track else "g",
                       "ts": max(recording.steps - 1, 0), "pid": pid, "tid": tid,
                       "args": {"source": where(finding.span),
                                "related": where(finding.related),
                                "state": list(finding.state)}})
    return {"traceEvents": events, "displayTimeUnit": "ms",  # the format's default
            "otherData": {"kernel": recording.kernel.name, "schedule": recording.schedule,
                          "steps": recording.steps, "time unit": TIME_UNIT}}


def _mark_other_side(spans: list[Slice], finding: Finding) -> None:
    """Mark the spans of the finding's other statement (a race's earlier access,
    a hang's other wait): the copies or products the message names, else any
    span of that line; of those, the ones still open, else the latest."""
    source = where(finding.related)
    at_line = [s for s in spans if s.args.get("source") == source]
    named = [s for s in at_line if f"{s.args.get('reads', s.name)} ({source})" in finding.message]
    candidates = named or at_line
    marked = [s for s in candidates if s.args.get("open")] or candidates[-1:]
    for piece in marked:
        piece.args["finding"] = f"the other statement of the finding ({source})"


def trace_bytes(recording: Recording) -> bytes:
    return json.dumps(chrome_trace(recording), separators=(",", ":")).encode()


def _meta(kind: str, pid: int, tid: int, **args) -> dict:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": args}


class _Tracks:
    """Each slice's (pid, tid): a warp's track is its warp's, tid = warp + 1; an
    asynchronous unit's slices go to the first of its tracks where they do not
    overlap a span already there."""

    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.names: dict[tuple[int, int], tuple[str, int]] = {}
        self.ends: dict[tuple, list[int]] = {}  # unit -> the end of each of its tracks
        self.tids: dict[tuple, list[int]] = {}
        self.placed: dict[int, tuple[int, int]] = {}
        self.next: dict[int, int] = {}

    def place(self, piece: Slice) -> None:
        kind, number, *rest = piece.track
        if kind == "warp":
            warp = rest[0]
            self.names.setdefault((number, warp + 1), (self._warp_name(warp), warp))
            self.placed[id(piece)] = (number, warp + 1)
            return
        ends, tids = self.ends.setdefault(piece.track, []), self.tids.setdefault(piece.track, [])
        slot = next((i for i, end in enumerate(ends) if end <= piece.start), len(ends))
        if slot == len(ends):
            tid = self.next.get(number, 1000)
            self.next[number] = tid + 1
            ends.append(0)
            tids.append(tid)
            name = _ASYNC_TRACKS[kind].format(*rest)
            # After the warps: the loads, the stores, then each warp's products.
            order = _ORDER[kind] + 100 * (rest[0] if rest else 0) + slot
            self.names[(number, tid)] = (f"{name} ({slot + 1})" if slot else name, order)
        ends[slot] = piece.end
        self.placed[id(piece)] = (number, tids[slot])

    def of(self, piece: Slice) -> tuple[int, int]:
        return self.placed[id(piece)]

    def first(self, track: tuple) -> tuple[int, int]:
        if track[0] == "warp":
            return track[1], track[2] + 1
        tids = self.tids.get(track)
        return track[1], tids[0] if tids else 0

    def _warp_name(self, warp: int) -> str:
        role = next((r for r in self.kernel.roles
                     if r.first_warp <= warp < r.first_warp + r.warps), None)
        if role is None:
            return f"warp {warp} (warpgroup {warp // 4})"
        last = role.first_warp + role.warps - 1
        return f"warp {warp}: {role.name} (warps {role.first_warp}-{last}, warpgroup {warp // 4})"


def _tracks(recording: Recording) -> _Tracks:
    tracks = _Tracks(recording.kernel)
    for number, _ in recording.blocks:  # every warp has its track, even one left idle
        for warp in range(recording.kernel.threads // 32):
            tracks.names[(number, warp + 1)] = (tracks._warp_name(warp), warp)
    for piece in sorted(recording.slices, key=lambda s: (s.start, -(s.end - s.start))):
        tracks.place(piece)
    return tracks
