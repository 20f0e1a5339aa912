"""The window's feedback, memory and shortcuts: waiting dots, prompt progress, Stopping…, live speed,
the thinking pane, one token count, a calm header, window memory, Ctrl+Q and the shortcuts sheet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QImage, QTextDocument
from PySide6.QtWidgets import QAbstractButton, QLabel, QMainWindow, QSplitter, QWidget
from pytestqt.qtbot import QtBot

from desktop.qt.answer.markdown_view import TextSegment
from desktop.qt.chat.thinking_pane import ThinkingPane
from desktop.qt.frame.shortcuts_sheet import ShortcutsSheet
from desktop.qt.frame.window_state import WindowState
from desktop.qt.window import MainWindow
from engine.backends.base import Request
from engine.backends.scripted import ScriptedBackend
from engine.events import PromptProgress
from engine.runtime import Engine
from engine.session.session import ChatSession

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]


class ReadingEngine(Engine):
    """An engine whose turns first report reading a long prompt (as the decode loop does), then answer."""

    gate: asyncio.Event

    async def run_turn(self, request: Request, cancel: Any = None, **kwargs: Any) -> AsyncGenerator[Any, None]:  # type: ignore[override]
        yield PromptProgress(720, 1600)
        await self.gate.wait()
        async for event in super().run_turn(request, cancel, **kwargs):
            yield event


def test_the_reply_shows_prompt_reading_progress_then_the_answer(qtbot: QtBot, make_chat: MakeChat) -> None:
    chat = make_chat("Read it all.")
    engine = ReadingEngine(chat.backend)
    engine.gate = asyncio.Event()
    chat.controller.engine = engine
    chat.type_and_send("summarise this long report")
    try:
        qtbot.waitUntil(
            lambda: (
                chat.window.last_reply() is not None and chat.reply().waiting.text() == "Reading 1,600 tokens… 45 %"
            ),
            timeout=WAIT_MS,
        )
        qtbot.waitUntil(lambda: chat.reply().waiting.isVisible(), timeout=WAIT_MS)
    finally:
        engine.gate.set()
    reply = chat.wait_reply_finished()
    assert reply.answer_text() == "Read it all." and not reply.waiting.isVisible()
    engine.close_sync()


def test_waiting_dots_until_the_first_word_and_stopping_at_once(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat([{"text": "slow", "delay_ms": 600}] + [{"text": f" w{i}", "delay_ms": 60} for i in range(80)])
    chat.type_and_send("hi")
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().waiting.isVisible(), timeout=WAIT_MS)
    assert "●" in chat.reply().waiting.text()
    qtbot.waitUntil(lambda: "w3" in chat.reply().answer_text(), timeout=WAIT_MS)
    assert not chat.reply().waiting.isVisible()
    qtbot.waitUntil(lambda: chat.window.status.speed.text().endswith("tok/s"), timeout=WAIT_MS)  # live
    qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_Escape)
    button = chat.window.composer.button
    assert button.text() == "Stopping…" and not button.isEnabled()  # said at once, before the reply ends
    assert chat.reply().status.text() == "Stopping…"
    reply = chat.wait_reply_finished()
    assert reply.status.text() == "Stopped" and button.text() == "Send"
    assert chat.window.composer.edit.hasFocus() or not chat.window.isActiveWindow()


def test_thinking_streams_open_and_folds_when_the_answer_starts(make_chat: MakeChat, qtbot: QtBot) -> None:
    ThinkingPane.open_while_thinking = True
    thinking = [{"text": "<think>"}, "Let me think", {"text": " about it", "delay_ms": 400}, {"text": "</think>"}]
    chat = make_chat([*thinking, {"text": "Answer.", "delay_ms": 200}], ["<think>", "again", "</think>", "Two."])
    chat.type_and_send("why?")
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().thinking.expanded, timeout=WAIT_MS)
    pane = chat.reply().thinking
    assert pane.running and "Let me think" in pane.body.toPlainText()
    reply = chat.wait_reply_finished()
    assert not reply.thinking.expanded  # folded once the answer began

    # Closing it while it thinks is remembered: the next reply's thinking stays folded.
    remembered: list[bool] = []
    ThinkingPane.on_preference_changed = remembered.append
    pane.reset()
    pane.append("more")
    qtbot.mouseClick(pane.header, Qt.MouseButton.LeftButton)
    assert remembered == [False] and ThinkingPane.open_while_thinking is False
    ThinkingPane.open_while_thinking = True
    ThinkingPane.on_preference_changed = staticmethod(lambda _open: None)  # type: ignore[assignment]


def test_one_token_count_that_resets_on_a_new_chat(make_chat: MakeChat, qtbot: QtBot) -> None:
    backend = ScriptedBackend.from_texts("one two three four five six", "ok")
    backend.n_ctx = 400
    chat = make_chat(backend=backend)
    meter, status = chat.window.context_meter, chat.window.status
    chat.type_and_send("a question of several words here")
    chat.wait_reply_finished()
    qtbot.waitUntil(lambda: meter.meter is not None and meter.meter.used > 10, timeout=WAIT_MS)
    assert not any(" / " in label.text() for label in status.findChildren(QLabel))  # one count: the meter's
    used = meter.meter.used  # type: ignore[union-attr]
    chat.qtbot.keyClick(chat.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: meter.meter is not None and meter.meter.used < used, timeout=WAIT_MS)
    assert meter.text().endswith(f"/ {backend.n_ctx:,}")  # the new chat's count


def test_the_header_is_calm(make_chat: MakeChat) -> None:
    chat = make_chat("x")
    header = chat.window.header
    buttons = [b for b in header.findChildren(QAbstractButton) if b.isVisibleTo(header)]
    others = [b for b in buttons if b not in (header.model_button, header.sidebar_button)]
    assert [b.accessibleName() for b in others] == ["Menu", "New conversation"]
    assert header.title.isVisibleTo(header)


def test_the_title_is_elided_at_its_end_never_clipped_at_its_start(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("x")
    title = chat.window.header.title
    title.set_full_text("reverse_string_with_lambda and a much longer title that cannot fit")
    for width in (1040, 800, 640):
        chat.window.resize(width, 600)
        qtbot.waitUntil(lambda w=width: chat.window.width() == w, timeout=WAIT_MS)

        def elided_at_its_end() -> None:  # retried until the layout has followed the new width
            shown = title.text()
            assert shown == "" or (
                shown.startswith("rev") and title.fontMetrics().horizontalAdvance(shown) <= title.contentsRect().width()
            )

        qtbot.waitUntil(elided_at_its_end, timeout=WAIT_MS)


def test_math_is_drawn_as_an_image(qtbot: QtBot) -> None:
    segment = TextSegment()
    qtbot.addWidget(segment)
    from desktop.core.markdown_blocks import MarkdownStream

    (part,) = MarkdownStream().update("So $E = mc^2$.", final=True).parts
    key = part.html.split('src="math:', 1)[1].split('"', 1)[0]
    image = segment.loadResource(QTextDocument.ResourceType.ImageResource.value, QUrl(f"math:{key}"))
    assert isinstance(image, QImage) and not image.isNull() and image.width() > image.height()


def test_ctrl_q_quits_and_the_window_remembers_its_size_and_conversation(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("Hi.")
    chat.type_and_send("hello")
    chat.wait_reply_finished()
    conversation = chat.controller.history.conversation_id if chat.controller.history else None
    chat.window.resize(700, 500)  # within the offscreen screen (800×600)
    qtbot.waitUntil(lambda: (chat.window.width(), chat.window.height()) == (700, 500), timeout=WAIT_MS)
    chat.window.header.quit_action.trigger()  # Ctrl+Q
    qtbot.waitUntil(lambda: not chat.window.isVisible(), timeout=WAIT_MS)
    state = WindowState.load()
    assert state.conversation == conversation and state.geometry
    again = MainWindow(Engine(), ChatSession.unsaved())
    qtbot.addWidget(again)
    again.restore_state()
    assert (again.width(), again.height()) == (700, 500)
    again.controller.session.close()


class _Switch:
    """A sidebar switch: folded by a narrow window or not, and what it was last asked to show."""

    def __init__(self, folded: bool) -> None:
        self.sidebar_folded = folded
        self.shown: list[bool] = []

    def set_sidebar_visible(self, visible: bool) -> None:
        self.shown.append(visible)


def test_a_sidebar_folded_by_a_narrow_window_is_remembered_as_shown(qtbot: QtBot) -> None:
    """The state asks the window's switch (not its private fields) whether a hidden sidebar was
    the user's choice, and gives the choice back to it on the next start."""
    window = QMainWindow()
    qtbot.addWidget(window)
    splitter, sidebar = QSplitter(), QWidget()
    splitter.addWidget(sidebar)
    splitter.addWidget(QWidget())
    window.setCentralWidget(splitter)
    sidebar.hide()  # hidden: by the narrow window, or by the user
    state = WindowState()
    state.save_from(window, switch=_Switch(folded=True), conversation=None)
    assert state.sidebar is True
    state.save_from(window, switch=_Switch(folded=False), conversation=None)
    assert state.sidebar is False
    switch = _Switch(folded=False)
    WindowState.load().restore(window, sidebar=switch)
    assert switch.shown == [False]


