"""Outputs a CI can trust: the usual file modes, clear errors where they cannot
be written, nothing left behind by SIGINT/SIGTERM, one build's cubin and
metadata together even when processes race for the same output, and `emit`
refusing two forms at once."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from hopperc.buildsys import outputs
from hopperc.buildsys.outputs import OutputError, write_atomically
from tests.builds.helpers import TMA_COPY, hopperc
from tests.conftest import ROOT

GEMM = ROOT / "samples" / "gemm_bf16.hk"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_get_the_usual_mode_under_the_umask(tmp_path, umask, mode):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    proc = subprocess.run([sys.executable, "-m", "hopperc", "build", "k.hk", "-MD", "-q",
                           "--no-cache", "--manifest", "m.json"], cwd=tmp_path,
                          preexec_fn=lambda: os.umask(umask), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("k.cubin", "k.json", "k.d", "m.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


def test_an_output_below_a_regular_file_is_a_clear_error(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    (tmp_path / "notes").write_text("a file")
    proc = hopperc("build", "k.hk", "-o", "notes/k.cubin", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot write notes/k.cubin: notes is a file, not a directory" in proc.stderr
    emitted = hopperc("emit", "--cu", "k.hk", "-o", "notes/k.cu", cwd=tmp_path)
    assert emitted.returncode == 1 and "notes is a file, not a directory" in emitted.stderr


def test_an_unwritable_directory_is_a_clear_error(tmp_path, monkeypatch):
    def refused(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(outputs.temporaries, "create", refused)
    with pytest.raises(OutputError, match=r"cannot write .*k\.cubin: Permission denied"):
        write_atomically({tmp_path / "k.cubin": b"x"})


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_a_clear_error(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    (tmp_path / "ro").mkdir(mode=0o555)
    proc = hopperc("build", "k.hk", "-o", "ro/k.cubin", cwd=tmp_path)
    assert proc.returncode == 1 and "cannot write ro/k.cubin: Permission denied" in proc.stderr


def test_an_interrupted_write_leaves_the_earlier_outputs_and_no_temporaries(tmp_path,
                                                                           monkeypatch):
    old = {tmp_path / "k.cubin": b"old cubin", tmp_path / "k.json": b"old json"}
    write_atomically(old)
    real_fdopen = os.fdopen

    def interrupted_on_second(fd, *args, **kwargs):
        if len(list(tmp_path.glob(".k.*"))) > 1:
            raise KeyboardInterrupt
        return real_fdopen(fd, *args, **kwargs)
    monkeypatch.setattr(outputs.os, "fdopen", interrupted_on_second)
    with pytest.raises(KeyboardInterrupt):
        write_atomically({tmp_path / "k.cubin": b"new", tmp_path / "k.json": b"new"})
    assert {p: p.read_bytes() for p in old} == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cubin", "k.json"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_build_exits_cleanly_with_no_partial_output(tmp_path, signum):
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "hopperc", "build", str(GEMM), "--out-dir",
                             "out", "--no-cache"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HOPPERC_CACHE_DIR": str(cache)})
    # The parser's tables appear once the build is under way (its signal handlers
    # are set by then); lowering and NVRTC take a few tenths of a second more.
    deadline = time.monotonic() + 60
    while not list(cache.glob("grammar/hk-*.lark")) and proc.poll() is None:
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.01)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    if proc.returncode == 0:
        pytest.skip("the build finished before the signal arrived")
    assert proc.returncode == 128 + signum, err
    assert "interrupted" in err
    leftovers = list((tmp_path / "out").iterdir()) if (tmp_path / "out").exists() else []
    assert leftovers == []


def test_racing_builds_of_one_output_leave_a_matching_pair(tmp_path):
    """Processes building two different kernels into the same -o: whichever wins,
    the cubin is the one its metadata describes."""
    (tmp_path / "k.hk").write_text(TMA_COPY)
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-m", "hopperc", "build", "k.hk", "-o",
                                   "out/k.cubin", "-q", "-D", f"BM={64 if i % 2 else 32}"],
                                  cwd=tmp_path, stderr=subprocess.PIPE, text=True)
                 for i in range(6)]
        for proc in procs:
            assert proc.wait(timeout=300) == 0, proc.stderr.read()
        meta = json.loads((tmp_path / "out" / "k.json").read_text())
        cubin = (tmp_path / "out" / "k.cubin").read_bytes()
        assert hashlib.sha256(cubin).hexdigest() == meta["cubin_sha256"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["k.cubin", "k.json"]


def test_emit_refuses_two_forms(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    proc = hopperc("emit", "--ptx", "--cu", "k.hk", cwd=tmp_path)
    assert proc.returncode == 1 and "--ptx and --cu were given" in proc.stderr
