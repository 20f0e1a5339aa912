"""A hostile loopback Hub (tests/fake_hub.py): the failed cases of adversarial-review-3's Hub section, by class.

escape     HB16-HB18, HB21, HB22: redirects to other hosts, ports and address classes
hang       HB44, HB44c (Retry-After 0 / negative), HB23 (a drip-fed file), HB33 (a drip-fed listing)
traceback  HB07, HB35, HB52a
claims     HB13, HB14 (no digest, no size), HB26 (a file changed between a cut and its resume),
           HB41 (a file listed twice), HB52b (a port over 65535 never becomes 80)
Each ends in one line, in bounded time, with nothing left under a final name.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import COMMIT, FakeHub

from desktop.cli.main import main
from engine.hub import client as hub_client
from engine.hub import download as hub_download
from engine.hub import transfer
from engine.hub.client import HubClient
from engine.hub.consent import allow_downloads
from engine.hub.download import DownloadError, Progress, download, target_path
from engine.hub.errors import HubError
from engine.hub.files import pick_files
from engine.hub.transfer import meta_path, part_path
from engine.network.guard import enforced, guard_for
from engine.network.ledger import LEDGER_FILE, read_ledger_file
from engine.network.policy import load_settings
from models.library.paths import EmberPaths, ember_paths

pytestmark = pytest.mark.slow  # a loopback Hub server per test: out of the fast lane

REPO = "qa/t"
SIZE = 300_000
_socket_events: list[tuple[str, tuple[Any, ...]]] = []
_watching = False
_hooked = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watching and event in ("socket.connect", "socket.getaddrinfo"):
        _socket_events.append((event, args))


@pytest.fixture
def watch() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Every connect and name lookup this process makes inside the test (an audit hook, added once)."""
    global _watching, _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    _socket_events.clear()
    _watching = True
    try:
        yield _socket_events
    finally:
        _watching = False


def _gguf(path: Path, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + bytes((i * 7 + seed) % 251 for i in range(SIZE - 4)))
    return path


@pytest.fixture
def paths() -> EmberPaths:
    return ember_paths()


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({REPO: {"m.gguf": _gguf(tmp_path / "src" / "m.gguf")}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


def _pull(paths: EmberPaths, **kw: Any) -> list[Path]:
    client = HubClient(**kw)
    with enforced(guard_for(paths)):
        allow_downloads(paths, client)
        return download(pick_files(client.list_gguf(REPO), None), paths.models_dir, client=client)


def _leftovers(paths: EmberPaths) -> list[str]:
    return sorted(p.name for p in paths.models_dir.rglob("*") if p.is_file()) if paths.models_dir.exists() else []


# -- escape -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("http://evil.invalid/x.gguf", "evil.invalid:80, which is not 127.0.0.1"),  # HB16
        ("http://169.254.169.254/latest/meta-data/x.gguf", "169.254.169.254:80, which is not"),  # HB17
        ("http://127.0.0.1:18999/internal-admin", "127.0.0.1:18999, which is not"),  # HB18
        ("http://127.0.0.1:99999/x", "Port out of range"),  # HB22: was a connect to 127.0.0.1:80
        ("http://[::1", "Invalid IPv6 URL"),  # HB21: was a traceback
    ],
)
def test_a_hostile_redirect_is_never_looked_up_or_connected_to(
    hub: FakeHub, paths: EmberPaths, watch: list[tuple[str, tuple[Any, ...]]], location: str, words: str
) -> None:
    hub.redirect_to = location
    hub_port = int(hub.url.rsplit(":", 1)[1])
    with pytest.raises(DownloadError, match=words.replace("(", r"\(")) as caught:
        _pull(paths)
    assert "\n" not in str(caught.value)
    connects = [args[1] for event, args in watch if event == "socket.connect" and isinstance(args[1], tuple)]
    assert connects and all(address[1] == hub_port for address in connects)
    looked_up = {str(args[0]) for event, args in watch if event == "socket.getaddrinfo"}
    assert looked_up <= {"127.0.0.1"}, looked_up
    ledger = read_ledger_file(paths.data_dir / LEDGER_FILE)
    assert {a.destination for a in ledger if a.allowed} == {f"127.0.0.1:{hub_port}"}
    assert _leftovers(paths) == []


# -- hangs --------------------------------------------------------------------------------


