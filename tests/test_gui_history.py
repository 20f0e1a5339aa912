"""History in the window: turns recorded as they stream, the sidebar, versions, export and import."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from gui_helpers import WAIT_MS, Chat, shown_answer
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QLabel, QLineEdit, QListWidgetItem
from pytestqt.qtbot import QtBot

from desktop.core.async_tasks import spawn
from desktop.core.history_session import open_history
from desktop.core.model_choice import ModelInfo
from desktop.qt.chat.message_view import AssistantMessage, UserMessage
from desktop.qt.history.row_delegate import MESSAGE_ROLE, SNIPPET_ROLE, relative_time, snippet_runs
from desktop.qt.history.sidebar import HistorySidebar
from desktop.qt.window import WindowOptions
from engine.backends.base import Capabilities, PlainBackend, Request, StreamInfo
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.errors import BackendError
from engine.events import Piece
from engine.history.store import HistoryStore
from engine.history.types import HistoryError
from engine.session import session as session_module
from engine.session.messages import branch_messages
from models.library.paths import ember_paths

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]
T = TypeVar("T")
# Scaffolding only: nothing visible is left, so the turn recovers once and then fails.
MALFORMED_REPLY = [
    {"text": "<|tool_call_start|>", "special": True},
    "[x()]",
    {"text": "<|tool_call_end|>", "special": True},
]


def slow(*texts: str, delay_ms: int = 20) -> list[dict[str, object]]:
    return [{"text": t, "delay_ms": delay_ms} for t in texts]


def store_of(chat: Chat) -> HistoryStore:
    assert chat.controller.history is not None
    return chat.controller.history.store


def sidebar_of(chat: Chat) -> HistorySidebar:
    sidebar = chat.window.sidebar
    assert isinstance(sidebar, HistorySidebar)
    return sidebar


def finished(qtbot: QtBot, work: Coroutine[Any, Any, T]) -> T:
    """Run a sidebar coroutine (its disk work is on the history thread) to its end; its result."""
    task = spawn(work)
    qtbot.waitUntil(task.done, timeout=WAIT_MS)
    return task.result()


def refreshed(qtbot: QtBot, sidebar: HistorySidebar) -> None:
    """Re-read the list and wait until it is shown (the rows are read on the history thread)."""
    read = sidebar.refresh()
    qtbot.waitUntil(read.done, timeout=WAIT_MS)


def shown(chat: Chat) -> list[tuple[str, str]]:
    """The conversation on screen as (role, text) pairs."""
    out: list[tuple[str, str]] = []
    for widget in chat.window.conversation.message_widgets():
        if isinstance(widget, UserMessage):
            out.append(("user", widget.text()))
        else:
            out.append(("assistant", widget.answer_text()))
    return out


def rows(store: HistoryStore, conversation_id: int) -> list[tuple[str, str, str]]:
    return [(m.role, m.content, m.status) for m in store.path(conversation_id)]


def current_id(chat: Chat) -> int:
    assert chat.controller.history is not None and chat.controller.history.conversation_id is not None
    return chat.controller.history.conversation_id


def send_and_wait(chat: Chat, text: str) -> AssistantMessage:
    chat.type_and_send(text)
    chat.qtbot.waitUntil(
        lambda: any(
            isinstance(w, UserMessage) and w.text() == text for w in chat.window.conversation.message_widgets()
        ),
        timeout=WAIT_MS,
    )
    return chat.wait_reply_finished()


def first_row(sidebar: HistorySidebar) -> QListWidgetItem:
    """The top conversation's row (row 0 is its date header)."""
    ids = sidebar.list.conversation_ids()
    item = sidebar.list.item_of(ids[0] if ids else None)
    assert item is not None
    return item


def click_item(qtbot: QtBot, sidebar: HistorySidebar, item: QListWidgetItem) -> None:
    rect = sidebar.list.visualItemRect(item)
    qtbot.mouseClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def add_conversation(store: HistoryStore, title: str, *pairs: tuple[str, str]) -> int:
    conv = store.create_conversation(title=title)
    parent = None
    for question, answer in pairs:
        parent = store.add_message(conv.id, "user", question, parent_id=parent)
        parent = store.add_message(conv.id, "assistant", answer, parent_id=parent)
    return conv.id


