"""Attachments you can see: picture and file chips above the box and on the sent question,
paste of a screenshot, drop anywhere with its overlay, a click that opens the picture, and the
conversation reopened with its thumbnails (scripted backend)."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from desktop.qt.chat.attachment_chips import Attachments, Chip, PictureWindow
from desktop.qt.chat.message_view import UserMessage
from engine.backends.image_input import ImageData
from engine.backends.scripted import ScriptedBackend
from tests.projector_fixture import png, png_chunks
from tests.test_hostile_picture_files import released

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]


def _attachments(chat: Chat, tmp_path: Path) -> Attachments:
    return chat.window.attachments


def _files(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def _question_chips(chat: Chat) -> list[Chip]:
    return chat.window.findChildren(UserMessage)[-1].findChildren(Chip)


def test_a_pasted_screenshot_shows_as_a_chip_goes_with_the_message_and_shows_on_the_question(
    make_chat: MakeChat, tmp_path: Path
) -> None:
    backend = ScriptedBackend.from_texts("A red square.")
    chat = make_chat(backend=backend)
    attachments = _attachments(chat, tmp_path)
    screenshot = QImage(64, 40, QImage.Format.Format_RGB32)
    screenshot.fill(QColor("red"))
    mime = QMimeData()
    mime.setImageData(screenshot)
    chat.window.composer.edit.insertFromMimeData(mime)  # what Ctrl+V does
    assert chat.window.composer.text() == ""
    assert attachments.row.isVisible() and len(attachments.row.chips) == 1
    assert attachments.row.chips[0].remove_button is not None  # × above the box
    chat.type_and_send("What is this?")
    chat.wait_reply_finished()
    [sent] = backend.requests[0].messages[-1].get("images", [])
    assert QImage.fromData(sent.data).size().width() == 64
    assert not attachments.row.isVisible()  # the chips left with the message
    [chip] = _question_chips(chat)
    assert chip.remove_button is None and chip.thumbnail.pixmap().width() <= 48


def test_a_chip_removes_its_picture_and_a_click_opens_it_full_size(
    make_chat: MakeChat, tmp_path: Path, qtbot: QtBot
) -> None:
    chat = make_chat()
    attachments = _attachments(chat, tmp_path)
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    one.write_bytes(png(300, 200, seed=1))
    two.write_bytes(png(30, 20, seed=2))
    chat.window.composer.edit.insertFromMimeData(_files(one, two))
    qtbot.waitUntil(lambda: [c.name for c in attachments.row.chips] == ["one.png", "two.png"], timeout=WAIT_MS)
    qtbot.mouseClick(attachments.row.chips[0], Qt.MouseButton.LeftButton)
    opened = [w for w in QApplication.topLevelWidgets() if isinstance(w, PictureWindow) and w.isVisible()]
    assert opened and opened[-1].label.pixmap().width() == 300  # full size
    opened[-1].close()
    remove = attachments.row.chips[1].remove_button
    assert remove is not None
    qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
    assert [i.name for i in attachments.pending.items] == ["one.png"]


def test_a_document_and_a_picture_dropped_anywhere_go_their_ways_with_an_overlay(
    make_chat: MakeChat, tmp_path: Path
) -> None:
    backend = ScriptedBackend.from_texts("Noted.")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    attachments = _attachments(chat, tmp_path)
    notes, picture = tmp_path / "notes.txt", tmp_path / "shot.png"
    notes.write_text("The meeting is on Tuesday.")
    picture.write_bytes(png(16, 12))
    mime = _files(notes, picture)
    where = QPointF(chat.window.conversation.geometry().center())
    enter = QDragEnterEvent(
        where.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(chat.window, enter)
    assert enter.isAccepted() and attachments.overlay.isVisible()
    assert "Drop files here" in attachments.overlay.text()
    drop = QDropEvent(where, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(chat.window, drop)
    assert not attachments.overlay.isVisible()
    chat.qtbot.waitUntil(lambda: len(attachments.row.chips) == 2, timeout=WAIT_MS)  # read on a worker
    assert sorted(c.name for c in attachments.row.chips) == ["notes.txt", "shot.png"]  # both as chips
    assert [i.name for i in attachments.pending.items] == ["shot.png"]  # the picture with the message
    chat.type_and_send("When is the meeting?")
    chat.wait_reply_finished()
    assert "Tuesday" in backend.requests[0].messages[-1]["content"]  # the document grounds it
    assert sorted(c.name for c in _question_chips(chat)) == ["notes.txt", "shot.png"]


def test_hostile_pictures_are_refused_in_one_line_and_attach_nothing(make_chat: MakeChat, tmp_path: Path) -> None:
    chat = make_chat()
    attachments = _attachments(chat, tmp_path)
    huge = tmp_path / "huge.png"
    huge.write_bytes(png_chunks(struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0), b""))
    chat.window.composer.edit.insertFromMimeData(_files(huge))
    chat.qtbot.waitUntil(lambda: bool(attachments.problem), timeout=WAIT_MS)
    assert "30000×30000 pixels" in attachments.problem and "\n" not in attachments.problem
    assert attachments.pending.items == []
    cut = tmp_path / "cut.png"
    cut.write_bytes(png(200, 100)[:300])  # a header that passes, pixels that stop short
    chat.window.composer.edit.insertFromMimeData(_files(cut))
    chat.qtbot.waitUntil(lambda: len(attachments.row.chips) == 1, timeout=WAIT_MS)
    [chip] = attachments.row.chips  # it attaches (the header is sound); its thumbnail is the file icon
    assert chip.thumbnail.pixmap().isNull()


def test_a_reopened_conversation_shows_its_thumbnails(make_chat: MakeChat, tmp_path: Path, qtbot: QtBot) -> None:
    chat = make_chat("It is a cat.", "Hello again.")
    attachments = _attachments(chat, tmp_path)
    attachments.pending.add(ImageData(png(20, 10), "cat.png"))
    chat.type_and_send("What is this?")
    chat.wait_reply_finished()
    conversation = chat.controller.session.conversation_id
    assert conversation is not None
    fresh = asyncio.ensure_future(chat.controller.new_conversation())
    qtbot.waitUntil(fresh.done, timeout=WAIT_MS)
    reopened = asyncio.ensure_future(chat.controller.open_conversation(conversation))
    qtbot.waitUntil(reopened.done, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: bool(chat.window.findChildren(UserMessage)), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: bool(_question_chips(chat)), timeout=WAIT_MS)
    assert [c.name for c in _question_chips(chat)] == ["cat.png"]


def test_a_projector_chosen_in_the_settings_is_checked_against_the_model(
    qtbot: QtBot, tmp_path: Path, ember_home: Path
) -> None:
    import gguf_factory as gf

    from desktop.qt.models.settings_dialog import ModelSettingsDialog
    from models.library.settings import ModelSettings, load_model_settings
    from tests.projector_fixture import write_projector_fixture

    model = gf.write_tiny_llama(tmp_path / "tiny.gguf", n_embd=64)
    dialog = ModelSettingsDialog(
        None,
        model_file=model,
        label="tiny",
        settings=ModelSettings(),
        n_ctx_train=2048,
        n_layers=2,
        gpu_supported=False,
    )
    qtbot.addWidget(dialog)
    dialog.projector.setText(str(write_projector_fixture(tmp_path / "wide.gguf", projection=576)))
    dialog.save()
    assert dialog.error.text() == (
        "Not saved: wide.gguf does not go with tiny.gguf: it projects images to 576 "
        "values, the model's embeddings are 64 wide"
    )
    fitting = write_projector_fixture(tmp_path / "fits.gguf", projection=64)
    dialog.projector.setText(str(fitting))
    dialog.save()
    assert load_model_settings(model).projector == str(fitting)


def test_a_picture_missing_on_disk_shows_a_placeholder_and_the_rest_opens(
    make_chat: MakeChat, tmp_path: Path, qtbot: QtBot
) -> None:
    from engine.backends.image_input import image_digest
    from engine.history.images import image_folder

    chat = make_chat("Two pictures.", "Hello again.")
    attachments = _attachments(chat, tmp_path)
    lost = png(20, 10, seed=7)
    attachments.pending.add(ImageData(png(20, 10), "cat.png"))
    attachments.pending.add(ImageData(lost, "dog.png"))
    chat.type_and_send("What are these?")
    chat.wait_reply_finished()
    conversation = chat.controller.session.conversation_id
    assert conversation is not None
    digest = image_digest(lost)
    (image_folder(chat.controller.session.store) / digest[:2] / digest).unlink()
    fresh = asyncio.ensure_future(chat.controller.new_conversation())
    qtbot.waitUntil(fresh.done, timeout=WAIT_MS)
    reopened = asyncio.ensure_future(chat.controller.open_conversation(conversation))
    qtbot.waitUntil(reopened.done, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: bool(chat.window.findChildren(UserMessage)), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: len(_question_chips(chat)) == 2, timeout=WAIT_MS)
    cat, dog = _question_chips(chat)
    assert cat.name == "cat.png" and not cat.thumbnail.pixmap().isNull()
    assert dog.name == "dog.png (unavailable)" and "missing" in dog.toolTip() and "\n" not in dog.toolTip()


def test_a_fifo_dropped_on_the_window_never_blocks_its_gui_thread(
    make_chat: MakeChat, tmp_path: Path, qtbot: QtBot
) -> None:
    """IW-01: the drop read `photo.png` (a FIFO) on the GUI thread, which blocked until someone wrote."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    chat = make_chat()
    attachments = chat.window.attachments
    fifo, picture = tmp_path / "photo.png", tmp_path / "real.png"
    os.mkfifo(fifo)
    picture.write_bytes(png(16, 12))
    beats: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: beats.append(1))  # the event loop keeps turning while the drop is read
    timer.start(5)
    with released(fifo) as release:
        attachments.route([str(fifo), str(picture)])  # what a drop of the two does
        qtbot.waitUntil(lambda: len(attachments.pending.items) == 1 and len(beats) >= 3, timeout=WAIT_MS)
    timer.stop()
    assert not release.had_to_release, "the drop blocked on the FIFO"
    assert [i.name for i in attachments.pending.items] == ["real.png"]
    qtbot.waitUntil(lambda: "photo.png" in attachments.problem, timeout=WAIT_MS)
    assert "is a pipe (FIFO)" in attachments.problem and "\n" not in attachments.problem


def test_a_picture_for_a_model_whose_projector_was_refused_says_why_in_one_line(
    make_chat: MakeChat, qtbot: QtBot
) -> None:
    """PJ-08/PJ-10 in the window: the model loads text-only and the picture is refused, naming why."""
    from dataclasses import replace

    from PySide6.QtWidgets import QLabel

    why = "mmproj-x.gguf is refused: its layer-norm epsilon nan is not a finite number ≥ 0"
    backend = ScriptedBackend.from_texts("never")
    backend.capabilities = replace(backend.capabilities, vision=False, vision_note=why)
    chat = make_chat(backend=backend)
    screenshot = QImage(20, 10, QImage.Format.Format_RGB32)
    screenshot.fill(QColor("red"))
    mime = QMimeData()
    mime.setImageData(screenshot)
    chat.window.composer.edit.insertFromMimeData(mime)
    chat.type_and_send("What is this?")

    def shown() -> list[str]:
        return [label.text() for label in chat.window.findChildren(QLabel) if why in label.text()]

    qtbot.waitUntil(lambda: bool(shown()), timeout=WAIT_MS)
    assert all("\n" not in text for text in shown())
    assert backend.requests == []  # nothing reached the model
