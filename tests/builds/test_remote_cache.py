"""The build cache's remote tier against a real WebDAV server (wsgidav, started
here): one machine's build fills it, another's is served from it without
compiling, a damaged or foreign entry there is a miss, and a remote that fails
in any way is one failure (the command's one warning: test_cache.py's
unusable-tiers test) and the build goes on."""
from __future__ import annotations

import contextlib
import http.server
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hopperc.buildsys import cache as cache_module
from hopperc.buildsys.cache import BuildCache, CachedBuild, build_key
from hopperc.buildsys.remote import RemoteCache
from tests.builds.helpers import TMA_COPY, hopperc

KEY, OTHER_KEY = "ab" * 32, "cd" * 32
LARGEST = cache_module.LARGEST_ENTRY
ENTRY = CachedBuild(b"\x7fELF cubin", b'{"kernel": "k"}\n', {"kernel": "k"}, ())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Dav:
    def __init__(self, root: Path, port: int):
        self.root, self.url = root, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def dav(tmp_path_factory):
    """`wsgidav` serving an empty directory, anonymous and writable, as a CI
    cache server would (WebDAV: a PUT needs its parent collection)."""
    root = tmp_path_factory.mktemp("dav-root")
    port = _free_port()
    log = open(root.parent / "wsgidav.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "wsgidav.server.server_cli",
                               "--host", "127.0.0.1", "--port", str(port), "--root", str(root),
                               "--auth", "anonymous", "--no-config", "-q"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (root.parent / "wsgidav.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "wsgidav did not start"
                time.sleep(0.05)
        yield Dav(root, port)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def machine_a(dav, tmp_path_factory):
    """Machine A builds k.hk with an empty local cache, and the remote holds a
    damaged entry at its key: a miss, so A compiles and its build replaces it."""
    from hopperc.target import DEFAULT_ARCH
    key = build_key(TMA_COPY, "k.hk", {}, DEFAULT_ARCH)
    seeded = dav.root / "ci" / "hopperc" / key[:2] / key
    seeded.parent.mkdir(parents=True)
    seeded.write_bytes(cache_module.encode(key, ENTRY)[:-1] + b"\x00")
    work = tmp_path_factory.mktemp("machine-a")
    (work / "k.hk").write_text(TMA_COPY)
    proc = hopperc("build", "k.hk", cwd=work, cache=work / "cache",
                   HOPPERC_REMOTE_CACHE=f"{dav.url}/ci/hopperc")
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return work, proc, seeded


def test_a_damaged_remote_entry_is_a_miss_and_the_build_replaces_it(machine_a):
    work, proc, seeded = machine_a
    assert "remote" not in proc.stdout and "cached" not in proc.stdout
    stored = cache_module.decode(seeded.read_bytes(), seeded.name)
    assert stored.cubin == (work / "k.cubin").read_bytes()
    assert stored.metadata == (work / "k.json").read_bytes()


def test_a_build_on_one_machine_is_a_remote_hit_on_another(dav, machine_a, tmp_path):
    work = machine_a[0]
    (tmp_path / "k.hk").write_text(TMA_COPY)
    remote = {"HOPPERC_REMOTE_CACHE": f"{dav.url}/ci/hopperc/"}
    b = hopperc("build", "k.hk", cwd=tmp_path, cache=tmp_path / "b", **remote)
    assert b.returncode == 0 and not b.stderr
    assert "nvrtc   remote  -> k.cubin" in b.stdout
    for name in ("k.cubin", "k.json"):
        assert (tmp_path / name).read_bytes() == (work / name).read_bytes()
    # the remote hit was kept locally: the remote is not needed again
    again = hopperc("build", "k.hk", cwd=tmp_path, cache=tmp_path / "b")
    assert again.returncode == 0 and "nvrtc   cached  -> k.cubin" in again.stdout


def test_a_foreign_entry_on_the_remote_is_a_miss(dav, tmp_path):
    """(Its PUTs make the collections /foreign/nested/ab/ and /cd/ first.)"""
    remote = RemoteCache(f"{dav.url}/foreign/nested")
    remote.put(KEY, cache_module.encode(OTHER_KEY, ENTRY))  # another key's, at KEY's path
    remote.put(OTHER_KEY, cache_module.encode(OTHER_KEY, ENTRY))
    store = BuildCache(tmp_path, remote=remote)
    assert store.get(KEY) is None and store.origin is None
    assert store.get(OTHER_KEY) == ENTRY and store.origin == "remote"
    assert remote.failure is None and (dav.root / "foreign" / "nested" / "ab" / KEY).is_file()
    assert BuildCache(tmp_path).get(OTHER_KEY) == ENTRY  # kept locally


def test_a_read_only_remote_is_read_and_never_written(dav, tmp_path):
    RemoteCache(f"{dav.url}/shared").put(KEY, cache_module.encode(KEY, ENTRY))
    reader = RemoteCache(f"{dav.url}/shared", read_only=True)
    store = BuildCache(tmp_path, remote=reader)
    assert store.get(KEY) == ENTRY and store.origin == "remote"
    store.put(OTHER_KEY, ENTRY)
    assert not (dav.root / "shared" / "cd").exists() and reader.failure is None
    assert BuildCache(tmp_path).get(OTHER_KEY) == ENTRY  # the local tier took it


class _Handler(http.server.BaseHTTPRequestHandler):
    """Every WebDAV method the remote tier sends goes to `_answer`; nothing logged."""

    def do_GET(self):
        self._answer()

    do_PUT = do_HEAD = do_MKCOL = do_GET

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serving(*handlers):
    """A local HTTP server per handler class, in threads; their servers."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
               for handler in handlers]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


class _Answer(_Handler):
    """A server that answers every request with the status its path names
    (`/500/...`) and records the requests' headers; `/hang` never answers."""
    seen: list = []

    def _answer(self):
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if self.path.startswith("/hang"):
            time.sleep(1)
            return
        self.send_response(int(self.path.split("/")[1]))
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def answering():
    with _serving(_Answer) as (server,):
        yield f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("path, method, failure", [
    ("/500", "get", "GET {url}/500/ab/{key}: HTTP 500"),
    ("/503", "put", "PUT {url}/503/ab/{key}: HTTP 503"),
    ("/403", "put", "PUT {url}/403/ab/{key}: HTTP 403"),
    ("/401", "get", "GET {url}/401/ab/{key}: HTTP 401"),
    ("/hang", "get", "GET {url}/hang/ab/{key}: timed out")])
def test_a_failing_remote_is_one_failure_and_then_left_alone(answering, path, method,
                                                             failure):
    remote = RemoteCache(answering + path, token="t0ken", timeout=0.2)
    _Answer.seen.clear()
    assert (remote.get(KEY, LARGEST) if method == "get" else remote.put(KEY, b"entry")) is None
    assert remote.failure.startswith(failure.format(url=answering, key=KEY))
    assert _Answer.seen[0][2] == "Bearer t0ken"
    sent = len(_Answer.seen)
    first = remote.failure
    assert remote.get(OTHER_KEY, LARGEST) is None and remote.put(OTHER_KEY, b"entry") is None
    assert remote.failure == first and len(_Answer.seen) == sent  # nothing sent after it


def test_a_missing_entry_is_a_miss_not_a_failure(answering):
    remote = RemoteCache(answering + "/404")
    assert remote.get(KEY, LARGEST) is None and remote.failure is None
    assert remote.reachable()


def test_cache_info_names_the_remote(dav, tmp_path):
    info = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c",
                   HOPPERC_REMOTE_CACHE=f"{dav.url}/ci", HOPPERC_REMOTE_CACHE_READ_ONLY="yes")
    assert info.returncode == 0
    assert f"remote:    {dav.url}/ci (read-only); answers" in info.stdout
    bad = hopperc("cache", "info", cwd=tmp_path, cache=tmp_path / "c",
                  HOPPERC_REMOTE_CACHE="cache.example/hk")
    assert bad.returncode == 1 and "expected an http:// or https:// URL" in bad.stderr
    assert "Invalid value for HOPPERC_REMOTE_CACHE: 'cache.example/hk': " in bad.stderr
    assert bad.stderr.count("HOPPERC_REMOTE_CACHE") == 1
    assert "Traceback" not in bad.stderr


class _Redirect(_Handler):
    """Answers every request with `status` and a Location on `target` (another
    server); `seen` records what each server received (method, path, headers)."""
    status, target, seen = 302, "", []

    def _answer(self):
        self.seen.append((self.command, self.path, dict(self.headers)))
        if self.target:
            self.send_response(self.status)
            self.send_header("Location", self.target + self.path)
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def redirecting_servers():
    """Server A (127.0.0.1) redirects everything to server B (`localhost`, another
    host name) at the same path; yields A's URL and the two handler classes."""
    class Elsewhere(_Redirect):
        target, seen = "", []

    class Redirector(_Redirect):
        seen = []

    with _serving(Elsewhere, Redirector) as (elsewhere, redirector):
        Redirector.target = f"http://localhost:{elsewhere.server_address[1]}"
        yield f"http://127.0.0.1:{redirector.server_address[1]}", Redirector, Elsewhere


@pytest.fixture
def redirecting(redirecting_servers):
    """The two servers with nothing received yet (A answers 302 unless told)."""
    _, redirector, elsewhere = redirecting_servers
    redirector.status = 302
    redirector.seen.clear()
    elsewhere.seen.clear()
    return redirecting_servers


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("credentials", [{"token": "s3cret"}, {"user": "u:p4ss@"}])
def test_a_redirect_is_a_failure_and_is_not_followed(redirecting, status, credentials):
    """Following a 3xx would send the Authorization header to the host it names."""
    a_url, redirector, elsewhere = redirecting
    redirector.status = status
    base = a_url.replace("//", "//" + credentials.get("user", ""), 1) + "/ci"
    for request in (lambda r: r.get(KEY, LARGEST), lambda r: r.put(KEY, b"entry"),
                    lambda r: r.reachable()):
        remote = RemoteCache(base, token=credentials.get("token"))
        assert not request(remote)
        assert f": HTTP {status} " in remote.failure
        assert "a redirect to http://localhost:" in remote.failure
        assert "u:p4ss" not in remote.failure
    assert len(redirector.seen) == 3 and "Authorization" in redirector.seen[0][2]
    assert elsewhere.seen == []


def test_a_redirecting_remote_is_one_warning_and_the_build_goes_on(redirecting, tmp_path):
    a_url, redirector, elsewhere = redirecting
    (tmp_path / "k.hk").write_text(TMA_COPY)
    proc = hopperc("build", "k.hk", cwd=tmp_path, cache=tmp_path / "cache",
                   HOPPERC_REMOTE_CACHE=f"{a_url}/ci", HOPPERC_REMOTE_CACHE_TOKEN="s3cret")
    assert proc.returncode == 0 and (tmp_path / "k.cubin").is_file()
    assert proc.stderr.count("warning: the remote build cache failed (GET ") == 1
    assert "HTTP 302 Found, a redirect to http://localhost:" in proc.stderr
    assert [seen[0] for seen in redirector.seen] == ["GET"]  # no PUT after the failure
    assert redirector.seen[0][2]["Authorization"] == "Bearer s3cret"
    assert elsewhere.seen == []


def test_both_tiers_refuse_an_entry_over_one_size_bound(dav, tmp_path, monkeypatch):
    """One bound (cache.LARGEST_ENTRY) for what either tier reads as an entry."""
    data = cache_module.encode(KEY, ENTRY)
    remote = RemoteCache(f"{dav.url}/bounded")
    remote.put(KEY, data)
    local = tmp_path / "builds" / KEY[:2] / KEY
    local.parent.mkdir(parents=True)
    local.write_bytes(data)
    monkeypatch.setattr(cache_module, "LARGEST_ENTRY", len(data) - 1)
    assert BuildCache(tmp_path).get(KEY) is None
    local.unlink()
    store = BuildCache(tmp_path, remote=remote)
    assert store.get(KEY) is None and remote.failure is None
    monkeypatch.setattr(cache_module, "LARGEST_ENTRY", len(data))
    assert store.get(KEY) == ENTRY and store.origin == "remote"
    assert BuildCache(tmp_path).get(KEY) == ENTRY