# -- recording turns ---------------------------------------------------------------------


def test_a_streamed_turn_lands_in_the_history_as_it_streams(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(slow(*(f"w{i} " for i in range(40)), delay_ms=25))
    chat.type_and_send("hello there")
    qtbot.waitUntil(
        lambda: chat.controller.history is not None and chat.controller.history.conversation_id is not None,
        timeout=WAIT_MS,
    )
    store = store_of(chat)
    conv = current_id(chat)
    # The question is committed before the reply; the reply's row appears with its first text.
    qtbot.waitUntil(lambda: len(rows(store, conv)) == 2, timeout=WAIT_MS)
    assert rows(store, conv)[0] == ("user", "hello there", "complete")
    assert rows(store, conv)[1][2] == "streaming"
    reply = chat.wait_reply_finished()
    assert rows(store, conv) == [("user", "hello there", "complete"), ("assistant", reply.answer_text(), "complete")]
    assert [t.outcome for t in store.turns(conv)] == ["completed"]
    assert branch_messages(chat.controller.session.path())[-1] == {"role": "assistant", "content": reply.answer_text()}


def test_a_pause_in_the_stream_is_flushed_by_the_timer(
    make_chat: MakeChat, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_module, "FLUSH_EVERY_S", 0.05)
    chat = make_chat(["A", {"text": "B", "delay_ms": 30}, {"text": "C", "delay_ms": 2500}])
    chat.type_and_send("q")
    qtbot.waitUntil(
        lambda: chat.controller.history is not None and chat.controller.history.conversation_id is not None,
        timeout=WAIT_MS,
    )
    store, conv = store_of(chat), current_id(chat)
    # "B" came within the recorder's own one-second throttle; the timer writes it during the pause
    # (a long one: on a loaded machine the first rows themselves may take a second to land).
    qtbot.waitUntil(lambda: rows(store, conv)[-1:] == [("assistant", "AB", "streaming")], timeout=2000)
    assert chat.controller.busy
    chat.wait_reply_finished()
    assert rows(store, conv)[-1] == ("assistant", "ABC", "complete")


def test_stop_records_a_stopped_reply(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(slow(*(f"tok{i} " for i in range(200))))
    chat.type_and_send("go on")
    qtbot.waitUntil(lambda: "tok3" in shown_answer(chat.reply()), timeout=WAIT_MS)
    chat.controller.stop()
    reply = chat.wait_reply_finished()
    store, conv = store_of(chat), current_id(chat)
    assert rows(store, conv) == [("user", "go on", "complete"), ("assistant", reply.answer_text(), "stopped")]
    assert store.turns(conv)[0].outcome == "stopped"


def test_a_malformed_turn_keeps_only_the_question_and_try_again_answers_it(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(MALFORMED_REPLY, MALFORMED_REPLY, "Fine now.")
    chat.type_and_send("hi")
    qtbot.waitUntil(lambda: chat.window.conversation.banner is not None, timeout=WAIT_MS)
    chat.wait_idle()
    store, conv = store_of(chat), current_id(chat)
    assert rows(store, conv) == [("user", "hi", "complete")]
    assert store.turns(conv)[0].outcome == "malformed"
    banner = chat.window.conversation.banner
    assert banner is not None and banner.button is not None
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().finished, timeout=WAIT_MS)
    chat.wait_idle()
    assert rows(store, conv) == [("user", "hi", "complete"), ("assistant", "Fine now.", "complete")]
    assert [(t.kind, t.outcome) for t in store.turns(conv)] == [("send", "malformed"), ("regenerate", "completed")]


class BreaksMidway(PlainBackend):
    """Streams some text, then fails like a dropped connection; answers normally afterwards."""

    name = "breaks"

    def __init__(self) -> None:
        self.calls = 0

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.calls += 1
        yield Piece("Half an ans")
        if self.calls == 1:
            raise BackendError("connection reset")

    def close(self) -> None:
        pass


def test_a_reply_cut_off_by_an_error_stays_on_screen_as_stored(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(backend=BreaksMidway())
    chat.type_and_send("question")
    qtbot.waitUntil(lambda: chat.window.conversation.banner is not None and not chat.controller.busy, timeout=WAIT_MS)
    store, conv = store_of(chat), current_id(chat)
    assert rows(store, conv) == [("user", "question", "complete"), ("assistant", "Half an ans", "error")]
    assert shown(chat) == [("user", "question"), ("assistant", "Half an ans")]
    assert chat.reply().status.text() == "Ended with an error"
    banner = chat.window.conversation.banner
    assert banner is not None and banner.button is not None
    assert chat.window.conversation.messages()[-1] is banner
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)  # Try again: a new version of the answer
    qtbot.waitUntil(
        lambda: not chat.controller.busy and chat.reply().finished and chat.reply().nav.isVisible(), timeout=WAIT_MS
    )
    assert chat.reply().nav.position == (2, 2)


def test_the_first_exchange_names_the_conversation_without_spending_a_scripted_reply(
    make_chat: MakeChat, qtbot: QtBot
) -> None:
    backend = ScriptedBackend.from_texts("Paris.", "Lyon.")
    chat = make_chat(backend=backend)
    send_and_wait(chat, "## What is the **capital** of France, by the way?")
    store, conv = store_of(chat), current_id(chat)
    # One title rule (engine.history.store.title_from_text): six words, Markdown dropped; the
    # titler, with no grammar, leaves it alone.
    qtbot.waitUntil(lambda: not chat.controller.busy, timeout=WAIT_MS)

    # The title moment (TITLE_AFTER_IDLE_S after the reply) comes and goes: it must not rename.
    def title_moment_passed() -> bool:
        controller = chat.controller
        task = controller._titler._task  # pyright: ignore[reportPrivateUsage]
        return controller._title_due is None and (task is None or task.done())  # pyright: ignore[reportPrivateUsage]

    qtbot.waitUntil(title_moment_passed, timeout=WAIT_MS)
    assert store.conversation(conv).title == "What is the capital of France…"
    assert len(backend.requests) == 1  # no grammar: the title did not ask the model
    qtbot.waitUntil(lambda: first_row(sidebar_of(chat)).text() == "What is the capital of France…", timeout=WAIT_MS)
    assert send_and_wait(chat, "And of Italy?").answer_text() == "Lyon."


class GrammarScripted(ScriptedBackend):
    """A scripted backend that claims grammar support, so titles are asked of it."""

    capabilities = Capabilities(grammar=True)


def test_a_grammar_backend_writes_the_title_on_the_worker(make_chat: MakeChat, qtbot: QtBot) -> None:
    backend = GrammarScripted.from_texts("Paris.", '{"title": "French capital"}')
    chat = make_chat(backend=backend)
    send_and_wait(chat, "What is the capital of France?")
    store, conv = store_of(chat), current_id(chat)
    qtbot.waitUntil(lambda: store.conversation(conv).title == "French capital", timeout=WAIT_MS)
    assert backend.requests[1].grammar is not None  # constrained to {"title": ...}
    qtbot.waitUntil(lambda: first_row(sidebar_of(chat)).text() == "French capital", timeout=WAIT_MS)


def test_new_conversation_is_stored_only_once_it_has_a_message(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("one", "two")
    send_and_wait(chat, "first")
    first = current_id(chat)
    chat.window.activateWindow()
    qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not chat.window.conversation.messages(), timeout=WAIT_MS)
    assert chat.controller.history is not None and chat.controller.history.conversation_id is None
    assert [c.id for c in store_of(chat).conversations()] == [first]
    send_and_wait(chat, "second")
    assert len(store_of(chat).conversations()) == 2 and current_id(chat) != first


def test_without_a_usable_database_the_window_still_chats(make_chat: MakeChat, qtbot: QtBot, tmp_path: Path) -> None:
    broken = tmp_path / "history.sqlite3"
    broken.write_bytes(b"this is not a database " * 10)
    session, notice = open_history(broken)
    assert not session.saved and notice.startswith("History is off for this session")
    session.close()
    chat = make_chat("Still here.", history=False, options=WindowOptions(history_notice=notice))  # as the app shows it
    window = chat.window
    assert window.notice.isVisible() and "\n" not in window.notice.text()
    assert send_and_wait(chat, "anyone?").answer_text() == "Still here."
    assert branch_messages(chat.controller.session.path())[-1] == {"role": "assistant", "content": "Still here."}


def test_a_read_only_history_folder_keeps_the_chat_in_memory_and_says_so_once(
    make_chat: MakeChat, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import tempfile

    folder = ember_paths().ensure().data_dir

    def read_only(*args: object, **kwargs: object) -> object:  # what a read-only mount answers (root too)
        raise OSError(errno.EROFS, "Read-only file system", str(kwargs.get("dir")))

    with monkeypatch.context() as patch:
        patch.setattr(tempfile, "TemporaryFile", read_only)
        session, notice = open_history()
    assert not session.saved
    assert notice == (
        f"History is read-only ({folder}: Read-only file system): this chat is kept in memory and will not be saved."
    )
    chat = make_chat("Kept.", "Still kept.", session=session, options=WindowOptions(history_notice=notice))
    window = chat.window  # as run_session builds it
    assert window.notice.isVisible() and window.notice.text() == notice
    assert [w for w in window.findChildren(QLabel) if w.text() == notice] == [window.notice.label]  # said once
    window.model_ready(ModelInfo("SmolLM2", "CPU"))  # a model loading later does not take it away
    assert send_and_wait(chat, "first").answer_text() == "Kept."
    assert send_and_wait(chat, "second").answer_text() == "Still kept."
    texts = [m.text() for m in window.conversation.message_widgets() if isinstance(m, UserMessage)]
    assert texts == ["first", "second"]  # nothing the user typed was refused
    assert window.notice.isVisible()  # it lasts past the model's load and the replies
    assert branch_messages(chat.controller.session.path())[-1] == {"role": "assistant", "content": "Still kept."}


# -- the sidebar -------------------------------------------------------------------------


def test_sidebar_lists_newest_first_and_search_filters_it(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    store = store_of(chat)
    apples = add_conversation(store, "Apples", ("tell me about apples", "They are red or green."))
    bananas = add_conversation(store, "Bananas", ("and bananas?", "Bananas are yellow and curved."))
    cherries = add_conversation(store, "Cherries", ("cherries", "Small and red."))
    sidebar = sidebar_of(chat)
    refreshed(qtbot, sidebar)
    assert sidebar.list.conversation_ids() == [cherries, bananas, apples]
    sidebar.search.setText("yellow")
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [bananas], timeout=WAIT_MS)
    item = sidebar.list.item(0)
    assert any(match and text.lower() == "yellow" for text, match in item.data(SNIPPET_ROLE))
    sidebar.search.setText("red")
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [cherries, apples], timeout=WAIT_MS)
    sidebar.search.clear()
    qtbot.waitUntil(lambda: len(sidebar.list.conversation_ids()) == 3, timeout=WAIT_MS)


def test_relative_times() -> None:
    now = 1_700_000_000.0
    assert relative_time(now - 10, now) == "now"
    assert relative_time(now - 5 * 60, now) == "5 min"
    assert relative_time(now - 400 * 24 * 3600, now).endswith(str(2022))


def test_clicking_a_conversation_loads_its_active_branch(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("Continuing.")
    store = store_of(chat)
    conv = store.create_conversation(title="Saved").id
    question = store.add_message(conv, "user", "What is 2+2?", parent_id=None)
    store.add_message(
        conv,
        "assistant",
        "It is **4**.",
        parent_id=question,
        thinking="2 and 2 make 4",
        status="stopped",
        model="Old model",
    )
    sidebar = sidebar_of(chat)
    refreshed(qtbot, sidebar)
    click_item(qtbot, sidebar, first_row(sidebar))
    qtbot.waitUntil(lambda: len(shown(chat)) == 2, timeout=WAIT_MS)
    assert shown(chat) == [("user", "What is 2+2?"), ("assistant", "It is **4**.")]
    reply = chat.reply()
    assert reply.thinking.isVisibleTo(reply) and not reply.thinking.expanded
    assert reply.thinking.text() == "2 and 2 make 4"
    assert reply.status.text() == "Stopped" and reply.role.text() == "Old model"
    assert sidebar.list.current_id() == conv
    send_and_wait(chat, "And 3+3?")  # the conversation goes on from its active branch
    assert [m.content for m in store.path(conv)][-2:] == ["And 3+3?", "Continuing."]


def test_a_search_hit_on_an_older_version_opens_that_version(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    store = store_of(chat)
    conv = store.create_conversation(title="Versions").id
    question = store.add_message(conv, "user", "Name a fruit", parent_id=None)
    old = store.add_message(conv, "assistant", "A kumquat.", parent_id=question)
    store.add_message(conv, "assistant", "An apple.", parent_id=question)
    sidebar = sidebar_of(chat)
    sidebar.search.setText("kumquat")
    qtbot.waitUntil(lambda: sidebar.list.count() == 1, timeout=WAIT_MS)
    assert sidebar.list.item(0).data(MESSAGE_ROLE) == old
    click_item(qtbot, sidebar, sidebar.list.item(0))
    qtbot.waitUntil(lambda: shown(chat) == [("user", "Name a fruit"), ("assistant", "A kumquat.")], timeout=WAIT_MS)


def test_delete_asks_first_and_undo_restores(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    store = store_of(chat)
    keep = add_conversation(store, "Keep", ("a", "b"))
    doomed = add_conversation(store, "Doomed", ("c", "d"))
    sidebar = sidebar_of(chat)
    refreshed(qtbot, sidebar)
    asked: list[str] = []
    sidebar.confirm_delete = lambda title: asked.append(title) is None and len(asked) > 1  # no, then yes
    sidebar.list.setCurrentItem(first_row(sidebar))
    sidebar.list.setFocus()
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Delete)
    assert asked == ["Doomed"] and sidebar.list.conversation_ids() == [doomed, keep]
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Delete)
    assert sidebar.list.conversation_ids() == [keep]  # at once; the write follows on the history thread
    assert sidebar.deleting is not None
    qtbot.waitUntil(sidebar.deleting.done, timeout=WAIT_MS)
    assert [c.id for c in store.conversations(deleted=True)] == [doomed]
    assert sidebar.undo_bar.isVisible() and sidebar.undo_bar.action_button.text() == "Undo"
    qtbot.mouseClick(sidebar.undo_bar.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [doomed, keep], timeout=WAIT_MS)
    assert not sidebar.undo_bar.isVisible() and store.conversations(deleted=True) == []


def test_a_delete_that_cannot_be_written_puts_the_row_back(
    make_chat: MakeChat, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = make_chat()
    kept = add_conversation(store_of(chat), "Kept", ("a", "b"))
    sidebar = sidebar_of(chat)
    refreshed(qtbot, sidebar)

    def locked(_conversation_id: int) -> None:
        raise HistoryError("history database error: database is locked")

    monkeypatch.setattr(sidebar.session, "delete", locked)
    sidebar.confirm_delete = lambda _title: True
    assert sidebar.delete(kept) and sidebar.list.conversation_ids() == []
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [kept], timeout=WAIT_MS)
    assert "Couldn't delete it: history database error: database is locked" in sidebar.undo_bar.label.text()


def test_deleting_the_open_conversation_starts_a_fresh_one(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("answer")
    send_and_wait(chat, "question")
    sidebar = sidebar_of(chat)
    sidebar.confirm_delete = lambda _title: True
    assert sidebar.delete(current_id(chat))
    qtbot.waitUntil(lambda: not chat.window.conversation.messages(), timeout=WAIT_MS)
    assert chat.controller.history is not None and chat.controller.history.conversation_id is None


def test_renaming_in_place_keeps_the_title_over_automatic_ones(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("ok")
    send_and_wait(chat, "some question")
    conv = current_id(chat)
    sidebar = sidebar_of(chat)
    sidebar.list.editItem(first_row(sidebar))
    editor = sidebar.list.viewport().findChild(QLineEdit)
    assert editor is not None and sidebar.list.editing
    editor.setText("My title")
    sidebar.refresh()  # e.g. a title arriving meanwhile: it waits for the editor
    assert sidebar.list.editing
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # the view commits it a moment later
    store = store_of(chat)
    qtbot.waitUntil(lambda: store.conversation(conv).title == "My title", timeout=WAIT_MS)
    assert not store.conversation(conv).title_is_auto
    qtbot.waitUntil(lambda: not sidebar.list.editing and first_row(sidebar).text() == "My title", timeout=WAIT_MS)
    assert sidebar.list.current_id() == conv


# -- versions ----------------------------------------------------------------------------


def test_regenerate_makes_a_second_version_and_the_navigator_switches(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("First answer.", "Second answer.")
    first = send_and_wait(chat, "question")
    assert first.regenerate_button.isVisible() and not first.nav.isVisible()
    qtbot.mouseClick(first.regenerate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: (
            chat.window.last_reply() is not None
            and chat.reply().answer_text() == "Second answer."
            and chat.reply().finished
        ),
        timeout=WAIT_MS,
    )
    chat.wait_idle()
    reply = chat.reply()
    assert shown(chat) == [("user", "question"), ("assistant", "Second answer.")]
    assert reply.nav.isVisible() and reply.nav.position == (2, 2)
    qtbot.mouseClick(reply.nav.previous, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown(chat) == [("user", "question"), ("assistant", "First answer.")], timeout=WAIT_MS)
    assert chat.reply().nav.position == (1, 2)
    assert branch_messages(chat.controller.session.path())[-1]["content"] == "First answer."
    qtbot.mouseClick(chat.reply().nav.next, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown(chat)[-1] == ("assistant", "Second answer."), timeout=WAIT_MS)


def test_a_failed_regenerate_shows_the_old_answer_again(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("Old answer.", MALFORMED_REPLY, MALFORMED_REPLY, "Next answer.")
    first = send_and_wait(chat, "question")
    qtbot.mouseClick(first.regenerate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.window.conversation.banner is not None and not chat.controller.busy, timeout=WAIT_MS)
    # What is stored is what is shown: the old answer, then the failure under it.
    assert shown(chat) == [("user", "question"), ("assistant", "Old answer.")]
    assert chat.window.conversation.messages()[-1] is chat.window.conversation.banner
    assert chat.controller.can_retry
    send_and_wait(chat, "follow-up")
    assert [m.content for m in store_of(chat).path(current_id(chat))] == [
        "question",
        "Old answer.",
        "follow-up",
        "Next answer.",
    ]


def test_edit_branches_and_keeps_the_original_later_messages(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("a1", "a2", "a3")
    send_and_wait(chat, "q1")
    send_and_wait(chat, "q2")
    first_question = chat.window.conversation.message_widgets()[0]
    assert isinstance(first_question, UserMessage) and first_question.edit_button.isVisible()
    qtbot.mouseClick(first_question.edit_button, Qt.MouseButton.LeftButton)
    editor = first_question.editor
    assert editor is not None
    editor.edit.setPlainText("q1 edited")
    qtbot.mouseClick(editor.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown(chat) == [("user", "q1 edited"), ("assistant", "a3")], timeout=WAIT_MS)
    chat.wait_idle()
    edited = chat.window.conversation.message_widgets()[0]
    assert isinstance(edited, UserMessage) and edited.nav.position == (2, 2)
    store = store_of(chat)
    assert sorted(m.content for m in store.messages(current_id(chat))) == ["a1", "a2", "a3", "q1", "q1 edited", "q2"]
    qtbot.mouseClick(edited.nav.previous, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: shown(chat) == [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")],
        timeout=WAIT_MS,
    )


def test_cancelling_an_edit_puts_the_message_back(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("a1")
    send_and_wait(chat, "q1")
    question = chat.window.conversation.message_widgets()[0]
    assert isinstance(question, UserMessage)
    editor = question.start_edit()
    qtbot.keyClick(editor.edit, Qt.Key.Key_Escape)
    assert question.editor is None and question.edit_button.isVisible() and question.text() == "q1"
    assert len(store_of(chat).messages(current_id(chat))) == 2


# -- export and import -------------------------------------------------------------------


def test_export_and_import_round_trip(make_chat: MakeChat, qtbot: QtBot, tmp_path: Path) -> None:
    chat = make_chat(["<think>", "hmm", "</think>", "First."], "Second.")
    first = send_and_wait(chat, "one")
    qtbot.mouseClick(first.regenerate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: chat.window.last_reply() is not None and chat.reply().answer_text() == "Second.", timeout=WAIT_MS
    )
    chat.wait_idle()
    conv = current_id(chat)
    sidebar = sidebar_of(chat)
    assert finished(qtbot, sidebar.files.export_conversation(conv, tmp_path / "c.md", "md"))
    markdown = (tmp_path / "c.md").read_text(encoding="utf-8")
    assert "## You\n\none" in markdown and "Second." in markdown
    assert finished(qtbot, sidebar.files.export_conversation(conv, tmp_path / "c.json", "json"))
    imported = finished(qtbot, sidebar.files.import_conversation(tmp_path / "c.json"))
    assert imported is not None and imported != conv
    old_ids = {m.id for m in store_of(chat).messages(conv)}  # the screens look alike: wait for the new widgets
    qtbot.waitUntil(lambda: current_id(chat) == imported and chat.reply().message_id not in old_ids, timeout=WAIT_MS)
    assert shown(chat) == [("user", "one"), ("assistant", "Second.")]
    reply = chat.reply()
    assert reply.nav.position == (2, 2)  # both versions came along
    qtbot.mouseClick(reply.nav.previous, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown(chat)[-1] == ("assistant", "First."), timeout=WAIT_MS)
    assert chat.reply().thinking.text() == "hmm"
    assert sorted(sidebar.list.conversation_ids()) == sorted([conv, imported])


def test_importing_a_bad_file_says_why(make_chat: MakeChat, qtbot: QtBot, tmp_path: Path) -> None:
    chat = make_chat()
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}', encoding="utf-8")
    sidebar = sidebar_of(chat)
    assert finished(qtbot, sidebar.files.import_conversation(bad)) is None
    assert sidebar.undo_bar.isVisible() and "not an Ember conversation" in sidebar.undo_bar.label.text()
    assert store_of(chat).conversations() == []


def test_the_history_file_is_where_the_paths_say(make_chat: MakeChat) -> None:
    chat = make_chat()
    assert store_of(chat).db_path == ember_paths().history_db


def test_a_search_snippet_keeps_its_matched_word_whole_in_a_narrow_sidebar(qtbot: QtBot) -> None:
    font = QFont()
    bold = QFont(font)
    bold.setBold(True)
    plain_m, bold_m = QFontMetrics(font), QFontMetrics(bold)
    parts = [
        ("…across twenty seven countries in Latin America; it is also home to numerous ", False),
        ("museums", True),
        (" worldwide and more words after it", False),
    ]
    room = bold_m.horizontalAdvance("museums") + plain_m.horizontalAdvance("…home to numerous ") + 4
    runs = snippet_runs(parts, plain_m, bold_m, room)
    assert ("museums", True) in runs  # the match is drawn whole, not "muse…"
    lead = runs[0][0]
    assert lead.startswith("…") and lead.endswith("numerous ") and "Latin" not in lead  # context gave way
    assert sum((bold_m if m else plain_m).horizontalAdvance(t) for t, m in runs) <= room
    # With room to spare nothing is dropped before the match; the end is elided.
    wide = snippet_runs(parts, plain_m, bold_m, plain_m.horizontalAdvance(parts[0][0]) + 200)
    assert wide[0] == parts[0] and wide[1] == parts[1]
