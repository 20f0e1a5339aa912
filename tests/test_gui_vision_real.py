"""Issue #42's "done when", in the window: a screenshot pasted into a chat with a vision model.

SmolLM2 (the built-in GGUF) is copied into a models folder with the fixture projector beside it
as `mmproj-*.gguf` (tests/projector_fixture.py: a real libmtmd projector with random weights,
the stand-in for a real one, so the reply's words mean nothing). The window loads the model from
the picker, the picture is pasted from the clipboard with Ctrl+V, and the turn runs it through
mtmd: the image's positions are in the prompt the backend evaluated, the reply streams into the
view, the question carries its thumbnail, and the conversation reopened from the sidebar shows it.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS, Chat, FakePrompts, click, open_picker, row_named, shown_answer
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from desktop.qt.chat.attachment_chips import Chip
from desktop.qt.chat.message_view import AssistantMessage, UserMessage
from engine.llama.llama import LlamaBackend
from engine.llama.llama_media import is_pseudo
from models.library.settings import ModelSettings, save_model_settings
from tests.projector_fixture import write_projector_fixture
from tests.test_gui_history import click_item, first_row, refreshed, sidebar_of

pytestmark = pytest.mark.slow
pytest_plugins = ["gui_helpers"]

MODEL = "smol-vision.Q4_1.gguf"  # not the built-in's file name, so its picker row is this copy's
PROJECTOR = "mmproj-smol-vision-f16.gguf"
IMAGE_POSITIONS = 4  # the fixture's 28×28 input in 14-pixel patches, whatever the picture's size
MAX_TOKENS = 16
SLOW_MS = 30_000  # loading and replying on a loaded 2-core machine (about 5 s all told when idle)


@pytest.fixture
def vision_folder(tmp_path: Path, smollm_path: Path) -> Path:
    """A models folder as a vision download leaves it: the model, and its projector beside it."""
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / MODEL
    shutil.copyfile(smollm_path, model)
    write_projector_fixture(folder / PROJECTOR)
    save_model_settings(model, ModelSettings(context_length=1024, temperature=0.0, max_tokens=MAX_TOKENS))
    return folder


def _load_from_the_picker(chat: Chat, folder: Path) -> LlamaBackend:
    picker = open_picker(chat, FakePrompts(folders=[folder]))
    with chat.qtbot.waitSignal(picker.scanned, timeout=WAIT_MS):
        click(chat.qtbot, picker.add_folder)
    row = picker.rows[row_named(picker, MODEL)]
    assert row.projector is not None and row.projector.path.name == PROJECTOR  # paired from the headers
    assert "vision" in row.line.split(" · ")  # and marked in the picker
    picker.select_row(row_named(picker, MODEL))
    click(chat.qtbot, picker.load)
    chat.qtbot.waitUntil(lambda: chat.controller.models.choice is not None, timeout=SLOW_MS)
    backend = chat.engine.backend
    assert isinstance(backend, LlamaBackend) and backend.path == folder / MODEL
    assert backend.projector == folder / PROJECTOR and backend.capabilities.vision
    return backend


def _paste_screenshot(chat: Chat) -> None:
    screenshot = QImage(40, 30, QImage.Format.Format_RGB32)
    screenshot.fill(QColor("teal"))
    QApplication.clipboard().setImage(screenshot)
    edit = chat.window.composer.edit
    edit.setFocus()
    chat.qtbot.keyClick(edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert len(chat.window.attachments.pending.items) == 1 and len(chat.window.attachments.row.chips) == 1


def _streamed(chat: Chat, reply: AssistantMessage) -> list[str]:
    """The distinct answers the reply view showed before it finished (sampled every 10 ms)."""
    seen: list[str] = []

    def sample() -> bool:
        text = shown_answer(reply)
        if not reply.finished and text and (not seen or seen[-1] != text):
            seen.append(text)
        return reply.finished

    chat.qtbot.waitUntil(sample, timeout=SLOW_MS)
    chat.wait_idle(SLOW_MS)
    return seen


def _question_chips(chat: Chat) -> list[Chip]:
    questions = chat.window.findChildren(UserMessage)
    return questions[-1].findChildren(Chip) if questions else []


def test_a_pasted_screenshot_runs_through_mtmd_streams_and_reopens_with_its_thumbnail(
    make_chat, qtbot: QtBot, vision_folder: Path
) -> None:
    chat: Chat = make_chat("the scripted model, until the vision model loads")
    backend = _load_from_the_picker(chat, vision_folder)
    _paste_screenshot(chat)
    chat.type_and_send("Describe the picture.")
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None, timeout=WAIT_MS)
    reply = chat.reply()
    seen = _streamed(chat, reply)
    assert len(seen) >= 2, seen  # it streamed: partial answers were on screen before the end
    assert reply.answer_text().startswith(seen[-1].rstrip())
    # The image went through mtmd: its positions (pseudo-ids, llama_media) sit in the KV cache's
    # record, which only a span evaluated by mtmd_helper_eval_chunk_single puts there, and the
    # whole prompt was evaluated, the image's span with it.
    held = backend._kv.tokens  # pyright: ignore[reportPrivateUsage]
    image = [i for i, t in enumerate(held) if is_pseudo(t)]
    assert len(image) == IMAGE_POSITIONS and image == list(range(image[0], image[0] + IMAGE_POSITIONS))
    [question, answer] = chat.controller.session.path()
    assert answer.stats["prompt_tokens"] == backend.last_prompt_evaluated > image[-1]
    assert 1 < answer.stats["tokens"] <= MAX_TOKENS
    [stored] = chat.controller.session.stored_images([question]).found[question.id]
    assert QImage.fromData(stored.data).size().toTuple() == (40, 30)  # the pasted picture, stored
    [chip] = _question_chips(chat)
    assert not chip.thumbnail.pixmap().isNull() and chip.remove_button is None
    conversation = chat.controller.session.conversation_id
    fresh = asyncio.ensure_future(chat.controller.new_conversation())
    qtbot.waitUntil(fresh.done, timeout=WAIT_MS)
    assert _question_chips(chat) == []
    sidebar = sidebar_of(chat)
    refreshed(qtbot, sidebar)
    assert sidebar.list.conversation_ids() == [conversation]
    click_item(qtbot, sidebar, first_row(sidebar))
    qtbot.waitUntil(lambda: len(_question_chips(chat)) == 1, timeout=WAIT_MS)
    [again] = _question_chips(chat)
    assert again.name == chip.name and not again.thumbnail.pixmap().isNull()
    assert chat.reply().answer_text() == reply.answer_text()
