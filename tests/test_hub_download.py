"""The Hub client and the download against a loopback fake Hub (tests/fake_hub.py) serving SmolLM2's real bytes.

Every hostile case ends in one line and leaves nothing with a final name in the models folder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import COMMIT, FakeHub, sha256_of

from engine.cancel import CancelToken
from engine.hub.client import HubClient
from engine.hub.consent import allow_downloads, downloads_allowed
from engine.hub.download import DownloadCancelled, DownloadError, Progress, default_models_dir, download, target_path
from engine.hub.errors import HubError
from engine.hub.files import HubFile, pick_files
from engine.hub.route import CDN_HOSTS
from engine.hub.transfer import meta_path, part_path
from engine.network.guard import enforced, guard_for
from engine.network.ledger import LEDGER_FILE, read_ledger_file
from models.library.digests import cached_sha256
from models.library.origins import origin_of
from models.library.paths import EmberPaths, ember_paths
from models.library.scan import Source, library_entries

pytestmark = pytest.mark.slow  # a loopback Hub server per test: out of the fast lane

REPO = "ember-test/SmolLM2-135M-Instruct-GGUF"
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def hub(smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # never the user's saved token
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({REPO: {NAME: smollm_path}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


@pytest.fixture
def paths() -> EmberPaths:
    return ember_paths()


def _files(client: HubClient) -> list[HubFile]:
    return pick_files(client.list_gguf(REPO), None)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_search_and_list_through_huggingface_hub(hub: FakeHub, smollm_path: Path) -> None:
    client = HubClient()
    assert client.endpoint == hub.url
    [found] = client.search("smollm2")
    assert (found.repo, found.gated, found.gguf_files) == (REPO, False, None)
    assert client.search("nothing-like-this") == []
    [file] = client.list_gguf(REPO)
    assert file == HubFile(REPO, NAME, smollm_path.stat().st_size, sha256_of(smollm_path), COMMIT)
    assert file.quant == "Q4_1"
    # The fake answers the tree and paths-info calls as the real client makes them, too.
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=hub.url, token=False)
    [entry] = list(api.list_repo_tree(REPO, expand=True))
    [info] = api.get_paths_info(REPO, [NAME])
    assert isinstance(entry, RepoFile) and isinstance(info, RepoFile)
    assert entry.lfs is not None and info.lfs is not None
    assert entry.lfs.sha256 == info.lfs.sha256 == file.sha256


def test_pick_files_by_quant_file_or_default() -> None:
    def f(path: str) -> HubFile:
        return HubFile("o/r", path, 1, None, COMMIT)

    files = [
        f("M-Q8_0.gguf"),
        f("M-Q4_K_M-00002-of-00002.gguf"),
        f("M-Q4_K_M-00001-of-00002.gguf"),
        f("mmproj-M-f16.gguf"),
        f("M-IQ4_XS.gguf"),
    ]
    assert [x.path for x in pick_files(files, None)] == ["M-Q4_K_M-00001-of-00002.gguf", "M-Q4_K_M-00002-of-00002.gguf"]
    assert [x.path for x in pick_files(files, "q8_0")] == ["M-Q8_0.gguf"]
    assert [x.path for x in pick_files(files, "M-IQ4_XS.gguf")] == ["M-IQ4_XS.gguf"]
    assert [x.path for x in pick_files(files, "mmproj-M-f16.gguf")] == ["mmproj-M-f16.gguf"]
    with pytest.raises(HubError, match=r"no GGUF file matches 'Q2_K'; this repository has Q8_0, Q4_K_M, IQ4_XS"):
        pick_files(files, "Q2_K")
    with pytest.raises(HubError, match="name one after a colon"):
        pick_files([f("A-Q6_K.gguf"), f("B-Q6_K.gguf")], None)


def test_a_cut_at_40_percent_resumes_with_a_range_and_lands_verified(
    hub: FakeHub, paths: EmberPaths, smollm_path: Path
) -> None:
    client = HubClient()
    files = _files(client)
    hub.cut_at = 0.4
    seen: list[Progress] = []
    [path] = download(files, default_models_dir(paths), client=client, progress=seen.append)
    size = smollm_path.stat().st_size
    assert [r.range for r in hub.resolves()] == [None, f"bytes={int(size * 0.4)}-"]
    assert path == default_models_dir(paths) / REPO / NAME
    assert path.read_bytes() == smollm_path.read_bytes()
    assert _leftovers(path.parent) == [NAME]  # no .part, no .part.json
    assert seen[-1].done == seen[-1].total == size
    origin = origin_of(path, paths)
    assert origin is not None
    assert (origin.repo, origin.revision, origin.sha256, origin.size) == (REPO, COMMIT, sha256_of(smollm_path), size)
    assert cached_sha256(path, paths) == sha256_of(smollm_path)  # the receipt never hashes it again
    [entry] = [e for e in library_entries(paths=paths) if e.path == path]
    assert entry.source is Source.MODELS_DIR


def test_a_cut_that_repeats_keeps_the_part_and_the_next_pull_resumes_it(
    hub: FakeHub, paths: EmberPaths, smollm_path: Path
) -> None:
    client = HubClient()
    files = _files(client)
    hub.cut_at, hub.cuts = 0.4, 100
    with pytest.raises(DownloadError) as caught:
        download(files, default_models_dir(paths), client=client)
    assert "\n" not in str(caught.value)
    assert "the connection closed early" in str(caught.value) and "pull again to resume" in str(caught.value)
    final = target_path(default_models_dir(paths), files[0])
    kept = part_path(final).stat().st_size
    assert kept == int(smollm_path.stat().st_size * 0.4)
    assert not final.exists()
    hub.cut_at, hub.requests[:] = None, []
    download(files, default_models_dir(paths), client=client)
    assert [r.range for r in hub.resolves()] == [f"bytes={kept}-"]
    assert sha256_of(final) == files[0].sha256


def test_tampered_bytes_are_refused_and_deleted(hub: FakeHub, paths: EmberPaths) -> None:
    client = HubClient()
    files = _files(client)
    hub.tamper = True
    with pytest.raises(DownloadError, match=r"do not match the Hub's SHA-256 .*the file was deleted") as caught:
        download(files, default_models_dir(paths), client=client)
    assert "\n" not in str(caught.value)
    assert _leftovers(default_models_dir(paths)) == []
    assert origin_of(target_path(default_models_dir(paths), files[0]), paths) is None


def test_a_full_disk_is_refused_before_the_first_byte(hub: FakeHub, paths: EmberPaths) -> None:
    client = HubClient()
    files = _files(client)
    with pytest.raises(DownloadError, match=r"not enough disk space .* needs 98.4 MB more .*nothing was downloaded"):
        download(files, default_models_dir(paths), client=client, free_space=lambda _: 50_000_000)
    assert hub.resolves() == []
    assert _leftovers(default_models_dir(paths)) == []


def test_a_gated_repository_says_how_to_give_a_token(hub: FakeHub, paths: EmberPaths) -> None:
    hub.gated.add(REPO)
    files = _files(HubClient())  # the listing is public, as on the Hub
    assert HubClient().repo_info(REPO).gated
    with pytest.raises(DownloadError) as caught:
        download(files, default_models_dir(paths), client=HubClient())
    assert str(caught.value) == (
        f"{REPO} is gated or private (HTTP 401): accept its licence on the Hub, then set "
        f"HF_TOKEN, or run `hf auth login`"
    )
    assert _leftovers(default_models_dir(paths)) == []
    download(files, default_models_dir(paths), client=HubClient(token=hub.token))
    assert hub.resolves()[-1].authorization == f"Bearer {hub.token}"


def test_a_missing_file_and_a_missing_repository_are_one_line_each(hub: FakeHub, paths: EmberPaths) -> None:
    [file] = _files(HubClient())
    ghost = HubFile(REPO, "ghost.gguf", 10, None, COMMIT)
    with pytest.raises(DownloadError, match=rf"^{REPO}/ghost.gguf: not found on the Hub \(HTTP 404\)$"):
        download([ghost], default_models_dir(paths), client=HubClient())
    with pytest.raises(HubError, match=r"^nobody/nothing is private, gated or missing \(HTTP 401\): check the name"):
        HubClient().list_gguf("nobody/nothing")
    assert _leftovers(default_models_dir(paths)) == []
    assert file.size > 0


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_429_waits_for_retry_after_within_a_bound_then_says_so(hub: FakeHub, paths: EmberPaths) -> None:
    client = HubClient(retry_after_max=5)
    files = _files(client)
    hub.fail, hub.fail_times = (429, {"Retry-After": "1"}), 1
    started = time.monotonic()
    download(files, default_models_dir(paths), client=client)
    assert time.monotonic() - started >= 1.0
    assert len(hub.resolves()) == 2
    for p in default_models_dir(paths).rglob("*.gguf"):
        p.unlink()
    hub.fail, hub.fail_times = (429, {"Retry-After": "3600"}), None
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"rate-limiting downloads \(HTTP 429, asked to wait 3600 s\)"):
        download(files, default_models_dir(paths), client=client)
    assert time.monotonic() - started < 5
    with pytest.raises(HubError, match=r"rate-limiting requests \(HTTP 429\)"):
        client.search("smol")  # the metadata calls too (the fake answers the search with the same 429)


def test_a_stalled_server_ends_in_bounded_time_and_keeps_the_part(
    hub: FakeHub, paths: EmberPaths, smollm_path: Path
) -> None:
    client = HubClient(timeout=1.0)
    files = _files(client)
    hub.stall_at = 0.3
    started = time.monotonic()
    with pytest.raises(
        DownloadError,
        match=r"stopped sending for 1 s after 29.\d MB of 98.4 MB; the part received "
        r"is kept: pull again to resume",
    ):
        download(files, default_models_dir(paths), client=client)
    assert time.monotonic() - started < 10
    final = target_path(default_models_dir(paths), files[0])
    kept = part_path(final).read_bytes()
    assert len(kept) > smollm_path.stat().st_size // 4  # all but the last read's buffer (at most 1 MiB)
    assert kept == smollm_path.read_bytes()[: len(kept)]
    assert not final.exists()


def test_cancel_keeps_the_part_for_the_next_pull(hub: FakeHub, paths: EmberPaths) -> None:
    client = HubClient()
    files = _files(client)
    cancel = CancelToken()

    def progress(p: Progress) -> None:
        if p.done > p.total // 4:
            cancel.cancel()

    with pytest.raises(DownloadCancelled, match=r"download cancelled; .* kept, and the next pull resumes it"):
        download(files, default_models_dir(paths), client=client, progress=progress, cancel=cancel)
    final = target_path(default_models_dir(paths), files[0])
    kept = part_path(final).stat().st_size
    assert kept > files[0].size // 4 and not final.exists()
    hub.requests[:] = []
    download(files, default_models_dir(paths), client=client)
    assert [r.range for r in hub.resolves()] == [f"bytes={kept}-"]


def test_several_files_are_one_item_none_final_until_all_verified(
    smollm_path: Path, tmp_path: Path, paths: EmberPaths
) -> None:
    import gguf_factory as gf

    one = gf.write_tiny_llama(tmp_path / "one.gguf", gf.CHATML)
    two = gf.write_tiny_llama(tmp_path / "two.gguf", gf.LLAMA3)
    names = ("Tiny-Q8_0-00001-of-00002.gguf", "Tiny-Q8_0-00002-of-00002.gguf")
    with FakeHub({"o/tiny": {names[0]: one, names[1]: two}}) as fake:
        client = HubClient(fake.url)
        files = pick_files(client.list_gguf("o/tiny"), "Q8_0")
        assert [f.path for f in files] == list(names)
        bad = [files[0], HubFile("o/tiny", names[1], files[1].size, "0" * 64, COMMIT)]
        with pytest.raises(DownloadError, match="do not match"):
            download(bad, default_models_dir(paths), client=client)
        first = target_path(default_models_dir(paths), files[0])
        assert not first.exists() and part_path(first).exists()  # verified, waiting for its sibling
        fake.requests[:] = []
        got = download(files, default_models_dir(paths), client=client)
        assert [p.read_bytes() for p in got] == [one.read_bytes(), two.read_bytes()]
        assert [r.path.rsplit("/", 1)[1] for r in fake.resolves()] == [names[1]]  # the first was not fetched again
        assert not meta_path(first).exists()
        fake.requests[:] = []
        assert download(files, default_models_dir(paths), client=client) == got  # already there: no request
        assert fake.resolves() == []


def test_a_file_already_there_that_is_not_this_one_is_never_overwritten(hub: FakeHub, paths: EmberPaths) -> None:
    client = HubClient()
    files = _files(client)
    final = target_path(default_models_dir(paths), files[0])
    final.parent.mkdir(parents=True)
    final.write_bytes(b"GGUF mine")
    with pytest.raises(DownloadError, match="already exists and is not"):
        download(files, default_models_dir(paths), client=client)
    assert final.read_bytes() == b"GGUF mine"
    assert hub.resolves() == []


def test_zero_egress_refuses_until_allowed_and_the_ledger_shows_the_download(
    hub: FakeHub, paths: EmberPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CDN_HOSTS, "127.0.0.1", ("localhost",))  # the fake Hub's published file server
    client = HubClient()
    with enforced(guard_for(paths)):
        assert not downloads_allowed(paths, client)
        with pytest.raises(
            HubError,
            match=rf"zero-egress mode: downloads from {client.host} are not allowed yet; "
            rf".*ember network allow {client.destination}$",
        ):
            client.search("smol")
        assert hub.requests == []
        allow_downloads(paths, client)
        assert downloads_allowed(paths, client)
        hub.redirect = True  # the Hub sends the bytes from another host, as it does through its CDN
        [path] = download(_files(client), default_models_dir(paths), client=client)
    assert path.is_file()
    assert {r.host.split(":")[0] for r in hub.resolves()} == {"127.0.0.1", "localhost"}
    ledger = read_ledger_file(paths.data_dir / LEDGER_FILE)
    assert ledger[0].feature == "model download" and not ledger[0].allowed
    allowed = {a.destination for a in ledger if a.allowed}
    cdn_port = hub.cdn_url.rsplit(":", 1)[1]
    assert str(client.destination) in allowed
    assert any(d.endswith(f":{cdn_port}") for d in allowed)
    assert {a.feature for a in ledger} == {"model download"}
    # The file server was allowed for that download only: nothing else may connect to it now.
    import socket

    from engine.network.guard import EgressRefused

    with enforced(guard_for(paths)), pytest.raises(EgressRefused):
        socket.create_connection(("127.0.0.1", int(cdn_port)), timeout=2)


def test_the_download_bench_row_measures_against_curl_or_says_why_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import shutil

    from tests.bench.download import measure_download

    notes: list[str] = []
    if shutil.which("curl"):
        row = measure_download(size_mb=4, runs=1, notes=notes)
        assert row["download_vs_curl_ratio"] > 0 and row["hash_overhead_pct"] > 0
        assert row["download_file_mb"] == 4 and notes == []
    monkeypatch.setenv("PATH", str(tmp_path))  # no curl on this PATH
    row = measure_download(size_mb=4, runs=1, notes=notes)
    assert row["download_vs_curl_ratio"] is None
    assert notes == ["download: curl is not installed; the download row is skipped"]


def test_file_names_from_the_hub_never_leave_the_models_folder(tmp_path: Path) -> None:
    for bad in ("../../evil.gguf", "/etc/evil.gguf", "a\\..\\evil.gguf"):
        with pytest.raises(DownloadError, match="refusing the file name"):
            target_path(tmp_path, HubFile("o/r", bad, 1, None, COMMIT))
    assert target_path(tmp_path, HubFile("o/r", "Q4/m.gguf", 1, None, COMMIT)) == tmp_path / "o" / "r" / "Q4" / "m.gguf"


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_second_pull_of_the_same_file_waits_for_nothing_and_says_why(hub: FakeHub, paths: EmberPaths) -> None:
    client = HubClient(timeout=2.0)
    files = _files(client)
    hub.stall_at = 0.3
    errors: list[BaseException] = []

    def first() -> None:
        try:
            download(files, default_models_dir(paths), client=client)
        except DownloadError as exc:
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    part = part_path(target_path(default_models_dir(paths), files[0]))
    try:
        assert wait_for_size(part, files[0].size // 5)
        with pytest.raises(DownloadError, match="is already being downloaded by another Ember process"):
            download(files, default_models_dir(paths), client=client)
    finally:
        thread.join(30)
    assert errors and "stopped sending" in str(errors[0])  # the first one kept its .part
    assert part.stat().st_size > files[0].size // 5


def wait_for_size(path: Path, size: int) -> bool:
    from fake_hub import wait_for

    return wait_for(lambda: path.exists() and path.stat().st_size >= size, 30)
