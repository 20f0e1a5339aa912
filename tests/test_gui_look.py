"""The look: empty state, keyboard-only use, text size, theme switch, accessible names, code colours."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)
from pytestqt.qtbot import QtBot

from desktop.qt.answer.markdown_view import CodeBlock
from desktop.qt.chat.empty_state import EXAMPLE_PROMPTS
from desktop.qt.chat.format_picker import ReplyFormatButton
from desktop.qt.chat.hover_actions import HoverReveal
from desktop.qt.chat.message_view import AssistantMessage, TurnBanner
from desktop.qt.look.appearance import ThemeManager, load_appearance
from desktop.qt.look.theme import DARK, LIGHT
from tests.tools.screenshots import STATES

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]
CODE_REPLY = "Here:\n\n```python\ndef f(x):\n    return x + 1\n```\n\nDone."


@pytest.fixture(autouse=True)
def default_appearance(qapp: QApplication) -> Iterator[None]:
    """Theme and text size are the application's: put them back for the tests after these."""
    yield
    theme = ThemeManager.current()
    if theme is not None:
        theme.set_mode("system")
        theme.reset_zoom()


def slow(text: str, n: int = 40, delay_ms: int = 40) -> list[object]:
    return [{"text": f"{text} ", "delay_ms": delay_ms} for _ in range(n)]


def activate(chat: Chat) -> None:
    chat.window.activateWindow()
    chat.qtbot.waitUntil(lambda: QApplication.activeWindow() is chat.window, timeout=WAIT_MS)


def focus_by_tab(qtbot: QtBot, target: QWidget, limit: int = 80) -> None:
    """Press Tab until `target` has the keyboard focus (fails if it is never reached)."""
    for _ in range(limit):
        if target.hasFocus():
            return
        widget = QApplication.focusWidget()
        assert widget is not None, "nothing has the keyboard focus"
        qtbot.keyClick(widget, Qt.Key.Key_Tab)
    assert target.hasFocus(), f"{target.accessibleName()!r} is not reachable with Tab"


