"""The build cache: complete keys, hits that load no compiler, damaged entries,
pruning, `hopperc cache info|clear`, and concurrent processes."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hopperc.buildsys import cache as cache_module
from hopperc.buildsys.cache import BuildCache, CacheError, CachedBuild, build_key, parse_size
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


def test_a_damaged_entry_is_rebuilt_by_the_command(shared_build, tmp_path):
    """Metadata edited by hand in the cache: not served, rebuilt, replaced."""
    cache = shared_build.cache_copy(tmp_path / "c")
    entry = shared_build.entry(cache)
    edited = entry.read_bytes().replace(b'"block": [\n    128,', b'"block": [\n    256,', 1)
    assert edited != entry.read_bytes()
    entry.write_bytes(edited)
    (tmp_path / "k.hk").write_text(TMA_COPY)
    proc = hopperc("build", "k.hk", cwd=tmp_path, cache=cache)
    assert proc.returncode == 0 and "cached" not in proc.stdout
    assert (tmp_path / "k.cubin").read_bytes() == shared_build.cubin
    assert entry.read_bytes() != edited
    assert (tmp_path / "k.json").read_bytes() == (shared_build.directory / "k.json").read_bytes()


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
                                        ("500MB", 500 << 20), ("2 GiB", 2 << 30),
                                        ("8388608T", 1 << 63)])
def test_cache_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, message", [
    ("nan", "expected a size like 500M"), ("inf", "expected a size like 500M"),
    ("-1", "expected a size like 500M"), ("500X", "expected a size like 500M"),
    ("0", "the cache needs a positive size"), ("0.0001", "the cache needs a positive size"),
    ("9" * 400, "larger than any disk"), ("8388608.001T", "larger than any disk")])
def test_cache_sizes_refused(tmp_path, text, message):
    """Not a number, not a unit, not positive, or beyond any file size (no float
    overflow): a message naming the variable once, exit 1, no traceback."""
    with pytest.raises(CacheError, match=message) as refused:
        parse_size(text)
    assert str(refused.value).startswith(f"HOPPERC_CACHE_MAX_SIZE={text!r}: ")
    bad = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c",
                  HOPPERC_CACHE_MAX_SIZE=text)
    assert bad.returncode == 1 and message in bad.stderr and "Traceback" not in bad.stderr
    assert f"Invalid value for HOPPERC_CACHE_MAX_SIZE: {text!r}: " in bad.stderr
    assert bad.stderr.count("HOPPERC_CACHE_MAX_SIZE") == 1


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


def test_unusable_cache_tiers_are_a_warning_each_and_the_build_goes_on(tmp_path):
    """The local cache directory is a file; the remote's port is closed."""
    import socket
    (tmp_path / "k.hk").write_text(TMA_COPY)
    (tmp_path / "c").write_text("a file where the cache directory should be")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/hk"
    proc = hopperc("build", "k.hk", "-q", cwd=tmp_path, cache=tmp_path / "c",
                   HOPPERC_REMOTE_CACHE=closed, HOPPERC_REMOTE_CACHE_TIMEOUT="2")
    assert proc.returncode == 0 and (tmp_path / "k.cubin").exists()
    assert proc.stderr.count("warning:") == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("warning: cannot write the build cache in") == 1
    assert proc.stderr.count(f"warning: the remote build cache failed (GET {closed}/") == 1
    info = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c")
    cleared = hopperc("cache", "clear", cwd=tmp_path, cache=tmp_path / "c")
    assert info.returncode == 0 and "entries:   0" in info.stdout
    assert cleared.returncode == 0 and "removed 0 cached builds" in cleared.stdout


def test_a_hit_shows_the_warnings_of_the_first_build():
    from hopperc.diagnostics import SourceFile
    from hopperc.buildsys.jobs import replayed_warnings
    record = {"severity": "warning", "rule": "ptxas-warning", "message": "Unused register",
              "line": 2}
    entry = CachedBuild(b"", b"{}", {}, (record,))
    (shown,) = replayed_warnings(entry, SourceFile("k.hk", "one\ntwo\n"))
    assert shown.rule == "ptxas-warning" and shown.span.line == 2
    assert shown.text.splitlines() == ["k.hk:2:1: warning: Unused register", "two", "^"]


