"""Shared test helpers: compile .hk text through the same driver the CLI uses."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir.printer import print_kernel

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "samples").glob("*.hk"))
# The suite never reads or fills the user's cache: a cached build would hide the
# compiler under test. Each process (xdist worker) gets its own directory.
_CACHE = tempfile.mkdtemp(prefix="hopperc-test-cache-")
os.environ["HOPPERC_CACHE_DIR"] = _CACHE


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)


def source(text: str, name: str = "t.hk") -> SourceFile:
    return SourceFile(name, text)


def edit_error(text: str, old: str, new: str) -> CompileError:
    """The error the front end gives `text` with its first `old` made `new`
    (`old` must be there, so the edit cannot silently miss)."""
    assert old in text
    with pytest.raises(CompileError) as info:
        driver.check(source(text.replace(old, new, 1)))
    return info.value


def ir_after(text: str, after: str | None = None, name: str = "t.hk") -> str:
    """The printed IR of `text` after pass `after` (front end only when 'front-end')."""
    kernel = driver.check(source(text, name))
    if after != "front-end":
        kernel = driver.lower(kernel, after)
    return print_kernel(kernel)


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    """Run FileCheck-style CHECK / CHECK-NEXT / CHECK-NOT lines against `text`."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    proc = subprocess.run([str(Path(sys.executable).parent / "filecheck"), str(check_file)],
                          input=text, capture_output=True, text=True)
    assert proc.returncode == 0, f"filecheck failed:\n{proc.stderr}\n--- input ---\n{text}"


@pytest.fixture
def hopperc_cli():
    """Run the CLI as a user would: `python -m hopperc ARGS` in a subprocess."""
    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hopperc", *args], capture_output=True,
                              text=True, cwd=cwd)
    return run


def device_helper(name: str) -> str:
    """The prelude's `__device__` integer helper `name`, as a host C++ function (for
    tests that compile generated arithmetic with g++)."""
    text = (ROOT / "templates" / "prelude.cu.j2").read_text()
    # a one-line body, or one that ends at a closing brace of its own line
    match = re.search(rf"__device__ __forceinline__ int {name}\((?:[^\n]*}}\n|.*?\n}}\n)",
                      text, re.S)
    assert match, f"{name} is not in the prelude"
    return match.group(0).replace("__device__ __forceinline__", "static")
