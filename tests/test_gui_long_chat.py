"""Long conversations in the window: the meter counts, the divider shows, a too-long message is
refused with its draft kept, a stored 2,000-message conversation opens lazily."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from gui_helpers import WAIT_MS, Chat
from pytestqt.qtbot import QtBot

from desktop.qt.chat.conversation_view import HEAD_DIVIDER_TEXT, LAZY_BATCH, RESUME_DIVIDER_TEXT, ContextDivider
from desktop.qt.chat.message_view import UserMessage
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore
from engine.turns.context_policy import DIVIDER_TEXT, ContextPolicy

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]


def counting(*replies: str, n_ctx: int = 400) -> ScriptedBackend:
    backend = ScriptedBackend.from_texts(*replies)
    backend.n_ctx = n_ctx
    return backend


def store_of(chat: Chat) -> HistoryStore:
    assert chat.controller.history is not None
    return chat.controller.history.store


def send(chat: Chat, text: str) -> None:
    chat.type_and_send(text)
    chat.qtbot.waitUntil(
        lambda: any(
            isinstance(w, UserMessage) and w.text() == text for w in chat.window.conversation.message_widgets()
        ),
        timeout=WAIT_MS,
    )
    chat.wait_reply_finished()


def test_the_meter_counts_the_draft_as_it_is_typed(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(backend=counting("ok", n_ctx=4096))
    meter = chat.window.context_meter
    chat.window.composer.edit.setPlainText("one two three four five")
    qtbot.waitUntil(lambda: meter.meter is not None and meter.meter.draft == 5, timeout=WAIT_MS)
    assert meter.meter is not None
    used = meter.meter.used
    assert meter.text() == f"{used:,} / 4,096"
    chat.window.composer.edit.setPlainText("one two three four five six seven eight nine ten")
    qtbot.waitUntil(lambda: meter.meter is not None and meter.meter.draft == 10, timeout=WAIT_MS)
    assert meter.meter.used == used + 5


def test_the_meter_says_when_the_model_cannot_count(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("ok")  # a script with no context size declares no counting
    chat.window.composer.edit.setPlainText("hello")
    meter = chat.window.context_meter  # counted, not a fixed wait: the tooltip comes with the answer
    qtbot.waitUntil(lambda: meter.toolTip() == "The loaded model does not report token counts", timeout=WAIT_MS)
    assert meter.text() == "– / –"


def test_a_message_too_long_for_the_context_is_refused_not_stored_and_the_draft_stays(
    make_chat: MakeChat, qtbot: QtBot
) -> None:
    chat = make_chat(backend=counting("first answer", n_ctx=200))
    send(chat, "hello")
    long = "word " * 300
    chat.type_and_send(long)
    banner = lambda: chat.window.conversation.banner  # noqa: E731
    qtbot.waitUntil(lambda: banner() is not None, timeout=WAIT_MS)
    text = banner().message.text()  # type: ignore[union-attr]
    assert text.startswith("This message was not sent: this message needs 300 tokens")
    qtbot.waitUntil(lambda: chat.window.composer.text() == long.strip(), timeout=WAIT_MS)
    store = store_of(chat)
    conv = store.latest_conversation()
    assert conv is not None and [m.content for m in store.path(conv.id)] == ["hello", "first answer"]
    assert isinstance(chat.backend, ScriptedBackend) and len(chat.backend.requests) == 1
    # The meter says so too.
    meter = chat.window.context_meter
    qtbot.waitUntil(lambda: meter.meter is not None and bool(meter.meter.problem), timeout=WAIT_MS)


def _below(chat: Chat, divider: ContextDivider) -> UserMessage:
    layout = chat.window.conversation._layout  # pyright: ignore[reportPrivateUsage]
    item = layout.itemAt(layout.indexOf(divider) + 1)
    assert item is not None
    below = item.widget()
    assert isinstance(below, UserMessage)
    return below


def test_the_divider_shows_above_the_first_turn_the_model_still_sees(make_chat: MakeChat, qtbot: QtBot) -> None:
    answers = [f"answer {i} " + "filler " * 20 for i in range(8)]
    chat = make_chat(backend=counting(*answers, n_ctx=400))
    for i in range(8):
        send(chat, (f"question {i} " + "more " * 10).strip())
    view = chat.window.conversation
    divider = view.divider
    qtbot.waitUntil(divider.isVisible, timeout=WAIT_MS)
    # The divider sits right above the first question after the gap, and that question is
    # the first the backend received after the kept first exchange.
    assert isinstance(chat.backend, ScriptedBackend)
    last = chat.backend.requests[-1].messages
    assert last[1]["content"] == ("question 0 " + "more " * 10).strip()  # truncate-middle keeps the first
    assert _below(chat, divider).text() == str(last[3]["content"]).strip()
    assert divider.text() == RESUME_DIVIDER_TEXT
    # The kept first exchange is marked too: a second line right under it opens the left-out span.
    assert view.head_divider.isVisible() and view.head_divider.text() == HEAD_DIVIDER_TEXT
    assert _below(chat, view.head_divider).text() == ("question 1 " + "more " * 10).strip()


def test_a_rolling_window_has_one_divider(make_chat: MakeChat, qtbot: QtBot) -> None:
    answers = [f"answer {i} " + "filler " * 20 for i in range(8)]
    chat = make_chat(backend=counting(*answers, n_ctx=400))
    chat.controller.screen.set_policy(ContextPolicy.ROLLING)
    for i in range(8):
        send(chat, (f"question {i} " + "more " * 10).strip())
    view = chat.window.conversation
    qtbot.waitUntil(view.divider.isVisible, timeout=WAIT_MS)
    assert view.divider.text() == DIVIDER_TEXT and not view.head_divider.isVisible()
    assert isinstance(chat.backend, ScriptedBackend)
    assert _below(chat, view.divider).text() == str(chat.backend.requests[-1].messages[1]["content"]).strip()


def test_under_stop_the_full_conversation_offers_to_leave_older_messages_out(make_chat: MakeChat, qtbot: QtBot) -> None:
    answers = [f"answer {i} " + "filler " * 20 for i in range(8)]
    chat = make_chat(backend=counting(*answers, n_ctx=400))
    chat.controller.screen.set_policy(ContextPolicy.STOP)
    sent = 0
    for i in range(8):
        asked = len(chat.backend.requests)  # type: ignore[union-attr]
        chat.type_and_send((f"question {i} " + "more " * 10).strip())
        # Answered (a request reached the model) or refused (a banner): the send was handled.
        qtbot.waitUntil(
            lambda a=asked: (
                len(chat.backend.requests) > a  # type: ignore[union-attr]
                or chat.window.conversation.banner is not None
            ),
            timeout=WAIT_MS,
        )
        qtbot.waitUntil(lambda: not chat.controller.busy, timeout=WAIT_MS)
        if chat.window.conversation.banner is not None:
            break
        sent += 1
    banner = chat.window.conversation.banner
    assert banner is not None and sent >= 2
    assert "reached the model's context limit" in banner.message.text() and banner.button is not None
    draft = chat.window.composer.text()
    assert draft.startswith("question")
    assert isinstance(chat.backend, ScriptedBackend)
    asked = len(chat.backend.requests)
    banner.button.click()  # Leave older messages out: the draft is sent under truncate-middle
    qtbot.waitUntil(lambda: len(chat.backend.requests) == asked + 1, timeout=WAIT_MS)  # type: ignore[union-attr]
    chat.wait_idle()
    assert chat.window.composer.text() == ""
    assert chat.controller.screen.policy is ContextPolicy.TRUNCATE_MIDDLE
    conv = store_of(chat).latest_conversation()
    assert conv is not None and conv.settings["context_policy"] == "truncate-middle"


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_long_stored_conversation_opens_lazily_and_builds_older_messages_on_the_way_up(
    make_chat: MakeChat, qtbot: QtBot
) -> None:
    chat = make_chat("ok")
    store = store_of(chat)
    conv = store.create_conversation(title="long")
    parent = None
    for i in range(1000):
        parent = store.add_message(conv.id, "user", f"q{i}\n" + "a line of the question\n" * 3, parent_id=parent)
        parent = store.add_message(conv.id, "assistant", f"a{i}\n\n" + "a paragraph. " * 30, parent_id=parent)
    view = chat.window.conversation
    opening = asyncio.ensure_future(chat.controller.open_conversation(conv.id))
    qtbot.waitUntil(opening.done, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: view.verticalScrollBar().maximum() > 1000, timeout=WAIT_MS)
    # Lazily: one batch, or a second while the view fills (a loaded machine may read the scroll
    # range before the first batch's layout settles); never the whole conversation.
    built = len(view.message_widgets())
    assert built in (LAZY_BATCH, 2 * LAZY_BATCH) and view.backlog_count == 2000 - built
    widgets = view.message_widgets()
    assert isinstance(widgets[-2], UserMessage) and widgets[-2].text().startswith("q999\n")
    first = widgets[0]
    view.verticalScrollBar().setValue(0)  # the reader scrolls to the top: the next batch is built
    qtbot.waitUntil(lambda: len(view.message_widgets()) >= built + LAZY_BATCH, timeout=WAIT_MS)
    now = view.message_widgets()
    assert now[len(now) - built] is first  # the older batch went above what was there
    assert isinstance(now[0], UserMessage)
    assert now[0].text().startswith(f"q{1000 - len(now) // 2}\n")  # type: ignore[union-attr]
    # A new turn in this conversation still tags the widgets with their stored ids.
    send(chat, "one more")
    assert view.backlog_count <= 2000 - 2 * LAZY_BATCH


def test_a_conversation_stuck_on_a_too_long_message_opens_and_continues(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(backend=counting("Back on track.", n_ctx=400))
    store = store_of(chat)
    conv = store.create_conversation(title="stuck")
    first = store.add_message(conv.id, "user", "hello", parent_id=None)
    answer = store.add_message(conv.id, "assistant", "hi", parent_id=first)
    store.add_message(conv.id, "user", "word " * 500, parent_id=answer)  # stored before policies existed
    opening = asyncio.ensure_future(chat.controller.open_conversation(conv.id))
    qtbot.waitUntil(opening.done, timeout=WAIT_MS)
    assert isinstance(chat.backend, ScriptedBackend)
    chat.type_and_send("shorter question")
    qtbot.waitUntil(lambda: len(chat.backend.requests) == 1, timeout=WAIT_MS)  # type: ignore[union-attr]
    chat.wait_idle()
    qtbot.waitUntil(lambda: chat.reply().answer_text() == "Back on track.", timeout=WAIT_MS)
    sent = chat.backend.requests[-1].messages
    assert all("word word" not in str(m["content"]) for m in sent)
    assert sent[-1] == {"role": "user", "content": "shorter question"}
