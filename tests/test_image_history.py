"""Images stored with their message: content-addressed files, the branch that carries them,
deletion with the last conversation, JSON export and import, refusal before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.backends.image_input import ImageData, image_digest
from engine.backends.scripted import ScriptedBackend
from engine.errors import ConfigError
from engine.history.export import ImportFormatError, export_json, export_markdown, import_json
from engine.history.images import image_folder
from engine.history.store import HistoryStore
from engine.session.messages import branch_messages
from engine.session.session import Ask, ChatSession
from engine.session.settings import resolve
from tests.projector_fixture import png


@pytest.fixture
def session(tmp_path: Path) -> Any:
    chat = ChatSession(HistoryStore(tmp_path / "history.db"))
    yield chat
    chat.close()


def send(session: ChatSession, backend: ScriptedBackend, text: str, *images: bytes) -> None:
    asked = Ask.send(text, [ImageData(i, f"shot{n}.png") for n, i in enumerate(images)])
    plan = session.prepare(asked, resolve()).fit(backend)
    list(session.begin(plan, model="m").run(backend))


def stored_files(store: HistoryStore) -> set[str]:
    return {p.name for p in image_folder(store).glob("*/*")}


def test_the_question_keeps_its_images_and_the_next_turn_sends_them_again(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("A cat.", "Grey.")
    picture = png(8, 6)
    send(session, backend, "What is this?", picture)
    send(session, backend, "What colour?")
    assert next(m.get("images") for m in backend.requests[1].messages if m["role"] == "user") == [
        ImageData(picture, "shot0.png")
    ]
    assert stored_files(session.store) == {image_digest(picture)}
    reopened = ChatSession(HistoryStore(session.store.db_path))
    reopened.open(session.conversation_id or 0)
    [question] = [m for m in branch_messages(reopened.path()) if m["role"] == "user"][:1]
    assert "images" not in question  # the view's thread is text; the model's messages carry them
    images = reopened.stored_images(reopened.path()).found
    assert [i.data for i in next(iter(images.values()))] == [picture]
    reopened.close()


def test_an_image_goes_with_the_last_conversation_that_holds_it(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("One.", "Two.")
    shared, own = png(8, 6, seed=1), png(8, 6, seed=2)
    send(session, backend, "first", shared, own)
    first = session.conversation_id
    session.new()
    send(session, backend, "second", shared)
    second = session.conversation_id
    assert first is not None and second is not None
    session.store.purge(first)
    assert stored_files(session.store) == {image_digest(shared)}
    session.store.purge(second)
    assert stored_files(session.store) == set()


def test_json_export_embeds_the_images_and_import_restores_them(session: ChatSession, tmp_path: Path) -> None:
    backend = ScriptedBackend.from_texts("A cat.")
    picture = png(8, 6, seed=3)
    send(session, backend, "What is this?", picture)
    data = json.loads(json.dumps(export_json(session.store, session.conversation_id or 0)))
    assert data["messages"][0]["images"][0]["url"].startswith("data:image/png;base64,")
    elsewhere = HistoryStore(tmp_path / "other" / "history.db")
    conversation = import_json(elsewhere, data)
    [question] = [m for m in elsewhere.messages(conversation.id) if m.role == "user"]
    other = ChatSession(elsewhere)
    assert other.stored_images([question]).found[question.id] == [ImageData(picture, "shot0.png")]
    assert stored_files(elsewhere) == {image_digest(picture)}
    other.close()


def test_an_import_with_a_linked_or_hostile_image_imports_nothing(session: ChatSession, tmp_path: Path) -> None:
    backend = ScriptedBackend.from_texts("A cat.")
    send(session, backend, "What is this?", png(8, 6))
    data = export_json(session.store, session.conversation_id or 0)
    elsewhere = HistoryStore(tmp_path / "other" / "history.db")
    for url in ("https://example.com/cat.png", "data:image/png;base64,aGVsbG8="):
        data["messages"][0]["images"][0]["url"] = url
        with pytest.raises(ImportFormatError, match=r"messages\[0\]\.images\[0\]"):
            import_json(elsewhere, data)
    assert elsewhere.conversations() == []


def test_a_backend_that_cannot_see_refuses_before_anything_is_stored(session: ChatSession) -> None:
    class Blind(ScriptedBackend):
        pass

    backend = Blind.from_texts("never")
    backend.capabilities = backend.capabilities.__class__(device="Scripted", vision=False)
    plan = session.prepare(Ask.send("What is this?", [ImageData(png(4, 4))]), resolve())
    with pytest.raises(ConfigError, match="no vision projector"):
        plan.fit(backend)
    plan.release()
    assert session.store.conversations() == [] and backend.requests == []


def test_joined_questions_keep_both_pictures() -> None:
    from engine.turns.context_policy import join_runs

    first, second = ImageData(png(4, 4, seed=1), "a.png"), ImageData(png(4, 4, seed=2), "b.png")
    [joined] = join_runs(
        [{"role": "user", "content": "one", "images": [first]}, {"role": "user", "content": "two", "images": [second]}]
    )
    assert joined["content"] == "one\n\ntwo" and joined.get("images") == [first, second]


def _damage(store: HistoryStore, missing: bytes, changed: bytes) -> None:
    folder = image_folder(store)
    (folder / image_digest(missing)[:2] / image_digest(missing)).unlink()
    (folder / image_digest(changed)[:2] / image_digest(changed)).write_bytes(png(8, 6, seed=99))


def test_a_missing_or_changed_image_file_does_not_block_the_conversation(session: ChatSession, tmp_path: Path) -> None:
    from desktop.core.history_session import HistorySession

    backend = ScriptedBackend.from_texts("Three pictures.", "Still here.")
    kept, missing, changed = png(8, 6, seed=10), png(8, 6, seed=11), png(8, 6, seed=12)
    send(session, backend, "What are these?", kept, missing, changed)
    _damage(session.store, missing, changed)
    reopened = ChatSession(HistoryStore(session.store.db_path))
    reopened.open(session.conversation_id or 0)
    [question, _reply] = HistorySession(reopened).branch()
    assert [i.data for i in question.images] == [kept]
    assert [d.name for d in question.damaged] == ["shot1.png", "shot2.png"]
    assert "missing" in question.damaged[0].note and "changed on disk" in question.damaged[1].note
    assert all("\n" not in d.note for d in question.damaged)
    send(reopened, backend, "And now?")  # the next turn goes, with the picture that is left
    first = next(m for m in backend.requests[1].messages if m["role"] == "user")
    assert first.get("images") == [ImageData(kept, "shot0.png")]
    reopened.close()


def test_an_export_with_a_damaged_image_notes_it_and_imports(session: ChatSession, tmp_path: Path) -> None:
    backend = ScriptedBackend.from_texts("Three pictures.")
    kept, missing, changed = png(8, 6, seed=20), png(8, 6, seed=21), png(8, 6, seed=22)
    send(session, backend, "What are these?", kept, missing, changed)
    _damage(session.store, missing, changed)
    data = json.loads(json.dumps(export_json(session.store, session.conversation_id or 0)))
    images = data["messages"][0]["images"]
    assert [i["name"] for i in images] == ["shot0.png", "shot1.png", "shot2.png"]
    assert images[0]["url"].startswith("data:image/png;base64,")
    assert "url" not in images[1] and "missing" in images[1]["missing"]
    assert "changed on disk" in images[2]["missing"]
    assert "What are these?" in export_markdown(session.store, session.conversation_id or 0)
    elsewhere = HistoryStore(tmp_path / "other" / "history.db")
    conversation = import_json(elsewhere, data)
    [question] = [m for m in elsewhere.messages(conversation.id) if m.role == "user"]
    other = ChatSession(elsewhere)
    assert other.stored_images([question]).found[question.id] == [ImageData(kept, "shot0.png")]
    other.close()