def test_f1_opens_the_shortcuts_sheet(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("x")
    assert chat.window.header.shortcuts_action.shortcuts()[1].toString() == "F1"
    chat.window.header.shortcuts_action.trigger()
    sheet = chat.window.findChild(ShortcutsSheet)
    assert sheet is not None and sheet.isVisible()
    texts = [label.text() for label in sheet.findChildren(QLabel)]
    assert "Ctrl+Q" in texts and "Esc" in texts
    assert "Ctrl+E" in texts  # the sidebar's Archive, beside Delete
    sheet.close()


def test_larger_text_keeps_the_sidebar_width_and_grows_the_icons(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("x")
    window = chat.window
    window.resize(780, 580)  # within the offscreen screen
    window.set_sidebar_visible(True)
    shown = lambda: window.width() == 780 and window.sidebar.isVisible() and window.isActiveWindow()  # noqa: E731
    qtbot.waitUntil(shown, timeout=WAIT_MS)  # active: the zoom shortcut needs the focus
    width = window.sidebar.width()
    icon = window.header.new_chat.iconSize().width()
    for _ in range(3):
        qtbot.keyClick(window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.header.new_chat.iconSize().width() > icon, timeout=WAIT_MS)

    def sidebar_kept_its_width() -> None:  # retried until the relayout the larger text asked for is done
        assert abs(window.sidebar.width() - width) <= 2

    qtbot.waitUntil(sidebar_kept_its_width, timeout=WAIT_MS)
    window.theme.reset_zoom()


def test_a_clicked_button_takes_no_focus_but_tab_reaches_it(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("Hi.")
    chat.type_and_send("hello")
    reply = chat.wait_reply_finished()
    qtbot.waitUntil(lambda: reply.copy_button.isVisible(), timeout=WAIT_MS)
    qtbot.mouseClick(reply.copy_button, Qt.MouseButton.LeftButton)
    assert not reply.copy_button.hasFocus()  # no focus ring left behind by a click
    assert reply.copy_button.focusPolicy() & Qt.FocusPolicy.TabFocus
