"""Documents go through the session: the window's controller and `ember chat` send the same prompt.

Both open a turn's documents through the one session method (`ChatSession.prepare_documents`),
which keeps them in the typed `ConversationSettings` (`docs`, `attachments`), where rows written
before they were typed are read too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_gui_controller import FakeView

from desktop.cli import cmd_chat
from desktop.cli.main import main
from desktop.core.controller import ChatController
from engine.backends.base import Message
from engine.backends.scripted import ScriptedBackend
from engine.docs.embed import DEFAULT_EMBEDDER, shared_embedder
from engine.docs.index import DocIndex, default_path
from engine.docs.indexer import index_collection
from engine.history.store import HistoryStore
from engine.runtime import Engine
from engine.session.session import Ask, ChatSession
from engine.session.settings import ConversationSettings
from engine.session.turn_documents import TurnDocuments
from models.library.paths import ember_paths

QUESTION = "How long should I knead the dough?"


@pytest.fixture
def kitchen(tmp_path: Path) -> str:
    """A collection in the test's own default index, with the default embedder."""
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "bread.md").write_text("# Bread\n\nKnead the dough for ten minutes, then let it rise in a warm place.\n")
    (folder / "bikes.md").write_text("# Bikes\n\nOil the chain after riding in the rain, and check the brakes.\n")
    with DocIndex.open(default_path()) as index:
        coll = index.create_collection("Kitchen", DEFAULT_EMBEDDER)
        index.add_roots(coll, [folder])
        index_collection(index, coll, embedder=shared_embedder(DEFAULT_EMBEDDER))
    return "Kitchen"


def _store() -> HistoryStore:
    return HistoryStore(ember_paths().ensure().history_db)  # the one `ember chat` writes


def _window_prompt(collection: str, attach: list[Path]) -> tuple[list[Message], ConversationSettings]:
    async def main() -> tuple[list[Message], ConversationSettings]:
        backend = ScriptedBackend.from_texts("Ten minutes [1].")
        controller = ChatController(Engine(backend), FakeView(), session=ChatSession(_store()))
        controller.documents.choose_collection(collection)
        controller.documents.attach(attach)
        assert await controller.send(QUESTION)
        settings = controller.session.settings
        await controller.aclose()
        return list(backend.requests[0].messages), settings

    return asyncio.run(main())


@pytest.mark.slow  # the real default embedder
def test_the_window_and_the_command_line_send_the_same_prompt_with_a_collection(
    kitchen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Oven\n\nBake the loaf at 220 degrees for thirty minutes.\n")
    window, window_settings = _window_prompt(kitchen, [note])
    scripted = ScriptedBackend.from_texts("Ten minutes [1].")
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    assert main(["chat", "--docs", kitchen, "--attach", str(note), QUESTION]) == 0
    cli = list(scripted.requests[0].messages)
    assert cli == window
    assert "Knead the dough for ten minutes" in str(cli[-1]["content"])
    # both remember the documents as the conversation's own, typed
    with _store() as store:
        stored = [ConversationSettings.from_stored(c.settings) for c in store.conversations()]
    remembered = (kitchen, (str(note.resolve()),))
    assert [(s.docs, s.attachments) for s in stored] == [remembered, remembered]
    assert (window_settings.docs, window_settings.attachments) == remembered
    assert not {"docs", "attachments"} & set(stored[0].extra)


@pytest.mark.slow  # the real default embedder
def test_both_front_ends_open_their_documents_through_the_one_session_method(
    kitchen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    note, gone = tmp_path / "note.md", tmp_path / "gone.md"
    note.write_text("# Oven\n\nBake the loaf at 220 degrees for thirty minutes.\n")
    # what each call opened: files, collection, the readable files, the problems
    opened: list[tuple[tuple[Path, ...], str | None, tuple[Path, ...], tuple[str, ...]]] = []
    prepare = ChatSession.prepare_documents

    async def recorded(self: ChatSession, ask: Ask, **options: Any) -> TurnDocuments:
        docs = await prepare(self, ask, **options)
        opened.append((docs.files, docs.collection, tuple(docs.attached), tuple(docs.problems)))
        return docs

    monkeypatch.setattr(ChatSession, "prepare_documents", recorded)
    window, window_settings = _window_prompt(kitchen, [note, gone])
    scripted = ScriptedBackend.from_texts("Ten minutes [1].")
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    assert main(["chat", "--docs", kitchen, "--attach", str(note), "--attach", str(gone), QUESTION]) == 0
    assert len(opened) == 2 and opened[0] == opened[1]  # one call each, the same documents
    files, collection, readable, problems = opened[0]
    assert (files, collection, readable) == ((note.resolve(), gone.resolve()), kitchen, (note.resolve(),))
    assert len(problems) == 1 and "gone.md" in problems[0] and "gone.md" in capsys.readouterr().err
    assert list(scripted.requests[0].messages) == window
    with _store() as store:  # the session remembered the readable file for both
        stored = [ConversationSettings.from_stored(c.settings) for c in store.conversations()]
    assert [(s.docs, s.attachments) for s in stored] == [(kitchen, (str(note.resolve()),))] * 2
    assert (window_settings.docs, window_settings.attachments) == (kitchen, (str(note.resolve()),))


@pytest.mark.slow  # the real default embedder
def test_a_conversation_stored_with_untyped_document_keys_keeps_its_documents(
    kitchen: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ConversationSettings.from_stored({"docs": kitchen, "attachments": ["/a.md"], "other": 1})
    assert (settings.docs, settings.attachments, dict(settings.extra)) == (kitchen, ("/a.md",), {"other": 1})
    assert settings.to_stored() == {"docs": kitchen, "attachments": ["/a.md"], "other": 1}
    with _store() as store:  # a row as Ember wrote it before the keys were typed
        conv = store.create_conversation(model="m", settings={"docs": kitchen})
        asked = store.add_message(conv.id, "user", "Hello", parent_id=None)
        store.add_message(conv.id, "assistant", "Hi.", parent_id=asked)

    async def window_opens() -> str | None:
        controller = ChatController(Engine(ScriptedBackend.from_texts("x")), FakeView(), session=ChatSession(_store()))
        assert await controller.open_conversation(conv.id)
        collection = controller.documents.collection
        await controller.aclose()
        return collection

    assert asyncio.run(window_opens()) == kitchen
    scripted = ScriptedBackend.from_texts("Ten minutes [1].")
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    assert main(["chat", "-c", QUESTION]) == 0
    assert "Knead the dough for ten minutes" in str(scripted.requests[0].messages[-1]["content"])
