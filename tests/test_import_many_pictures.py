"""Imported pictures are bounded per message and per file (adversarial review 3, F6: HI-04).

One imported question carrying 3,000 pictures (a 900 KB file) stalled the window 8.6 s when it
opened: every picture becomes a thumbnail. A message carries at most MAX_MESSAGE_IMAGES (what
the window, `ember chat --image` and `ember serve` let one message carry), a file at most
MAX_FILE_IMAGES; more is refused in one line, and nothing is imported.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from desktop.core.async_tasks import spawn
from desktop.qt.history.sidebar import HistorySidebar
from engine.backends.image_input import MAX_MESSAGE_IMAGES
from engine.history.export import MAX_FILE_IMAGES, ImportFormatError, import_json
from engine.history.store import HistoryStore
from tests.projector_fixture import png

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]
URL = "data:image/png;base64," + base64.b64encode(png(4, 4)).decode()


def _export(pictures_per_question: list[int]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for n, count in enumerate(pictures_per_question):
        images = [{"name": f"p{i}.png", "url": URL} for i in range(count)]
        messages.append(
            {"id": 2 * n, "parent": 2 * n - 1 if n else None, "role": "user", "content": "look", "images": images}
        )
        messages.append({"id": 2 * n + 1, "parent": 2 * n, "role": "assistant", "content": "seen."})
    return {"format": "ember.conversation", "version": 1, "conversation": {"title": "pictures"}, "messages": messages}


@pytest.fixture
def store(tmp_path: Path) -> HistoryStore:
    return HistoryStore(tmp_path / "history.sqlite3")


def test_a_message_with_3000_pictures_is_refused_in_one_line_and_imports_nothing(store: HistoryStore) -> None:
    with pytest.raises(ImportFormatError) as caught:
        import_json(store, _export([3000]))
    assert (
        str(caught.value)
        == f"messages[0].images holds 3,000 pictures; at most {MAX_MESSAGE_IMAGES} go with one message"
    )
    assert store.conversations() == []


def test_a_file_with_more_pictures_than_the_bound_is_refused_before_any_is_decoded(store: HistoryStore) -> None:
    questions = MAX_FILE_IMAGES // MAX_MESSAGE_IMAGES + 1  # each within the message bound
    with pytest.raises(
        ImportFormatError, match=rf"carries {questions * MAX_MESSAGE_IMAGES:,} pictures; at most {MAX_FILE_IMAGES:,}"
    ):
        import_json(store, _export([MAX_MESSAGE_IMAGES] * questions))
    assert store.conversations() == []


def test_pictures_within_the_bounds_import(store: HistoryStore) -> None:
    conv = import_json(store, _export([MAX_MESSAGE_IMAGES, 1]))
    assert [m.role for m in store.messages(conv.id)] == ["user", "assistant", "user", "assistant"]


def test_the_window_refuses_the_3000_picture_import_and_keeps_turning(
    make_chat: MakeChat, qtbot: QtBot, tmp_path: Path
) -> None:
    """Through the sidebar's Import (read and stored on the history thread, then opened)."""
    chat = make_chat()
    sidebar = chat.window.sidebar
    assert isinstance(sidebar, HistorySidebar)
    path = tmp_path / "many_images.json"
    path.write_text(json.dumps(_export([3000])))
    beats: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: beats.append(1))
    timer.start(5)
    task = spawn(sidebar.files.import_conversation(path))
    qtbot.waitUntil(task.done, timeout=WAIT_MS)
    timer.stop()
    assert task.result() is None  # nothing imported, nothing opened
    assert sidebar.undo_bar.isVisible()
    shown = sidebar.undo_bar.label.text()
    assert "holds 3,000 pictures; at most 8 go with one message" in shown and "\n" not in shown
    assert beats  # the loop turned while the file was read on the history thread
    assert chat.controller.history is not None and chat.controller.history.store.conversations() == []
