"""One file from the Hub: a ranged GET streamed into `<name>.part`, hashed by Ember as the bytes arrive.

    NAME.gguf.part       the bytes so far, always a prefix of the file (appended, never rewritten)
    NAME.gguf.part.json  what they are a prefix of (repository, revision, SHA-256, size), and
                         `verified` once the whole file hashed right

A later pull resumes from the `.part`'s length with `Range: bytes=N-` (the bytes already
there are hashed again first, so the digest always covers the whole file), whether the last
one was cut, killed or cancelled; a connection cut mid-body is resumed at once, up to
MAX_RESUMES times. A server that ignores the range starts the file over. The Hub answers a
resolve URL with the bytes or with a redirect to its file servers: the redirect is followed by
hand, only where `engine.hub.route` allows (the Hub itself, or its published file servers at
public addresses), so the token never leaves the Hub's host and the guard permits the file
server to this download alone (`engine.network.guard.granted`). The bytes come through
`http.client`, read as they arrive (httpx, used for the metadata, moves bodies in 64 KiB
pieces through its parser, at a third of curl's speed here; this is on par with curl), and a
server that sends less than MIN_RATE bytes a second over RATE_WINDOW_S ends the try in one
line. A resume names the validator (ETag) of the bytes it continues (`If-Range`), so a file
that changed on the server starts over instead of being spliced; without a validator and
without the Hub's SHA-256 nothing could tell, so such a file starts over too. A 429 is
retried at most MAX_429_TRIES times, each wait clamped to RETRY_FLOOR_S and the client's
ceiling. Proxies are used as `engine.hub.proxy` says. The `.part` is locked while it is
written, so two pulls of one file never interleave. Verified files stay `.part` until the
caller has the whole item and renames them (`engine.hub.download`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import http.client
import json
import os
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import urlsplit

import certifi

from engine.cancel import CancelToken
from engine.history.lock import try_lock
from engine.hub.client import HubClient, retry_after_s
from engine.hub.errors import DownloadCancelled, DownloadError, gated_line, status_line
from engine.hub.files import HubFile
from engine.hub.proxy import Proxy, proxy_for
from engine.hub.route import Place, next_hop, pinned_addresses, place_of
from engine.network.destinations import Destination
from engine.network.guard import EgressRefused, granted, note

CHUNK = 1 << 20
MAX_REDIRECTS = 5
MAX_RESUMES = 3
MAX_429_TRIES = 5  # 429 answers retried per file, whatever Retry-After says
RETRY_FLOOR_S = 1.0  # the shortest wait after a 429 (a Retry-After of 0 or below is not "at once")
MIN_RATE = 1000  # bytes a second: a server slower than this over RATE_WINDOW_S is given up on
RATE_WINDOW_S = 60.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

OnBytes = Callable[[int, bool], None]  # (bytes, whether they came over the network now)


def part_path(final: Path) -> Path:
    return final.with_name(final.name + ".part")


def meta_path(final: Path) -> Path:
    return final.with_name(final.name + ".part.json")


class _Cut(Exception):
    """The body ended early; `moved` says whether this try got anywhere (else it is not retried)."""

    def __init__(self, moved: bool, why: str) -> None:
        super().__init__(why)
        self.moved = moved


class _Wait(Exception):
    def __init__(self, seconds: float | None) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class _Receiver:
    """The `.part` being appended to, its running SHA-256, and the progress callback."""

    def __init__(self, fh: IO[bytes], on_bytes: OnBytes) -> None:
        self.fh, self.on_bytes = fh, on_bytes
        self.digest = hashlib.sha256()
        self.offset = 0
        self.etag: str | None = None  # the validator of the bytes held (a strong ETag), for If-Range

    def rehash(self, limit: int) -> None:
        """Hash what the `.part` already holds (a resume); more than `limit` bytes is not this file."""
        self.fh.seek(0, os.SEEK_END)
        size = self.fh.tell()
        if size > limit:
            self.fh.truncate(0)
            return
        self.offset = size
        self.on_bytes(size, False)  # shown before the hashing: a resumed bar starts at the bytes there
        self.fh.seek(0)
        left = size
        while left and (block := self.fh.read(min(CHUNK, left))):
            self.digest.update(block)
            left -= len(block)

    def reset(self) -> None:
        self.fh.truncate(0)
        self.on_bytes(-self.offset, False)
        self.digest, self.offset, self.etag = hashlib.sha256(), 0, None

    def write(self, block: memoryview) -> None:
        self.fh.write(block)
        self.digest.update(block)
        self.offset += len(block)
        self.on_bytes(len(block), True)


def fetch(
    file: HubFile, final: Path, *, client: HubClient, on_bytes: OnBytes, cancel: CancelToken | None = None
) -> str:
    """Bring `final`'s `.part` to the whole, verified file; returns its SHA-256 (hex). The `.part` stays."""
    part, meta = part_path(final), meta_path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(part, "a+b") as fh:  # append mode: bytes only ever go on the end
        if not try_lock(fh):
            raise DownloadError(f"{file.name} is already being downloaded by another Ember process")
        state = _read_meta(meta)
        if state.get("identity") != _identity(file):
            fh.truncate(0)
            _write_meta(meta, {"identity": _identity(file)})
        elif state.get("verified") and os.fstat(fh.fileno()).st_size == file.size:
            on_bytes(file.size, False)
            return str(state["verified"])
        got = _Receiver(fh, on_bytes)
        try:
            got.rehash(file.size)
            etag = state.get("etag")
            got.etag = etag if isinstance(etag, str) else None
            if got.offset and got.etag is None and file.sha256 is None:
                got.reset()  # nothing could tell whether the bytes held are of this file: start over
            _fill(file, got, client, cancel, lambda tag: _write_meta(meta, {"identity": _identity(file), "etag": tag}))
            fh.flush()
            os.fsync(fh.fileno())
        except OSError as exc:  # the network's errors are dealt with below this: these are the disk's
            raise _disk_error(exc, file, got.offset) from exc
        except DownloadError:
            if got.offset == 0:  # nothing to resume: leave nothing behind
                fh.close()
                for p in (part, meta):
                    p.unlink(missing_ok=True)
            raise
        sha = got.digest.hexdigest()
        if file.sha256 is not None and sha != file.sha256.lower():
            fh.close()
            for p in (part, meta):
                p.unlink(missing_ok=True)
            raise DownloadError(
                f"{file.name}: the bytes received do not match the Hub's SHA-256 "
                f"({sha[:12]}… instead of {file.sha256[:12]}…); the file was deleted, nothing was kept"
            )
        _write_meta(meta, {"identity": _identity(file), "verified": sha})
    return sha


