"""Fixtures and helpers for the GUI tests (pytest-qt, offscreen, a qasync loop).

Test modules load this with `pytest_plugins = ["gui_helpers"]` and import its helpers, so it
is imported before pytest could rewrite its asserts: PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import qasync
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from desktop.controller import ChatController
from desktop.message_view import AssistantMessage
from desktop.qt_compat import guard_singleton_refcounts
from desktop.window import MainWindow
from engine.backend import Backend
from engine.runtime import Engine
from engine.scripted import ScriptedBackend

WAIT_MS = 5000

guard_singleton_refcounts()  # PySide6 6.12 on Python 3.11: see desktop/qt_compat.py


@pytest.fixture
def aloop(qapp: QApplication) -> Iterator[qasync.QEventLoop]:
    """A qasync loop flagged as running, torn down without stop() (see the testing notes)."""
    loop = qasync.QEventLoop(qapp, already_running=True)
    pool = qasync.QThreadExecutor(1)
    loop.set_default_executor(pool)
    asyncio.set_event_loop(loop)
    yield loop
    for task in asyncio.all_tasks(loop):
        task.cancel()
    pool.shutdown(wait=True)
    asyncio.events._set_running_loop(None)  # pyright: ignore[reportPrivateUsage]
    asyncio.set_event_loop(None)


@dataclass
class Chat:
    """A window bound to a controller and an engine, driven like a user would."""

    qtbot: QtBot
    window: MainWindow
    controller: ChatController
    engine: Engine
    backend: Backend

    def type_and_send(self, text: str) -> None:
        edit = self.window.composer.edit
        edit.setFocus()
        edit.setPlainText(text)
        self.qtbot.keyClick(edit, Qt.Key.Key_Return)

    def reply(self) -> AssistantMessage:
        reply = self.window.last_reply()
        assert reply is not None, "no assistant message yet"
        return reply

    def wait_reply_finished(self, timeout: int = WAIT_MS) -> AssistantMessage:
        self.qtbot.waitUntil(lambda: _finished(self.window), timeout=timeout)
        self.qtbot.waitUntil(lambda: not self.controller.busy, timeout=timeout)
        return self.reply()

    def wait_idle(self, timeout: int = WAIT_MS) -> None:
        self.qtbot.waitUntil(lambda: not self.controller.busy, timeout=timeout)


def _finished(window: MainWindow) -> bool:
    reply = window.last_reply()
    return reply is not None and reply.finished


@pytest.fixture
def make_chat(qtbot: QtBot, aloop: qasync.QEventLoop) -> Iterator[Callable[..., Chat]]:
    """Build a shown window on a scripted (or given) backend; everything is shut at teardown."""
    chats: list[Chat] = []

    def build(*replies: str | list[Any], backend: Backend | None = None, no_model: bool = False) -> Chat:
        backend = backend if backend is not None else ScriptedBackend.from_texts(*replies)
        engine = Engine(None if no_model else backend)
        window = MainWindow()
        qtbot.addWidget(window)
        controller = ChatController(engine, window)
        window.bind(controller)
        window.show()
        qtbot.waitExposed(window)
        chat = Chat(qtbot, window, controller, engine, backend)
        chats.append(chat)
        return chat

    yield build
    for chat in chats:
        chat.controller.stop()
        qtbot.waitUntil(lambda c=chat: not c.controller.busy, timeout=WAIT_MS)
        chat.engine.close_sync()


def widget_texts(root: QWidget) -> list[str]:
    """Every piece of text the widget tree under `root` can show or announce."""
    texts = [root.windowTitle()]
    for widget in [root, *root.findChildren(QWidget)]:
        texts += [widget.toolTip(), widget.accessibleName(), widget.accessibleDescription()]
        texts += _own_texts(widget)
    return [t for t in texts if t]


def _own_texts(widget: QWidget) -> list[str]:
    if isinstance(widget, QLabel | QAbstractButton | QLineEdit):
        return [widget.text()]
    if isinstance(widget, QTextEdit):
        return [widget.toPlainText(), widget.toHtml()]
    if isinstance(widget, QPlainTextEdit):
        return [widget.toPlainText()]
    if isinstance(widget, QComboBox):
        return [widget.itemText(i) for i in range(widget.count())]
    return []


def shown_answer(reply: AssistantMessage) -> str:
    """The answer as its widgets display it (rendered text and code)."""
    parts = []
    for widget in reply.answer.part_widgets():
        parts.append(widget.toPlainText() if isinstance(widget, QTextEdit) else widget.code)
    return "\n".join(parts)
