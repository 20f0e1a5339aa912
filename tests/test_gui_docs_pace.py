"""The Collections dialog says indexing's passages/s and time left beside its bar (issue #50)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS, Chat
from test_docs_pace import Clock, FakeEmbedder

from desktop.qt.chat import documents_ui
from engine.backends.scripted import ScriptedBackend
from engine.docs.indexer import IndexReport, Progress

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]


def test_the_dialog_says_passages_per_second_and_time_left(
    make_chat: MakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(8):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"lantern harbour rule {i} " * 400)
    clock = Clock()
    embedder = FakeEmbedder(clock, 1.0)  # a second of the clock per batch: a model's work, no waiting
    monkeypatch.setattr(documents_ui, "shared_embedder", lambda spec: embedder)
    real = documents_ui.index_collection

    def clocked(*args: object, **kwargs: object) -> IndexReport:
        return real(*args, clock=clock, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(documents_ui, "index_collection", clocked)
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = chat.window.documents_button.open_collections()
    chat.qtbot.addWidget(dialog)
    said: list[str] = []
    shown = dialog.progress.show_progress

    def watched(progress: Progress, done: int, total: int) -> None:
        shown(progress, done, total)
        said.append(dialog.progress.words.text())

    monkeypatch.setattr(dialog.progress, "show_progress", watched)
    dialog.create_collection("Notes")
    dialog.add_paths([folder])
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS * 4)
    assert any(" passages/s" in words for words in said), said
    assert any(words.endswith(" left") and "about " in words for words in said), said
    assert dialog.detail.text().startswith("8 indexed")
