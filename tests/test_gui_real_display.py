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
from gui_helpers import WAIT_MS, Chat, FakeModelsPrompts, earlier_today
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
from desktop.qt.chat.message_view import AssistantMessage, UserMessage
from desktop.qt.chat.tool_card import ToolCallCard
from desktop.qt.window import WindowOptions
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
    pytest.mark.skipif(
        os.environ.get("QT_QPA_PLATFORM") != "xcb" or not os.environ.get("DISPLAY"),
        reason="needs a real display: QT_QPA_PLATFORM=xcb with DISPLAY (see .ci/run)",
    ),
]

MakeChat = Callable[..., Chat]
CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'
SLOW = [{"text": f"word{i} ", "delay_ms": 150} for i in range(60)]
ANSWER = (
    "Here is the result:\n\nThe answer is **42**.\nIt is six times seven.\n\n"
    "```python\nprint(6 * 7)\n```\n\nAnd the area is $\\pi r^2$."
)


def _tools_chat(make_chat: MakeChat, *replies: object) -> Chat:
    chat = make_chat(*replies)
    chat.window.tool_toggle.setChecked(True)
    return chat


def _shot(name: str, window: QWidget | None = None) -> None:
    """With EMBER_SHOTS set (a folder), `window` (else the active one) as it is now, cropped from the
    screen so menus and dialogs over it show too (the closing note's before/after pictures)."""
    folder = os.environ.get("EMBER_SHOTS")
    target = window or QApplication.activeWindow()
    if folder and target is not None:
        import subprocess

        for _ in range(3):
            QApplication.processEvents()
        area = target.geometry()  # a top-level's inside, in screen coordinates
        crop = f"{area.width()}x{area.height()}+{area.x()}+{area.y()}"
        path = os.path.join(folder, f"{name}.png")
        subprocess.run(["import", "-window", "root", "-crop", crop, path], check=False, timeout=30)


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


def _asked_to_run_the_tool(chat: Chat) -> ToolCallCard:
    """Type the tool question into the box; the approval card appears and takes the focus."""
    _type(chat, "what is 6*7?")
    chat.qtbot.waitUntil(
        lambda: any(isinstance(c, ToolCallCard) and c.asking for c in chat.reply().tool_cards()), timeout=WAIT_MS
    )
    card = next(c for c in chat.reply().tool_cards() if isinstance(c, ToolCallCard))
    chat.qtbot.waitUntil(lambda: _focused() is card.approve, timeout=WAIT_MS)
    return card


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
    chat.qtbot.waitUntil(
        lambda: any(isinstance(c, ToolCallCard) and c.asking for c in chat.reply().tool_cards()), timeout=WAIT_MS
    )
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
def test_every_label_fits_and_every_widget_is_inside(
    make_chat: MakeChat,
    shown,
    size: tuple[int, int],  # type: ignore[no-untyped-def]
    larger: int,
    mode: str,
) -> None:
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
    return (
        layout.indexOf(widget) >= 0
        or any(
            (item := layout.itemAt(i)) is not None and (sub := item.layout()) is not None and sub.indexOf(widget) >= 0
            for i in range(layout.count())
        )
        or _nested(layout, widget)
    )


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
        chat.qtbot.waitUntil(
            # A generous bound: the dialog first asks llama.cpp about the GPU, and its first import
            # picks a CPU variant (14 s on a loaded two-core machine).
            lambda: picker.settings_dialog is not None and picker.settings_dialog.isVisible(),
            timeout=WAIT_MS * 6,
        )
        dialog = picker.settings_dialog
        assert dialog is not None
        chat.qtbot.waitUntil(lambda: bool(dialog.gpu_where.text()), timeout=WAIT_MS * 6)  # type: ignore[attr-defined]
        chat.qtbot.wait(200)
        _check_geometry(dialog)
        _check_no_field_cut(dialog)
        if not larger:  # the picture: a field's hover help and its Reset
            _show_field_help(chat, dialog)
        dialog.close()
        picker.close()
    finally:
        chat.window.theme.reset_zoom()


