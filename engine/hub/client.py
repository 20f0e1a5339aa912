"""The Hub as Ember uses it: search GGUF repositories and list their files, through `huggingface_hub`.

Every call checks the network guard first, so zero-egress mode refuses with the one line
that says how to allow downloads (`consent.refusal_line`) before any connection is tried;
the connections themselves go through the guard's audit hook and land in the ledger as
the feature "model download". `huggingface_hub` is imported only when the Hub is used.

Its shared HTTP session is given a transport that bounds every wait (`huggingface_hub`
passes `timeout=None`, which waits forever, on some calls), so a stalled server ends in
one line after `timeout` seconds, and a body drip-fed slower than the transfer's minimum
rate ends in one line too. A 429 is retried after its Retry-After (at least RETRY_FLOOR_S)
at most MAX_429_TRIES times, while the wait stays under `retry_after_max` seconds in all.

Proxies are honoured as the Hugging Face client honours them (httpx reads `HTTPS_PROXY`,
`HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY`): the proxy is permitted for the Hub's calls alone,
every request (each redirect too) is checked against zero-egress mode before it is sent,
and the ledger names the proxy and what was reached through it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Generator, Iterator
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from engine import __version__
from engine.hub.consent import refusal_line
from engine.hub.errors import TOKEN_HOW, HubError, gated_line, status_line
from engine.hub.files import HubFile, HubRepo, check_repo_id
from engine.hub.proxy import proxy_for
from engine.network.destinations import Destination
from engine.network.guard import EgressRefused, feature, granted, note, require

DEFAULT_ENDPOINT = "https://huggingface.co"
FEATURE = "model download"
TIMEOUT_S = 30.0  # the longest a silent server is waited for, per read
RETRY_AFTER_MAX_S = 60.0  # the longest Ember waits in all on a 429 before saying so
RETRY_FLOOR_S = 1.0  # the shortest wait after a 429, whatever Retry-After says (0, negative)
MAX_429_TRIES = 5
MIN_RATE = 1000  # bytes a second over RATE_WINDOW_S: a slower answer is given up on
RATE_WINDOW_S = 60.0
USER_AGENT = f"ember/{__version__}"
_PORTS = {"http": 80, "https": 443}
_T = TypeVar("_T")
_session_lock = threading.Lock()
_session_env: tuple[tuple[str, str], ...] | None = None  # the proxy variables the session was made with
_bound_now: contextvars.ContextVar[float] = contextvars.ContextVar("ember_hub_timeout", default=TIMEOUT_S)


class HubClient:
    """One Hub endpoint (`HF_ENDPOINT` or huggingface.co) and its token (`HF_TOKEN` or the saved one)."""

    def __init__(
        self,
        endpoint: str | None = None,
        token: str | None = None,
        *,
        timeout: float = TIMEOUT_S,
        retry_after_max: float = RETRY_AFTER_MAX_S,
    ) -> None:
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
        try:  # `[::1` fails in urlsplit, a port over 65535 in .port: neither may become a default
            url = urlsplit(self.endpoint)
            port = url.port
        except ValueError as exc:
            raise HubError(f"not a Hub address: {self.endpoint[:120]!r} ({exc})") from exc
        if url.scheme not in _PORTS or not url.hostname or port == 0:
            raise HubError(
                f"not a Hub address: {self.endpoint[:120]!r} (expected https://host, e.g. {DEFAULT_ENDPOINT})"
            )
        self.destination = Destination(url.hostname.lower(), port or _PORTS[url.scheme])
        self._explicit_port = port is not None and port != _PORTS[url.scheme]
        self._token = token
        self._token_read = token is not None
        self.timeout = timeout
        self.retry_after_max = retry_after_max

    @property
    def host(self) -> str:
        """The endpoint's host (with its port when it is not the usual one), for the consent question."""
        return str(self.destination) if self._explicit_port else self.destination.host

    @property
    def token(self) -> str | None:
        if not self._token_read:
            self._token = os.environ.get("HF_TOKEN") or _saved_token()
            self._token_read = True
        return self._token or None

    # -- what the Hub has ------------------------------------------------------------------

    def search(self, text: str, limit: int = 30) -> list[HubRepo]:
        """GGUF repositories whose name contains `text`, most downloaded first (files not listed)."""

        def call() -> list[HubRepo]:
            found = self._api().list_models(
                filter="gguf",
                search=text.strip() or None,
                sort="downloads",
                limit=limit,
                expand=["downloads", "likes", "gated"],
            )
            return [
                HubRepo(m.id, _count(m.downloads), _count(m.likes), m.gated not in (None, False))
                for m in found
                if isinstance(m.id, str) and m.id
            ]

        return self._call(f"search {text!r}", call)

    def list_gguf(self, repo: str, revision: str | None = None) -> list[HubFile]:
        """The repository's GGUF files with their LFS sizes and SHA-256, pinned to the commit listed."""
        files = self.repo_info(repo, revision).gguf_files
        return list(files or ())

    def repo_info(self, repo: str, revision: str | None = None) -> HubRepo:
        """The repository with its GGUF files listed (one request: model info with file metadata)."""
        check_repo_id(repo)

        def call() -> HubRepo:
            info = self._api().model_info(repo, revision=revision, files_metadata=True, timeout=self.timeout)
            if not info.sha:
                raise HubError(f"{repo}: the Hub did not say which commit it listed")
            named = {s.rfilename: s for s in info.siblings or () if str(s.rfilename).lower().endswith(".gguf")}
            files = _usable(repo, [_hub_file(repo, info.sha, s) for s in named.values()])  # listed twice: one file
            return HubRepo(info.id or repo, _count(info.downloads), _count(info.likes), bool(info.gated), files)

        return self._call(repo, call)

    # -- what a download needs ---------------------------------------------------------------

    def resolve_url(self, file: HubFile) -> str:
        """The file's download URL at its pinned revision (the Hub answers it or redirects to a file server)."""
        return f"{self.endpoint}/{file.repo}/resolve/{quote(file.revision, safe='')}/{quote(file.path)}"

    def headers_for(self, url: str) -> dict[str, str]:
        """Request headers for `url`: the token goes to the Hub's own host only, never to a file server."""
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        u = urlsplit(url)
        if self.token and (u.hostname or "").lower() == self.destination.host and _port(url) == self.destination.port:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def check_allowed(self) -> None:
        """HubError with the consent words when zero-egress mode refuses the Hub (nothing is sent)."""
        try:
            require(self.destination.host, self.destination.port, FEATURE)
        except EgressRefused as exc:
            raise HubError(refusal_line(self)) from exc

    # -- the calls ---------------------------------------------------------------------------

    def _api(self) -> Any:
        from huggingface_hub import HfApi

        _bound_session()
        return HfApi(
            endpoint=self.endpoint, token=self.token or False, library_name="ember", library_version=__version__
        )

    def _call(self, what: str, call: Callable[[], _T]) -> _T:
        bound = _bound_now.set(self.timeout)
        try:
            return self._retrying(what, call)
        finally:
            _bound_now.reset(bound)

    def _retrying(self, what: str, call: Callable[[], _T]) -> _T:
        waited, tries = 0.0, 0
        with feature(FEATURE), self._through_proxy():
            self.check_allowed()
            while True:
                try:
                    return call()
                except HubError:
                    raise
                except Exception as exc:
                    wait = _retry_after(exc)
                    pause = None if wait is None else max(RETRY_FLOOR_S, wait)  # None: not a 429
                    tries += 1
                    if pause is None or waited + pause > self.retry_after_max or tries > MAX_429_TRIES:
                        raise HubError(self.describe(exc, what)) from exc
                    time.sleep(pause)
                    waited += pause

    @contextlib.contextmanager
    def _through_proxy(self) -> Generator[None]:
        """Permit the proxy the environment names for the Hub (if any) to these calls alone."""
        try:
            proxy = proxy_for(self.endpoint)
        except HubError:
            proxy = None  # httpx itself refuses what it cannot use, in its own words
        if proxy is None:
            yield
            return
        with granted(proxy.destination, f"proxy for {FEATURE} from {self.host}"):
            yield

    def describe(self, exc: BaseException, what: str) -> str:
        """One line for a failed call about `what` (a repository, a file or a search)."""
        from huggingface_hub import errors as hf

        status = _status(exc)
        if isinstance(exc, EgressRefused):
            return str(exc)
        if isinstance(exc, _TooSlow):
            return f"{self.host} sent its answer too slowly ({exc}; {what}); try again later"
        if isinstance(exc, hf.GatedRepoError) or status == 403:
            return gated_line(what, status or 403, self.token is not None)
        if isinstance(exc, hf.RevisionNotFoundError):
            return f"{what}: no such revision on the Hub (HTTP {status})"
        if status == 401:
            return f"{what} is private, gated or missing (HTTP 401): check the name; if it is gated, {TOKEN_HOW}"
        if isinstance(exc, hf.RepositoryNotFoundError):
            return status_line(what, status or 404)
        if status is not None:
            return status_line(what, status)
        if isinstance(exc, httpx.TimeoutException):
            return f"{self.host} did not answer within {self.timeout:g} s ({what}); try again later"
        if isinstance(exc, hf.OfflineModeIsEnabled):
            return "HF_HUB_OFFLINE is set: unset it to search or download models"
        if isinstance(exc, httpx.TransportError | OSError):
            return f"cannot reach {self.host} ({what}): {exc or type(exc).__name__}"
        return f"{what}: the Hub's answer could not be read ({type(exc).__name__}: {exc})"


