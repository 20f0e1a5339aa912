"""Documents in the window: attach by drop or paste, the sources row, `[n]` links that show and open passages."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from doc_fixtures import write_pdf
from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtWidgets import QToolTip
from pytestqt.qtbot import QtBot

from desktop.qt.answer import citations
from desktop.qt.answer.citations import GIVEN_ONLY
from desktop.qt.answer.markdown_view import TextSegment
from desktop.qt.chat.documents_ui import CollectionsDialog, DocumentsButton
from desktop.qt.chat.message_view import AssistantMessage
from engine.backends.scripted import ScriptedBackend
from engine.docs.index import DocIndex, default_path
from engine.events import ANSWER_FROM_GIVEN, ANSWER_FROM_PARAGRAPHS, AnswerFrom, SourceRef, TurnStats

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]


@pytest.fixture
def opened() -> Iterator[list[QUrl]]:
    urls: list[QUrl] = []

    def opener(url: QUrl) -> bool:
        urls.append(url)
        return True

    previous = citations.set_opener(opener)
    yield urls
    citations.set_opener(previous)


def _with_docs(chat: Chat, tmp_path: Path) -> DocumentsButton:
    return chat.window.documents_button  # on the default index, in the test's own EMBER_HOME


def _drop(chat: Chat, *paths: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    chat.window.composer.edit.insertFromMimeData(mime)  # what a drop and a paste both do
    chat.qtbot.waitUntil(lambda: not chat.window.attachments.reading, timeout=WAIT_MS)  # read on a worker


def test_a_dropped_pdf_grounds_the_answer_and_its_citation_opens_the_page(
    make_chat: MakeChat, tmp_path: Path, opened: list[QUrl]
) -> None:
    pdf = write_pdf(tmp_path / "policy.pdf", ["Cover.", "Refunds are paid within 14 days."])
    backend = ScriptedBackend.from_texts("Refunds take 14 days [2].")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    button = _with_docs(chat, tmp_path)
    _drop(chat, pdf)
    assert chat.window.composer.text() == ""  # attached, not typed
    assert button.text() == "1 file"
    chat.type_and_send("How fast are refunds?")
    reply = chat.wait_reply_finished()
    sent = backend.requests[0].messages[-1]["content"]
    assert "[2] policy.pdf, page 2\nRefunds are paid within 14 days." in sent
    assert reply.sources_row.isVisible()
    assert "[2] policy.pdf, page 2" in reply.sources_row.text()
    segment = reply.answer.part_widgets()[0]
    assert isinstance(segment, TextSegment)
    assert '<a href="cite:2">[2]</a>' in segment.raw_html or 'href="cite:2"' in segment.toHtml()
    segment.highlighted.emit(QUrl("cite:2"))  # hovering the link
    assert "Refunds are paid within 14 days." in QToolTip.text()
    segment.anchorClicked.emit(QUrl("cite:2"))  # clicking it
    assert [u.toLocalFile() for u in opened] == [str(pdf.resolve())] and opened[0].fragment() == "page=2"
    # the conversation keeps the file, and history keeps the sources with the reply
    assert button.text() == "1 file"
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    stored = history.store.path(history.conversation_id)[-1]
    assert [s["n"] for s in stored.stats["sources"]] == [1, 2]


def test_a_stored_reply_shows_its_sources_again(make_chat: MakeChat, tmp_path: Path, opened: list[QUrl]) -> None:
    note = tmp_path / "note.md"
    note.write_text("The office closes at six.")
    backend = ScriptedBackend.from_texts("At six [1].")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    _with_docs(chat, tmp_path)
    _drop(chat, note)
    chat.type_and_send("When does it close?")
    chat.wait_reply_finished()
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    conversation = history.conversation_id
    cleared = asyncio.ensure_future(chat.controller.new_conversation())
    chat.qtbot.waitUntil(cleared.done, timeout=WAIT_MS)
    assert chat.window.last_reply() is None
    reopened = asyncio.ensure_future(chat.controller.open_conversation(conversation))
    chat.qtbot.waitUntil(reopened.done, timeout=WAIT_MS)
    reply = chat.reply()
    assert "[1] note.md" in reply.sources_row.text()
    reply.sources_row.linkActivated.emit("cite:1")
    assert [u.toLocalFile() for u in opened] == [str(note.resolve())]


def test_citation_links_skip_code_and_unknown_numbers(qtbot: QtBot) -> None:
    reply = AssistantMessage()
    qtbot.addWidget(reply)
    reply.set_sources((SourceRef(1, "/tmp/a.md", None, 0, 5, 0.5, "hello"),))
    reply.add_content("See [1] and [7], not `[1]`.")
    reply.finish(TurnStats())
    segment = reply.answer.part_widgets()[0]
    assert isinstance(segment, TextSegment)
    html = segment.toHtml()
    assert html.count('href="cite:1"') == 1 and "cite:7" not in html


@pytest.mark.slow  # the real default embedder
def test_the_collections_dialog_indexes_with_progress_and_sets_the_conversation(
    make_chat: MakeChat, tmp_path: Path
) -> None:
    folder = tmp_path / "manuals"
    folder.mkdir()
    for i in range(5):
        (folder / f"m{i}.md").write_text(f"Manual {i} says to press button {i}.")
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    button = _with_docs(chat, tmp_path)
    dialog = button.open_collections()
    assert isinstance(dialog, CollectionsDialog)
    chat.qtbot.addWidget(dialog)
    dialog.create_collection("Manuals")
    assert dialog.selected() == "Manuals"
    dialog.add_paths([folder])
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS * 4)
    assert "5 indexed" in dialog.detail.text()
    assert dialog.list.currentItem() is not None and "5 files" in dialog.list.currentItem().text()
    dialog.buttons["use"].click()
    assert chat.controller.documents is not None and chat.controller.documents.collection == "Manuals"
    assert "Manuals" in button.text()
    with DocIndex.open(default_path()) as index:
        assert index.search(index.collection("Manuals"), "button 3")[0].path.endswith("m3.md")


def test_new_collection_with_an_existing_name_selects_it_and_keeps_its_embedder(
    make_chat: MakeChat, tmp_path: Path
) -> None:
    with DocIndex.open(default_path()) as index:
        index.create_collection("Logs", "")  # BM25 alone, as `ember docs add --embedder none` makes it
        index.create_collection("Other", "")
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = _with_docs(chat, tmp_path).open_collections()
    assert isinstance(dialog, CollectionsDialog)
    chat.qtbot.addWidget(dialog)
    dialog.create_collection("Logs")
    assert dialog.selected() == "Logs" and "already exists" in dialog.detail.text()
    with DocIndex.open(default_path()) as index:
        assert index.collection("Logs").embedder == ""  # never switched to the default model
    dialog.create_collection("Fresh")
    assert "already exists" not in dialog.detail.text()
    with DocIndex.open(default_path()) as index:
        assert index.collection("Fresh").embedder == "default"


@pytest.mark.slow  # the real default embedder
def test_the_dialog_indexes_a_long_pdf(make_chat: MakeChat, tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "handbook.pdf", [f"Handbook page {i + 1} about rule {i + 1}." for i in range(100)])
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = _with_docs(chat, tmp_path).open_collections()
    assert isinstance(dialog, CollectionsDialog)
    chat.qtbot.addWidget(dialog)
    dialog.create_collection("Handbook")
    width = dialog.width()
    dialog.add_paths([pdf])
    assert dialog.buttons["cancel"].isVisible() and dialog.progress.isVisible()
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS * 4)
    assert "1 indexed" in dialog.detail.text()
    assert dialog.width() == width  # the Cancel button beside the progress bar did not widen it
    item = dialog.list.currentItem()
    assert item is not None and item.text().startswith("Handbook — 1 file, ")
    with DocIndex.open(default_path()) as index:
        coll = index.collection("Handbook")
        assert index.info(coll).chunks >= 100
        assert index.search(coll, "rule 87")[0].page == 87


def test_the_token_meter_counts_the_documents_attached_to_the_next_message(make_chat: MakeChat, tmp_path: Path) -> None:
    note = tmp_path / "minutes.md"
    note.write_text("# Minutes\n\n" + " ".join(f"item{i}" for i in range(300)) + "\n")
    backend = ScriptedBackend.from_texts("Noted [1].")
    backend.n_ctx = 4096  # the scripted backend counts words, through the same meter
    chat = make_chat(backend=backend)
    button = _with_docs(chat, tmp_path)
    meter = chat.window.context_meter

    def documents() -> int:
        return meter.meter.documents if meter.meter is not None else -1

    chat.qtbot.waitUntil(lambda: meter.meter is not None, timeout=WAIT_MS)
    empty = meter.meter.used  # type: ignore[union-attr]
    _drop(chat, note)  # nothing typed yet: the file alone already counts
    chat.qtbot.waitUntil(lambda: documents() >= 300, timeout=WAIT_MS)
    assert meter.meter is not None and meter.meter.used >= empty + 300
    assert "attached documents" in meter.toolTip() and meter.meter.draft == 0
    chat.window.composer.edit.setPlainText("What was decided?")
    chat.qtbot.waitUntil(lambda: meter.meter is not None and meter.meter.draft == 3, timeout=WAIT_MS)
    with_note = meter.meter.used
    button._detach(note.resolve())  # pyright: ignore[reportPrivateUsage]  (the menu's "✕ minutes.md")
    chat.qtbot.waitUntil(lambda: documents() == 0, timeout=WAIT_MS)
    assert meter.meter is not None and meter.meter.used <= with_note - 300
    _drop(chat, note)
    chat.qtbot.waitUntil(lambda: documents() >= 300, timeout=WAIT_MS)
    assert meter.meter is not None and meter.meter.used == with_note
    chat.qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_Return)
    chat.wait_reply_finished()
    sent = backend.requests[0]
    assert "item299" in sent.messages[-1]["content"]
    assert backend.count_prompt_tokens(sent.messages, sent.tools) == with_note  # the meter counted what was sent


def test_an_answer_without_citations_shows_the_passages_that_support_it(
    make_chat: MakeChat, tmp_path: Path, opened: list[QUrl]
) -> None:
    """The built-in model writes no [n]: the row names the passage each paragraph comes from (issue #50)."""
    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot by the door.\n")
    other = tmp_path / "other.md"
    other.write_text("Tomatoes want six hours of sun and deep watering twice a week.\n")
    backend = ScriptedBackend.from_texts("The spare key is under the blue pot, next to the door.")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    _with_docs(chat, tmp_path)
    _drop(chat, note, other)
    chat.type_and_send("Where is the spare key?")
    reply = chat.wait_reply_finished()
    row = reply.sources_row.text()
    assert row.startswith("Answer from: <b>") and "note.md</a></b>" in row and "also given:" in row
    assert "<b><a" not in row.split("also given:")[1]  # the tomato passage is listed, not as support
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    stored = history.store.path(history.conversation_id)[-1]
    assert stored.stats["source_paragraphs"][0]["cited"] is False
    conversation = history.conversation_id
    cleared = asyncio.ensure_future(chat.controller.new_conversation())
    chat.qtbot.waitUntil(cleared.done, timeout=WAIT_MS)
    reopened = asyncio.ensure_future(chat.controller.open_conversation(conversation))
    chat.qtbot.waitUntil(reopened.done, timeout=WAIT_MS)
    assert chat.reply().sources_row.text() == row  # the same, read back from history


def test_an_answer_nothing_supports_shows_what_the_model_was_given(make_chat: MakeChat, tmp_path: Path) -> None:
    """Off-topic: no paragraph matches a passage, yet the reply still says where it came from, labelled as
    the passages the model was given, not as support; the same when reopened from history (issue #50)."""
    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot by the door.\n")
    backend = ScriptedBackend.from_texts("Canberra became the capital as a compromise between two cities.")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    _with_docs(chat, tmp_path)
    _drop(chat, note)
    chat.type_and_send("Where is the spare key?")
    reply = chat.wait_reply_finished()
    row = reply.sources_row.text()
    assert reply.sources_row.isVisible() and row.startswith(f"{GIVEN_ONLY}: ") and "note.md</a>" in row
    assert "Answer from" not in row and "<b>" not in row
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    conversation = history.conversation_id
    cleared = asyncio.ensure_future(chat.controller.new_conversation())
    chat.qtbot.waitUntil(cleared.done, timeout=WAIT_MS)
    reopened = asyncio.ensure_future(chat.controller.open_conversation(conversation))
    chat.qtbot.waitUntil(reopened.done, timeout=WAIT_MS)
    assert chat.reply().sources_row.text() == row  # the same, read back from history


def test_the_row_claims_nothing_until_the_answer_is_whole(qtbot: QtBot) -> None:
    """While streaming (or for a reply stored before attribution) the row lists the passages as "Sources"."""
    reply = AssistantMessage()
    qtbot.addWidget(reply)
    refs = (SourceRef(1, "/tmp/a.md", None, 0, 5, 0.5, "hello"), SourceRef(2, "/tmp/b.md", None, 0, 5, 0.4, "hi"))
    reply.set_sources(refs)
    assert reply.sources_row.text().startswith("Sources: ")
    reply.set_sources(refs, AnswerFrom(ANSWER_FROM_PARAGRAPHS, (2,)))
    assert reply.sources_row.text().startswith('Answer from: <b><a href="cite:2">')
    reply.set_sources(refs, AnswerFrom(ANSWER_FROM_GIVEN, (1, 2)))
    assert reply.sources_row.text().startswith(f"{GIVEN_ONLY}: ")