def test_example_prompts_fill_the_composer_without_sending(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("unused")
    empty = chat.window.conversation.empty_state
    qtbot.waitUntil(
        lambda: "Scripted" in empty.model_line.text() or "scripted" in empty.model_line.text(), timeout=WAIT_MS
    )
    assert empty.isVisible() and len(empty.prompt_buttons) == 3
    qtbot.mouseClick(empty.prompt_buttons[1], Qt.MouseButton.LeftButton)
    assert chat.window.composer.text() == EXAMPLE_PROMPTS[1]
    assert chat.window.focusWidget() is chat.window.composer.edit
    assert chat.window.conversation.messages() == []  # filled, not sent
    chat.type_and_send(chat.window.composer.text())
    chat.wait_reply_finished()
    assert not empty.isVisible()  # a conversation replaces the welcome


def test_empty_state_names_the_model_and_where_it_runs(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("unused")
    line = chat.window.conversation.empty_state.model_line
    qtbot.waitUntil(lambda: "demo" in line.text(), timeout=WAIT_MS)
    assert chat.window.header.model_label in line.text()


def test_keyboard_only_send_stop_copy_regenerate(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(slow("partial"), "Second answer.")
    window = chat.window
    edit = window.composer.edit
    activate(chat)
    assert edit.hasFocus()  # the window opens with the composer focused
    qtbot.keyClicks(edit, "hello")
    qtbot.keyClick(edit, Qt.Key.Key_Return)  # send
    qtbot.waitUntil(lambda: chat.controller.busy and "partial" in chat.reply().answer_text(), timeout=WAIT_MS)
    qtbot.keyClick(edit, Qt.Key.Key_Escape)  # stop
    reply = chat.wait_reply_finished()
    assert reply.status.text() == "Stopped"
    qtbot.waitUntil(lambda: reply.regenerate_button.isVisible(), timeout=WAIT_MS)

    QGuiApplication.clipboard().clear()
    focus_by_tab(qtbot, reply.copy_button)
    assert reply.reveal.revealed  # the newest answer's actions show (others on hover or focus)
    qtbot.keyClick(reply.copy_button, Qt.Key.Key_Space)  # copy
    assert QGuiApplication.clipboard().text() == reply.answer_text()
    assert reply.answer_text().startswith("partial")

    focus_by_tab(qtbot, reply.regenerate_button)
    qtbot.keyClick(reply.regenerate_button, Qt.Key.Key_Space)  # regenerate
    qtbot.waitUntil(lambda: chat.reply() is not reply and chat.reply().finished, timeout=WAIT_MS)
    chat.wait_idle()
    assert chat.reply().answer_text() == "Second answer."


def test_messages_and_the_thinking_pane_are_reachable_by_keyboard(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat([{"text": "<think>"}, "mulling", {"text": "</think>"}, "The answer."])
    chat.type_and_send("q")
    reply = chat.wait_reply_finished()
    question = chat.window.conversation.message_widgets()[0]
    bubble = question.findChild(QWidget, "UserBubble")
    assert bubble is not None
    activate(chat)
    focus_by_tab(qtbot, bubble)
    focus_by_tab(qtbot, reply.thinking.header)
    assert not reply.thinking.expanded
    qtbot.keyClick(reply.thinking.header, Qt.Key.Key_Space)
    assert reply.thinking.expanded and reply.thinking.body.isVisible()


def test_text_size_shortcuts_change_the_font_and_are_remembered(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(CODE_REPLY)
    chat.type_and_send("code please")
    reply = chat.wait_reply_finished()
    code = reply.answer.part_widgets()[1]
    assert isinstance(code, CodeBlock)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    activate(chat)
    body = code.findChild(QPlainTextEdit)
    assert body is not None
    before, code_before = app.font().pointSizeF(), body.font().pointSizeF()
    qtbot.keyClick(chat.window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(chat.window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert app.font().pointSizeF() > before
    assert body.font().pointSizeF() > code_before  # code follows the text size
    assert load_appearance().text_scale == 1.25  # two steps up from 1.0, saved
    assert ThemeManager(app).body_pt == chat.window.theme.body_pt  # a new start comes back at this size
    qtbot.keyClick(chat.window, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert load_appearance().text_scale == 1.1


def test_theme_switch_recolours_the_window_and_is_remembered(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(CODE_REPLY)
    chat.type_and_send("code please")
    reply = chat.wait_reply_finished()
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    theme = chat.window.theme
    theme.set_mode("light")
    assert app.palette().color(QPalette.ColorRole.Window).name() == LIGHT.window
    activate(chat)
    chat.window.header.mode_actions["dark"].trigger()  # the Appearance menu
    assert theme.palette is DARK
    assert app.palette().color(QPalette.ColorRole.Window).name() == DARK.window
    assert DARK.surface in app.styleSheet() and LIGHT.surface not in app.styleSheet()
    assert load_appearance().mode == "dark"
    text = reply.answer.part_widgets()[0]
    assert isinstance(text, QTextEdit)
    assert DARK.text in text.document().defaultStyleSheet()  # rendered Markdown follows too
    qtbot.keyClick(chat.window, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert theme.palette is LIGHT


def test_code_blocks_are_highlighted_once_settled(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(CODE_REPLY)
    chat.type_and_send("code please")
    code = chat.wait_reply_finished().answer.part_widgets()[1]
    assert isinstance(code, CodeBlock)
    qtbot.waitUntil(lambda: code.highlighted, timeout=WAIT_MS)
    body = code.findChild(QPlainTextEdit)
    assert body is not None
    keyword = chat.window.theme.palette.syntax.keyword

    def def_is_a_keyword() -> None:  # the highlighter paints on the next turn of the event loop
        formats = body.document().firstBlock().layout().formats()
        assert any(f.format.foreground().color().name() == keyword for f in formats)

    qtbot.waitUntil(def_is_a_keyword, timeout=WAIT_MS)


def test_reply_format_lives_in_the_composer_options_not_the_header(make_chat: MakeChat) -> None:
    chat = make_chat("x")
    assert chat.window.header.findChild(ReplyFormatButton) is None
    titles = [a.text() for a in chat.window.composer.options_menu.actions()]
    assert "Reply format: Plain text" in titles
    button = chat.window.composer.findChild(ReplyFormatButton)
    assert button is not None and button.isHidden()  # a chip by Send only while the format is not text


INTERACTIVE = (QAbstractButton, QLineEdit, QPlainTextEdit, QTextEdit, QComboBox, QAbstractItemView)


def unnamed(root: QWidget) -> list[str]:
    missing = []
    for widget in root.findChildren(QWidget):
        if isinstance(widget, INTERACTIVE) and widget.isVisible() and not widget.accessibleName().strip():
            parent = widget.parentWidget()
            missing.append(f"{type(widget).__name__}#{widget.objectName()} in {parent.objectName() if parent else ''}")
    return missing


def test_every_interactive_widget_has_an_accessible_name(make_chat: MakeChat, qtbot: QtBot) -> None:
    malformed = [
        {"text": "<|tool_call_start|>", "special": True},
        "[f()]",
        {"text": "<|tool_call_end|>", "special": True},
    ]
    chat = make_chat([{"text": "<think>"}, "hmm", {"text": "</think>"}, CODE_REPLY], malformed, malformed)
    assert unnamed(chat.window) == []  # the empty state
    chat.type_and_send("q1")
    reply = chat.wait_reply_finished()
    reply.thinking.set_expanded(True)
    chat.type_and_send("q2")
    qtbot.waitUntil(
        lambda: any(isinstance(w, TurnBanner) for w in chat.window.conversation.messages()), timeout=WAIT_MS
    )
    chat.wait_idle()
    assert isinstance(reply, AssistantMessage)
    assert unnamed(chat.window) == []


@pytest.mark.slow
def test_screenshots_script_renders_every_state(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.tools.screenshots", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == sorted(f"{state}.png" for state in STATES)
    for path in tmp_path.glob("*.png"):
        image = QImage(str(path))
        assert not image.isNull() and image.width() > 300 and image.height() > 300


def test_hover_actions_appear_on_focus_without_moving_anything(qtbot: QtBot) -> None:
    host = QWidget()
    qtbot.addWidget(host)
    layout = QVBoxLayout(host)
    row = QWidget(host)
    row_layout = QVBoxLayout(row)
    button = QPushButton("Copy", row)
    row_layout.addWidget(button)
    other = QLineEdit(host)
    layout.addWidget(row)
    layout.addWidget(other)
    reveal = HoverReveal(host, row, [button])
    host.show()
    host.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is host, timeout=WAIT_MS)
    host.setAttribute(Qt.WidgetAttribute.WA_UnderMouse, False)  # the pointer is elsewhere
    other.setFocus()
    geometry = button.geometry()
    assert not reveal.revealed and button.isVisible()  # laid out and focusable, just not painted
    button.setFocus()
    qtbot.waitUntil(lambda: reveal.revealed, timeout=WAIT_MS)
    assert button.geometry() == geometry
    other.setFocus()
    qtbot.waitUntil(lambda: not reveal.revealed, timeout=WAIT_MS)
    reveal.pin(True)
    assert reveal.revealed
