"""Thinking panes: collapsed by default, raw text, live header, mouse and keyboard, per message."""

from __future__ import annotations

import re
from collections.abc import Callable

from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop.qt.chat.thinking_pane import ThinkingPane, thinking_label

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]

RAW_THINKING = 'Let me check. <|tool_call_start|>[get_weather(location="Paris")]<|tool_call_end|> Done.'


def thinking_reply(thinking: str, answer: str, delay_ms: int = 0) -> list[object]:
    return [
        {"text": "<think>", "delay_ms": delay_ms},
        {"text": thinking, "delay_ms": delay_ms},
        {"text": "</think>", "delay_ms": delay_ms},
        answer,
    ]


def test_pane_is_collapsed_by_default_and_holds_the_raw_thinking(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(thinking_reply(RAW_THINKING, "It is sunny."))
    chat.type_and_send("weather?")
    reply = chat.wait_reply_finished()
    pane = reply.thinking
    assert pane.isVisible() and not pane.expanded
    assert not pane.body.isVisible()
    assert re.fullmatch(r"Thought for \d+s", pane.header_text())
    # Scaffolding inside thinking stays in the thinking pane, raw, and only there.
    assert pane.text() == RAW_THINKING
    assert reply.answer_text() == "It is sunny."


def test_pane_expands_by_mouse_and_shows_the_exact_text(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(thinking_reply("line one\n  *not markdown*\n<b>raw</b>", "ok"))
    chat.type_and_send("q")
    pane = chat.wait_reply_finished().thinking
    header = pane.header
    qtbot.mouseClick(header, Qt.MouseButton.LeftButton)
    assert pane.expanded
    body = pane.body
    assert body.isVisible()
    assert body.toPlainText() == "line one\n  *not markdown*\n<b>raw</b>"
    qtbot.mouseClick(header, Qt.MouseButton.LeftButton)
    assert not pane.expanded and not body.isVisible()


def test_pane_toggles_from_the_keyboard(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(thinking_reply("hmm", "ok"))
    chat.type_and_send("q")
    pane = chat.wait_reply_finished().thinking
    header = pane.header
    header.setFocus()
    qtbot.keyClick(header, Qt.Key.Key_Space)
    assert pane.expanded
    qtbot.keyClick(header, Qt.Key.Key_Return)
    assert not pane.expanded
    assert header.focusPolicy() & Qt.FocusPolicy.TabFocus


def test_each_message_remembers_its_own_pane_state(make_chat: MakeChat) -> None:
    chat = make_chat(thinking_reply("first thoughts", "one"), thinking_reply("second thoughts", "two"))
    chat.type_and_send("1")
    first = chat.wait_reply_finished()
    first.thinking.set_expanded(True)
    chat.type_and_send("2")
    chat.qtbot.waitUntil(lambda: chat.reply() is not first and chat.reply().finished, timeout=WAIT_MS)
    second = chat.reply()
    assert first.thinking.expanded and not second.thinking.expanded
    assert second.thinking.text() == "second thoughts"


def test_header_counts_while_thinking_streams(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(
        [{"text": "<think>"}, *({"text": f"t{i} ", "delay_ms": 20} for i in range(30)), {"text": "</think>"}, "answer"]
    )
    chat.type_and_send("q")
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().thinking.running, timeout=WAIT_MS)
    assert re.fullmatch(r"Thinking… \d+s", chat.reply().thinking.header_text())
    reply = chat.wait_reply_finished()
    assert re.fullmatch(r"Thought for \d+s", reply.thinking.header_text())


def test_a_reply_without_thinking_has_no_pane(make_chat: MakeChat) -> None:
    chat = make_chat("plain answer")
    chat.type_and_send("q")
    assert not chat.wait_reply_finished().thinking.isVisible()


def test_header_time_uses_the_clock(qtbot: QtBot) -> None:
    now = [100.0]
    pane = ThinkingPane(clock=lambda: now[0])
    qtbot.addWidget(pane)
    pane.append("a")
    now[0] = 103.4
    pane.tick()
    assert pane.header_text() == "Thinking… 3s"
    now[0] = 107.6
    pane.end()
    assert pane.header_text() == "Thought for 8s"
    assert thinking_label(0.2, running=False) == "Thought for 1s"
