"""The window's history work runs off the GUI thread: a slow disk never stalls the window.

A store whose every read takes SLOW_S stands in for a slow or busy disk. While a turn runs,
another conversation opens, the sidebar re-reads and a conversation is exported, a QTimer heartbeat on the GUI thread
must keep ticking: a single read on the GUI thread would hold it for SLOW_S. The reads are
also checked by the thread that made them, which does not depend on the machine's load.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import WAIT_MS
from PySide6.QtCore import QObject, Qt, QTimer
from pytestqt.qtbot import QtBot

from desktop.core.async_tasks import spawn
from desktop.core.controller import ChatController
from desktop.qt.chat.message_view import UserMessage
from desktop.qt.history.sidebar import HistorySidebar
from desktop.qt.window import MainWindow
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore
from engine.runtime import Engine
from engine.session.session import ChatSession

pytest_plugins = ["gui_helpers"]

SLOW_S = 0.4  # each read of the slow store: longer than a busy machine holds a thread (0.27 s seen at load 11)
READS = ("conversation", "conversations", "path", "sibling_ids", "search", "message")


class SlowStore(HistoryStore):
    """A history store on a slow disk: every read sleeps first, and notes the thread it ran on."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.watching = False
        self.reads: list[tuple[str, str]] = []  # (method, thread name) while watching

    def _slow(self, name: str) -> None:
        if self.watching:
            self.reads.append((name, threading.current_thread().name))
            time.sleep(SLOW_S)


def _slowed(name: str) -> Any:
    def read(self: SlowStore, *args: Any, **kwargs: Any) -> Any:
        self._slow(name)  # pyright: ignore[reportPrivateUsage]
        return getattr(HistoryStore, name)(self, *args, **kwargs)

    return read


for _name in READS:
    setattr(SlowStore, _name, _slowed(_name))


class Heartbeat(QObject):
    """A 10 ms timer on the GUI thread; `longest_gap_s` is the longest the thread was held."""

    def __init__(self) -> None:
        super().__init__()
        self.beats: list[float] = []
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(10)
        self._timer.timeout.connect(lambda: self.beats.append(time.perf_counter()))

    def start(self) -> None:
        self.beats = [time.perf_counter()]
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self.beats.append(time.perf_counter())

    @property
    def longest_gap_s(self) -> float:
        return max(b - a for a, b in zip(self.beats, self.beats[1:], strict=False))


@pytest.fixture
def slow_window(qtbot: QtBot, aloop: Any, tmp_path: Path) -> Iterator[tuple[MainWindow, ChatController, SlowStore]]:
    store = SlowStore(tmp_path / "history.db")
    engine = Engine(ScriptedBackend.from_texts("The first answer.", "The second answer."))
    window = MainWindow(engine, ChatSession(store))  # closed at the end, once its turn has ended
    controller = window.controller  # with tools and documents, as the app's: their settings are read each turn
    window.show()
    qtbot.waitExposed(window)
    yield window, controller, store
    controller.stop()
    qtbot.waitUntil(lambda: not controller.busy, timeout=WAIT_MS)
    window.close()
    window.deleteLater()
    engine.close_sync()
    controller.session.close()


def _sidebar(window: MainWindow) -> HistorySidebar:
    assert isinstance(window.sidebar, HistorySidebar)
    return window.sidebar


def _user_texts(window: MainWindow) -> list[str]:
    return [w.text() for w in window.conversation.message_widgets() if isinstance(w, UserMessage)]


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_slow_disk_never_holds_the_gui_thread(
    slow_window: tuple[MainWindow, ChatController, SlowStore], qtbot: QtBot, tmp_path: Path
) -> None:
    window, controller, store = slow_window
    older = store.create_conversation(title="Older")
    question = store.add_message(older.id, "user", "an older question", parent_id=None)
    store.add_message(older.id, "assistant", "an older answer", parent_id=question)
    sidebar = _sidebar(window)
    sidebar.refresh()
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [older.id], timeout=WAIT_MS)
    wait = WAIT_MS * 4  # every read sleeps: a turn makes a dozen of them
    heartbeat = Heartbeat()
    heartbeat.start()
    store.watching = True

    # A turn: the branch read and the question stored before, the reply recorded, the branch
    # and the list read again after.
    window.composer.set_text("A new question")
    window.composer.submit()
    qtbot.waitUntil(lambda: (reply := window.last_reply()) is not None and reply.finished, timeout=wait)
    qtbot.waitUntil(lambda: not controller.busy and len(sidebar.list.conversation_ids()) == 2, timeout=wait)
    after_turn = len(store.reads)
    # A conversation switch, from the sidebar.
    sidebar.openRequested.emit(older.id, None)
    qtbot.waitUntil(lambda: _user_texts(window) == ["an older question"], timeout=wait)
    qtbot.waitUntil(lambda: window.header.title.full_text() == "Older", timeout=wait)
    after_open = len(store.reads)
    # A sidebar refresh (as after every turn, and every minute).
    read = sidebar.refresh()
    qtbot.waitUntil(read.done, timeout=wait)
    after_refresh = len(store.reads)
    # An export (the conversation read, the file written).
    export = spawn(sidebar.files.export_conversation(older.id, tmp_path / "older.md", "md"))
    qtbot.waitUntil(export.done, timeout=wait)
    assert export.result() and "an older answer" in (tmp_path / "older.md").read_text(encoding="utf-8")

    store.watching = False
    heartbeat.stop()
    names = {name for name, _thread in store.reads}
    assert 0 < after_turn < after_open < after_refresh < len(store.reads)  # each of them read the store
    assert {"path", "conversations", "conversation"} <= names
    on_gui = [name for name, thread in store.reads if thread == threading.main_thread().name]
    assert on_gui == [], f"read on the GUI thread: {on_gui}"
    assert heartbeat.longest_gap_s < SLOW_S, f"the GUI thread was held {heartbeat.longest_gap_s:.3f} s"
