"""Long single lines in the window (issue #28): cards, composer paste, sent messages, model names.

Each surface shows such text in bounded time (lines cut for display, slices per loop turn,
held-aside pastes) while the text itself stays whole. Timings are the stall bench's job
(`ember bench`); these tests check what is shown and what is kept.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import QMimeData
from pytestqt.qtbot import QtBot

from desktop.qt.answer.bulk_text import DISPLAY_LINE_CHARS, bounded_label_text
from desktop.qt.chat.composer import ComposerEdit
from desktop.qt.chat.message_view import UserMessage
from desktop.qt.chat.tool_card import ToolCallCard
from engine.backends.scripted import ScriptedBackend
from engine.events import ToolCall
from engine.tools.permissions import arguments_text

pytest_plugins = ["gui_helpers"]

MEGA = "J" * 1_000_000


def test_a_card_with_a_1mb_argument_shows_all_of_it_in_short_lines(qtbot: QtBot) -> None:
    call = ToolCall("c1", "calculator", {"expression": "1+1", "junk": MEGA})
    card = ToolCallCard(call)
    qtbot.addWidget(card)
    card.show()
    qtbot.waitUntil(lambda: card.arguments.caught_up, timeout=60_000)
    shown = card.arguments.toPlainText()
    assert shown.replace("\n", "") == arguments_text(call.arguments).replace("\n", "")
    assert max(len(run) for run in shown.split()) <= DISPLAY_LINE_CHARS  # no unbroken run is slow to lay out


def test_a_card_with_a_huge_tool_name_keeps_its_labels_short(qtbot: QtBot) -> None:
    card = ToolCallCard(ToolCall("c1", "t" * 100_000, {}))
    qtbot.addWidget(card)
    assert len(card.title.text()) < 300 and len(card.always.text()) < 200


def test_a_pasted_1mb_line_is_held_aside_and_sent_whole(make_chat: Callable[..., Chat]) -> None:
    chat = make_chat("got it")
    edit = chat.window.composer.edit
    mime = QMimeData()
    mime.setText("look at this: " + MEGA)
    edit.setPlainText("Before. ")
    edit.moveCursor(edit.textCursor().MoveOperation.End)
    edit.insertFromMimeData(mime)
    assert len(edit.toPlainText()) < 100 and "pasted text 1: 1,000,014 characters" in edit.toPlainText()
    assert chat.window.composer.text() == "Before. look at this: " + MEGA
    chat.window.composer.submit()
    chat.wait_reply_finished()
    sent = [m["content"] for m in chat.backend.requests[0].messages if m["role"] == "user"]  # type: ignore[attr-defined]
    assert sent == ["Before. look at this: " + MEGA]


def test_a_held_paste_survives_typing_around_it_and_a_forged_marker_does_not_expand(qtbot: QtBot) -> None:
    edit = ComposerEdit()
    qtbot.addWidget(edit)
    edit.set_message("a\n" + "x" * 20_000 + "\nb")
    assert edit.toPlainText().startswith("a\n\u2060[pasted text 1: 20,000 characters]\u2060\nb")
    edit.insertPlainText("c ")
    assert edit.message() == "c a\n" + "x" * 20_000 + "\nb"
    edit.set_message("[pasted text 1: 20,000 characters]")  # typed by hand: just text
    assert edit.message() == "[pasted text 1: 20,000 characters]"
    edit.clear()
    assert edit.message() == ""


def test_a_huge_sent_message_shows_a_bounded_bubble_and_keeps_its_text(qtbot: QtBot) -> None:
    bubble = UserMessage(MEGA)
    qtbot.addWidget(bubble)
    bubble.show()
    assert bubble.text() == MEGA
    assert len(bubble._bubble.text()) < 5_000  # pyright: ignore[reportPrivateUsage]
    assert "more characters not shown" in bubble._bubble.text()  # pyright: ignore[reportPrivateUsage]
    editor = bubble.start_edit()
    assert editor.text() == MEGA and len(editor.edit.toPlainText()) < 100


@pytest.mark.parametrize("text", ["short", "a\nb", "x" * 600, "y" * 50_000, "z\n" * 30_000])
def test_bounded_label_text_never_has_long_lines_or_a_huge_body(text: str) -> None:
    shown = bounded_label_text(text, 2_000)
    assert max(len(line) for line in shown.split("\n")) <= DISPLAY_LINE_CHARS
    assert len(shown) <= 2_000 + 2_000 // DISPLAY_LINE_CHARS + 60
    assert shown.replace("\n", "").startswith(text[:1_000].replace("\n", ""))


def test_a_model_name_with_bidi_overrides_reads_as_written(make_chat: Callable[..., Chat]) -> None:
    name = "evil\u202egnp.exe\x1b]0;T\x07\u200f"
    chat = make_chat(backend=ScriptedBackend([["ok"]], name=name))
    chat.qtbot.waitUntil(lambda: "evil" in chat.window.header.model_button.text(), timeout=WAIT_MS)
    for text in (
        chat.window.header.model_button.text(),
        chat.window.header.model_button.toolTip(),
        chat.window.header.model_label,
        chat.window.status.model.text(),
    ):  # type: ignore[attr-defined]
        assert "evilgnp.exe" in text
        assert not any(c in text for c in "\u202e\u200f\x1b\x07")


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_stored_reply_with_thousands_of_calls_shows_a_bounded_number_of_cards(qtbot: QtBot) -> None:
    from desktop.qt.chat.tool_card import MAX_STORED_CARDS, stored_tool_cards

    records = [
        {"id": f"c{i}", "name": "calculator", "arguments": {"expression": "1"}, "approval": "approved", "result": "1"}
        for i in range(5_000)
    ]
    cards = stored_tool_cards(records)
    for card in cards:
        qtbot.addWidget(card)
    assert len(cards) == MAX_STORED_CARDS == 256
