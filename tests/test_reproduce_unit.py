"""`reproduce` on a fake backend: prompt-progress events of a long prompt are not reply text."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from engine.backends.base import Backend, PlainBackend, Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece, PromptProgress
from engine.history.store import HistoryStore
from engine.session.reproduce import reproduce
from models.library.digests import file_sha256

REPLY = "Blue."


class _ReadsALongPrompt(PlainBackend):
    """Reports prompt progress first, as llama.cpp does between batches, then the reply."""

    name = "fake llama.cpp"

    def close(self) -> None:
        pass

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece | PromptProgress]:
        yield PromptProgress(0, 600)
        yield PromptProgress(512, 600)
        yield Piece(REPLY, token_id=7)
        info.receipt = {"prompt": {"sha256": "p"}, "reply": {"tokens": 1, "sha256": _sha(REPLY)}}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_reply_read_after_prompt_progress_reproduces(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF weights")
    receipt = {
        "backend": "llama.cpp",
        "model": {"file": "m.gguf", "sha256": file_sha256(model)},
        "prompt": {"sha256": "p"},
        "reply": {"tokens": 1, "sha256": _sha(REPLY)},
        "max_tokens": 4,
    }
    with HistoryStore(tmp_path / "h.db") as store:
        conv = store.create_conversation(title="t")
        user = store.add_message(conv.id, "user", "long question", parent_id=None)
        reply = store.add_message(conv.id, "assistant", REPLY, parent_id=user, stats={"receipt": receipt})

        def open_model(path: Path, _: Mapping[str, Any]) -> Backend:
            assert path == model
            return _ReadsALongPrompt()

        result = reproduce(store, reply, open_model, lambda: iter([model]))
    assert result.text == REPLY
    assert result.matched, result.line
