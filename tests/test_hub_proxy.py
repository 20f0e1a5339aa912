"""Downloads through a proxy (issue #48): HTTP_PROXY/HTTPS_PROXY/NO_PROXY honoured as the Hugging Face client does.

A loopback forwarding proxy, written here and run as its own process (so the guard of this
process sees only Ember's connections), logs every request it forwards. Zero-egress mode
still decides what may be reached through it, and the ledger names the proxy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import FakeHub

from engine.hub.client import HubClient
from engine.hub.consent import allow_downloads
from engine.hub.download import DownloadError, download
from engine.hub.errors import HubError
from engine.hub.files import pick_files
from engine.network.guard import enforced, guard_for
from engine.network.ledger import LEDGER_FILE, read_ledger_file
from models.library.paths import EmberPaths, ember_paths

pytestmark = pytest.mark.slow  # two loopback servers per test

REPO = "qa/t"
PROXY = r"""
import http.client, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

LOG = open(sys.argv[1], "a", buffering=1)

class Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        LOG.write(f"{self.command} {self.path}\n")
        u = urlsplit(self.path)  # absolute form: http://host:port/path
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
        headers = {k: v for k, v in self.headers.items() if not k.lower().startswith("proxy-")}
        conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers=headers)
        r = conn.getresponse()
        body = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
server.daemon_threads = True
print(server.server_address[1], flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
server.serve_forever()
"""


@pytest.fixture
def paths() -> EmberPaths:
    return ember_paths()


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    src = tmp_path / "src" / "m.gguf"
    src.parent.mkdir()
    src.write_bytes(b"GGUF" + bytes(range(256)) * 400)
    with FakeHub({REPO: {"m.gguf": src}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


@pytest.fixture
def proxy_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The proxy's log of what it forwarded; HTTP_PROXY names it (and nothing goes direct by NO_PROXY)."""
    script, log = tmp_path / "proxy.py", tmp_path / "proxy.log"
    script.write_text(PROXY)
    log.touch()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(log)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    try:
        yield log
    finally:
        proc.communicate("", timeout=10)


def _forwarded(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_a_pull_goes_through_the_proxy_and_the_ledger_names_it(
    hub: FakeHub, proxy_log: Path, paths: EmberPaths
) -> None:
    client = HubClient()
    with enforced(guard_for(paths)):
        allow_downloads(paths, client)
        [found] = client.search("t")
        [path] = download(pick_files(client.list_gguf(found.repo), None), paths.models_dir, client=client)
    assert path.read_bytes()[:4] == b"GGUF"
    seen = _forwarded(proxy_log)
    assert any(line.startswith(f"GET {hub.url}/api/models?") for line in seen)  # the search
    assert any(line.startswith(f"GET {hub.url}/api/models/{REPO}") for line in seen)  # the listing
    assert any(line.startswith(f"GET {hub.url}/{REPO}/resolve/") for line in seen)  # the bytes
    proxy = "127.0.0.1:" + os.environ["HTTP_PROXY"].rsplit(":", 1)[1]
    ledger = read_ledger_file(paths.data_dir / LEDGER_FILE)
    allowed = [a.destination for a in ledger if a.allowed]
    assert proxy in allowed  # the connection to the proxy itself
    assert f"{client.destination} via proxy {proxy}" in allowed  # and what was reached through it


def test_without_consent_nothing_reaches_the_proxy(hub: FakeHub, proxy_log: Path, paths: EmberPaths) -> None:
    client = HubClient()
    with enforced(guard_for(paths)), pytest.raises(HubError, match="zero-egress mode"):
        client.search("t")
    assert _forwarded(proxy_log) == []


def test_a_redirect_through_the_proxy_goes_only_where_a_download_may(
    hub: FakeHub, proxy_log: Path, paths: EmberPaths
) -> None:
    hub.redirect_to = "http://127.0.0.1:18999/internal-admin"
    client = HubClient()
    with enforced(guard_for(paths)):
        allow_downloads(paths, client)
        files = pick_files(client.list_gguf(REPO), None)
        with pytest.raises(DownloadError, match=r"127\.0\.0\.1:18999, which is not"):
            download(files, paths.models_dir, client=client)
    assert not any("18999" in line for line in _forwarded(proxy_log))


def test_no_proxy_sends_the_hub_direct(
    hub: FakeHub, proxy_log: Path, paths: EmberPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = HubClient()
    with enforced(guard_for(paths)):
        allow_downloads(paths, client)
        download(pick_files(client.list_gguf(REPO), None), paths.models_dir, client=client)
    assert _forwarded(proxy_log) == []
