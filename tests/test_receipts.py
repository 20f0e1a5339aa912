"""Receipts: what each reply keeps to be reproduced, through export/import, and `--reproduce`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from desktop.cli.main import main
from engine.backends.base import Request, Sampling, StreamInfo
from engine.backends.receipt import TokenDigest
from engine.cancel import CancelToken
from engine.history.export import export_json, import_json
from engine.history.store import HistoryStore
from models.library.digests import DIGESTS_FILE, file_sha256
from models.library.paths import ember_paths

pytestmark = pytest.mark.slow


def _ember(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _reply(store: HistoryStore, conversation_id: int) -> Any:
    return next(m for m in store.path(conversation_id) if m.role == "assistant")


def test_the_llama_backend_fills_a_receipt(smollm: Any, smollm_path: Path) -> None:
    info = StreamInfo()
    request = Request(
        messages=({"role": "user", "content": "Hi"},), sampling=Sampling(temperature=0.0, seed=None), max_tokens=6
    )
    ids = [p.token_id for p in smollm.stream(request, CancelToken(), info) if p.token_id is not None]
    r = info.receipt
    assert r["backend"] == "llama.cpp"
    assert r["model"] == {
        "file": smollm_path.name,
        "bytes": smollm_path.stat().st_size,
        "sha256": file_sha256(smollm_path),
    }
    assert len(r["chat_template_sha256"]) == 64
    assert isinstance(r["seed"], int)  # no seed asked for: the one drawn is recorded
    assert r["sampling"]["temperature"] == 0.0 and "seed" not in r["sampling"]
    assert r["prompt"]["tokens"] == info.prompt_tokens
    assert r["reply"]["tokens"] == info.completion_tokens
    if len(ids) == info.completion_tokens:  # each token came as its own piece
        assert r["reply"] == TokenDigest(ids).to_json()


def test_a_model_file_is_hashed_once_and_again_only_when_it_changes(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(1000))
    first = file_sha256(model)
    cache_file = ember_paths().data_dir / DIGESTS_FILE
    cache = json.loads(cache_file.read_text())
    [entry] = cache.values()
    entry["sha256"] = "from the cache"
    cache_file.write_text(json.dumps(cache))
    assert file_sha256(model) == "from the cache"  # not read again
    os.utime(model, ns=(0, 0))
    assert file_sha256(model) == first  # changed (its time): hashed again


@pytest.mark.timeout(900)  # three model loads and replies: minutes on a loaded 2-core machine
def test_a_greedy_reply_round_trips_and_reproduces_token_for_token(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _ember(
        capsys, "chat", "--temperature", "0", "--max-tokens", "12", "--ctx", "1024", "Name a colour."
    )
    assert status == 0, err
    with HistoryStore(ember_paths().history_db) as store:
        reply = _reply(store, 1)
        receipt = reply.stats["receipt"]
        assert receipt["model"]["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
        assert len(receipt["model"]["sha256"]) == 64
        exported = export_json(store, 1)
        assert _reply_json(exported)["stats"]["receipt"] == receipt
        copy = import_json(store, json.loads(json.dumps(exported)))
        assert _reply(store, copy.id).stats["receipt"] == receipt

    status, out, err = _ember(capsys, "history", "show", str(copy.id), "--reproduce")
    assert status == 0, out + err
    assert "matches token for token" in out and f"{receipt['reply']['tokens']} tokens" in out

    exported["messages"][-1]["stats"]["receipt"]["reply"]["sha256"] = "0" * 64  # a different reply
    with HistoryStore(ember_paths().history_db) as store:
        forged = import_json(store, exported)
    status, out, _ = _ember(capsys, "history", "show", str(forged.id), "--reproduce", "--json")
    result = json.loads(out)
    assert status == 1
    assert result["prompt_matched"] and not result["matched"] and "DIFFERS" in result["verdict"]


def _reply_json(exported: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in exported["messages"] if m["role"] == "assistant")


def test_what_cannot_be_reproduced_says_why_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(title="t")
        user = store.add_message(conv.id, "user", "hi", parent_id=None)
        store.add_message(conv.id, "assistant", "hello", parent_id=user, stats={"tokens": 1})
        remote = store.create_conversation(title="r")
        user = store.add_message(remote.id, "user", "hi", parent_id=None)
        store.add_message(
            remote.id,
            "assistant",
            "hello",
            parent_id=user,
            stats={"receipt": {"backend": "openai-compatible", "server": "h:1"}},
        )
    status, _, err = _ember(capsys, "history", "show", str(conv.id), "--reproduce")
    assert status == 2 and "has no receipt" in err and err.count("\n") == 1
    status, _, err = _ember(capsys, "history", "show", str(remote.id), "--reproduce")
    assert status == 2 and "only replies of a local model" in err
