"""The real window on a real display: xcb under Xvfb with a window manager (openbox).

These run only when the tests run on the xcb platform (`.ci/run` starts Xvfb and openbox
and runs this tier with QT_QPA_PLATFORM=xcb); offscreen they are skipped, because the
offscreen platform has no window manager, no real focus and no real geometry.

They drive the window with the keyboard and the mouse through send → tool approval → stop
→ regenerate, and check its geometry at 800×600 and 1600×1000, at the default and the
largest text size (Ctrl+= three times), light and dark: every visible widget inside the
window and in a layout, and no button or label text wider than the room it is drawn in.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

import gguf_factory as gf
import pytest
from gui_helpers import WAIT_MS, Chat, FakeModelsPrompts
from hub_fakes import GB, TINY_TARGET, FakeDownloader, Gate, page_options, small_catalogue, small_hub
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QApplication,
    QLabel,
    QPushButton,
    QStyle,
    QStyleOptionButton,
    QToolButton,
    QWidget,
)

from desktop.core.model_choice import ModelInfo
from desktop.qt.message_view import AssistantMessage, UserMessage
from desktop.qt.network_indicator import install_network_indicator
from desktop.qt.serve_toggle import install_serve
from desktop.qt.tool_card import ToolCallCard, install_tools
from engine.backends.scripted import ScriptedBackend
from engine.network.guard import Guard
from engine.network.ledger import Ledger
from engine.network.policy import EgressPolicy, PolicyView
from engine.tools.permissions import Decision
from models.library.fit import FreeMemory
from models.library.paths import ember_paths

pytest_plugins = ["gui_helpers"]
pytestmark = [
    pytest.mark.display,
    pytest.mark.skipif(os.environ.get("QT_QPA_PLATFORM") != "xcb" or not os.environ.get("DISPLAY"),
                       reason="needs a real display: QT_QPA_PLATFORM=xcb with DISPLAY (see .ci/run)"),
]

MakeChat = Callable[..., Chat]
CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'
SLOW = [{"text": f"word{i} ", "delay_ms": 150} for i in range(60)]
ANSWER = ("Here is the result:\n\nThe answer is **42**.\nIt is six times seven.\n\n"
          "```python\nprint(6 * 7)\n```\n\nAnd the area is $\\pi r^2$.")


def _tools_chat(make_chat: MakeChat, *replies: object) -> Chat:
    chat = make_chat(*replies)
    install_tools(chat.window, chat.controller)
    chat.window.tool_toggle.setChecked(True)  # type: ignore[attr-defined]
    return chat


def _focused() -> QWidget | None:
    return QApplication.focusWidget()


def _in_composer(chat: Chat) -> bool:
    return _focused() is chat.window.composer.edit


def _type(chat: Chat, text: str) -> None:
    """Type as a user does: into whatever has the focus, then Enter."""
    target = _focused()
    assert target is not None
    chat.qtbot.keyClicks(target, text)
    chat.qtbot.keyClick(target, Qt.Key.Key_Return)


@pytest.fixture
def shown(qtbot) -> Callable[[Chat, int, int], None]:  # type: ignore[no-untyped-def]
    def show(chat: Chat, width: int, height: int) -> None:
        chat.window.resize(width, height)
        chat.window.activateWindow()
        chat.window.raise_()
        qtbot.waitUntil(lambda: chat.window.isActiveWindow(), timeout=WAIT_MS)
        qtbot.waitUntil(lambda: abs(chat.window.width() - width) <= 2, timeout=WAIT_MS)
        qtbot.wait(100)

    return show


def test_send_approve_stop_regenerate_with_keyboard_and_mouse(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    chat = _tools_chat(make_chat, "Let me calculate that. " + CALC, "It is 42.", SLOW, "Again: 42.")
    shown(chat, 1040, 780)
    chat.window.composer.focus_edit()
    assert _in_composer(chat)

    # Send: the approval card appears inline, takes the focus, and Y (typed to it) approves.
    _type(chat, "what is 6*7?")
    chat.qtbot.waitUntil(lambda: any(isinstance(c, ToolCallCard) and c.asking
                                     for c in chat.reply().tool_cards()), timeout=WAIT_MS)
    card = next(c for c in chat.reply().tool_cards() if isinstance(c, ToolCallCard))
    assert _inside(card, chat.window) and card.visibleRegion().boundingRect().height() > 0
    chat.qtbot.waitUntil(lambda: _focused() is card.approve, timeout=WAIT_MS)
    chat.qtbot.keyClick(card.approve, Qt.Key.Key_Y)
    reply = chat.wait_reply_finished()
    assert reply.answer_text().endswith("It is 42.") and card.summary.full_text() == "Used calculator → 42"
    assert _in_composer(chat)  # after the card, typing goes on in the message box

    # Stop: Esc says "Stopping…" at once, the partial answer stays, focus stays in the box.
    _type(chat, "count slowly")
    chat.qtbot.waitUntil(lambda: "word2" in chat.reply().answer_text(), timeout=WAIT_MS)
    chat.qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_Escape)
    assert chat.window.composer.button.text() in ("Stopping…", "Send")
    stopped = chat.wait_reply_finished()
    assert stopped.status.text() == "Stopped" and _in_composer(chat)

    # Regenerate with the mouse: the new answer streams and the focus is back in the box,
    # not on the button that was clicked (and no focus ring is left on it).
    chat.qtbot.waitUntil(lambda: stopped.regenerate_button.isVisible(), timeout=WAIT_MS)
    chat.qtbot.mouseClick(stopped.regenerate_button, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: chat.reply() is not stopped and chat.reply().finished, timeout=WAIT_MS)
    chat.wait_idle()
    assert chat.reply().answer_text() == "Again: 42."
    assert _in_composer(chat)  # not the Regenerate button that was clicked (it is gone with its version)


@pytest.mark.parametrize("size", [(800, 600), (1600, 1000)], ids=["800x600", "1600x1000"])
@pytest.mark.parametrize("larger", [0, 3], ids=["1x", "ctrl-plus-3"])
@pytest.mark.parametrize("mode", ["light", "dark"])
def test_every_label_fits_and_every_widget_is_inside(make_chat: MakeChat, shown, size: tuple[int, int],  # type: ignore[no-untyped-def]
                                                     larger: int, mode: str) -> None:
    chat = _tools_chat(make_chat, CALC, ANSWER)
    chat.window.theme.set_mode(mode)  # type: ignore[arg-type]
    for _ in range(larger):
        chat.qtbot.keyClick(chat.window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    shown(chat, *size)
    chat.type_and_send("what is 6*7? " * 6)
    chat.qtbot.waitUntil(lambda: bool(chat.reply().tool_cards()), timeout=WAIT_MS)
    card = chat.reply().tool_cards()[0]
    assert isinstance(card, ToolCallCard)
    chat.qtbot.wait(200)
    _check_geometry(chat.window)  # with the approval card asking
    chat.qtbot.waitUntil(lambda: card.asking, timeout=WAIT_MS)
    card.decide(Decision.APPROVE)
    chat.wait_reply_finished()
    chat.qtbot.wait(200)
    _check_geometry(chat.window)
    try:
        chat.window.theme.reset_zoom()
    finally:
        chat.window.theme.set_mode("light")


def _inside(widget: QWidget, window: QWidget) -> bool:
    top_left = widget.mapTo(window, QPoint(0, 0))
    return window.rect().contains(QRect(top_left, widget.size()).adjusted(1, 1, -1, -1))


def _visible_in_view(widget: QWidget, window: QWidget) -> bool:
    """Shown on screen, not only scrolled out of a scroll area's viewport."""
    return widget.isVisibleTo(window) and not widget.visibleRegion().isEmpty()