def _hub_file(repo: str, sha: str, sibling: Any) -> HubFile | str:
    """The file, or why it is no model file (a size of 0 or less would be "saved" as an empty file)."""
    lfs = sibling.lfs
    size = (lfs.size if lfs is not None else sibling.size) or 0
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return f"{repo}: the Hub lists {sibling.rfilename!r} with a size of {size!r} bytes; not a model file"
    digest = lfs.sha256 if lfs is not None else None
    return HubFile(repo, sibling.rfilename, size, digest if isinstance(digest, str) else None, sha)


def _usable(repo: str, listed: list[HubFile | str]) -> tuple[HubFile, ...]:
    """The files that can be models; HubError saying why when none can (one bad entry spoils nothing else)."""
    files = tuple(f for f in listed if isinstance(f, HubFile))
    why = [f for f in listed if isinstance(f, str)]
    if why and not files:
        raise HubError(why[0])
    return files


def _count(value: object) -> int:
    """A count the Hub reports (downloads, likes): anything but a whole number reads as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _port(url: str) -> int | None:
    u = urlsplit(url)
    try:
        return u.port or _PORTS.get(u.scheme)
    except ValueError:
        return None


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header in seconds (it may be a number or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _retry_after(exc: BaseException) -> float | None:
    if _status(exc) != 429:
        return None
    response: Any = getattr(exc, "response", None)
    asked = retry_after_s(response.headers.get("Retry-After")) if response is not None else None
    return 0.0 if asked is None else asked  # a 429 without a readable Retry-After waits the floor


def _saved_token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


class _TooSlow(httpx.ReadTimeout):
    """An answer drip-fed slower than MIN_RATE over RATE_WINDOW_S (each read within the timeout)."""


class _RateBound(httpx.SyncByteStream):
    """The response body, ended by `_TooSlow` when it arrives slower than the minimum rate."""

    def __init__(self, inner: httpx.SyncByteStream, request: httpx.Request) -> None:
        self._inner, self._request = inner, request

    def __iter__(self) -> Iterator[bytes]:
        since, got = time.monotonic(), 0
        for chunk in self._inner:
            got += len(chunk)
            now = time.monotonic()
            if now - since >= RATE_WINDOW_S:
                if got < MIN_RATE * RATE_WINDOW_S:
                    raise _TooSlow(f"{got:,} bytes in {now - since:.0f} s", request=self._request)
                since, got = now, 0
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _on_request(request: httpx.Request) -> None:
    """Before each request (each redirect too): bound its waits, and check its destination.

    Through a proxy the audit hook sees only the proxy, so the destination is checked here.
    """
    given: dict[str, float | None] = request.extensions.get("timeout") or {}
    bound = _bound_now.get()
    request.extensions["timeout"] = {k: given.get(k) or bound for k in ("connect", "read", "write", "pool")}
    url = request.url
    port = url.port or _PORTS.get(url.scheme)
    require(url.host, port, FEATURE)
    proxy = proxy_for(str(url))
    if proxy is not None:
        note(f"{Destination(url.host, port)} via proxy {proxy}")


def _on_response(response: httpx.Response) -> None:
    stream = response.stream
    if isinstance(stream, httpx.SyncByteStream):
        response.stream = _RateBound(stream, response.request)


def _bound_session() -> None:
    """Give `huggingface_hub`'s shared session bounded waits and the destination check.

    Once per process, and again when the proxy variables change (httpx reads them when the
    session is made; a session kept past a change would still go to the old proxy).
    """
    global _session_env
    env = tuple(sorted(urllib.request.getproxies_environment().items()))
    with _session_lock:
        if _session_env == env:
            return
        from huggingface_hub import set_client_factory

        set_client_factory(
            lambda: httpx.Client(
                follow_redirects=True,
                headers={"User-Agent": USER_AGENT},
                event_hooks={"request": [_on_request], "response": [_on_response]},
            )
        )
        _session_env = env
