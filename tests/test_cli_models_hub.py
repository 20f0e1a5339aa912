"""`ember models search/pull/add/rm` against the loopback fake Hub (tests/fake_hub.py), under zero-egress mode."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import COMMIT, FakeHub, sha256_of, wait_for

from desktop.cli.main import main
from engine.hub.transfer import part_path
from models.library.catalogue import CatalogueEntry, parse_entry
from models.library.origins import origin_of
from models.library.paths import ember_paths
from models.library.projectors import pair
from tests.projector_fixture import write_projector_fixture

pytestmark = pytest.mark.slow  # a loopback Hub server per test: out of the fast lane

ROOT = Path(__file__).resolve().parents[1]
REPO = "ember-test/SmolLM2-135M-Instruct-GGUF"
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def hub(smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({REPO: {NAME: smollm_path}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


def _final() -> Path:
    return ember_paths().models_dir / REPO / NAME


def _ember(*args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "desktop", *args],
        cwd=ROOT,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,  # type: ignore[call-overload]
    )


def test_the_first_pull_asks_and_without_a_yes_reaches_nothing(
    hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", REPO]) == 2
    err = capsys.readouterr().err
    host = hub.url.removeprefix("http://")
    assert f"Allow downloads from {host}?" in err
    assert f"ember network allow {host}" in err
    assert hub.requests == []
    assert not ember_paths().models_dir.exists()


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_pull_with_allow_downloads_verifies_and_lists_it(
    hub: FakeHub, smollm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", f"{REPO}:Q4_1", "--allow", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)  # one JSON object on stdout
    assert result["model"] == str(_final())
    assert result["revision"] == COMMIT
    assert result["files"] == [
        {
            "path": str(_final()),
            "file": NAME,
            "size": smollm_path.stat().st_size,
            "sha256": sha256_of(smollm_path),
            "verified": True,
        }
    ]
    assert "100%" in err and "B/s" in err and "left" in err  # the bar, on stderr
    assert sha256_of(_final()) == sha256_of(smollm_path)
    # The consent is an allowed destination, and the ledger shows the download's connections.
    assert main(["network", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [a["destination"] for a in report["allowed"]] == [hub.url.removeprefix("http://")]
    assert {e["feature"] for e in report["ledger"]} == {"model download"}
    assert all(e["allowed"] for e in report["ledger"])
    assert main(["models", "--json"]) == 0
    [listed] = [m for m in json.loads(capsys.readouterr().out) if m["path"] == str(_final())]
    assert listed["origin"]["repo"] == REPO and listed["origin"]["revision"] == COMMIT
    # A second pull finds it in place and fetches nothing.
    hub.requests[:] = []
    assert main(["models", "pull", REPO]) == 0
    assert hub.resolves() == []


def test_search_lists_repositories(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "search", "smol", "--allow", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"repo": REPO, "downloads": 1000 - len(REPO), "likes": 7, "gated": False}
    ]
    assert main(["models", "search", "smol"]) == 0
    assert REPO in capsys.readouterr().out


def test_hostile_hub_answers_are_one_line_each(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    hub.gated.add(REPO)
    assert main(["models", "pull", REPO, "--allow"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"ember: {REPO} is gated or private (HTTP 401): accept its licence on the Hub, then set "
        f"HF_TOKEN, or run `hf auth login`"
    )
    assert main(["models", "pull", f"{REPO}:Q2_K"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == ("ember: no GGUF file matches 'Q2_K'; this repository has Q4_1")
    assert main(["models", "pull", "not a repo"]) == 2
    assert "not a repository" in capsys.readouterr().err
    assert not _final().exists()


@pytest.mark.slow
def test_a_killed_pull_resumes_where_it_stopped(
    hub: FakeHub, smollm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.stall_at = 0.5  # the server stops mid-file, so the kill lands mid-download
    proc = _ember("models", "pull", REPO, "--allow")
    part = part_path(_final())
    try:
        assert wait_for(lambda: part.exists() and part.stat().st_size >= smollm_path.stat().st_size * 0.4, 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    kept = part.stat().st_size
    assert not _final().exists()
    hub.stall_at, hub.requests[:] = None, []
    assert main(["models", "pull", REPO]) == 0  # allowed by the first pull
    assert [r.range for r in hub.resolves()] == [f"bytes={kept}-"]
    assert sha256_of(_final()) == sha256_of(smollm_path)
    assert not part.exists()


@pytest.mark.slow
def test_ctrl_c_cancels_and_keeps_the_part(hub: FakeHub, smollm_path: Path) -> None:
    hub.stall_at = 0.5
    proc = _ember("models", "pull", REPO, "--allow")
    part = part_path(_final())
    try:
        assert wait_for(lambda: part.exists() and part.stat().st_size >= smollm_path.stat().st_size * 0.4, 60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert (
        err.splitlines()[-1] == f"ember: cancelled; the part downloaded is kept, and `ember models pull {REPO}` "
        f"resumes it"
    )
    assert "Traceback" not in err
    assert part.exists() and not _final().exists()


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_add_and_rm_touch_only_what_ember_owns(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gguf_factory as gf

    mine = gf.write_tiny_llama(tmp_path / "mine.gguf", gf.CHATML)
    assert main(["models", "add", str(mine)]) == 0
    assert "added" in capsys.readouterr().out
    assert main(["models", "--json"]) == 0
    assert str(mine) in [m["path"] for m in json.loads(capsys.readouterr().out)]
    assert main(["models", "rm", str(mine)]) == 0
    assert "the file itself stays" in capsys.readouterr().out
    assert mine.exists()
    assert main(["models", "--json"]) == 0
    assert str(mine) not in [m["path"] for m in json.loads(capsys.readouterr().out)]

    assert main(["models", "pull", REPO, "--allow"]) == 0
    capsys.readouterr()
    assert main(["models", "rm", NAME]) == 2  # the built-in model has that file name too
    assert "names 2 models; give the path" in capsys.readouterr().err
    assert main(["models", "rm", str(_final())]) == 0
    assert capsys.readouterr().out.startswith(f"deleted {_final()}")
    assert not _final().exists() and not _final().parent.exists()
    assert origin_of(_final()) is None

    assert main(["models", "rm", "SmolLM2 135M Instruct (built in)"]) == 2
    assert "cannot be removed" in capsys.readouterr().err
    assert main(["models", "rm", "no-such-model"]) == 2
    assert "not in Ember's library" in capsys.readouterr().err
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf")
    assert main(["models", "add", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"ember: {bad}: not a GGUF file")


@pytest.mark.slow
def test_the_downloaded_model_answers_a_greedy_turn_and_its_receipt_says_where_from(
    hub: FakeHub, smollm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.history.store import HistoryStore

    assert main(["models", "pull", REPO, "--allow"]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "chat",
                "--model",
                str(_final()),
                "--max-tokens",
                "8",
                "--temperature",
                "0",
                "What is the capital of France?",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip()
    with HistoryStore(ember_paths().history_db) as store:
        reply = next(m for m in store.path(1) if m.role == "assistant")
    model = reply.stats["receipt"]["model"]
    assert model["sha256"] == sha256_of(smollm_path)
    assert model["source"] == f"{REPO}@{COMMIT[:12]}/{NAME}"


@pytest.mark.slow
def test_a_second_architecture_pulled_from_the_hub_answers_and_says_it_is_a_base_model(
    gemma_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gemma 3 270M (253 MB, gemma3, no chat template) through the loopback Hub: pulled by its
    quantisation, verified, listed, and one greedy turn that stops and names the base model once."""
    repo, name = "ember-test/gemma-3-270m-GGUF", "gemma-3-270m-Q4_K_M.gguf"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({repo: {name: gemma_path}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        assert main(["models", "pull", f"{repo}:Q4_K_M", "--allow", "--json"]) == 0
    pulled = json.loads(capsys.readouterr().out)
    final = ember_paths().models_dir / repo / name
    assert sha256_of(final) == sha256_of(gemma_path) and json.dumps(pulled).count(name) >= 1
    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert str(final) in json.dumps(listed)
    assert (
        main(
            [
                "chat",
                "--model",
                str(final),
                "--max-tokens",
                "24",
                "--temperature",
                "0",
                "What is the capital of France?",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "Paris" in out and "<end_of_turn>" not in out and "<|im_end|>" not in out
    assert err.count("no chat template") == 1


# --- a catalogue vision model: the model and its projector as one download ------------------

VISION_REPO = "ember-test/SmolVLM-like-GGUF"
PROJECTOR = "mmproj-SmolLM2-135M-f16.gguf"


def _vision_entry() -> CatalogueEntry:
    return parse_entry(
        {
            "key": "test-vision",
            "name": "Test Vision",
            "repo": VISION_REPO,
            "parameters": "135M",
            "parameters_b": 0.135,
            "quality": 1,
            "licence": "apache-2.0",
            "licence_url": "https://example.test/l",
            "context_length": 8192,
            "thinks": False,
            "tool_calls": None,
            "architecture": None,
            "files": [{"quant": "Q4_1", "name": NAME, "size": 100_000_000}],
            "projector": {"file": PROJECTOR, "size": 1_000_000},
            "checked_against": ["a test"],
        },
        0,
    )


@pytest.fixture
def vision_hub(smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    from desktop.cli import models_hub

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(models_hub, "shipped_catalogue", lambda: (_vision_entry(),))
    projector = write_projector_fixture(tmp_path / PROJECTOR)  # 576 wide: pairs with SmolLM2-135M
    with FakeHub({VISION_REPO: {NAME: smollm_path, PROJECTOR: projector}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


@pytest.mark.slow  # seconds: the real SmolLM2 bytes over loopback
def test_pulling_a_vision_model_brings_its_projector_and_the_library_pairs_them(
    vision_hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", VISION_REPO, "--allow", "--json"]) == 0
    out, err = capsys.readouterr()
    folder = ember_paths().models_dir / VISION_REPO
    result = json.loads(out)
    assert result["model"] == str(folder / NAME)
    assert [f["file"] for f in result["files"]] == [NAME, PROJECTOR]
    assert err.count("100%") == 1  # one bar over both files
    assert sorted(p.name for p in folder.iterdir()) == sorted([NAME, PROJECTOR])
    paired = pair(folder / NAME, 576).projector
    assert paired is not None and paired.path == folder / PROJECTOR
    assert sha256_of(folder / PROJECTOR) == sha256_of(tmp_path / PROJECTOR)


@pytest.mark.slow
def test_a_bad_projector_leaves_no_half_vision_model(vision_hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    vision_hub.tamper, vision_hub.tamper_only = True, {PROJECTOR}  # the model's bytes arrive intact
    assert main(["models", "pull", VISION_REPO, "--allow"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "SHA-256" in err[-1] and "Traceback" not in "\n".join(err)
    folder = ember_paths().models_dir / VISION_REPO
    assert not (folder / NAME).exists() and not (folder / PROJECTOR).exists()
    assert part_path(folder / NAME).exists()  # the good model's part is kept for the retry
    # The retry, with the projector served intact, fetches only the projector.
    vision_hub.tamper, vision_hub.requests[:] = False, []
    assert main(["models", "pull", VISION_REPO]) == 0
    assert {r.path.rsplit("/", 1)[-1] for r in vision_hub.resolves()} == {PROJECTOR}
    assert pair(folder / NAME, 576).projector is not None


def test_a_vision_pull_whose_projector_is_gone_downloads_nothing(
    smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.cli import models_hub

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(models_hub, "shipped_catalogue", lambda: (_vision_entry(),))
    with FakeHub({VISION_REPO: {NAME: smollm_path}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        assert main(["models", "pull", VISION_REPO, "--allow"]) == 1
        assert fake.resolves() == []
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"ember: {PROJECTOR}, the image projector of Test Vision, is not in {VISION_REPO} any more; "
        f"nothing was downloaded"
    )
    assert not (ember_paths().models_dir / VISION_REPO).exists()