def _check_no_field_cut(dialog: QWidget) -> None:
    """Every wrapped label is as tall as its text, and the fields scroll only when the screen is short."""
    for label in dialog.findChildren(QLabel):
        if label.isVisible() and label.wordWrap() and label.text():
            assert label.height() >= label.heightForWidth(label.width()) - 1, label.text()[:60]
    area = dialog.fields_area  # type: ignore[attr-defined]
    assert area.widget().width() <= area.viewport().width()  # nothing cut on the right
    screen = dialog.screen().availableGeometry().height()
    assert area.verticalScrollBar().maximum() == 0 or dialog.height() >= int(screen * 0.9) - 2
    assert _inside(dialog.buttons, dialog)  # type: ignore[attr-defined]


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
    backend.n_ctx = 4096  # it counts tokens (the composer's meter shows them, not the status bar)
    guard = Guard(EgressPolicy.fixed(PolicyView(True, ()), ember_paths()), Ledger(tmp_path / "ledger.jsonl"))
    chat = make_chat(backend=backend, options=WindowOptions(guard=guard))  # the serve toggle and this indicator
    window = chat.window
    indicator = window.network
    assert indicator is not None
    window.status.show_model(ModelInfo("SmolLM2 135M Instruct (built in)", "CPU · this build has no GPU support"))
    bar = window.status
    for size, model_shown in (((1600, 1000), True), ((1040, 780), False), ((800, 600), False)):
        shown(chat, *size)
        if not chat.window.conversation.message_widgets():
            chat.type_and_send("What is the capital of France?")
            chat.wait_reply_finished()
        bar.show_speed(12.5)
        chat.qtbot.waitUntil(lambda: window.context_meter.text().endswith("/ 4,096"), timeout=WAIT_MS)
        chat.qtbot.waitUntil(lambda w=size[0]: bar.width() == window.width() <= w + 2, timeout=WAIT_MS)
        chat.qtbot.wait(100)
        parts = [
            p for p in bar.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly) if p.isVisible()
        ]
        for part in parts:
            assert part.geometry().right() < bar.width(), part.accessibleName() or part
            assert _text_overflow(part) == ""
        lefts = sorted(parts, key=lambda p: p.x())
        for part, following in itertools.pairwise(lefts):  # none drawn over another (nor the grip)
            assert part.geometry().right() < following.x(), (part.accessibleName(), following.accessibleName())
        assert indicator.isVisible() and indicator.text() == "No outgoing connections"
        assert bar.speed.text() == "12 tok/s"  # words a person reads, no "drafted accepted"
        _shot(f"27-status-bar-words-one-count-{size[0]}x{size[1]}", window)
        # Wide, everything shows; narrow, the model's name (the header's chip shows it) gives way
        # first if anything must (with the count left to the composer's meter, it fits at 800 px).
        if model_shown:
            assert bar.model.isVisible()
        assert bar.device.toolTip()  # the whole device note stays in the tooltip