def _fill(
    file: HubFile,
    got: _Receiver,
    client: HubClient,
    cancel: CancelToken | None,
    keep_etag: Callable[[str | None], None],
) -> None:
    resumes, waited, tries = 0, 0.0, 0
    while got.offset < file.size:
        _check_cancel(cancel, file, got)
        try:
            _one_request(file, got, client, cancel, keep_etag)
        except _Cut as cut:
            if not cut.moved or resumes >= MAX_RESUMES:
                kept = "the part received is kept: pull again to resume" if got.offset else "nothing was kept"
                raise DownloadError(f"{file.name}: {cut} after {_mb(got.offset)} of {_mb(file.size)}; {kept}") from cut
            resumes += 1
        except _Wait as wait:
            pause = max(RETRY_FLOOR_S, wait.seconds or 0.0)  # no or an unreadable Retry-After: the floor
            tries += 1
            if waited + pause > client.retry_after_max or tries > MAX_429_TRIES:
                asked = f", asked to wait {wait.seconds:g} s" if wait.seconds is not None else ""
                tried = f" after {tries} tries" if tries > 1 else ""
                raise DownloadError(
                    f"{file.name}: the Hub is rate-limiting downloads (HTTP 429{asked}){tried}; "
                    f"pull again later to resume"
                ) from wait
            waited += pause
            if cancel is None:
                time.sleep(pause)
            elif cancel.wait(pause):
                _check_cancel(cancel, file, got)


def _one_request(
    file: HubFile,
    got: _Receiver,
    client: HubClient,
    cancel: CancelToken | None,
    keep_etag: Callable[[str | None], None],
) -> None:
    url = client.resolve_url(file)
    for _ in range(MAX_REDIRECTS + 1):
        headers = client.headers_for(url) | _range_headers(got)
        with contextlib.ExitStack() as stack:
            conn = _open(url, client, stack)
            stack.callback(conn.close)
            response = _send(conn, url, headers, file, client)
            if response.status in _REDIRECTS:
                url = next_hop(client.destination, url, response.getheader("Location"))
                continue
            if response.status == 416:  # what the .part holds cannot be continued: start over
                got.reset()
                raise _Cut(True, "the server refused to resume (HTTP 416)")
            _check_status(response, file, client)
            _check_same_file(response, got)
            if response.status == 200 and got.offset:  # the server ignored the range: start over
                got.reset()
            if got.offset == 0:
                got.etag = _strong_etag(response)
                keep_etag(got.etag)
            _receive(response, file, got, cancel, client, url)
            return
    raise DownloadError(f"{file.name}: more than {MAX_REDIRECTS} redirects; the Hub's address may be wrong")


