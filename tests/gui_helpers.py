"""Fixtures and helpers for the GUI tests (pytest-qt, offscreen, a qasync loop).

Test modules load this with `pytest_plugins = ["gui_helpers"]` and import its helpers, so it
is imported before pytest could rewrite its asserts: PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
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

from desktop.core.controller import ChatController
from desktop.core.history_session import open_history
from desktop.qt.answer.markdown_view import AnswerView
from desktop.qt.chat.message_view import AssistantMessage
from desktop.qt.models.get_models import ModelsPrompts
from desktop.qt.models.model_picker import FilePrompts, ModelPicker
from desktop.qt.models.model_switch import ModelSwitcher
from desktop.qt.window import MainWindow, WindowOptions
from engine.backends.base import Backend
from engine.backends.scripted import ScriptedBackend
from engine.runtime import Engine
from engine.session.session import ChatSession

WAIT_MS = 5000


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
    models: ModelSwitcher

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

    def build(
        *replies: str | list[Any],
        backend: Backend | None = None,
        no_model: bool = False,
        history: bool = True,
        session: ChatSession | None = None,
        options: WindowOptions | None = None,
    ) -> Chat:
        backend = backend if backend is not None else ScriptedBackend.from_texts(*replies)
        engine = Engine(None if no_model else backend)
        if session is None:
            session = open_history()[0] if history else ChatSession.unsaved()  # in the test's own EMBER_HOME
        window = MainWindow(engine, session, options)  # closed below once its turn has ended (not by pytest-qt)
        window.show()
        qtbot.waitExposed(window)
        chat = Chat(qtbot, window, window.controller, engine, backend, window.models)
        chats.append(chat)
        return chat

    yield build
    for chat in chats:
        # A turn still ending (its record, the branch read back) touches the window: stop it
        # and let it end before the window goes, as the app's close does.
        chat.controller.stop()
        qtbot.waitUntil(lambda c=chat: not c.controller.busy, timeout=WAIT_MS)
        chat.window.close()
        chat.window.deleteLater()
        chat.engine.close_sync()
        chat.controller.session.close()


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
    return shown_text(reply.answer)


def shown_text(view: AnswerView) -> str:
    """What an answer view's widgets display (rendered text and code)."""
    parts = []
    for widget in view.part_widgets():
        parts.append(widget.toPlainText() if isinstance(widget, QTextEdit) else widget.code)
    return "\n".join(parts)


# --- the model picker ---------------------------------------------------------------------


class FakePrompts(FilePrompts):
    """Canned answers for the picker's file and folder dialogs (None once they run out)."""

    def __init__(self, *, files: list[Path] | None = None, folders: list[Path] | None = None) -> None:
        self.files = list(files or [])
        self.folders = list(folders or [])

    def open_file(self, parent: QWidget) -> Path | None:
        return self.files.pop(0) if self.files else None

    def folder(self, parent: QWidget) -> Path | None:
        return self.folders.pop(0) if self.folders else None


def open_picker(chat: Chat, prompts: FakePrompts | None = None) -> ModelPicker:
    """Open the window's model picker and wait until it has read the library."""
    switcher = chat.models
    if prompts is not None:
        switcher.prompts = prompts
    with chat.qtbot.waitSignal(switcher.open_picker().scanned, timeout=WAIT_MS):
        pass  # the scan runs on a worker thread; its result arrives while we wait
    assert switcher.picker is not None
    return switcher.picker


def click(qtbot: QtBot, button: QAbstractButton) -> None:
    assert button.isEnabled(), f"{button.text()!r} is disabled"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def row_named(picker: ModelPicker, name: str) -> int:
    """The index of the picker row whose Name column is `name`."""
    names = [row.name for row in picker.rows]
    assert name in names, f"{name!r} not in {names}"
    return names.index(name)


# --- the "Get models" page ----------------------------------------------------------------


class FakeModelsPrompts(ModelsPrompts):
    """Canned answers to "Allow downloads from HOST?"; records the questions and the links opened."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.links: list[str] = []

    def allow_downloads(self, parent: QWidget, host: str) -> bool:
        self.asked.append(host)
        return self.answers.pop(0) if self.answers else False

    def open_link(self, url: str) -> None:
        self.links.append(url)


def earlier_today(seconds: float, now: float | None = None) -> float:
    """About `seconds` (at most an hour) before `now`, but today in the local zone: just after
    midnight the gaps shrink in proportion, so rows keep their order and their "Today" group."""
    assert seconds <= 3600
    now = time.time() if now is None else now
    midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    return now - seconds * min(1.0, (now - midnight) / 3600)
