"""The pieces of bench/gpu_check.py that do not depend on the machine: running a
command with a time limit, the record of each step, and the report."""
from __future__ import annotations

import datetime
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SANITIZER_TOOLS = ("racecheck", "synccheck")

PASS, FAIL, REFUSED, NOT_RUN = "pass", "FAIL", "refused", "not run"


@dataclass
class Step:
    name: str
    outcome: str = NOT_RUN
    seconds: float = 0.0
    note: str = ""
    output: str = ""  # shown in the report when the step did not pass


@dataclass(frozen=True)
class Ran:
    code: int | None  # None: not started, or killed at its time limit
    output: str
    seconds: float
    timed_out: bool = False


def run_command(command: list[str], limit: float, env: dict | None = None,
                cwd: Path | None = None) -> Ran:
    """Run `command` (stdout and stderr together) for at most `limit` seconds; at
    the limit its whole process group is killed (compute-sanitizer's target too)."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True)
    except OSError as exc:
        return Ran(None, f"cannot start {command[0]}: {exc.strerror}", 0.0)
    try:
        output, _ = proc.communicate(timeout=max(limit, 1))
        return Ran(proc.returncode, output, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return Ran(None, output, time.monotonic() - start, timed_out=True)


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def outcome_of(check) -> tuple[int, str]:
    """The exit status and the verdict of a check (a gpu_check.Check)."""
    every = check.steps + list(check.sanitizer.values())
    bad = [s for s in every if s.outcome not in (PASS, REFUSED)]
    if bad:
        return 1, f"FAIL: {len(bad)} of {len(every)} steps did not pass"
    if any(s.outcome == REFUSED for s in every):
        return 3, "PASS where run; compute-sanitizer refused the device"
    return 0, f"PASS: all {len(every)} steps"


def render(check) -> str:
    """The report of a check (a gpu_check.Check), as far as it has come."""
    code, verdict = outcome_of(check)
    if not check.done:
        verdict = f"under way, or stopped before its end ({verdict})"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# hopperc GPU check", "", f"- date: {now}", *(f"- {f}" for f in check.facts),
             f"- result: **{verdict}** (exit {code})", "", "| step | outcome | seconds | note |",
             "|---|---|---|---|"]
    sanitizer = list(check.sanitizer.values())
    for step in check.steps:
        note = step.note.replace("|", "\\|")
        lines.append(f"| {step.name} | {step.outcome} | {step.seconds:.0f} | {note} |")
        if step.name == "GPU tests" and sanitizer:
            counts = {o: sum(s.outcome == o for s in sanitizer)
                      for o in (PASS, FAIL, REFUSED, NOT_RUN)}
            worst = next(o for o in (FAIL, NOT_RUN, REFUSED, PASS) if counts[o] or o == PASS)
            lines.append(f"| compute-sanitizer ({len(sanitizer)} runs) | {worst} | "
                         f"{max((s.seconds for s in sanitizer), default=0):.0f} (longest) | "
                         + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + " |")
    table = _sanitizer_table(check) if sanitizer else []
    for title, body in check.sections.items():
        if title.startswith("bench") and table:
            lines += table
            table = []
        lines += ["", f"## {title}", "", body]
    lines += table
    failed = [s for s in check.steps + sanitizer if s.outcome == FAIL and s.output]
    short = {id(s) for s in sanitizer}  # 34 runs: their tails stay short
    if failed:
        lines += ["", "## Output of the steps that failed"]
        for step in failed:
            lines += ["", f"### {step.name}", "```",
                      tail(step.output, 12 if id(step) in short else 30), "```"]
    return "\n".join(lines) + "\n"


def _sanitizer_table(check) -> list[str]:
    lines = ["", "## compute-sanitizer by sample", "",
             "| sample | " + " | ".join(SANITIZER_TOOLS) + " |",
             "|---|" + "---|" * len(SANITIZER_TOOLS)]
    for sample in sorted({name for name, _ in check.sanitizer}):
        cells = [check.sanitizer.get((sample, tool)) for tool in SANITIZER_TOOLS]
        lines.append(f"| {sample} | " + " | ".join(
            "-" if c is None else f"{c.outcome}{f' ({c.note})' if c.note else ''}"
            for c in cells) + " |")
    return lines