@pytest.mark.parametrize("retry_after", ["0", "-5", "0.0001", "soon", ""])
def test_retry_after_zero_or_negative_is_a_bounded_number_of_paced_tries(
    hub: FakeHub, paths: EmberPaths, monkeypatch: pytest.MonkeyPatch, retry_after: str
) -> None:
    monkeypatch.setattr(transfer, "RETRY_FLOOR_S", 0.05)
    hub.fail, hub.fail_times = (429, {"Retry-After": retry_after}), 200  # HB44: was 8,807 requests in 15 s
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"rate-limiting downloads \(HTTP 429.*\) after 6 tries"):
        _pull(paths)
    assert len(hub.resolves()) == transfer.MAX_429_TRIES + 1
    assert time.monotonic() - started >= transfer.MAX_429_TRIES * 0.05  # each retry waited the floor


def test_a_search_answered_429_with_retry_after_zero_stops(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_client, "RETRY_FLOOR_S", 0.05)
    hub.fail, hub.fail_times = (429, {"Retry-After": "0"}), 200  # HB44c: was 275 requests in 15 s
    with pytest.raises(HubError, match="HTTP 429"):
        HubClient().search("t")
    searches = [r for r in hub.requests if r.path == "/api/models"]
    assert len(searches) == hub_client.MAX_429_TRIES + 1


def test_a_drip_fed_file_ends_in_one_line_and_shows_the_bytes_it_got(
    hub: FakeHub, paths: EmberPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "RATE_WINDOW_S", 0.6)
    hub.drip_s, hub.drip_for_s = 0.03, 20  # HB23: a byte every 30 ms, each read within any timeout
    seen: list[Progress] = []
    client = HubClient()
    files = pick_files(client.list_gguf(REPO), None)
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"slower than 1,000 bytes a second\); the 0.0 MB received are kept"):
        download(files, paths.models_dir, client=client, progress=seen.append)
    assert time.monotonic() - started < 5
    assert any(p.done > 0 for p in seen)  # progress from partial reads (was 0 % until 1 MiB arrived)
    assert part_path(target_path(paths.models_dir, files[0])).stat().st_size > 0


def test_a_drip_fed_listing_ends_in_one_line(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_client, "RATE_WINDOW_S", 0.6)
    hub.info_drip_s, hub.drip_for_s = 0.03, 20  # HB33: the model info a byte at a time
    started = time.monotonic()
    with pytest.raises(HubError, match="sent its answer too slowly"):
        HubClient().list_gguf(REPO)
    assert time.monotonic() - started < 5


def test_a_stalled_transfer_reports_waiting_and_a_resume_starts_at_the_bytes_there(
    hub: FakeHub, paths: EmberPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_download, "WAITING_S", 0.3)
    monkeypatch.setattr(hub_download, "TICK_S", 0.1)
    hub.stall_at = 0.5
    seen: list[Progress] = []
    client = HubClient(timeout=2.0)
    files = pick_files(client.list_gguf(REPO), None)
    with pytest.raises(DownloadError, match="stopped sending"):
        download(files, paths.models_dir, client=client, progress=seen.append)
    waiting = [p for p in seen if p.waiting_s > 0]
    assert waiting and all(p.seconds_left is None and p.bytes_per_s == 0 for p in waiting)
    kept = part_path(target_path(paths.models_dir, files[0])).stat().st_size
    assert kept >= SIZE // 2
    hub.stall_at = None
    seen.clear()
    download(files, paths.models_dir, client=client, progress=seen.append)
    assert seen[0].done >= kept  # the resumed bar starts at the bytes already there, not at 0 B
    assert [r.range for r in hub.resolves()][-1] == f"bytes={kept}-"


# -- claims -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [-5, 0])
def test_a_listed_size_of_zero_or_less_is_no_model(hub: FakeHub, paths: EmberPaths, size: int) -> None:
    hub.no_lfs.add("m.gguf")
    hub.sizes["m.gguf"] = size  # HB13, HB14: was "saved … (0.0 MB, SHA-256 checked)", a 0-byte file
    with pytest.raises(HubError, match=rf"the Hub lists 'm.gguf' with a size of {size} bytes; not a model file"):
        _pull(paths)
    assert _leftovers(paths) == []


