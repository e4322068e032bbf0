"""The progress line: on a terminal only, for people (text diagnostics, not
`-q`), rewritten in place and erased before anything else is printed."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

import pytest

from hopperc.cli.progress import Progress
from tests.builds.helpers import FAILING_SOURCES, FAILING_VARIANTS, TMA_COPY, write_library

ERASE = "\r\x1b[K"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_is_rewritten_and_erased():
    stream = Terminal()
    progress = Progress.on_stderr(3, "text", quiet=False, stream=stream)
    progress.show(0, "gemm_bn128")
    progress.show(1, "gemm_bn256")
    progress.clear()
    progress.clear()  # erased once: nothing drawn since
    assert stream.getvalue() == (f"{ERASE}[0/3] gemm_bn128 ...{ERASE}[1/3] gemm_bn256 ..."
                                 f"{ERASE}")


def test_a_line_wider_than_the_terminal_is_cut():
    stream = Terminal()
    Progress.on_stderr(2, "text", quiet=False, stream=stream).show(0, "k" * 200)
    assert len(stream.getvalue()) == len(ERASE) + 79  # no fileno: 80 columns, less one


@pytest.mark.parametrize("stream, form, quiet, total", [
    (io.StringIO(), "text", False, 3),  # not a terminal: a CI log
    (Terminal(), "json", False, 3),
    (Terminal(), "sarif", False, 3),
    (Terminal(), "text", True, 3),
    (Terminal(), "text", False, 1),
])
def test_no_line_where_no_person_watches_it(stream, form, quiet, total):
    progress = Progress.on_stderr(total, form, quiet, stream=stream)
    progress.show(0, "k")
    progress.clear()
    assert stream.getvalue() == ""


def test_a_library_build_on_a_terminal_shows_and_erases_it(tmp_path):
    """stderr a pseudo-terminal: each kernel's line, erased before its error is
    printed; the errors read as without it."""
    write_library(tmp_path, FAILING_VARIANTS, FAILING_SOURCES)
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "hopperc", "build", "kernels.toml",
                               "--out-dir", "out", "--no-cache", "-j", "1"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=terminal, text=True)
        os.close(terminal)
        shown = _read_all(controller)
    finally:
        os.close(controller)
    assert proc.returncode == 1
    assert f"{ERASE}[0/2] copy_bm32 ...{ERASE}kernels.toml: variant copy_bm32" in shown
    assert f"{ERASE}[1/2] copy_bm256 ...{ERASE}kernels.toml: variant copy_bm256" in shown
    assert shown.endswith("^\r\n")  # the last error, nothing drawn after it
    assert "\r" not in proc.stdout


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_simulation_reports_each_schedule_as_it_ends(jobs):
    from hopperc import driver
    from hopperc.diagnostics import SourceFile
    ticks = []
    report = driver.simulate(SourceFile("k.hk", TMA_COPY), seeds=2, search=3, jobs=jobs,
                             progress=lambda done, total: ticks.append((done, total)))
    assert report.ok
    # in order here; in the workers as each task ends (the search with them)
    assert ticks == ([(1, 3), (2, 3)] if jobs == 1 else [(1, 3), (2, 3), (3, 3)])


def test_check_on_a_terminal_erases_its_line_before_the_report(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hopperc.cli import main
    monkeypatch.setattr("hopperc.cli.progress._is_terminal", lambda stream: True)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.hk").write_text(TMA_COPY.replace("tma buf <- X", "tma buf <- Z"))
    failed = CliRunner().invoke(main, ["check", "k.hk", "-j", "1"])
    assert failed.exit_code == 1
    assert failed.stderr.startswith(f"{ERASE}[0/17] simulating k.hk ...{ERASE}k.hk:9:16: error")
    (tmp_path / "k.hk").write_text(TMA_COPY)
    passed = CliRunner().invoke(main, ["sim", "k.hk", "-j", "1", "--seeds", "2", "--search",
                                       "3"])
    assert passed.exit_code == 0 and passed.stdout.startswith("shapes: ")
    assert passed.stderr == f"{ERASE}[0/3] simulating k.hk ...{ERASE}[1/3] simulating k.hk ..." \
        f"{ERASE}[2/3] simulating k.hk ...{ERASE}"