def _check_geometry(window: QWidget) -> None:
    problems: list[str] = []
    for widget in window.findChildren(QWidget):
        if not _visible_in_view(widget, window) or widget.window() is not window:
            continue
        name = f"{type(widget).__name__}#{widget.objectName() or '?'}"
        if not _inside(widget, window) and not _in_scroll_area(widget):
            problems.append(f"{name} is outside the window")
        if isinstance(widget, QAbstractButton | QLabel) and not _in_layout(widget):
            problems.append(f"{name} is in no layout")
        overflow = _text_overflow(widget)
        if overflow:
            problems.append(f"{name} clips its text {overflow!r}")
    assert not problems, "\n".join(problems)


def _in_scroll_area(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return True
        parent = parent.parentWidget()
    return False


def _in_layout(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    if parent is None or isinstance(parent, QAbstractScrollArea) or parent.layout() is None:
        return True  # a viewport's or a style's own child: placed by its owner, not a layout
    layout = parent.layout()
    assert layout is not None
    return layout.indexOf(widget) >= 0 or any(
        (item := layout.itemAt(i)) is not None and (sub := item.layout()) is not None and sub.indexOf(widget) >= 0
        for i in range(layout.count())) or _nested(layout, widget)


def _nested(layout, widget: QWidget) -> bool:  # type: ignore[no-untyped-def]
    for i in range(layout.count()):
        item = layout.itemAt(i)
        sub = item.layout() if item is not None else None
        if sub is not None and (sub.indexOf(widget) >= 0 or _nested(sub, widget)):
            return True
    return False


def _text_overflow(widget: QWidget) -> str:
    """The text when it is wider than the room the widget draws it in, else ""."""
    if isinstance(widget, QPushButton):
        text = widget.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
        if not text:
            return ""
        option = QStyleOptionButton()
        widget.initStyleOption(option)
        room = widget.style().subElementRect(QStyle.SubElement.SE_PushButtonContents, option, widget).width()
        icon = widget.iconSize().width() + 4 if not widget.icon().isNull() else 0
        need = widget.fontMetrics().horizontalAdvance(text) + icon
        return f"{text} ({need} > {room}, {widget.width()} wide)" if need > room else ""
    if isinstance(widget, QToolButton):
        if widget.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly or not widget.text():
            return ""
        return widget.text() if widget.sizeHint().width() > widget.width() + 1 else ""
    if isinstance(widget, QLabel) and widget.text() and not widget.wordWrap() and widget.pixmap().isNull():
        if widget.textFormat() == Qt.TextFormat.RichText or "<" in widget.text():
            return ""
        widest = max(widget.fontMetrics().horizontalAdvance(line) for line in widget.text().split("\n"))
        return widget.text() if widest > widget.contentsRect().width() + 1 else ""
    return ""


def test_the_reply_shows_a_typing_indicator_until_the_first_word(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat([{"text": "Hi", "delay_ms": 800}, " there."])
    shown(chat, 1040, 780)
    chat.type_and_send("hello")
    chat.qtbot.waitUntil(lambda: chat.window.last_reply() is not None, timeout=WAIT_MS)
    reply = chat.reply()
    assert isinstance(reply, AssistantMessage)
    chat.qtbot.waitUntil(lambda: reply.waiting.isVisible(), timeout=WAIT_MS)
    assert _inside(reply.waiting, chat.window)
    chat.wait_reply_finished()
    assert not reply.waiting.isVisible()


@pytest.mark.parametrize("larger", [0, 3], ids=["1x", "ctrl-plus-3"])
def test_the_model_picker_and_settings_labels_fit(make_chat: MakeChat, shown, larger: int) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat("x")
    for _ in range(larger):
        chat.qtbot.keyClick(chat.window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    shown(chat, 1040, 780)
    try:
        picker = chat.models.open_picker()
        chat.qtbot.waitUntil(lambda: picker.table.topLevelItemCount() > 0 and not picker.busy, timeout=WAIT_MS * 4)
        picker.select_row(0)
        chat.qtbot.wait(200)
        assert picker.width() <= chat.window.width()
        _check_geometry(picker)
        chat.qtbot.mouseClick(picker.settings, Qt.MouseButton.LeftButton)
        chat.qtbot.waitUntil(lambda: picker.settings_dialog is not None and picker.settings_dialog.isVisible(),
                             timeout=WAIT_MS * 2)
        dialog = picker.settings_dialog
        assert dialog is not None
        chat.qtbot.wait(200)
        _check_geometry(dialog)
        dialog.close()
        picker.close()
    finally:
        chat.window.theme.reset_zoom()


def _top(widget: QWidget, window: QWidget) -> int:
    return widget.mapTo(window, QPoint(0, 0)).y()


def _bottom(widget: QWidget, window: QWidget) -> int:
    return _top(widget, window) + widget.height()


@pytest.mark.parametrize("larger", [0, 3], ids=["1x", "ctrl-plus-3"])
def test_messages_follow_each_other_without_wide_gaps(make_chat: MakeChat, shown, larger: int) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat("Paris is the capital of France.", "Rain on the roof.\nA quiet afternoon.")
    for _ in range(larger):
        chat.qtbot.keyClick(chat.window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    shown(chat, 1040, 780)
    try:
        for question in ("What is the capital of France?", "Write a haiku about rain."):
            chat.type_and_send(question)
            chat.wait_reply_finished()
        chat.qtbot.wait(200)
        window = chat.window
        messages = window.conversation.message_widgets()
        assert [type(m) for m in messages] == [UserMessage, AssistantMessage] * 2
        line = window.conversation.fontMetrics().lineSpacing()
        for question, reply in zip(messages[::2], messages[1::2], strict=True):
            assert isinstance(question, UserMessage) and isinstance(reply, AssistantMessage)
            # Nothing hidden under a question: its answer starts right after its bubble.
            assert _bottom(question, window) == _bottom(question.bubble, window)
            assert _top(reply.role, window) - _bottom(question.bubble, window) <= 1.5 * line
            # Under an answer only its action row (Copy, Regenerate: one line of icons).
            assert _bottom(reply, window) - _bottom(reply.answer, window) <= 2.5 * line
        first_reply, next_question = messages[1], messages[2]
        assert isinstance(next_question, UserMessage)
        assert _top(next_question.bubble, window) - _bottom(first_reply, window) <= 1.5 * line
    finally:
        chat.window.theme.reset_zoom()


def test_the_status_bar_fits_at_800x600(make_chat: MakeChat, shown, tmp_path) -> None:  # type: ignore[no-untyped-def]
    backend = ScriptedBackend.from_texts("Paris.")
    backend.n_ctx = 4096  # it counts tokens, so the status bar has a context figure
    chat = make_chat(backend=backend)
    window = chat.window
    install_serve(window, chat.controller)
    guard = Guard(EgressPolicy.fixed(PolicyView(True, ()), ember_paths()), Ledger(tmp_path / "ledger.jsonl"))
    indicator = install_network_indicator(window.status, guard)
    assert indicator is not None
    window.status.show_model(ModelInfo("SmolLM2 135M Instruct (built in)", "CPU · this build has no GPU support"))
    bar = window.status
    for size, model_shown in (((1600, 1000), True), ((800, 600), False)):
        shown(chat, *size)
        if not chat.window.conversation.message_widgets():
            chat.type_and_send("What is the capital of France?")
            chat.wait_reply_finished()
        bar.show_speed(12.5)
        chat.qtbot.waitUntil(lambda: bar.context.text().startswith("Context "), timeout=WAIT_MS)
        chat.qtbot.waitUntil(lambda w=size[0]: bar.width() == window.width() <= w + 2, timeout=WAIT_MS)
        chat.qtbot.wait(100)
        parts = [p for p in bar.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                 if p.isVisible()]
        for part in parts:
            assert part.geometry().right() < bar.width(), part.accessibleName() or part
            assert _text_overflow(part) == ""
        lefts = sorted(parts, key=lambda p: p.x())
        for part, following in itertools.pairwise(lefts):  # none drawn over another (nor the grip)
            assert part.geometry().right() < following.x(), (part.accessibleName(), following.accessibleName())
        assert indicator.isVisible() and indicator.text() == "Offline · 0 connections"
        # At 800 px the model's name, which the header's chip shows, gives way first.
        assert bar.model.isVisible() is model_shown
        assert bar.device.toolTip()  # the whole device note stays in the tooltip


@pytest.mark.parametrize("size", [(1040, 780), (800, 600)], ids=["1040x780", "800x600"])
def test_get_models_search_download_cancel_use_by_keyboard_and_mouse(make_chat: MakeChat, shown,  # type: ignore[no-untyped-def]
                                                                    size, tmp_path) -> None:
    tiny = gf.write_tiny_llama(tmp_path / "source.gguf", name="Tiny chat").read_bytes()
    downloader = FakeDownloader(chunk=max(1, len(tiny) // 8), pause=True)
    chat = make_chat("x")
    models = tmp_path / "models"
    chat.models.page_options = page_options(small_catalogue(len(tiny)), small_hub(tiny), downloader, models, Gate(),
                                            FakeModelsPrompts(True), FreeMemory(ram_bytes=8 * GB))
    shown(chat, *size)
    picker = chat.models.open_picker()
    chat.qtbot.waitUntil(lambda: not picker.busy, timeout=WAIT_MS * 4)
    chat.qtbot.mouseClick(picker.get_models, Qt.MouseButton.LeftButton)
    page = chat.models.get_models
    assert page is not None
    chat.qtbot.waitUntil(lambda: page.isActiveWindow() and _focused() is page.search_box, timeout=WAIT_MS)
    assert page.width() <= chat.window.width() and page.height() <= chat.window.height()
    chat.qtbot.waitUntil(lambda: "measure" not in page.jobs, timeout=WAIT_MS)
    chat.qtbot.keyClicks(_focused(), "tiny")  # type: ignore[arg-type]
    assert [r.offer.key for r in page.rows] == ["tiny-chat"]
    row = page.rows[0]
    chat.qtbot.wait(100)
    _check_geometry(page)
    assert row.mark.text() == "✓ Runs on the CPU"

    # Download with the mouse: progress in place, then Cancel with the mouse.
    chat.qtbot.mouseClick(row.action, Qt.MouseButton.LeftButton)
    assert downloader.reached.wait(5)
    chat.qtbot.waitUntil(lambda: row.progress.value() > 0, timeout=WAIT_MS)
    chat.qtbot.wait(100)
    assert _inside(row.progress, page) and _inside(row.cancel, page)
    _check_geometry(page)
    chat.qtbot.mouseClick(row.cancel, Qt.MouseButton.LeftButton)
    downloader.resume.set()
    chat.qtbot.waitUntil(lambda: not row.downloading, timeout=WAIT_MS)
    assert row.note.text() == "Download cancelled." and not (models / TINY_TARGET).exists()

    # Again, to the end; then "Use this model" from the keyboard loads it.
    downloader.pause = False
    chat.qtbot.mouseClick(row.action, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: row.ready, timeout=WAIT_MS)
    row.action.setFocus()
    chat.qtbot.keyClick(row.action, Qt.Key.Key_Space)
    # A generous bound: the first llama.cpp load of a run picks its CPU variant first.
    chat.qtbot.waitUntil(lambda: chat.controller.choice is not None
                         and chat.controller.choice.path == models / TINY_TARGET, timeout=WAIT_MS * 6)
    assert not page.isVisible()
