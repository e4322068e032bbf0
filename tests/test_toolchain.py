"""The compiler's identity: the fingerprint that keys the build cache covers its
code, its grammar and its templates, wherever the layout puts them."""
from __future__ import annotations

import shutil

import pytest

from hopperc import local_files
from hopperc.buildsys import toolchain
from tests.conftest import ROOT


@pytest.fixture
def package_at(monkeypatch):
    """Make toolchain see the package at a given folder (its caches emptied)."""
    def move(package):
        monkeypatch.setattr(local_files, "package_directory", lambda: str(package))
        toolchain._compiler_files.cache_clear()
        toolchain.compiler_fingerprint.cache_clear()
    yield move
    toolchain._compiler_files.cache_clear()
    toolchain.compiler_fingerprint.cache_clear()


def _tree(root, wheel: bool):
    """A small hopperc: one module, the grammar and a template, as a checkout lays
    them out (grammar/ and templates/ beside the package) or as the wheel does."""
    package = root / "hopperc"
    package.mkdir(parents=True)
    shutil.copy(ROOT / "hopperc" / "__init__.py", package)
    data = package if wheel else root
    for folder, name in (("grammar", "hk.lark"), ("templates", "kernel.cu.j2")):
        (data / folder).mkdir()
        shutil.copy(ROOT / folder / name, data / folder)
    return package


def test_editing_a_template_or_the_grammar_changes_the_fingerprint(tmp_path, package_at):
    package = _tree(tmp_path, wheel=False)
    package_at(package)
    before = toolchain.compiler_fingerprint()
    assert sorted(toolchain.compiler_files()) == sorted(
        str(p) for p in (package / "__init__.py", tmp_path / "grammar" / "hk.lark",
                         tmp_path / "templates" / "kernel.cu.j2"))
    seen = {before}
    for edited in (tmp_path / "templates" / "kernel.cu.j2", tmp_path / "grammar" / "hk.lark"):
        edited.write_text(edited.read_text() + "\n")
        package_at(package)  # a new process: only the file stats tell the edit
        seen.add(toolchain.compiler_fingerprint())
    assert len(seen) == 3


def test_a_checkout_and_its_wheel_layout_have_one_fingerprint(tmp_path, package_at):
    package_at(_tree(tmp_path / "checkout", wheel=False))
    checkout = toolchain.compiler_fingerprint()
    wheel = _tree(tmp_path / "site", wheel=True)
    package_at(wheel)
    assert local_files.data_directory("templates") == wheel / "templates"
    assert toolchain.compiler_fingerprint() == checkout


def test_a_checkout_reads_its_top_level_grammar_and_templates():
    """Never another checkout's: tests run with PYTHONPATH beside an editable install."""
    assert local_files.data_directory("grammar") == ROOT / "grammar"
    assert local_files.data_directory("templates") == ROOT / "templates"