def _range_headers(got: _Receiver) -> dict[str, str]:
    if not got.offset:
        return {}
    return {"Range": f"bytes={got.offset}-"} | ({"If-Range": got.etag} if got.etag else {})


def _strong_etag(response: http.client.HTTPResponse) -> str | None:
    etag = (response.getheader("ETag") or "").strip()
    return etag if etag.startswith('"') and len(etag) < 300 else None  # a weak W/"…" cannot be used in If-Range


def _check_same_file(response: http.client.HTTPResponse, got: _Receiver) -> None:
    """A 206 continuing bytes of another version (a server that ignored If-Range) is not spliced on."""
    if response.status == 206 and got.offset and got.etag and _strong_etag(response) != got.etag:
        got.reset()
        raise _Cut(True, "the file changed on the server since the part was received; starting over")


def _open(url: str, client: HubClient, stack: contextlib.ExitStack) -> http.client.HTTPConnection:
    """A connection for `url`: direct (pinned to a checked address for a file server) or through a proxy."""
    place = place_of(url)
    why = f"model download from {client.host}"
    if place.destination != client.destination:
        stack.enter_context(granted(place.destination, why))
    proxy = proxy_for(url)
    if proxy is not None:
        stack.enter_context(granted(proxy.destination, f"proxy for a {why}"))
        note(f"{place.destination} via proxy {proxy}")
        return _through_proxy(place, proxy, client.timeout)
    addresses: list[str] = []
    if place.destination != client.destination:
        addresses = pinned_addresses(client.destination, place.destination, why)
        for ip in addresses:
            stack.enter_context(granted(Destination(ip, place.destination.port), why))
    return _connection(place, client.timeout, addresses)


def _send(
    conn: http.client.HTTPConnection, url: str, headers: dict[str, str], file: HubFile, client: HubClient
) -> http.client.HTTPResponse:
    u = urlsplit(url)
    target = url if getattr(conn, "absolute_form", False) else u.path + (f"?{u.query}" if u.query else "")
    try:
        conn.request("GET", target, headers=headers | getattr(conn, "proxy_headers", {}))
        return conn.getresponse()
    except EgressRefused as exc:
        raise DownloadError(str(exc)) from exc
    except TimeoutError as exc:
        raise DownloadError(
            f"{file.name}: {_host(url)} did not answer within {client.timeout:g} s; pull again to resume"
        ) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise DownloadError(f"cannot reach {_host(url)}: {exc or type(exc).__name__}") from exc


