"""The download benchmark: Ember's download (hashing while it streams) against `curl` on one loopback URL.

    download_vs_curl_ratio  curl's median time / Ember's median time for the same file (1.0 = as fast)
    download_vs_curl_synced_ratio  the same with curl's file synced to disk after it (Ember syncs each
                            file before it takes its final name, so that a power cut never leaves a
                            half-written model under it; curl leaves it to the kernel)
    hash_overhead_pct       the share of Ember's download time its SHA-256 costs (hashing the same
                            bytes from memory, over Ember's median download time)

A small HTTP server on 127.0.0.1 serves a file of random bytes with ranges (`sendfile`, so
the server is never the slow side); the runs alternate curl and Ember so both see the same
machine. Both write to the same temporary folder. No curl: the row is skipped with a note.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from engine.hub.client import HubClient
from engine.hub.download import download
from engine.hub.files import HubFile
from engine.network.destinations import Destination
from engine.network.guard import granted
from models.library.paths import EmberPaths

FIELDS = (
    "download_vs_curl_ratio",
    "download_vs_curl_synced_ratio",
    "hash_overhead_pct",
    "download_mb_per_s",
    "curl_mb_per_s",
    "download_file_mb",
)
_BLOCK = 1 << 20


def measure_download(
    size_mb: int = 100, runs: int = 3, notes: list[str] | None = None, say: Callable[[str], None] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    curl = shutil.which("curl")
    if curl is None:
        (notes if notes is not None else []).append("download: curl is not installed; the download row is skipped")
        return out
    with tempfile.TemporaryDirectory(prefix="ember-bench-download-") as tmp:
        root = Path(tmp)
        source = root / "served.gguf"
        sha = _write_random(source, size_mb * _BLOCK)
        with _FileServer(source) as server:
            if say is not None:
                say(f"download: {size_mb} MB from a loopback server, Ember (hashing) and curl, {runs} rounds each")
            ember_s, curl_s, synced_s = _interleaved(root, server, source, sha, curl, runs)
        hash_s = _hash_time(source)
    size = size_mb * _BLOCK
    ember, curl_t = statistics.median(ember_s), statistics.median(curl_s)
    out.update(
        download_vs_curl_ratio=round(curl_t / ember, 3),
        hash_overhead_pct=round(100 * hash_s / ember, 1),
        download_vs_curl_synced_ratio=round(statistics.median(synced_s) / ember, 3),
        download_mb_per_s=round(size / ember / 1e6, 1),
        curl_mb_per_s=round(size / curl_t / 1e6, 1),
        download_file_mb=size_mb,
    )
    return out


def _interleaved(
    root: Path, server: _FileServer, source: Path, sha: str, curl: str, runs: int
) -> tuple[list[float], list[float], list[float]]:
    client = HubClient(endpoint=server.url, token="")
    file = HubFile("bench/download", source.name, source.stat().st_size, sha, "0" * 40)
    paths = EmberPaths(root / "config", root / "data", root / "logs")
    ember_s: list[float] = []
    curl_s: list[float] = []
    synced_s: list[float] = []
    with granted(Destination("127.0.0.1", server.port), "download benchmark"):
        for i in range(runs):
            dest = root / f"ember-{i}"
            started = time.perf_counter()
            [got] = download([file], dest, client=client, paths=paths)
            ember_s.append(time.perf_counter() - started)
            got.unlink()
            out = root / f"curl-{i}.gguf"
            started = time.perf_counter()
            subprocess.run([curl, "-sSf", "-o", str(out), client.resolve_url(file)], check=True, timeout=300)
            curl_s.append(time.perf_counter() - started)
            fd = os.open(out, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            synced_s.append(time.perf_counter() - started)
            out.unlink()
    return ember_s, curl_s, synced_s


def _write_random(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(size // _BLOCK):
            block = os.urandom(_BLOCK)
            digest.update(block)
            f.write(block)
    return digest.hexdigest()


def _hash_time(path: Path) -> float:
    data = path.read_bytes()
    started = time.perf_counter()
    hashlib.sha256(data).hexdigest()
    return time.perf_counter() - started


class _FileServer:
    """Serves one file at every path, with `Range: bytes=N-`, from a thread on 127.0.0.1."""

    def __init__(self, path: Path) -> None:
        self.path = path
        served = path

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                size = served.stat().st_size
                wanted = self.headers.get("Range", "")
                start = int(wanted[len("bytes=") :].split("-")[0] or 0) if wanted.startswith("bytes=") else 0
                self.send_response(206 if wanted else 200)
                self.send_header("Content-Length", str(size - start))
                if wanted:
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                self.end_headers()
                with served.open("rb") as f:
                    self.connection.sendfile(f, start, size - start)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> _FileServer:
        threading.Thread(target=self._server.serve_forever, name="bench-file-server", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