# Integrity: each entry names its key and hashes every part; anything else is a miss.

KEY, OTHER_KEY = "ab" * 32, "cd" * 32


def _forged(key: str, contents: dict[str, bytes], /, **header) -> bytes:
    """An entry whose header lists `contents` with their true sizes and hashes (so
    only what the parts hold, or `header`'s overrides, can make it a miss)."""
    listed = [{"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
              for name, data in contents.items()]
    text = json.dumps({"key": key, "parts": listed, **header}).encode()
    return b"hopperc-cache 2\n" + text + b"\n" + b"".join(contents.values())


def _parts(record=None, metadata=b"{}\n") -> dict[str, bytes]:
    record = {"summary": {"kernel": "k"}, "warnings": []} if record is None else record
    return {"cubin": b"\x7fELF" + bytes(100), "metadata": metadata,
            "record": json.dumps(record).encode()}


def test_an_entry_names_its_key_and_the_hash_of_every_part():
    entry = CachedBuild(b"\x7fELF cubin", b'{"kernel": "k"}\n', {"kernel": "k"},
                        ({"rule": "ptxas-warning", "message": "m", "line": 2},))
    data = cache_module.encode(KEY, entry)
    magic, header, _ = data.split(b"\n", 2)
    header = json.loads(header)
    assert magic == b"hopperc-cache 2" and header["key"] == KEY
    assert [p["name"] for p in header["parts"]] == ["cubin", "metadata", "record"]
    cubin, metadata = (p["sha256"] for p in header["parts"][:2])
    assert cubin == hashlib.sha256(entry.cubin).hexdigest()
    assert metadata == hashlib.sha256(entry.metadata).hexdigest()
    assert cache_module.decode(data, KEY) == entry
    assert _forged(KEY, _parts()) == cache_module.encode(
        KEY, CachedBuild(*(_parts()[n] for n in ("cubin", "metadata")), {"kernel": "k"}))


def _damaged(kind: str, good: bytes) -> bytes:
    header_end = good.index(b"\n", 16) + 1
    if kind == "metadata edited":
        return good.replace(b'"kernel": "k"}\n', b'"kernel": "q"}\n')
    if kind == "summary edited":
        return good.replace(b'"summary": {"kernel": "k"}', b'"summary": {"kernel": "q"}')
    if kind == "cubin bit flipped":
        return good[:-1] + b"\x01"
    if kind == "another key's entry":
        return cache_module.encode(OTHER_KEY, cache_module.decode(good, KEY))
    if kind == "cut short":
        return good[:-10]
    if kind == "bytes appended":
        return good + b"\0"
    if kind == "format 1":
        return good.replace(b"hopperc-cache 2", b"hopperc-cache 1", 1)
    if kind == "header not JSON":
        return good[:header_end - 2] + b"\n" + good[header_end:]
    if kind == "no header":
        return b"hopperc-cache 2\n"
    if kind == "size not a number":
        return good[:16] + good[16:header_end].replace(b'"size": 104', b'"size": "104"')
    if kind == "parts not a list":
        return _forged(KEY, _parts(), parts={"cubin": 1})
    if kind == "key not a string":
        return _forged(KEY, _parts(), key=7)
    if kind == "parts missing":
        return _forged(KEY, {n: d for n, d in _parts().items() if n != "record"})
    if kind == "warnings not a list of records":
        return _forged(KEY, _parts({"summary": {}, "warnings": {"rule": "x"}}))
    if kind == "summary not an object":
        return _forged(KEY, _parts({"summary": [], "warnings": []}))
    if kind == "metadata not JSON":
        return _forged(KEY, _parts(metadata=b"\xff{"))
    if kind == "metadata names another cubin":
        other = hashlib.sha256(b"another").hexdigest()
        return _forged(KEY, _parts(metadata=json.dumps({"cubin_sha256": other}).encode()))
    raise AssertionError(kind)


DAMAGE = ["metadata edited", "summary edited", "cubin bit flipped", "another key's entry",
          "cut short", "bytes appended", "format 1", "header not JSON", "no header",
          "size not a number", "parts not a list", "key not a string", "parts missing",
          "warnings not a list of records", "summary not an object", "metadata not JSON",
          "metadata names another cubin"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_an_entry_that_does_not_check_is_a_miss_and_is_replaced(tmp_path, kind):
    store = BuildCache(tmp_path)
    good_entry = CachedBuild(_parts()["cubin"], b'{"kernel": "k"}\n', {"kernel": "k"}, ())
    assert store.put(KEY, good_entry)
    path = tmp_path / "builds" / "ab" / KEY
    damaged = _damaged(kind, path.read_bytes())
    assert damaged != path.read_bytes()
    path.write_bytes(damaged)
    assert store.get(KEY) is None and store.origin is None
    assert not path.exists()
    assert store.put(KEY, good_entry) and store.get(KEY) == good_entry


def _odd(kind: str, root: Path) -> Path:
    """A cache directory (`root`, or one that cannot be made) holding one thing that
    is not a cache."""
    builds, shard = root / "builds", root / "builds" / "ab"
    if kind == "root is a file":
        root.parent.mkdir(parents=True, exist_ok=True)
        root.write_text("not a directory")
    elif kind == "root is a link loop":
        os.symlink(root.name, root)
    elif kind == "root cannot be made":  # read-only, even for root
        return Path("/proc/hopperc-test-cache")
    elif kind == "builds is a file":
        root.mkdir()
        builds.write_text("not a directory")
    elif kind == "shard is a file":
        builds.mkdir(parents=True)
        shard.write_text("not a directory")
    elif kind == "shard is a link loop":
        builds.mkdir(parents=True)
        os.symlink("ab", shard)
    elif kind == "entry is a directory":
        (shard / KEY / "x").mkdir(parents=True)
    elif kind == "entry is a link loop":
        shard.mkdir(parents=True)
        os.symlink(KEY, shard / KEY)
    elif kind == "entry is a link to an entry":
        BuildCache(root / "elsewhere").put(KEY, _entry())
        shard.mkdir(parents=True)
        os.symlink(root / "elsewhere" / "builds" / "ab" / KEY, shard / KEY)
    elif kind == "entry is a FIFO":
        shard.mkdir(parents=True)
        os.mkfifo(shard / KEY)
    elif kind == "lock is a directory":
        (root / "prune.lock").mkdir(parents=True)
        BuildCache(root).put(OTHER_KEY, _entry())
    else:
        raise AssertionError(kind)
    return root


ODD = ["root is a file", "root is a link loop", "root cannot be made", "builds is a file",
       "shard is a file", "shard is a link loop", "entry is a directory", "entry is a link loop", "entry is a link to an entry",
       "entry is a FIFO", "lock is a directory"]


@pytest.mark.parametrize("kind", ODD)
def test_nothing_in_the_cache_directory_raises(tmp_path, kind):
    """Each is a miss; a put that cannot be stored says so (the command warns once)."""
    root = _odd(kind, tmp_path / "c")
    store = BuildCache(root, max_size=1)
    assert store.get(KEY) is None
    stored = store.put(KEY, _entry())
    assert stored == (kind not in ("root is a file", "root is a link loop", "root cannot be made",
                                   "builds is a file", "shard is a file",
                                   "shard is a link loop", "entry is a directory"))
    assert (store.get(KEY) == _entry()) == stored
    store.size()
    store.prune()
    if kind == "lock is a directory":
        with pytest.raises(OSError, match="cannot create its lock file"):
            store.clear()
    else:
        store.clear()
        assert store.get(KEY) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not bind root")
def test_an_unreadable_cache_directory_is_a_miss(tmp_path):
    store = BuildCache(tmp_path / "c")
    store.put(KEY, _entry())
    (tmp_path / "c" / "builds").chmod(0)
    try:
        assert store.get(KEY) is None and store.put(OTHER_KEY, _entry()) is False
        assert store.size() == (0, 0) and store.prune() == 0
    finally:
        (tmp_path / "c" / "builds").chmod(0o755)


def test_odd_things_in_the_cache_directory_leave_the_commands_working(shared_build, tmp_path):
    """A hit among a directory entry, link loops, a FIFO, a lock that cannot be made
    and a compiler memo that is not text: the build, `cache info` and `cache clear`
    end with their result or a message, never a traceback."""
    cache = shared_build.cache_copy(tmp_path / "c")
    (cache / "builds" / "zz" / ("zz" * 32)).mkdir(parents=True)
    os.symlink("loop", cache / "builds" / "loop")
    os.symlink("yy" * 32, cache / "builds" / "zz" / ("yy" * 32))
    os.mkfifo(cache / "builds" / "zz" / ("xx" * 32))
    (cache / "prune.lock").unlink(missing_ok=True)
    (cache / "prune.lock").mkdir()
    for memo in (cache / "compiler").iterdir():
        memo.write_bytes(b"\xff" * 64)
    (tmp_path / "k.hk").write_text(TMA_COPY)
    built = hopperc("build", "k.hk", cwd=tmp_path, cache=cache)
    assert built.returncode == 0 and "nvrtc   cached" in built.stdout, built.stderr
    assert (tmp_path / "k.cubin").read_bytes() == shared_build.cubin
    info = hopperc("cache", "info", cwd=tmp_path, cache=cache)
    assert info.returncode == 0 and "entries:   1" in info.stdout
    cleared = hopperc("cache", "clear", cwd=tmp_path, cache=cache)
    assert cleared.returncode == 1 and "cannot create its lock file" in cleared.stderr
    for proc in (built, info, cleared):
        assert "Traceback" not in proc.stderr


def test_the_build_cache_settings_are_checked(monkeypatch):
    from hopperc.buildsys.remote import RemoteCache
    monkeypatch.setenv("HOPPERC_REMOTE_CACHE", "https://u:p%40ss@cache.example/hk/")
    monkeypatch.setenv("HOPPERC_REMOTE_CACHE_READ_ONLY", "1")
    monkeypatch.setenv("HOPPERC_REMOTE_CACHE_TIMEOUT", "0.5")
    remote = BuildCache.from_environment().remote
    assert remote.url(KEY) == f"https://cache.example/hk/ab/{KEY}"
    assert remote.headers["Authorization"] == "Basic dTpwQHNz"  # u:p@ss
    assert remote.read_only and remote.timeout == 0.5
    monkeypatch.setenv("HOPPERC_REMOTE_CACHE_TOKEN", "t0ken")
    assert RemoteCache.from_environment().headers["Authorization"] == "Bearer t0ken"
    for name, value, message in [
            ("HOPPERC_REMOTE_CACHE", "ftp://cache.example/", "expected an http:// or https://"),
            ("HOPPERC_REMOTE_CACHE", "http://", "expected an http:// or https://"),
            ("HOPPERC_REMOTE_CACHE", "http://u:secret@h:port/", "'http://h:port/': Port could"),
            ("HOPPERC_REMOTE_CACHE", "http://u:secret@[::1/", r"'http://\[::1/': Invalid IPv6"),
            ("HOPPERC_REMOTE_CACHE", "http://h/cache?x=1", "takes no query or fragment"),
            ("HOPPERC_REMOTE_CACHE_TOKEN", "t0\nken", "TOKEN: the token holds a control character"),
            ("HOPPERC_REMOTE_CACHE_READ_ONLY", "maybe", "expected 1 or 0"),
            ("HOPPERC_REMOTE_CACHE_TIMEOUT", "0", "a positive number of seconds"),
            ("HOPPERC_REMOTE_CACHE_TIMEOUT", "nan", "a positive number of seconds"),
            ("HOPPERC_REMOTE_CACHE_TIMEOUT", "5s", "a positive number of seconds")]:
        with monkeypatch.context() as env:
            env.setenv(name, value)
            with pytest.raises(CacheError, match=message) as refused:
                BuildCache.from_environment()
            assert "secret" not in str(refused.value) and "t0" not in str(refused.value)