def _receive(
    response: http.client.HTTPResponse,
    file: HubFile,
    got: _Receiver,
    cancel: CancelToken | None,
    client: HubClient,
    url: str,
) -> None:
    start = _start(response)
    if start != got.offset:  # the server ignored the range (200) or sent another one: start over
        got.reset()
        if start != 0:
            raise _Cut(False, f"the server sent bytes from {start}, not from {got.offset}")
    before = got.offset
    floor = _RateFloor(file, url, got)
    while True:
        _check_cancel(cancel, file, got)
        try:
            block = response.read1(CHUNK)  # what has arrived: progress moves with every piece
        except TimeoutError as exc:
            raise DownloadError(
                f"{file.name}: {_host(url)} stopped sending for {client.timeout:g} s after "
                f"{_mb(got.offset)} of {_mb(file.size)}; the part received is kept: "
                f"pull again to resume"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise _Cut(got.offset > before, "the connection was cut") from exc
        if not block:
            break
        if got.offset + len(block) > file.size:
            got.reset()
            raise DownloadError(f"{file.name}: the server sent more than the Hub's size ({_mb(file.size)})")
        got.write(memoryview(block))
        floor.check()
    if got.offset < file.size:
        raise _Cut(got.offset > before, "the connection closed early")


class _RateFloor:
    """Ends a transfer slower than MIN_RATE bytes a second over each RATE_WINDOW_S (a drip-fed body)."""

    def __init__(self, file: HubFile, url: str, got: _Receiver) -> None:
        self.file, self.url, self.got = file, url, got
        self.since, self.at = time.monotonic(), got.offset

    def check(self) -> None:
        now = time.monotonic()
        if now - self.since < RATE_WINDOW_S:
            return
        if self.got.offset - self.at < MIN_RATE * RATE_WINDOW_S:
            raise DownloadError(
                f"{self.file.name}: {_host(self.url)} sent {self.got.offset - self.at:,} bytes in "
                f"{now - self.since:.0f} s (slower than {MIN_RATE:,} bytes a second); the "
                f"{_mb(self.got.offset)} received are kept: pull again to resume"
            )
        self.since, self.at = now, self.got.offset


def _connection(place: Place, timeout: float, addresses: list[str]) -> http.client.HTTPConnection:
    dest = place.destination
    conn: http.client.HTTPConnection
    if place.scheme == "https":
        conn = http.client.HTTPSConnection(dest.host, dest.port, timeout=timeout, context=_tls())
    else:
        conn = http.client.HTTPConnection(dest.host, dest.port, timeout=timeout)
    if addresses:  # connect to the address checked, not to whatever a second lookup answers
        conn._create_connection = functools.partial(_connect_any, addresses)  # type: ignore[attr-defined]
    return conn


def _connect_any(
    addresses: list[str], address: tuple[str, int], timeout: float | None = None, source: object = None
) -> socket.socket:
    last: OSError | None = None
    for ip in addresses:
        try:
            return socket.create_connection((ip, address[1]), timeout)
        except OSError as exc:
            last = exc
    raise last or OSError("no address")


def _through_proxy(place: Place, proxy: Proxy, timeout: float) -> http.client.HTTPConnection:
    auth = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else {}
    p = proxy.destination
    conn: http.client.HTTPConnection
    if place.scheme == "https":  # a CONNECT tunnel; TLS (and the certificate check) is with the server
        conn = http.client.HTTPSConnection(p.host, p.port, timeout=timeout, context=_tls())
        conn.set_tunnel(place.destination.host, place.destination.port, headers=auth)
    else:  # a plain request in absolute form, as httpx sends it to an http proxy
        conn = http.client.HTTPConnection(p.host, p.port, timeout=timeout)
        conn.absolute_form = True  # type: ignore[attr-defined]
        conn.proxy_headers = auth  # type: ignore[attr-defined]
    return conn


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certifi.where())  # the CA bundle httpx (the metadata calls) uses


def _start(response: http.client.HTTPResponse) -> int:
    if response.status != 206:
        return 0
    text = response.getheader("Content-Range") or ""  # bytes START-END/TOTAL
    try:
        return int(text.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return -1


def _check_status(response: http.client.HTTPResponse, file: HubFile, client: HubClient) -> None:
    status = response.status
    if status in (200, 206):
        return
    if status == 429:
        raise _Wait(retry_after_s(response.getheader("Retry-After")))
    code = response.getheader("X-Error-Code") or ""
    if status in (401, 403):
        if code == "GatedRepo" or status == 403:
            raise DownloadError(gated_line(file.repo, status, client.token is not None))
        raise DownloadError(
            f"{file.repo} is private, gated or missing (HTTP 401): check the name; if it is "
            f"gated, set HF_TOKEN, or run `hf auth login`"
        )
    raise DownloadError(status_line(f"{file.repo}/{file.path}", status))


def _check_cancel(cancel: CancelToken | None, file: HubFile, got: _Receiver) -> None:
    if cancel is not None and cancel.cancelled:
        raise DownloadCancelled(
            f"download cancelled; {file.name}: {_mb(got.offset)} of {_mb(file.size)} kept, and the next pull resumes it"
        )


def _host(url: str) -> str:
    return urlsplit(url).netloc.rpartition("@")[2] or url


def _identity(file: HubFile) -> dict[str, object]:
    return {"repo": file.repo, "path": file.path, "revision": file.revision, "sha256": file.sha256, "size": file.size}


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def _write_meta(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _disk_error(exc: OSError, file: HubFile, received: int) -> DownloadError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DownloadError(
            f"the disk filled up while downloading {file.name}; the {_mb(received)} received "
            f"are kept: free some space and pull again to resume"
        )
    return DownloadError(f"cannot write {file.name}: {exc.strerror or exc}")


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB"
