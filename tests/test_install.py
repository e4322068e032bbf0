"""After `pip install .`, hopperc works from any directory (grammar and templates ship)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

from hopperc.buildsys import toolchain
from tests.conftest import ROOT


def test_installed_wheel_runs_from_a_temporary_directory(tmp_path):
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(_clean_copy(tmp_path / "checkout"))], check=True, capture_output=True)
    wheel = next(wheels.glob("hopperc-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    (workdir / "k.hk").write_text((ROOT / "samples" / "tma_copy.hk").read_text())
    # an empty cache: the build parses and renders with the wheel's grammar and templates
    env = {**os.environ, "PYTHONPATH": str(site), "HOPPERC_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", WHERE], cwd=workdir, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    package, grammar, templates, fingerprint = proc.stdout.split()
    assert package.startswith(os.path.realpath(site)), "hopperc must come from the installed wheel"
    assert (grammar, templates) == (f"{package}/grammar", f"{package}/templates")
    # named as the wheel ships them, a checkout's files hash as its wheel's do
    assert fingerprint == toolchain.compiler_fingerprint(), \
        "the wheel lacks a file of the checkout's package (a subpackage pyproject.toml omits?)"
    proc = subprocess.run([sys.executable, "-m", "hopperc", "build", "k.hk", "-o", "k.cubin"],
                          cwd=workdir, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (workdir / "k.cubin").read_bytes()[:4] == b"\x7fELF"
    _check_contents(wheel)
    _check_metadata(wheel)


def _clean_copy(root):
    """What a fresh clone holds of the package's sources. Not the checkout itself:
    setuptools builds through ./build/lib and packs whatever an earlier build of
    another layout left there (docs/install.md)."""
    for folder in ("hopperc", "grammar", "templates"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        shutil.copy(ROOT / name, root / name)
    return root


# Where the installed package finds its grammar and templates, and its fingerprint.
WHERE = """\
import os, hopperc
from hopperc import local_files
from hopperc.buildsys import toolchain
print(os.path.realpath(os.path.dirname(hopperc.__file__)), local_files.data_directory("grammar"),
      local_files.data_directory("templates"), toolchain.compiler_fingerprint())
"""


def _check_contents(wheel) -> None:
    """The top-level grammar/ and templates/ ship inside the package, every file of
    them, and nothing lands beside the package in site-packages."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    for folder, pattern in (("grammar", "*.lark"), ("templates", "*.j2")):
        shipped = {n.removeprefix(f"hopperc/{folder}/") for n in names
                   if n.startswith(f"hopperc/{folder}/")}
        assert shipped == {p.name for p in (ROOT / folder).glob(pattern)} != set()
    assert all(n.startswith(("hopperc/", "hopperc-")) for n in names)


def _check_metadata(wheel) -> None:
    """One version (hopperc.__version__), the license, the project URLs, the extras."""
    from email.parser import Parser

    import hopperc
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(archive.read(name).decode())
        licenses = [n for n in archive.namelist() if n.endswith(("licenses/LICENSE",
                                                                   "licenses/NOTICE"))]
        text = archive.read(next(n for n in licenses if n.endswith("LICENSE"))).decode()
        assert "hopperc/py.typed" in archive.namelist()  # type checkers read the signatures
    assert meta["Version"] == hopperc.__version__
    assert meta["License-Expression"] == "Apache-2.0" and len(licenses) == 2
    # the license's whole text, terms and appendix, not a notice that points at it
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Issues"}
    assert {"sass", "test", "gpu"} <= set(meta.get_all("Provides-Extra"))
    sass = [r for r in meta.get_all("Requires-Dist") if 'extra == "sass"' in r]
    assert any(r.startswith("nvidia-cuda-nvdisasm") for r in sass)
