"""After `pip install .`, hopperc works from any directory (grammar and templates ship)."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def test_installed_wheel_runs_from_a_temporary_directory(tmp_path):
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(ROOT)], check=True, capture_output=True)
    wheel = next(wheels.glob("hopperc-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    (workdir / "k.hk").write_text((ROOT / "samples" / "tma_copy.hk").read_text())
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", "import hopperc, sys; print(hopperc.__file__)"],
                          cwd=workdir, env=env, capture_output=True, text=True)
    assert proc.stdout.startswith(str(site)), "hopperc must come from the installed wheel"
    proc = subprocess.run([sys.executable, "-m", "hopperc", "build", "k.hk", "-o", "k.cubin"],
                          cwd=workdir, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (workdir / "k.cubin").read_bytes()[:4] == b"\x7fELF"
    _check_metadata(wheel)


def _check_metadata(wheel) -> None:
    """One version (hopperc.__version__), the license, the project URLs, the extras."""
    import zipfile
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
