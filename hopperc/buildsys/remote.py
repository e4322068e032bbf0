"""The build cache's remote tier: entries kept on an HTTP server that several
machines share (CI jobs), spoken as ccache's and Bazel's HTTP caches speak it:
`GET base/ab/abcd...` fetches an entry (404: a miss), `PUT` stores one, and any
WebDAV server serves it (a WebDAV server refuses a PUT whose parent collection
is missing with 409 Conflict: the collection, and its missing parents, are made
with MKCOL and the PUT sent again).

Settings (the environment; hopperc/buildsys/cache.py's BuildCache reads them):
`HOPPERC_REMOTE_CACHE` the base URL (http or https; `user:password@` in it is
sent as basic authentication), `HOPPERC_REMOTE_CACHE_TOKEN` a bearer token,
`HOPPERC_REMOTE_CACHE_READ_ONLY=1` to fetch but never store, and
`HOPPERC_REMOTE_CACHE_TIMEOUT` seconds per request (default 5).

A remote that fails (unreachable, a timeout, a 5xx, a refused PUT, a redirect)
is not used again by this process, and `failure` says why once: the caller
warns, the build goes on from the local tier and the compiler. Redirects are
never followed (the store is the base URL's host, as ccache and Bazel expect):
following one would send the `Authorization` header to whatever host a 3xx
names, over plain http too. What a GET returns is checked by the cache like a
local entry: a damaged or foreign one is a miss.
"""
from __future__ import annotations

import base64
import os
import urllib.parse

DEFAULT_TIMEOUT = 5.0
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class RemoteSettingError(Exception):
    """A HOPPERC_REMOTE_CACHE setting that cannot be used: the variable, why, and
    the value as it may be shown (neither the password nor the token: None)."""

    def __init__(self, setting: str, reason: str, shown: str | None = None):
        super().__init__(setting, reason, shown)
        self.setting, self.reason, self.shown = setting, reason, shown


