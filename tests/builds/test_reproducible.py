"""The same source builds the same bytes: whatever the checkout's path (of the
kernels and of hopperc itself), the working directory or the file's mtime;
`--file-prefix-map` makes absolute paths portable too."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.builds.helpers import SCALE_ROWS, hopperc
from tests.conftest import ROOT


def _checkout(root, kernel_text=SCALE_ROWS):
    """A copy of hopperc and of a kernel under `root`, as a second clone would be."""
    for part in ("hopperc", "grammar", "templates"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "kernels").mkdir()
    (root / "kernels" / "k.hk").write_text(kernel_text)
    return root


def _build_in(checkout, *args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(checkout), "HOPPERC_CACHE_DIR": str(checkout / "c")}
    probe = "import hopperc, sys; print(hopperc.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                           text=True, cwd=cwd or checkout).stdout.strip()
    assert where.startswith(str(checkout)), where  # this checkout's compiler
    proc = subprocess.run([sys.executable, "-m", "hopperc", "build", *args, "--no-cache", "-q"],
                          env=env, capture_output=True, text=True, cwd=cwd or checkout)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_two_checkouts_build_identical_cubins_and_metadata(tmp_path):
    first = _checkout(tmp_path / "a")
    second = _checkout(tmp_path / "a-much-longer-checkout-path" / "nested")
    os.utime(second / "kernels" / "k.hk", (1_000_000_000, 1_000_000_000))  # another mtime
    for checkout in (first, second):
        _build_in(checkout, "kernels/k.hk", "--out-dir", "out")
    for name in ("k.cubin", "k.json"):
        data = (first / "out" / name).read_bytes()
        assert data == (second / "out" / name).read_bytes(), name
        assert str(tmp_path).encode() not in data


def test_the_working_directory_is_not_recorded(tmp_path):
    checkout = _checkout(tmp_path / "c1")
    (checkout / "elsewhere").mkdir()
    _build_in(checkout, "kernels/k.hk", "-o", "one.cubin")
    _build_in(checkout, "../kernels/k.hk", "-o", "../two.cubin",
              "--file-prefix-map", "../kernels=kernels", cwd=checkout / "elsewhere")
    assert (checkout / "one.cubin").read_bytes() == (checkout / "two.cubin").read_bytes()


def test_file_prefix_map_makes_absolute_paths_portable(tmp_path):
    outputs = []
    for name in ("x", "yyyy"):
        root = tmp_path / name
        (root / "src").mkdir(parents=True)
        (root / "src" / "k.hk").write_text(SCALE_ROWS)
        os.utime(root / "src" / "k.hk", (len(name) * 1e8, len(name) * 1e8))
        proc = hopperc("build", str(root / "src" / "k.hk"), "-o", str(root / "k.cubin"),
                       "--file-prefix-map", f"{root}=.", "--no-cache", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        outputs.append([(root / f"k.{ext}").read_bytes() for ext in ("cubin", "json")])
    assert outputs[0] == outputs[1]
    assert b'"source": "./src/k.hk"' in outputs[0][1]
    assert b"k.hk" in outputs[0][0] and str(tmp_path).encode() not in outputs[0][0]


def test_the_last_matching_prefix_map_wins():
    from hopperc.cli.build import recorded_name
    maps = [("/a", "A"), ("/a/b", "B")]
    assert recorded_name("/a/b/k.hk", maps) == "B/k.hk"
    assert recorded_name("/a/k.hk", maps) == "A/k.hk"
    assert recorded_name("/ab/k.hk", maps) == "/ab/k.hk"  # whole components only
    assert recorded_name("k.hk", maps) == "k.hk"
