"""The build cache: complete keys, hits that load no compiler, damaged entries,
pruning, `hopperc cache info|clear`, and concurrent processes."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap

import pytest

from hopperc.build import cache as cache_module
from hopperc.build.cache import BuildCache, CacheError, CachedBuild, build_key, parse_size
from tests.builds.helpers import SCALE_ROWS, TMA_COPY, hopperc


def test_a_second_build_is_a_hit_with_the_same_outputs(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    first = hopperc("build", "k.hk", "--out-dir", "a", cwd=tmp_path, cache=tmp_path / "c")
    second = hopperc("build", "k.hk", "--out-dir", "b", cwd=tmp_path, cache=tmp_path / "c")
    assert first.returncode == second.returncode == 0
    assert "cached" not in first.stdout and "nvrtc   cached  -> b/k.cubin" in second.stdout
    for name in ("k.cubin", "k.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_hit_loads_neither_the_parser_the_passes_the_templates_nor_nvrtc(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    assert hopperc("build", "k.hk", "-q", cwd=tmp_path, cache=tmp_path / "c").returncode == 0
    probe = textwrap.dedent("""
        import sys
        from hopperc.cli import main
        try:
            main(["build", "k.hk", "-q"])
        except SystemExit as stop:
            assert stop.code == 0, stop.code
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("lark", "jinja2", "cuda",
                       "numpy") or m.startswith(("hopperc.passes.", "hopperc.frontend",
                                                 "hopperc.codegen", "hopperc.backend",
                                                 "hopperc.driver", "hopperc.sim")))
        print(heavy)
    """)
    import os
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "HOPPERC_CACHE_DIR": str(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("change", ["text", "name", "defines", "arch", "compiler", "nvrtc"])
def test_every_input_of_a_build_is_in_its_key(monkeypatch, change):
    args = dict(source_text=TMA_COPY, recorded_name="k.hk", defines={"BM": 64}, arch="sm_90a")
    before = build_key(**args)
    identity = dict(cache_module.toolchain.identity())
    if change == "text":
        args["source_text"] += " "
    elif change == "name":
        args["recorded_name"] = "src/k.hk"
    elif change == "defines":
        args["defines"] = {"BM": 128}
    elif change == "arch":
        args["arch"] = "sm_90"
    else:
        identity[change] = identity[change] + "x"
        monkeypatch.setattr(cache_module.toolchain, "identity", lambda: identity)
    assert build_key(**args) != before


def test_defines_in_any_order_or_base_are_one_key():
    one = build_key(TMA_COPY, "k.hk", {"BM": 64, "BN": 0x40}, "sm_90a")
    assert one == build_key(TMA_COPY, "k.hk", {"BN": 64, "BM": 64}, "sm_90a")


def _entry(size: int = 100) -> CachedBuild:
    return CachedBuild(b"\x7fELF" + bytes(size), b"{}\n", {"kernel": "k"}, ())


def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path):
    store = BuildCache(tmp_path)
    store.put("ab" * 32, _entry())
    path = tmp_path / "builds" / "ab" / ("ab" * 32)
    data = path.read_bytes()
    path.write_bytes(data[:-1] + b"\x01")  # the cubin no longer matches its hash
    assert store.get("ab" * 32) is None and not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data[:20])  # cut short
    assert store.get("ab" * 32) is None


def test_a_damaged_entry_is_rebuilt_by_the_command(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    assert hopperc("build", "k.hk", "-q", cwd=tmp_path, cache=tmp_path / "c").returncode == 0
    good = (tmp_path / "k.cubin").read_bytes()
    for entry in (tmp_path / "c" / "builds").rglob("*"):
        if entry.is_file():
            entry.write_bytes(b"hopperc-cache 2\n{}\n")
    proc = hopperc("build", "k.hk", cwd=tmp_path, cache=tmp_path / "c")
    assert proc.returncode == 0 and "cached" not in proc.stdout
    assert (tmp_path / "k.cubin").read_bytes() == good


def test_no_cache_neither_reads_nor_writes(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    proc = hopperc("build", "k.hk", "--no-cache", cwd=tmp_path, cache=tmp_path / "c")
    assert proc.returncode == 0
    assert not (tmp_path / "c" / "builds").exists()


def test_pruning_removes_the_least_recently_used_first(tmp_path):
    import os
    store = BuildCache(tmp_path, max_size=3 * 1200)
    for number, key in enumerate(("a" * 64, "b" * 64, "c" * 64, "d" * 64)):
        store.put(key, _entry(1000))
        path = tmp_path / "builds" / key[:2] / key
        os.utime(path, (1000 + number, 1000 + number))
    assert store.get("a" * 64) is not None  # a hit: now the most recent
    assert store.prune() >= 1
    assert store.get("b" * 64) is None and store.get("a" * 64) is not None
    assert store.size()[1] <= store.max_size


@pytest.mark.parametrize("text, size", [("", 1 << 30), ("500M", 500 << 20), ("2G", 2 << 30),
                                        ("4096", 4096), ("1.5k", 1536), ("500MiB", 500 << 20),
                                        ("500MB", 500 << 20), ("2 GiB", 2 << 30)])
def test_cache_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, message", [
    ("nan", "expected a size like 500M"), ("inf", "expected a size like 500M"),
    ("-1", "expected a size like 500M"), ("500X", "expected a size like 500M"),
    ("0", "the cache needs a positive size"), ("0.0001", "the cache needs a positive size")])
def test_cache_sizes_refused(tmp_path, text, message):
    """Not a number, not a unit, or not positive: a message, exit 1, no traceback."""
    with pytest.raises(CacheError, match=message):
        parse_size(text)
    bad = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c",
                  HOPPERC_CACHE_MAX_SIZE=text)
    assert bad.returncode == 1 and message in bad.stderr and "Traceback" not in bad.stderr


def test_cache_info_and_clear(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    hopperc("build", "k.hk", "-q", cwd=tmp_path, cache=tmp_path / "c")
    info = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c")
    assert info.returncode == 0 and "entries:   1" in info.stdout
    assert f"directory: {tmp_path / 'c'}" in info.stdout
    cleared = hopperc("cache", "clear", cwd=tmp_path, cache=tmp_path / "c")
    assert cleared.returncode == 0 and "removed 1 cached build" in cleared.stdout
    assert "entries:   0" in hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c").stdout
    bad = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c",
                  HOPPERC_CACHE_MAX_SIZE="lots")
    assert bad.returncode == 1 and "expected a size like 500M" in bad.stderr


def test_concurrent_builds_share_one_cache_safely(tmp_path):
    """Eight processes at once, two kernels, a cache so small that every store
    prunes: every build succeeds, every cubin matches its metadata, and every
    entry left in the cache is whole."""
    (tmp_path / "copy.hk").write_text(TMA_COPY)
    (tmp_path / "scale.hk").write_text(SCALE_ROWS)
    import os
    env = {**os.environ, "HOPPERC_CACHE_DIR": str(tmp_path / "c"),
           "HOPPERC_CACHE_MAX_SIZE": "60K"}
    procs = [subprocess.Popen([sys.executable, "-m", "hopperc", "build", "copy.hk", "scale.hk",
                               "--out-dir", f"out{i}", "-j", "1", "-q"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for i in range(8):
        for name in ("copy", "scale"):
            meta = json.loads((tmp_path / f"out{i}" / f"{name}.json").read_text())
            cubin = (tmp_path / f"out{i}" / f"{name}.cubin").read_bytes()
            assert hashlib.sha256(cubin).hexdigest() == meta["cubin_sha256"]
    store = BuildCache(tmp_path / "c")
    for entry in store.entries():
        assert entry.name.startswith(".") or cache_module.decode(
            open(entry.path, "rb").read(), entry.name) is not None


def test_an_unwritable_cache_is_a_warning_and_the_build_goes_on(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    (tmp_path / "c").write_text("a file where the cache directory should be")
    proc = hopperc("build", "k.hk", "-q", cwd=tmp_path, cache=tmp_path / "c")
    assert proc.returncode == 0 and (tmp_path / "k.cubin").exists()
    assert proc.stderr.count("warning: cannot write the build cache in") == 1


def test_a_hit_shows_the_warnings_of_the_first_build():
    from hopperc.diagnostics import SourceFile
    from hopperc.build.jobs import replayed_warnings
    record = {"severity": "warning", "rule": "ptxas-warning", "message": "Unused register",
              "line": 2}
    entry = CachedBuild(b"", b"{}", {}, (record,))
    (shown,) = replayed_warnings(entry, SourceFile("k.hk", "one\ntwo\n"))
    assert shown.rule == "ptxas-warning" and shown.span.line == 2
    assert shown.text.splitlines() == ["k.hk:2:1: warning: Unused register", "two", "^"]