class RemoteCache:
    def __init__(self, base_url: str, *, token: str | None = None, read_only: bool = False,
                 timeout: float = DEFAULT_TIMEOUT):
        parts = urllib.parse.urlsplit(base_url)
        self.headers = {"User-Agent": "hopperc", "Content-Type": "application/octet-stream"}
        if parts.username is not None:
            credentials = (f"{urllib.parse.unquote(parts.username)}:"
                           f"{urllib.parse.unquote(parts.password or '')}")
            self.headers["Authorization"] = "Basic " + base64.b64encode(
                credentials.encode()).decode()
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.base = _without_credentials(base_url).rstrip("/")  # what messages show
        self.read_only = read_only
        self.timeout = timeout
        self.failure: str | None = None
        self._opener = None  # made by the first request (urllib is loaded then)

    @classmethod
    def from_environment(cls) -> RemoteCache | None:
        """The remote tier the environment asks for, or None; a setting that
        cannot be used is a RemoteSettingError (the build cache's CacheError)."""
        url = os.environ.get("HOPPERC_REMOTE_CACHE", "").strip()
        if not url:
            return None
        shown = _without_credentials(url)
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError as exc:
            raise RemoteSettingError("HOPPERC_REMOTE_CACHE", str(exc), shown) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteSettingError("HOPPERC_REMOTE_CACHE", "expected an http:// or https:// "
                                     "URL such as https://cache.example.com/hopperc", shown)
        if parts.query or parts.fragment:
            raise RemoteSettingError("HOPPERC_REMOTE_CACHE", "the base URL takes no query or "
                                     "fragment (entries go below its path)", shown)
        token = os.environ.get("HOPPERC_REMOTE_CACHE_TOKEN", "").strip()
        if not token.isprintable():
            raise RemoteSettingError("HOPPERC_REMOTE_CACHE_TOKEN", "the token holds a control character")
        read_only = os.environ.get("HOPPERC_REMOTE_CACHE_READ_ONLY", "").strip().lower()
        if read_only not in _TRUE + _FALSE:
            raise RemoteSettingError("HOPPERC_REMOTE_CACHE_READ_ONLY", "expected 1 or 0",
                                     read_only)
        timeout_text = os.environ.get("HOPPERC_REMOTE_CACHE_TIMEOUT", "").strip()
        try:
            timeout = float(timeout_text) if timeout_text else DEFAULT_TIMEOUT
        except ValueError:
            timeout = -1.0
        if not 0 < timeout < float("inf"):
            raise RemoteSettingError("HOPPERC_REMOTE_CACHE_TIMEOUT",
                                     "expected a positive number of seconds", timeout_text)
        return cls(url, token=token or None, read_only=read_only in _TRUE, timeout=timeout)

    def url(self, key: str) -> str:
        return f"{self.base}/{key[:2]}/{key}"

    def get(self, key: str, largest: int) -> bytes | None:
        """The bytes stored under `key`, or None (a miss, the remote failed, or
        more than `largest` bytes: the cache's bound on an entry)."""
        response = self._request("GET", self.url(key), missing_ok=True, largest=largest)
        return response if isinstance(response, bytes) else None

    def put(self, key: str, data: bytes) -> None:
        if self.read_only:
            return
        status = self._request("PUT", self.url(key), data, conflict_ok=True)
        if status == 409:  # WebDAV: the parent collection does not exist yet
            self._make_collection(f"{self.base}/{key[:2]}")
            self._request("PUT", self.url(key), data)

    def _make_collection(self, url: str) -> None:
        """MKCOL `url`, and first its missing parents (a 409 says the parent is
        missing; 405 that the collection exists)."""
        status = self._request("MKCOL", url + "/", conflict_ok=True, exists_ok=True)
        parent = url.rpartition("/")[0]
        if status == 409 and urllib.parse.urlsplit(parent).path not in ("", "/"):
            self._make_collection(parent)
            self._request("MKCOL", url + "/", exists_ok=True)

    def reachable(self) -> bool:
        """Whether the base URL answers a HEAD (404: not made yet, which will do)."""
        self._request("HEAD", self.base + "/", missing_ok=True, exists_ok=True)
        return self.failure is None

    def _request(self, method: str, url: str, data: bytes | None = None, *,
                 missing_ok: bool = False, conflict_ok: bool = False,
                 exists_ok: bool = False, largest: int = 0) -> bytes | int | None:
        """The body of a GET, else the status; None when the remote failed (the
        first failure is kept in `failure`, and no request is sent after it)."""
        if self.failure is not None:
            return None
        import http.client  # with ssl: loaded by the first request, not by a local hit
        import urllib.error
        import urllib.request

        if self._opener is None:
            self._opener = urllib.request.build_opener(_refusing_redirects())
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                if method != "GET":
                    return response.status
                body = response.read(largest + 1)
                return body if len(body) <= largest else None
        except urllib.error.HTTPError as exc:
            exc.close()
            if (exc.code == 404 and missing_ok) or (exc.code == 409 and conflict_ok) \
                    or (exc.code == 405 and exists_ok):
                return exc.code
            self.failure = f"{method} {url}: HTTP {exc.code} {exc.reason}"
            if 300 <= exc.code < 400:
                target = _without_credentials(exc.headers.get("Location", "?"))
                self.failure += (f", a redirect to {target}: the remote cache follows "
                                 "none (name the store's own URL)")
        except urllib.error.URLError as exc:
            self.failure = f"{method} {url}: {getattr(exc.reason, 'strerror', None) or exc.reason}"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.failure = f"{method} {url}: {exc or type(exc).__name__}"
        return None


def _refusing_redirects():
    """urllib's redirect handler, made to follow nothing: redirect_request's None
    leaves the 3xx to the default handler, which raises it as an HTTPError."""
    import urllib.request

    class RefuseRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    return RefuseRedirects


def _without_credentials(url: str) -> str:
    """`url` without a `user:password@` (messages and logs never show them)."""
    scheme, separator, rest = url.partition("//")
    if not separator:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}//{authority.rpartition('@')[2]}{slash}{path}"