@pytest.mark.parametrize("size", [(1040, 780), (800, 600)], ids=["1040x780", "800x600"])
def test_get_models_search_download_cancel_use_by_keyboard_and_mouse(
    make_chat: MakeChat,
    shown,  # type: ignore[no-untyped-def]
    size,
    tmp_path,
) -> None:
    tiny = gf.write_tiny_llama(tmp_path / "source.gguf", name="Tiny chat").read_bytes()
    downloader = FakeDownloader(chunk=max(1, len(tiny) // 8), pause=True)
    chat = make_chat("x")
    models = tmp_path / "models"
    chat.models.page_options = page_options(
        small_catalogue(len(tiny)),
        small_hub(tiny),
        downloader,
        models,
        Gate(),
        FakeModelsPrompts(True),
        FreeMemory(ram_bytes=8 * GB),
    )
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
    assert row.note.text() == "Download cancelled; what was downloaded is kept." and not (models / TINY_TARGET).exists()
    assert row.action.text().startswith("Resume download (")  # the part is kept: the same button resumes it
    chat.qtbot.wait(100)
    _check_geometry(page)

    # Resume, to the end; then "Use this model" from the keyboard loads it.
    downloader.pause = False
    chat.qtbot.mouseClick(row.action, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: row.ready, timeout=WAIT_MS)
    row.action.setFocus()
    chat.qtbot.keyClick(row.action, Qt.Key.Key_Space)
    # A generous bound: the first llama.cpp load of a run picks its CPU variant first.
    chat.qtbot.waitUntil(
        lambda: (
            chat.controller.models.choice is not None and chat.controller.models.choice.path == models / TINY_TARGET
        ),
        timeout=WAIT_MS * 6,
    )
    assert not page.isVisible()


def test_a_message_sent_during_a_slow_load_waits_then_runs_with_the_models_settings(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    import asyncio
    import threading

    from desktop.core.model_choice import ModelChoice
    from engine.api.factory import BackendSpec
    from models.library.settings import ModelSettings

    gate = threading.Event()
    backend = ScriptedBackend.from_texts("Hello there.")

    class Slow(ModelChoice):
        def factory(self):  # type: ignore[no-untyped-def]
            from engine.llama import load_progress

            report = load_progress.current()
            assert report is not None
            report(0.6)  # llama.cpp's figure: the share of the weights read
            assert gate.wait(30)
            return backend

    chat = make_chat(no_model=True)
    shown(chat, 1040, 780)
    choice = Slow(
        BackendSpec("script", "x"), label="Slow model", settings=ModelSettings(repeat_penalty=1.15, max_tokens=1024)
    )
    loading = asyncio.ensure_future(chat.models.load(choice))
    chat.qtbot.waitUntil(lambda: chat.window.header.loading, timeout=WAIT_MS)
    chat.window.composer.focus_edit()
    _type(chat, "hi")
    chat.qtbot.waitUntil(lambda: chat.window.last_reply() is not None, timeout=WAIT_MS)
    chat.qtbot.wait(300)
    _shot("02-first-message-waits-for-load-1040x780", chat.window)
    waiting = chat.reply().waiting
    chat.qtbot.waitUntil(lambda: waiting.isVisible(), timeout=WAIT_MS)
    assert waiting.text().startswith("Waiting for the model to load… 60 %") and "●" in waiting.text()
    assert chat.window.status.currentMessage() == "Loading Slow model… 60 %"
    gate.set()
    reply = chat.wait_reply_finished()
    assert reply.answer_text() == "Hello there."
    used = backend.requests[0]
    assert used.sampling.repeat_penalty == 1.15 and used.max_tokens == 1024
    chat.qtbot.waitUntil(loading.done, timeout=WAIT_MS)


@pytest.mark.parametrize("size", [(800, 600), (1040, 780)], ids=["800x600", "1040x780"])
def test_the_model_picker_names_read_to_their_end(make_chat: MakeChat, shown, tmp_path, size) -> None:  # type: ignore[no-untyped-def]
    from gui_helpers import FakePrompts, open_picker
    from PySide6.QtGui import QFontMetrics

    folder = tmp_path / "models"
    folder.mkdir()
    gf.write_tiny_llama(folder / "my-smol-copy-of-SmolLM2-135M-Instruct-Q4_K_M.gguf")
    cut = gf.write_tiny_llama(folder / "broken-download-Q8_0.gguf")
    os.truncate(cut, cut.stat().st_size - 1000)
    (folder / "renamed-paper.gguf").write_bytes(b"%PDF-1.7\n" + bytes(300))
    chat = make_chat("x")
    shown(chat, *size)
    picker = open_picker(chat, FakePrompts(folders=[folder]))
    with chat.qtbot.waitSignal(picker.scanned, timeout=WAIT_MS * 4):
        chat.qtbot.mouseClick(picker.add_folder, Qt.MouseButton.LeftButton)
    chat.qtbot.wait(300)
    _shot(f"11-model-picker-names-{size[0]}x{size[1]}", chat.window)
    table = picker.table
    for index in range(table.topLevelItemCount()):
        item = table.topLevelItem(index)
        assert item is not None
        name = item.text(0).split("\n")[0]
        column = min(table.columnWidth(0), table.viewport().width())  # the name's column, as far as it shows
        room = column - (table.iconSize().width() + 12 if not item.icon(0).isNull() else 8)
        needed = QFontMetrics(item.font(0)).horizontalAdvance(name)
        assert needed <= room, f"{name!r} needs {needed} px, has {room}"
    names = {row.name: row for row in picker.rows}
    assert names["broken-download-Q8_0.gguf"].line.startswith("Incomplete download")
    paper = names["renamed-paper.gguf"]
    assert paper.skipped and paper.line == "Not a GGUF model (this is a PDF)"
    picker.select_row(picker.rows.index(names["broken-download-Q8_0.gguf"]))
    assert not picker.load.isEnabled()
    chat.qtbot.wait(200)
    _shot(f"12-model-bad-file-load-disabled-{size[0]}x{size[1]}", chat.window)
    picker.close()


def test_the_message_box_keeps_its_room_at_800x600_with_the_sidebar_and_largest_text(
    make_chat: MakeChat, shown
) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat("x")
    for _ in range(3):
        chat.qtbot.keyClick(chat.window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    try:
        shown(chat, 800, 600)
        window = chat.window
        chat.qtbot.keyClick(window, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)  # the sidebar, opened
        chat.qtbot.waitUntil(lambda: window.sidebar.isVisible(), timeout=WAIT_MS)
        chat.qtbot.wait(300)
        _shot("14-composer-room-sidebar-over-chat-largest-text-800x600", window)
        composer = window.composer
        row = composer.contentsRect().width()
        assert composer.edit.width() >= 0.6 * row, f"message box {composer.edit.width()} of {row} px"
        assert composer.edit.width() >= 0.5 * window.width()  # the sidebar floats over the chat, not beside it
        for part in (composer.button, composer.options):
            assert _inside(part, window) and part.isVisible()
    finally:
        chat.window.theme.reset_zoom()


def _part_of(chat: Chat, widget: QWidget | None) -> str:
    window = chat.window
    for name, part in (
        ("header", window.header),
        ("sidebar", window.sidebar),
        ("transcript", window.conversation),
        ("composer", window.composer),
    ):
        if widget is not None and (widget is part or part.isAncestorOf(widget)):
            return name
    return "other"


def test_tab_goes_in_reading_order_with_a_visible_focus(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat("Here is **an answer** with `code`.")
    shown(chat, 1040, 780)
    chat.window.set_sidebar_visible(True)
    chat.type_and_send("a question")
    chat.wait_reply_finished()
    chat.window.composer.focus_edit()
    chat.qtbot.waitUntil(lambda: _in_composer(chat), timeout=WAIT_MS)
    seen: list[str] = []
    for _ in range(60):
        focused = _focused()
        assert focused is not None
        chat.qtbot.keyClick(focused, Qt.Key.Key_Tab)
        chat.qtbot.wait(20)
        if _in_composer(chat):
            break
        seen.append(_part_of(chat, _focused()))
        if _focused() is getattr(chat.window.sidebar, "list", None):
            _shot("23-tab-order-chat-list-focus-1040x780", chat.window)
    while seen and seen[0] == "composer":  # the box's own row first (Send), then round from the top
        seen.pop(0)
    collapsed = [r for i, r in enumerate(seen) if i == 0 or seen[i - 1] != r]
    # The box's own controls come before it (one row) or after it (stacked below, the default
    # size since #49): either way the cycle is header, sidebar, transcript, composer.
    assert collapsed in (["header", "sidebar", "transcript", "composer"], ["header", "sidebar", "transcript"]), seen
    assert (
        chat.window.context_meter not in chat.window.findChildren(QWidget)
        or not chat.window.context_meter.focusPolicy() & Qt.FocusPolicy.TabFocus
    )


def test_focus_comes_back_to_the_message_box_after_each_composer_menu(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat("x")  # the window builds its tools and documents buttons itself
    shown(chat, 1040, 780)
    buttons = [b for b in chat.window.composer.findChildren(QToolButton) if b.menu() is not None and b.isVisible()]
    assert len(buttons) >= 2  # "+" and the paperclip at least
    from PySide6.QtCore import QTimer
    from PySide6.QtTest import QTest

    inside: list[bool] = []
    for button in buttons:
        menu = button.menu()
        assert menu is not None

        def close_it(menu=menu) -> None:  # type: ignore[no-untyped-def]
            if menu.isVisible():
                inside.append(
                    QRect(chat.window.mapToGlobal(QPoint(0, 0)), chat.window.size()).contains(menu.geometry())
                )
                _shot(f"16-composer-menu-{len(inside)}-inside-the-window-1040x780", chat.window)
                QTest.keyClick(menu, Qt.Key.Key_Escape)
            else:
                QTimer.singleShot(100, close_it)

        QTimer.singleShot(300, close_it)  # the click opens the menu in a loop of its own
        chat.qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        chat.qtbot.waitUntil(lambda menu=menu: not menu.isVisible(), timeout=WAIT_MS)
        chat.qtbot.waitUntil(lambda: _in_composer(chat), timeout=WAIT_MS)
    assert inside and all(inside), inside  # every menu opened inside the window
    chat.qtbot.keyClicks(_focused(), "typed after the menus")
    assert chat.window.composer.text() == "typed after the menus"
    _shot("24-focus-back-in-the-box-after-the-menus-1040x780", chat.window)


def test_focus_comes_back_to_the_message_box_after_each_expander(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    thinking = [{"text": "<think>"}, {"text": "six sevens"}, {"text": "</think>"}, {"text": "Let me check. " + CALC}]
    chat = _tools_chat(make_chat, thinking, "It is 42.")
    shown(chat, 1040, 780)
    chat.window.composer.focus_edit()
    card = _asked_to_run_the_tool(chat)
    chat.qtbot.keyClick(card.approve, Qt.Key.Key_Y)
    reply = chat.wait_reply_finished()
    assert reply.thinking is not None
    for expander in (reply.thinking.header, card.summary):  # "Thought for 1s", "Used calculator → 42"
        chat.window.composer.focus_edit()
        chat.qtbot.waitUntil(lambda e=expander: e.isVisible() and _in_composer(chat), timeout=WAIT_MS)
        opened = expander.isChecked()
        chat.qtbot.mouseClick(expander, Qt.MouseButton.LeftButton)
        assert expander.isChecked() != opened  # it did open (or close)
        chat.qtbot.waitUntil(lambda: _in_composer(chat), timeout=WAIT_MS)
    chat.qtbot.keyClicks(_focused(), "typed after the expanders")
    assert chat.window.composer.text() == "typed after the expanders"
    # A keyboard user who reaches an expander with Tab keeps the focus on it when pressing Space.
    header = reply.thinking.header
    header.setFocus(Qt.FocusReason.TabFocusReason)
    chat.qtbot.keyClick(header, Qt.Key.Key_Space)
    assert _focused() is header


def test_a_50000_character_paragraph_wraps_at_words_with_no_inner_scroll_box(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    import time as _time

    from PySide6.QtCore import QTimer

    from desktop.qt.answer.bulk_text import BulkTextView

    words = "the quick brown fox jumps over the lazy dog and keeps on running "
    paragraph = (words * (50_000 // len(words) + 1))[:50_000]
    pieces = [paragraph[i : i + 400] for i in range(0, len(paragraph), 400)]
    chat = make_chat(pieces)
    shown(chat, 1040, 780)
    stalls: list[float] = []
    last = [_time.perf_counter()]

    def tick() -> None:
        now = _time.perf_counter()
        stalls.append((now - last[0]) * 1000)
        last[0] = now

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(5)
    chat.type_and_send("a long paragraph please")
    reply = chat.wait_reply_finished(timeout=WAIT_MS * 6)
    chat.qtbot.waitUntil(reply.on_screen, timeout=WAIT_MS * 6)
    chat.qtbot.wait(200)
    timer.stop()
    worst = max(stalls, default=0.0)
    print(f"50,000-character paragraph: worst event-loop stall {worst:.0f} ms")  # a figure, not a gate
    assert worst < 5_000  # a generous bound against a freeze only
    _shot("04-long-paragraph-wraps-at-words-1040x780", chat.window)
    assert reply.answer_text() == paragraph
    bulk = reply.findChild(BulkTextView)
    inner = [a for a in reply.findChildren(QAbstractScrollArea) if a.isVisible()]
    for area in inner:  # none scrolls inside the scrolling conversation
        assert area.verticalScrollBar().maximum() == 0, type(area).__name__
    if bulk is not None:
        shown_text = bulk.toPlainText()
        for line in shown_text.split("\n")[:-1]:
            assert line.endswith(" "), f"cut mid-word: …{line[-20:]!r}"


def test_the_sidebar_groups_by_date_and_archives_by_keyboard_and_mouse(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    import time as _time

    from desktop.qt.history.sidebar import HistorySidebar

    chat = make_chat("x")
    store = chat.controller.history.store if chat.controller.history is not None else None
    assert store is not None
    now = _time.time()
    ids: list[int] = []
    for title, days_ago in (("Soup", 0.01), ("Bread", 1.0), ("Tea", 3.0), ("Jam", 60.0)):
        conv = store.create_conversation(title=title).id
        store.add_message(conv, "user", title, parent_id=None)
        when = earlier_today(days_ago * 86400, now) if days_ago < 1 else now - days_ago * 86400
        store.set_timestamps(conv, created_at=when, updated_at=when)
        ids.append(conv)
    shown(chat, 1040, 780)
    chat.window.set_sidebar_visible(True)
    sidebar = chat.window.sidebar
    assert isinstance(sidebar, HistorySidebar)
    chat.qtbot.waitUntil(sidebar.refresh().done, timeout=WAIT_MS)
    listing = sidebar.list
    assert listing.headers()[:3] == ["Today", "Yesterday", "Previous 7 days"] and len(listing.headers()) == 4
    first = listing.item_of(ids[0])
    assert first is not None
    chat.qtbot.mouseClick(listing.viewport(), Qt.MouseButton.LeftButton, pos=listing.visualItemRect(first).center())
    chat.qtbot.waitUntil(lambda: listing.current_id() == ids[0] and listing.hasFocus(), timeout=WAIT_MS)
    chat.qtbot.keyClick(listing, Qt.Key.Key_Down)
    assert listing.current_id() == ids[1]  # over the "Yesterday" header
    _shot("21-sidebar-date-groups-1040x780", chat.window)
    chat.qtbot.keyClick(listing, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    toggle = sidebar.archive_toggle
    chat.qtbot.waitUntil(lambda: toggle.isVisible() and toggle.text().startswith("Archived (1)"), timeout=WAIT_MS)
    assert ids[1] not in listing.conversation_ids() and store.archived_count() == 1
    inside = sidebar.rect().contains(QRect(toggle.mapTo(sidebar, QPoint(0, 0)), toggle.size()))
    assert inside and toggle.fontMetrics().horizontalAdvance(toggle.text()) < toggle.width()
    chat.qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: listing.conversation_ids() == [ids[1]], timeout=WAIT_MS)
    _shot("21-sidebar-archived-1040x780", chat.window)
    row = listing.item_of(ids[1])
    assert row is not None
    chat.qtbot.mouseClick(listing.viewport(), Qt.MouseButton.LeftButton, pos=listing.visualItemRect(row).center())
    chat.qtbot.waitUntil(lambda: listing.current_id() == ids[1] and listing.hasFocus(), timeout=WAIT_MS)
    chat.qtbot.keyClick(listing, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    chat.qtbot.waitUntil(lambda: store.archived_count() == 0, timeout=WAIT_MS)
    chat.qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: listing.conversation_ids() == ids, timeout=WAIT_MS)


# The closing note's "after" pictures (issue 37): each test reaches the state a user sees,
# checks on the real window what the picture shows, and takes it when EMBER_SHOTS is set.


def _on_screen(widget: QWidget, window: QWidget) -> bool:
    return widget.isVisible() and _inside(widget, window) and not widget.visibleRegion().isEmpty()


def test_stopped_before_any_answer_shows_regenerate_on_screen(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    chat = make_chat([{"text": "", "delay_ms": 3000}, "late"], "Here it is.")
    shown(chat, 1040, 780)
    chat.type_and_send("What is the capital of France?")
    chat.qtbot.waitUntil(lambda: chat.controller.busy and chat.window.last_reply() is not None, timeout=WAIT_MS)
    chat.qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_Escape)
    reply = chat.wait_reply_finished()
    assert reply.status.text() == "Stopped before any answer"
    chat.qtbot.waitUntil(lambda: _on_screen(reply.regenerate_button, chat.window), timeout=WAIT_MS)
    chat.qtbot.wait(200)
    _shot("25-stopped-before-any-answer-regenerate-1040x780", chat.window)
    chat.qtbot.mouseClick(reply.regenerate_button, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: chat.reply().answer_text() == "Here it is.", timeout=WAIT_MS)


def test_the_header_title_follows_a_rename_on_screen(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    from desktop.qt.history.sidebar import HistorySidebar

    chat = make_chat("Rayleigh scattering: blue light scatters more.")
    shown(chat, 1040, 780)
    chat.window.set_sidebar_visible(True)
    chat.type_and_send("Why is the sky blue")
    chat.wait_reply_finished()
    history = chat.controller.history
    sidebar = chat.window.sidebar
    assert history is not None and history.conversation_id is not None and isinstance(sidebar, HistorySidebar)
    chat.qtbot.waitUntil(sidebar.rename(history.conversation_id, "Sky colour (physics)").done, timeout=WAIT_MS)
    title = chat.window.header.title
    chat.qtbot.waitUntil(lambda: title.full_text() == "Sky colour (physics)", timeout=WAIT_MS)
    chat.qtbot.wait(200)
    assert title.text() == "Sky colour (physics)" and _on_screen(title, chat.window)  # in full, not elided
    _shot("20-rename-header-follows-1040x780", chat.window)


def test_a_jump_to_latest_button_shows_while_scrolled_up_during_a_reply(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    from desktop.qt.chat.context_meter import UNKNOWN

    backend = ScriptedBackend.from_texts(
        [{"text": f"Line {i} of a long answer.\n\n", "delay_ms": 40} for i in range(150)]
    )
    backend.n_ctx = 4096  # so the composer's one token count shows, moving with the reply
    chat = make_chat(backend=backend)
    shown(chat, 1040, 780)
    chat.type_and_send("many lines please")
    bar = chat.window.conversation.verticalScrollBar()
    meter = chat.window.context_meter
    counts: set[str] = set()
    chat.qtbot.waitUntil(
        lambda: counts.add(meter.text()) or (bar.maximum() > 400 and len(counts) >= 3),  # type: ignore[func-returns-value]
        timeout=WAIT_MS,
    )
    assert all(c.endswith("/ 4,096") for c in counts if c != UNKNOWN), counts
    bar.setValue(0)  # the reader scrolls up while it streams
    jump = chat.window.jump_latest
    chat.qtbot.waitUntil(lambda: _on_screen(jump, chat.window), timeout=WAIT_MS)
    assert jump.text() == "↓ latest" and chat.controller.busy
    _shot("29-jump-to-latest-and-live-token-count-1040x780", chat.window)
    chat.qtbot.mouseClick(jump, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: bar.value() >= bar.maximum() - 40, timeout=WAIT_MS)
    chat.controller.stop()
    chat.wait_idle()


def test_attachments_show_as_chips_and_a_drop_shows_its_overlay(make_chat: MakeChat, shown, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent

    from desktop.qt.chat.attachment_chips import Chip
    from tests.projector_fixture import png

    backend = ScriptedBackend.from_texts("The meeting is on Tuesday.")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    shown(chat, 1040, 780)
    notes, picture = tmp_path / "meeting-notes.txt", tmp_path / "whiteboard.png"
    notes.write_text("The meeting is on Tuesday at ten.")
    picture.write_bytes(png(120, 80, seed=3))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in (notes, picture)])
    attachments = chat.window.attachments
    where = QPointF(chat.window.conversation.geometry().center())
    enter = QDragEnterEvent(
        where.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(chat.window, enter)
    chat.qtbot.waitUntil(lambda: _on_screen(attachments.overlay, chat.window), timeout=WAIT_MS)
    assert "Drop files here" in attachments.overlay.text()
    assert attachments.overlay.width() >= 0.5 * chat.window.conversation.width()  # over the chat, not the box
    _shot("17-drop-overlay-over-the-chat-1040x780", chat.window)
    QApplication.sendEvent(chat.window, QDragLeaveEvent())
    chat.window.composer.edit.insertFromMimeData(mime)  # what the drop (or a paste) does
    chat.qtbot.waitUntil(  # the dropped files are read on a worker: the chips come a moment later
        lambda: len(attachments.row.chips) == 2 and all(_on_screen(c, chat.window) for c in attachments.row.chips),
        timeout=WAIT_MS,
    )
    chips = attachments.row.chips
    assert all(c.remove_button is not None for c in chips)  # × above the box
    assert max(_bottom(c, chat.window) for c in chips) <= _top(chat.window.composer.edit, chat.window) + 2
    chat.window.composer.edit.setPlainText("When is the meeting?")
    _shot("17-attachment-chips-above-the-box-1040x780", chat.window)
    chat.qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_Return)
    chat.wait_reply_finished()
    question = chat.window.conversation.message_widgets()[-2]
    assert isinstance(question, UserMessage)
    sent = question.findChildren(Chip)
    assert sorted(c.name for c in sent) == ["meeting-notes.txt", "whiteboard.png"]
    assert all(c.remove_button is None and _on_screen(c, chat.window) for c in sent)
    chat.qtbot.wait(200)
    _shot("17-attachment-chips-on-the-question-1040x780", chat.window)


def test_tools_always_allowed_say_so_and_the_card_keys_match_the_sheet(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    chat = _tools_chat(make_chat, "Let me calculate. " + CALC, "It is 42.", "Again. " + CALC, "Still 42.")
    shown(chat, 1040, 780)
    chat.window.composer.focus_edit()
    card = _asked_to_run_the_tool(chat)
    labels = [b.text() for b in card.findChildren(QPushButton) if b.isVisible()]
    assert not any("&" in label for label in labels), labels  # no Alt keys beside the sheet's A / N
    _shot("07-approval-card-asking-1040x780", chat.window)
    chat.qtbot.keyClick(card.approve, Qt.Key.Key_A)  # the sheet's key for "Always allow"
    first = chat.wait_reply_finished()
    _type(chat, "and again?")
    chat.qtbot.waitUntil(lambda: chat.reply() is not first and chat.reply().finished, timeout=WAIT_MS)
    chat.wait_idle()
    auto = chat.reply().tool_cards()[0]
    assert isinstance(auto, ToolCallCard)
    assert auto.summary.full_text() == "Ran calculator automatically (always allowed) → 42"
    assert _on_screen(auto.summary, chat.window)
    chat.qtbot.wait(200)
    _shot("07-always-allowed-run-says-so-1040x780", chat.window)


def test_the_server_and_network_speak_plainly(make_chat: MakeChat, shown, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import socket

    import httpx

    guard = Guard(EgressPolicy.fixed(PolicyView(True, ()), ember_paths()), Ledger(tmp_path / "ledger.jsonl"))
    chat = make_chat("Hello from the API.", options=WindowOptions(guard=guard))
    shown(chat, 1040, 780)
    serve, indicator = chat.window.serve, chat.window.network
    assert indicator is not None
    with socket.socket() as probe:  # a free port, so no other test's server is in the way
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve.set_port(port)
    try:
        assert serve.start() and serve.server is not None
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(3):
            httpx.post(f"{serve.server.address}/chat/completions", json=body, timeout=20)
        real = serve.server.port
        chat.qtbot.waitUntil(lambda: serve.text() == f"API server on · 127.0.0.1:{real} · 3 requests", timeout=WAIT_MS)
        indicator.refresh()
        assert indicator.text() == "No outgoing connections"  # the API's incoming connections are not egress
        assert _on_screen(serve, chat.window) and _on_screen(indicator, chat.window)
        assert _text_overflow(serve) == "" and _text_overflow(indicator) == ""
        chat.qtbot.wait(200)
        _shot("22-api-server-and-egress-words-1040x780", chat.window)
        dialog = indicator.show_report()
        chat.qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
        words = dialog.summary.text()
        assert "It has made no outgoing connection since it started." in words, words
        for jargon in ("audit hook", "unshare", "sys.addaudithook", "-cn"):
            assert jargon not in words
        assert dialog.allow.isEnabled() and dialog.entry.isEnabled()  # the allow list is editable
        chat.qtbot.wait(200)
        _shot("22-network-dialog-plain-sentences-1040x780", chat.window)
        dialog.close()
    finally:
        serve.stop()


def test_the_shortcuts_sheet_lists_the_reply_shortcuts(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    from desktop.qt.frame.shortcuts_sheet import ShortcutsSheet

    chat = make_chat("x")
    shown(chat, 1040, 780)
    chat.qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_F1)
    chat.qtbot.waitUntil(lambda: chat.window.findChild(ShortcutsSheet) is not None, timeout=WAIT_MS)
    sheet = chat.window.findChild(ShortcutsSheet)
    assert isinstance(sheet, ShortcutsSheet)
    chat.qtbot.waitUntil(sheet.isVisible, timeout=WAIT_MS)
    texts = [label.text() for label in sheet.findChildren(QLabel)]
    for keys in ("Ctrl+Shift+C", "Ctrl+R", "Ctrl+K"):
        assert any(keys in t for t in texts), keys
    assert _inside(sheet, chat.window) or sheet.height() <= chat.window.height()
    chat.qtbot.wait(200)
    _shot("26-shortcuts-sheet-reply-keys-1040x780", chat.window)
    sheet.close()


def _show_field_help(chat: Chat, dialog: QWidget) -> None:
    """The pointer rests on Temperature: its help shows, wrapped, with Reset beside every field."""
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QCursor, QHelpEvent
    from PySide6.QtWidgets import QToolTip

    field = dialog.temperature  # type: ignore[attr-defined]
    resets = [b for b in dialog.findChildren(QToolButton) if b.objectName() == "ResetField" and b.isVisible()]
    assert len(resets) >= 4 and all(_inside(b, dialog.fields_area.widget()) for b in resets)  # type: ignore[attr-defined]
    dialog.fields_area.ensureWidgetVisible(field)  # type: ignore[attr-defined]  # a short screen scrolls the fields
    chat.qtbot.wait(50)
    centre = field.rect().center()
    QCursor.setPos(field.mapToGlobal(centre))
    chat.qtbot.wait(100)
    # What the hover delivers (sent too: the pointer may already rest there, and then no move comes).
    QApplication.sendEvent(field, QHelpEvent(QEvent.Type.ToolTip, centre, field.mapToGlobal(centre)))
    chat.qtbot.waitUntil(QToolTip.isVisible, timeout=WAIT_MS)
    assert "adventurous" in QToolTip.text()  # a sentence, not a label
    [tip] = [w for w in QApplication.topLevelWidgets() if w.objectName() == "qtooltip_label" and w.isVisible()]
    assert tip.width() <= dialog.width(), f"the help is one line {tip.width()} px wide"  # wrapped, readable
    chat.qtbot.wait(300)
    _shot("13-settings-field-help-and-reset-1040x780", chat.window)
    QToolTip.hideText()


def test_the_header_menu_opens_inside_the_window_at_800x600(make_chat: MakeChat, shown) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QTimer
    from PySide6.QtTest import QTest

    chat = make_chat("x")
    shown(chat, 800, 600)
    header = chat.window.header
    menu = header.menu
    inside: list[bool] = []

    def close_it() -> None:
        if menu.isVisible():
            inside.append(QRect(chat.window.mapToGlobal(QPoint(0, 0)), chat.window.size()).contains(menu.geometry()))
            _shot("16-header-menu-inside-the-window-800x600", chat.window)
            QTest.keyClick(menu, Qt.Key.Key_Escape)
        else:
            QTimer.singleShot(100, close_it)

    QTimer.singleShot(300, close_it)
    chat.qtbot.mouseClick(header.menu_button, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: not menu.isVisible() and bool(inside), timeout=WAIT_MS)
    assert inside == [True]
