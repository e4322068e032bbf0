"""`--trace PATH` of `hopperc sim` and `hopperc check`: where the simulator's
Chrome/Perfetto traces (`sim/trace.py`) go, checked before the simulation runs,
each file written whole or not at all."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from hopperc.buildsys.outputs import OutputError, write_atomically
from hopperc.sim.explore import Report
from hopperc.sim.findings import Finding
from hopperc.sim.recorder import Recording, replay
from hopperc.sim.trace import trace_bytes


def finding_path(directory: Path, kernel: str, number: int) -> Path:
    """Where `--trace DIR` writes finding `number` (from 1) of `kernel`."""
    return directory / f"{kernel}-finding-{number}.json"


class TraceTarget:
    """Where `--trace PATH` writes: PATH ending in `.json` is one file, the run
    of the first finding (else of seeded schedule 0); any other PATH is a
    directory that gets one file per finding, `<kernel>-finding-N.json`."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.one_file = self.path.suffix.lower() == ".json"
        self._check()

    def write(self, report: Report) -> list[str]:
        """Record and write the traces of `report`, each file written whole or
        not at all; the findings written name their file. The lines that say
        what was written."""
        findings = report.findings
        if not self.one_file:
            for number, finding in enumerate(findings, 1):
                self._write(finding_path(self.path, report.lowered.name, number),
                            replay(report, finding), report, finding)
            return [f"traces: {len(findings)} in {self.path} (one per finding)" if findings
                    else f"traces: none written to {self.path}: no finding"]
        if not findings and not report.schedules:
            raise OutputError(None, "--trace: no seeded schedule ran to its end within the "
                                    "work budget, so there is no run to write",
                              file=str(self.path))
        first = findings[0] if findings else None
        recording = replay(report, first)
        self._write(self.path, recording, report, first)
        return [f"trace: {self.path} ({recording.schedule}, {recording.steps} steps)"]

    def _write(self, path: Path, recording: Recording, report: Report,
               finding: Finding | None) -> None:
        write_atomically({path: trace_bytes(recording)})
        if finding is not None:
            index = report.findings.index(finding)
            report.findings[index] = replace(finding, trace_file=str(path))

    def _check(self) -> None:
        """Refuse a path that cannot be written before the simulation runs."""
        directory = self.path.parent if self.one_file else self.path
        if self.one_file and self.path.is_dir():
            raise OutputError(None, f"--trace: {self.path} is a directory; give a file "
                                    "ending in .json", file=str(self.path))
        existing = next(p for p in (directory, *directory.parents) if p.exists())
        if not existing.is_dir():
            raise OutputError(None, f"--trace: cannot write {self.path}: {existing} is a "
                                    "file, not a directory", file=str(self.path))
        if not os.access(existing, os.W_OK | os.X_OK):
            raise OutputError(None, f"--trace: cannot write {self.path}: {existing} is not "
                                    "writable", file=str(self.path))