def test_one_empty_entry_spoils_nothing_else_in_the_listing(hub: FakeHub, tmp_path: Path) -> None:
    hub.repos = {REPO: {"m.gguf": hub.repos[REPO]["m.gguf"], "empty-Q8_0.gguf": _gguf(tmp_path / "e.gguf")}}
    hub.no_lfs.add("empty-Q8_0.gguf")
    hub.sizes["empty-Q8_0.gguf"] = 0
    assert [f.path for f in HubClient().list_gguf(REPO)] == ["m.gguf"]


def test_a_file_without_a_digest_is_not_called_checked(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    hub.no_lfs.add("m.gguf")
    assert main(["models", "pull", REPO, "--allow"]) == 0
    out = capsys.readouterr().out
    assert "(300.0 KB, no checksum from the Hub: not verified)" in out and "SHA-256 checked" not in out
    assert main(["models", "pull", REPO, "--allow", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["files"]
    assert (entry["sha256"], entry["verified"]) == (None, False)


def test_a_file_changed_between_a_cut_and_its_resume_is_not_spliced(
    hub: FakeHub, paths: EmberPaths, tmp_path: Path
) -> None:
    changed = _gguf(tmp_path / "src" / "m-v2.gguf", seed=3)
    hub.no_lfs.add("m.gguf")  # no digest: only the validator can tell (HB26)
    hub.alt["m.gguf"] = changed
    hub.cut_at = 0.5
    [path] = _pull(paths)
    assert path.read_bytes() == changed.read_bytes()  # the new version whole, not half of each
    resume = hub.resolves()[1]
    assert resume.range == f"bytes={SIZE // 2}-"
    assert [r.range for r in hub.resolves()] == [None, f"bytes={SIZE // 2}-"]


def test_a_part_without_a_validator_or_digest_starts_over(hub: FakeHub, paths: EmberPaths) -> None:
    hub.no_lfs.add("m.gguf")
    client = HubClient()
    files = pick_files(client.list_gguf(REPO), None)
    final = target_path(paths.models_dir, files[0])
    final.parent.mkdir(parents=True)
    part_path(final).write_bytes(b"NOT THIS FILE")
    identity = {"repo": REPO, "path": "m.gguf", "revision": COMMIT, "sha256": None, "size": SIZE}
    meta_path(final).write_text(json.dumps({"identity": identity}))  # this file's part, but no ETag to resume by
    [path] = download(files, paths.models_dir, client=client)
    assert path.read_bytes()[:4] == b"GGUF" and path.stat().st_size == SIZE
    assert [r.range for r in hub.resolves()] == [None]


def test_a_file_listed_twice_is_saved_once_and_the_pull_succeeds(
    hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.twice.add("m.gguf")  # HB41: was saved, then "No such file or directory: ….part", rc 1
    assert main(["models", "pull", REPO, "--allow"]) == 0
    assert "saved " in capsys.readouterr().out
    assert len(hub.resolves()) == 1


def test_a_newline_or_escape_in_a_hub_file_name_forges_no_line(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "evil\nember: saved /etc/passwd\x1b[31m\u202e.gguf"  # HB07
    hub.repos = {REPO: {name: _gguf(tmp_path / "src" / "evil.gguf")}}
    assert main(["models", "pull", REPO, "--allow"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert all(line.startswith("ember: ") for line in lines), lines
    assert "refusing the file name" in lines[-1]
    assert "\x1b" not in err and "\u202e" not in err


def test_search_fields_of_the_wrong_type_are_one_row_not_a_traceback(
    hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.search_raw = [
        {"id": 12345, "downloads": "many", "likes": None, "gated": "yes"},  # HB35
        {"id": "qa/ok", "downloads": "many", "likes": None, "gated": "yes"},
    ]
    assert main(["models", "search", "x", "--allow"]) == 0
    out = capsys.readouterr().out
    assert "qa/ok" in out and "12345" not in out


def test_a_hub_address_with_an_impossible_port_is_refused_not_saved_as_port_80(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], paths: EmberPaths
) -> None:
    for endpoint in ("http://127.0.0.1:99999", "https://[::1"):  # HB52b, HB52a
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        assert main(["models", "pull", REPO, "--allow"]) == 2
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith("ember: not a Hub address: ")
    assert load_settings(paths).allow == ()
    assert not os.path.exists(paths.models_dir)
