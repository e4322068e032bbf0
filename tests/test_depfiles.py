"""`build -MD` / `-MF`: dependency files that make and ninja read, naming the
outputs, the `.hk` file and the compiler itself."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hopperc
from tests.conftest import ROOT

TMA_COPY = (ROOT / "samples" / "tma_copy.hk").read_text()


def test_md_names_the_outputs_the_source_and_the_compiler(hopperc_cli, tmp_path):
    (tmp_path / "my k.hk").write_text(TMA_COPY)
    proc = hopperc_cli("build", "my k.hk", "-o", "out dir/k.cubin", "-MD", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "out dir" / "k.d").read_text()
    rule, *phony = text.split("\n\n")
    targets, deps = rule.split(": \\\n", 1)
    assert targets == r"out\ dir/k.cubin out\ dir/k.json"  # spaces escaped as make reads them
    deps = [d.strip().rstrip("\\").strip() for d in deps.splitlines()]
    assert deps[0] == r"my\ k.hk"
    package = Path(hopperc.__file__).resolve().parent
    assert str(package / "cli" / "__init__.py") in deps and str(package / "passes" / "__init__.py") in deps
    # the grammar and the templates, where the checkout keeps them (its top level)
    data = [ROOT / "grammar" / "hk.lark", *(ROOT / "templates").glob("*.j2")]
    assert len(data) > 1 and {str(path) for path in data} <= set(deps)
    assert any("libnvrtc" in d for d in deps)
    # every compiler file also gets an empty rule, so removing one does not stop make
    assert len(phony) == len(deps) - 1 and all(p.rstrip().endswith(":") for p in phony)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_rebuilds_when_the_source_changes_and_not_otherwise(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    hopperc_cmd = f"{sys.executable} -m hopperc"
    # The rule names no prerequisite: only the dependency file says k.cubin needs k.hk.
    (tmp_path / "Makefile").write_text(
        f"k.cubin:\n\t{hopperc_cmd} build k.hk -o k.cubin -MD -q\n-include k.d\n")

    def up_to_date() -> bool:
        return subprocess.run(["make", "-q", "k.cubin"], cwd=tmp_path).returncode == 0

    subprocess.run(["make", "-s", "k.cubin"], cwd=tmp_path, check=True)
    assert up_to_date()
    later = (tmp_path / "k.cubin").stat().st_mtime + 10
    os.utime(tmp_path / "k.hk", (later, later))
    assert not up_to_date()


def test_mf_names_the_file_and_a_failed_build_keeps_the_earlier_outputs(hopperc_cli, tmp_path):
    """A failure leaves the last good build whole (cubin, metadata, depfile), and
    as the edited .hk is newer than them, make still rebuilds."""
    (tmp_path / "k.hk").write_text(TMA_COPY)
    proc = hopperc_cli("build", "k.hk", "-o", "k.cubin", "-MF", "deps/k.dep", "-q", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "deps" / "k.dep").read_text().startswith(
        "k.cubin k.json: \\\n  k.hk")
    outputs = [tmp_path / name for name in ("k.cubin", "k.json", "deps/k.dep")]
    before = [path.read_bytes() for path in outputs]
    (tmp_path / "k.hk").write_text(TMA_COPY.replace("shared buf", "shared 1buf"))
    later = outputs[0].stat().st_mtime + 10
    os.utime(tmp_path / "k.hk", (later, later))
    proc = hopperc_cli("build", "k.hk", "-o", "k.cubin", "-MF", "deps/k.dep", "-q", cwd=tmp_path)
    assert proc.returncode == 1
    assert [path.read_bytes() for path in outputs] == before
    assert all(path.stat().st_mtime < later for path in outputs)


def test_mf_takes_one_input(hopperc_cli, tmp_path):
    proc = hopperc_cli("build", "a.hk", "b.hk", "-MF", "x.d", cwd=tmp_path)
    assert proc.returncode == 1 and "-MF takes one input file" in proc.stderr
