"""The rules behind the hostile-Hub cases of adversarial-review-3 (F1, F9, F10), checked without a server.

Where a redirect may lead (HB16-HB22), which names and sizes the Hub may give (HB04, HB07,
HB13, HB14), split models and duplicates (HB41, HB42), ports (HB22, HB52), `localhost.` (X-08),
and what the consent and the progress say.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from desktop.cli.models_hub import _bar_line
from desktop.core.get_models import progress_text
from engine.errors import ConfigError
from engine.hub.client import HubClient
from engine.hub.consent import consent_question
from engine.hub.download import Progress, target_path
from engine.hub.errors import DownloadError, HubError
from engine.hub.files import HubFile, pick_files
from engine.hub.proxy import parse_proxy, proxy_for
from engine.hub.route import address_class, next_hop, pinned_addresses
from engine.network.destinations import Destination, answered_locally, parse_destination
from engine.network.guard import EgressRefused, Guard, enforced, feature, granted
from engine.network.ledger import Ledger
from engine.network.policy import Allowed, EgressPolicy, PolicyView
from models.library.paths import ember_paths

HF = Destination("huggingface.co", 443)
RESOLVE = "https://huggingface.co/o/r/resolve/abc/m.gguf"


def _file(path: str, size: int = 1) -> HubFile:
    return HubFile("o/r", path, size, None, "c" * 40)


@pytest.mark.parametrize(
    "location",
    [
        "https://cdn-lfs.huggingface.co/repos/x/y?sig=1",
        "https://cas-bridge.xethub.hf.co/xet/abc",
        "https://hf.co/x",
        "/o/r/resolve/abc/other.gguf",  # the Hub itself
    ],
)
def test_the_hubs_own_file_servers_over_https_are_followed(location: str) -> None:
    assert next_hop(HF, RESOLVE, location).startswith("https://")


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("http://evil.invalid/x.gguf", "unencrypted"),  # HB16 (from https)
        ("https://evil.invalid/x.gguf", "evil.invalid:443, which is not huggingface.co:443"),
        ("https://169.254.169.254/latest/meta-data/x.gguf", "which is not"),  # HB17
        ("https://127.0.0.1:18999/internal-admin", "which is not"),  # HB18
        ("https://hf.co.evil.example/x", "which is not"),
        ("https://cdn-lfs.hf.co:8443/x", "which is not"),  # a file server, but not on its https port
        ("https://127.0.0.1:99999/x", "Port out of range"),  # HB22: never port 443 or 80
        ("https://cdn.hf.co:0/x", "port 0"),
        ("http://[::1", "Invalid IPv6 URL"),  # HB21
        ("file:///etc/passwd", "does not follow"),  # HB20
        (None, "without saying where"),
    ],
)
def test_any_other_redirect_is_refused_in_one_line(location: str | None, words: str) -> None:
    with pytest.raises(DownloadError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        next_hop(HF, RESOLVE, location)
    assert "\n" not in str(caught.value)


def test_a_loopback_hub_may_use_http_but_never_another_local_port_or_a_private_address() -> None:
    hub = Destination("127.0.0.1", 8080)
    assert next_hop(hub, "http://127.0.0.1:8080/o/r/resolve/a/m", "/o/r/resolve/b/m") == (
        "http://127.0.0.1:8080/o/r/resolve/b/m"
    )
    with pytest.raises(DownloadError, match=r"127\.0\.0\.1:18999, which is not 127\.0\.0\.1:8080"):
        next_hop(hub, "http://127.0.0.1:8080/x", "http://127.0.0.1:18999/internal-admin")  # HB18


def test_a_file_server_name_that_resolves_to_a_private_or_metadata_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = {"cdn-lfs.hf.co": "169.254.169.254", "lan.hf.co": "10.0.0.7", "ok.hf.co": "18.1.2.3"}

    def fake_getaddrinfo(host: str, port: object, *args: Any, **kw: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    with pytest.raises(DownloadError, match=r"at a link-local address \(169.254.169.254\)"):
        pinned_addresses(HF, Destination("cdn-lfs.hf.co", 443), "test")
    with pytest.raises(DownloadError, match=r"at a private address \(10.0.0.7\)"):
        pinned_addresses(HF, Destination("lan.hf.co", 443), "test")
    assert pinned_addresses(HF, Destination("ok.hf.co", 443), "test") == ["18.1.2.3"]
    assert [address_class(a) for a in ("::ffff:169.254.169.254", "0.0.0.0", "::1", "224.0.0.1")] == [
        "link-local",
        "unspecified",
        "loopback",
        "multicast",
    ]


def test_the_consent_names_exactly_what_a_download_may_reach() -> None:
    question = consent_question(HubClient("https://huggingface.co"))
    assert "huggingface.co:443 and its file servers (*.huggingface.co, *.hf.co) over https, at public" in question
    mirror = consent_question(HubClient("https://mirror.example"))
    assert "only mirror.example:443: a redirect anywhere else is refused" in mirror


@pytest.mark.parametrize(
    ("endpoint", "words"),
    [
        ("https://[::1", "Invalid IPv6 URL"),  # HB52a: was a traceback
        ("http://127.0.0.1:99999", "Port out of range"),  # HB52b: was 127.0.0.1:80
        ("http://127.0.0.1:0", "expected https://host"),
    ],
)
def test_a_hub_address_with_a_bad_bracket_or_port_is_one_line(endpoint: str, words: str) -> None:
    with pytest.raises(HubError, match=f"not a Hub address: .*{words}"):
        HubClient(endpoint)


def test_ports_are_never_defaulted_and_localhost_with_a_dot_is_not_local() -> None:
    with pytest.raises(ConfigError, match="port 0"):
        parse_destination("127.0.0.1:0")
    with pytest.raises(ConfigError, match="out of range"):
        parse_destination("http://127.0.0.1:99999")
    assert not answered_locally("localhost.")  # glibc sends the absolute name to DNS
    assert answered_locally("localhost")
    view = PolicyView(True, (Allowed(Destination("localhost", 8080), "test"),))
    guard = Guard(EgressPolicy.fixed(view, ember_paths()), Ledger())
    with enforced(guard), pytest.raises(EgressRefused, match=r"localhost\."):
        socket.getaddrinfo("localhost.", 8080)


@pytest.mark.parametrize("name", ["a\x00b.gguf", "evil\n\x1b[31mRED\x1b[0m\u202e.gguf", "tab\there.gguf"])
def test_control_characters_in_a_hub_file_name_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(DownloadError, match="refusing the file name") as caught:  # HB04, HB07
        target_path(tmp_path, _file(name))
    assert "\n" not in str(caught.value) and "\x00" not in str(caught.value)


def test_half_a_split_model_is_refused_and_a_file_listed_twice_is_one() -> None:
    with pytest.raises(HubError, match=r"big-Q4_1 is split in 2 files and the Hub lists 1 of them \(missing 2\)"):
        pick_files([_file("big-Q4_1-00001-of-00002.gguf")], None)  # HB42
    with pytest.raises(HubError, match="missing 2"):
        pick_files([_file("big-Q4_1-00001-of-00002.gguf"), _file("m-Q8_0.gguf")], "Q4_1")
    twice = [_file("m.gguf"), _file("m.gguf")]  # HB41
    assert pick_files(twice, None) == [twice[0]]
    whole = [_file("big-Q4_1-00002-of-00002.gguf"), _file("big-Q4_1-00001-of-00002.gguf")]
    assert [f.path for f in pick_files(whole, None)] == sorted(f.path for f in whole)


def test_a_stalled_transfer_says_it_waits_and_guesses_no_time_left() -> None:
    waiting = Progress(30_000_000, 98_000_000, 0.0, None, "m.gguf", waiting_s=12.0)
    line = _bar_line(waiting, 0.3)
    assert "waiting for the server (12 s)" in line and "left" not in line and "MB/s" not in line
    assert (
        progress_text(30_000_000, 98_000_000, 0.0, None, 12.0) == "30.0 MB of 98.0 MB · waiting for the server (12 s)"
    )


def test_proxies_are_read_as_the_hugging_face_client_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", ".internal.example, 10.1.2.3:8080")
    assert proxy_for("https://huggingface.co/x") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://user:p%40ss@proxy.example:3128")
    proxy = proxy_for("https://huggingface.co/x")
    assert proxy is not None and str(proxy) == "proxy.example:3128"
    assert proxy.authorization == "Basic dXNlcjpwQHNz"  # user:p@ss
    assert proxy_for("http://huggingface.co/x") is None  # HTTP_PROXY is not set
    assert proxy_for("https://hub.internal.example/x") is None
    assert proxy_for("https://10.1.2.3/x") is None
    monkeypatch.setenv("ALL_PROXY", "proxy.example:8080")
    assert str(proxy_for("http://huggingface.co/x")) == "proxy.example:8080"
    with pytest.raises(HubError, match="http://host:port proxy is needed"):
        parse_proxy("socks5://proxy.example:1080")
    with pytest.raises(HubError, match="not a proxy address"):
        parse_proxy("http://proxy.example:99999")


def test_a_file_servers_lookup_is_in_the_ledger_and_refused_without_a_grant() -> None:
    """HB16: a redirect's lookup was not in the ledger; every lookup now is (no query is made here)."""
    ledger = Ledger()
    guard = Guard(EgressPolicy.fixed(PolicyView(True, (Allowed(HF, "network.json"),)), ember_paths()), ledger)
    with feature("model download"), granted(Destination("cdn-lfs.hf.co", 443), "test"):
        guard.on_event("socket.getaddrinfo", ("cdn-lfs.hf.co", 443, 0, 1, 0))
    guard.on_event("socket.getaddrinfo", ("huggingface.co", 443, 0, 1, 0))  # allowed by the policy itself
    guard.on_event("socket.getaddrinfo", ("localhost", 443, 0, 1, 0))  # answered by the hosts file: no query
    with pytest.raises(EgressRefused):
        guard.on_event("socket.getaddrinfo", ("evil.invalid", 80, 0, 1, 0))
    assert [(a.destination, a.action, a.allowed, a.feature) for a in ledger.entries()] == [
        ("cdn-lfs.hf.co", "lookup", True, "model download"),
        ("huggingface.co", "lookup", True, "unnamed code"),
        ("evil.invalid", "lookup", False, "unnamed code"),
    ]
    assert (ledger.allowed_count, ledger.refused_count) == (0, 1)  # lookups are not counted as connections
