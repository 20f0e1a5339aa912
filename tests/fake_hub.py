"""A loopback Hugging Face Hub for tests: the real `huggingface_hub` client and Ember's download talk to it.

    with FakeHub({"ember-test/SmolLM2-GGUF": {"SmolLM2-135M-Instruct.Q4_1.gguf": smollm_path}}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub.cut_at = 0.4          # the next resolve response stops at 40 % of the file

It answers what the client asks for (paths as `huggingface_hub` builds them):

    GET  /api/models?search=…&filter=gguf&sort=downloads&limit=…&expand=…   the search
    GET  /api/models/{repo}[/revision/{rev}][?blobs=true]                  model info, LFS metadata
    GET  /api/models/{repo}/tree/{rev}[/{folder}]                          the file tree
    POST /api/models/{repo}/paths-info/{rev}                               metadata of named paths
    GET  /{repo}/resolve/{rev}/{file}   (Range)                            the bytes, or a 302 to the CDN

Switches, read on every request (set them from the test, even mid-download):
    cut_at       a fraction: the next `cuts` file responses close the connection there
    stall_at     a fraction: file responses stop sending there (until the hub stops)
    tamper       one byte in the middle of every file response is flipped
    tamper_only  when not empty, `tamper` flips bytes only in these paths (one bad file of an item)
    fail         (status, headers): resolve requests answer that, `fail_times` times (None: always)
    redirect     resolve answers 302 to a second server on `localhost` (another host: a CDN)
    redirect_to  resolve answers 302 with this Location, as written (a hostile Hub)
    no_lfs       paths listed without LFS metadata (no SHA-256), with `sizes` overriding their size
    twice        paths listed twice in the model info
    alt          {path: another local file}: once a cut happened, that path serves the other file
    drip_s       file bodies are sent a byte every drip_s seconds (for at most drip_for_s), then cut
    info_drip_s  the model info is sent a byte every info_drip_s seconds (for at most drip_for_s)
    search_raw   the search answers this JSON as is
File responses carry an ETag (of the bytes served) and honour If-Range.
A repository listed in `gated` answers resolve with 401 (X-Error-Code: GatedRepo) unless the
request carries `Bearer {token}`. `requests` records (method, path, Range, host) of each request.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_digests: dict[tuple[str, int, int], str] = {}


def sha256_of(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        h = hashlib.sha256()
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        _digests[key] = h.hexdigest()
    return _digests[key]


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    host: str
    authorization: str | None


@dataclass
class FakeHub:
    repos: Mapping[str, Mapping[str, Path]]  # repo → {path in the repo: a local file}
    gated: set[str] = field(default_factory=set[str])
    token: str = "hf_fake_token"
    cut_at: float | None = None
    cuts: int = 1
    stall_at: float | None = None
    tamper: bool = False
    tamper_only: set[str] = field(default_factory=set[str])
    fail: tuple[int, dict[str, str]] | None = None
    fail_times: int | None = None
    redirect: bool = False
    redirect_to: str | None = None
    no_lfs: set[str] = field(default_factory=set[str])
    sizes: dict[str, int] = field(default_factory=dict[str, int])
    twice: set[str] = field(default_factory=set[str])
    alt: dict[str, Path] = field(default_factory=dict[str, Path])
    drip_s: float | None = None
    info_drip_s: float | None = None
    drip_for_s: float = 5.0
    search_raw: object = None
    requests: list[Request] = field(default_factory=list[Request])

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []

    # -- running -------------------------------------------------------------------------

    def start(self) -> FakeHub:
        for _ in ("hub", "cdn"):  # the CDN is reached as `localhost`: another host name than the Hub's
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, name="fake-hub", daemon=True).start()
            self._servers.append(server)
        return self

    def stop(self) -> None:
        self._stop.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._servers[0].server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://localhost:{self._servers[1].server_address[1]}"

    def resolves(self) -> list[Request]:
        return [r for r in self.requests if "/resolve/" in r.path or r.path.startswith("/cdn/")]

    # -- what the handler asks -------------------------------------------------------------

    def take_failure(self) -> tuple[int, dict[str, str]] | None:
        with self._lock:
            if self.fail is None or self.fail_times == 0:
                return None
            if self.fail_times is not None:
                self.fail_times -= 1
            return self.fail

    def take_cut(self) -> float | None:
        with self._lock:
            if self.cut_at is None or self.cuts <= 0:
                return None
            self.cuts -= 1
            self._was_cut = True
            return self.cut_at

    def local(self, repo: str, path: str) -> Path:
        """The bytes `path` serves now: its `alt` file once a cut happened."""
        if getattr(self, "_was_cut", False) and path in self.alt:
            return self.alt[path]
        return self.repos[repo][path]

    def entry(self, repo: str, path: str, blobs: bool = True) -> dict[str, Any]:
        local = self.repos[repo][path]
        size = local.stat().st_size
        out: dict[str, Any] = {
            "type": "file",
            "path": path,
            "rfilename": path,
            "size": size,
            "oid": hashlib.sha1(path.encode()).hexdigest(),
            "blobId": "b" * 40,
        }
        if blobs:
            out["lfs"] = {"oid": sha256_of(local), "sha256": sha256_of(local), "size": size, "pointerSize": 135}
        return out

    def info(self, repo: str, blobs: bool) -> dict[str, Any]:
        return {
            "_id": "x" * 24,
            "id": repo,
            "modelId": repo,
            "sha": COMMIT,
            "private": False,
            "gated": "manual" if repo in self.gated else False,
            "disabled": False,
            "downloads": 1000 - len(repo),
            "likes": 7,
            "tags": ["gguf"],
            "library_name": "gguf",
            "siblings": [self._sibling(repo, p, blobs) for p in self.repos[repo] for _ in range(1 + (p in self.twice))],
        }

    def _sibling(self, repo: str, path: str, blobs: bool) -> dict[str, Any]:
        e = self.entry(repo, path, blobs)
        out: dict[str, Any] = {"rfilename": path}
        if blobs and path in self.no_lfs:
            out.update(size=self.sizes.get(path, e["size"]), blobId=e["blobId"])
        elif blobs:
            out.update(
                size=e["size"], blobId=e["blobId"], lfs={k: e["lfs"][k] for k in ("sha256", "size", "pointerSize")}
            )
        return out


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._route("GET")

        def do_HEAD(self) -> None:
            self._route("HEAD")

        def do_POST(self) -> None:
            self._route("POST")

        def _route(self, method: str) -> None:
            url = urlsplit(self.path)
            hub.requests.append(
                Request(
                    method,
                    url.path,
                    self.headers.get("Range"),
                    self.headers.get("Host", ""),
                    self.headers.get("Authorization"),
                )
            )
            query = parse_qs(url.query)
            parts = [unquote(p) for p in url.path.strip("/").split("/")]
            if parts[:2] == ["api", "models"]:
                self._api(method, parts[2:], query)
            elif parts[0] == "cdn":
                self._file("/".join(parts[1:3]), "/".join(parts[3:]), method)
            elif len(parts) >= 5 and parts[2] == "resolve":
                self._resolve("/".join(parts[:2]), "/".join(parts[4:]), method)
            else:
                self._json(404, {"error": "not found"})

        # -- the API ---------------------------------------------------------------------

        def _api(self, method: str, rest: list[str], query: dict[str, list[str]]) -> None:
            if not rest:
                self._search(query)
                return
            repo = "/".join(rest[:2])
            if repo not in hub.repos:
                self._json(401, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                return
            blobs = query.get("blobs", ["false"])[0].lower() == "true"
            tail = rest[2:]
            if (not tail or tail[0] == "revision") and hub.info_drip_s is not None:
                self._drip(json.dumps(hub.info(repo, blobs)).encode(), hub.info_drip_s)
            elif not tail or tail[0] == "revision":
                self._json(200, hub.info(repo, blobs))
            elif tail[0] == "tree":
                folder = "/".join(tail[2:])
                self._json(200, [hub.entry(repo, p) for p in hub.repos[repo] if p.startswith(folder)])
            elif tail[0] == "paths-info" and method == "POST":
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                self._json(200, [hub.entry(repo, p) for p in form.get("paths", []) if p in hub.repos[repo]])
            else:
                self._json(404, {"error": "not found"})

        def _search(self, query: dict[str, list[str]]) -> None:
            failure = hub.take_failure()
            if failure is not None and failure[0] == 429:
                self._json(429, {"error": "slow down"}, failure[1])
                return
            if hub.search_raw is not None:
                self._json(200, hub.search_raw)
                return
            text = query.get("search", [""])[0].lower()
            limit = int(query.get("limit", ["100"])[0])
            found = [hub.info(r, False) for r in hub.repos if text in r.lower()]
            found.sort(key=lambda m: -m["downloads"])
            fields = ("_id", "id", *query.get("expand", ["downloads", "likes", "gated"]))
            self._json(200, [{k: m[k] for k in fields if k in m} for m in found[:limit]])

        # -- the bytes --------------------------------------------------------------------

        def _resolve(self, repo: str, path: str, method: str) -> None:
            failure = hub.take_failure()
            if failure is not None:
                self._json(failure[0], {"error": f"HTTP {failure[0]}"}, failure[1])
                return
            if repo not in hub.repos:
                self._json(401, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                return
            if path not in hub.repos[repo]:
                self._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
                return
            if repo in hub.gated and self.headers.get("Authorization") != f"Bearer {hub.token}":
                self._json(401, {"error": "Access to this repo is restricted"}, {"X-Error-Code": "GatedRepo"})
                return
            if hub.redirect or hub.redirect_to is not None:
                target = hub.redirect_to or f"{hub.cdn_url}/cdn/{repo}/{quote(path)}"
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._file(repo, path, method)

        def _file(self, repo: str, path: str, method: str) -> None:
            local = hub.local(repo, path)
            size = local.stat().st_size
            etag = f'"{sha256_of(local)[:16]}"'
            ranged = self.headers.get("Range")
            if_range = self.headers.get("If-Range")
            if ranged and if_range is not None and if_range != etag:
                ranged = None  # the file changed: the whole of the new one (RFC 9110 13.1.5)
            start, end = _range(ranged, size)
            if start >= size:
                self._json(416, {"error": "range not satisfiable"}, {"Content-Range": f"bytes */{size}"})
                return
            self.send_response(206 if ranged else 200)
            self.send_header("Content-Length", str(end - start))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", etag)
            if ranged:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            if method != "HEAD" and hub.drip_s is not None:
                with local.open("rb") as f:
                    f.seek(start)
                    self._drip_body(f.read(end - start), hub.drip_s)
            elif method != "HEAD":
                self._send_body(local, start, end, size, not hub.tamper_only or path in hub.tamper_only)

        def _send_body(self, local: Path, start: int, end: int, size: int, may_tamper: bool = True) -> None:
            cut, stall = hub.take_cut(), hub.stall_at
            stop_at = end
            if cut is not None:
                stop_at = max(start, min(end, int(size * cut)))
            if stall is not None:
                stop_at = max(start, min(stop_at, int(size * stall)))
            middle = size // 2
            with local.open("rb") as f:
                f.seek(start)
                pos = start
                while pos < stop_at:
                    block = bytearray(f.read(min(1 << 20, stop_at - pos)))
                    if hub.tamper and may_tamper and pos <= middle < pos + len(block):
                        block[middle - pos] ^= 0xFF
                    try:
                        self.wfile.write(block)
                    except OSError:
                        return
                    pos += len(block)
            if stall is not None and stop_at < end:
                self.wfile.flush()
                hub._stop.wait(120)
            if stop_at < end:
                self.close_connection = True

        def _drip(self, data: bytes, every_s: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self._drip_body(data, every_s)

        def _drip_body(self, data: bytes, every_s: float) -> None:
            """A byte at a time, each within any read timeout, for at most drip_for_s; then the connection closes."""
            deadline = time.monotonic() + hub.drip_for_s
            self.close_connection = True
            for i in range(len(data)):
                if time.monotonic() > deadline or hub._stop.wait(every_s):
                    return
                try:
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                except OSError:
                    return

        def _json(self, status: int, body: object, headers: Mapping[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _range(header: str | None, size: int) -> tuple[int, int]:
    """(start, end exclusive) of `bytes=N-` or `bytes=N-M`; the whole file without a header."""
    if not header or not header.startswith("bytes="):
        return 0, size
    first, _, last = header[len("bytes=") :].partition("-")
    start = int(first) if first else 0
    end = min(size, int(last) + 1) if last else size
    return start, end


def wait_for(check: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False
