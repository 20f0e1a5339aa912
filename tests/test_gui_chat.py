"""The chat window: streaming, composer, stop, copy, Markdown safety, following the bottom."""

from __future__ import annotations

from collections.abc import Callable

from gui_helpers import WAIT_MS, Chat, shown_answer
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QLabel, QPlainTextEdit
from pytestqt.qtbot import QtBot
from qasync import asyncSlot

from desktop.qt.answer.markdown_view import CodeBlock, CopyButton, TextSegment
from desktop.qt.look.style import monospace_font
from engine.session.messages import branch_messages

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]


def slow(*texts: str, delay_ms: int = 15) -> list[dict[str, object]]:
    return [{"text": t, "delay_ms": delay_ms} for t in texts]


def test_sent_message_streams_into_an_assistant_message(make_chat: MakeChat, qtbot: QtBot) -> None:
    words = [f"word{i} " for i in range(40)]
    chat = make_chat(slow(*words))
    chat.type_and_send("hello")
    assert chat.window.composer.text() == ""
    qtbot.waitUntil(lambda: chat.window.composer.button.text() == "Stop", timeout=WAIT_MS)
    # Part of the answer is on screen while the reply is still streaming.
    qtbot.waitUntil(lambda: "word3" in shown_answer(chat.reply()), timeout=WAIT_MS)
    assert not chat.reply().finished
    reply = chat.wait_reply_finished()
    assert shown_answer(reply).strip() == "".join(words).strip()
    assert branch_messages(chat.controller.session.path()) == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "".join(words)},
    ]
    assert chat.window.composer.button.text() == "Send"


def test_status_bar_shows_model_and_speed_and_leaves_the_count_to_the_meter(make_chat: MakeChat) -> None:
    chat = make_chat(["one ", "two ", "three"])
    chat.type_and_send("hi")
    chat.wait_reply_finished()
    status = chat.window.status
    assert status.device.text() == "Scripted"
    assert status.speed.text().endswith("tok/s")
    # The context used is the composer meter's alone: the status bar does not repeat it.
    assert not any("Context" in label.text() or " / " in label.text() for label in status.findChildren(QLabel))


def test_shift_enter_inserts_a_newline_and_enter_sends(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("ok")
    edit = chat.window.composer.edit
    edit.setFocus()
    qtbot.keyClicks(edit, "line one")
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(edit, "line two")
    assert edit.toPlainText() == "line one\nline two"
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    chat.wait_reply_finished()
    assert branch_messages(chat.controller.session.path())[0]["content"] == "line one\nline two"


def test_composer_grows_with_its_text(make_chat: MakeChat) -> None:
    chat = make_chat()
    edit = chat.window.composer.edit
    one_line = edit.height()
    edit.setPlainText("a\nb\nc\nd")
    assert edit.height() > one_line
    edit.setPlainText("\n".join("x" * 50))
    capped = edit.height()
    edit.setPlainText("\n".join("x" * 80))
    assert edit.height() == capped  # grows up to a cap, then scrolls


def test_stop_mid_stream_keeps_the_partial_answer(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(slow(*(f"tok{i} " for i in range(200)), delay_ms=20))
    chat.type_and_send("tell me everything")
    qtbot.waitUntil(lambda: "tok3" in shown_answer(chat.reply()), timeout=WAIT_MS)
    qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_Escape)
    reply = chat.wait_reply_finished()
    answer = reply.answer_text()
    assert "tok3" in answer and "tok199" not in answer
    assert reply.status.text() == "Stopped"
    assert shown_answer(reply).strip() == answer.strip()
    assert branch_messages(chat.controller.session.path())[-1] == {"role": "assistant", "content": answer}
    assert chat.window.composer.button.text() == "Send"


def test_the_stop_button_stops_the_reply(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(slow(*(f"tok{i} " for i in range(200)), delay_ms=20), "next answer")
    chat.type_and_send("go")
    qtbot.waitUntil(lambda: "tok2" in shown_answer(chat.reply()), timeout=WAIT_MS)
    qtbot.mouseClick(chat.window.composer.button, Qt.MouseButton.LeftButton)
    assert chat.wait_reply_finished().status.text() == "Stopped"
    chat.type_and_send("and now?")  # the app is fully usable after a stop
    qtbot.waitUntil(lambda: chat.reply().answer_text() == "next answer", timeout=WAIT_MS)


def test_copy_copies_the_answer_only_never_thinking(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(["<think>", "secret reasoning", "</think>", "The **answer**."])
    chat.type_and_send("q")
    reply = chat.wait_reply_finished()
    assert reply.copy_button.isVisible()
    qtbot.mouseClick(reply.copy_button, Qt.MouseButton.LeftButton)
    copied = QGuiApplication.clipboard().text()
    assert copied == "The **answer**."
    assert "secret" not in copied and "think" not in copied


def test_code_blocks_are_monospace_with_their_own_copy(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("Run this:\n\n```python\nprint('hi')\n```\n\nDone.")
    chat.type_and_send("code please")
    reply = chat.wait_reply_finished()
    blocks = [w for w in reply.answer.part_widgets() if isinstance(w, CodeBlock)]
    assert len(blocks) == 1
    assert blocks[0].code == "print('hi')"
    body = blocks[0].findChild(QPlainTextEdit)
    assert body is not None and body.font().family() == monospace_font().family()  # the system fixed font
    copy = next(b for b in blocks[0].findChildren(CopyButton) if b.accessibleName() == "Copy code")
    qtbot.mouseClick(copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "print('hi')"


def test_model_html_is_shown_as_text_and_nothing_is_fetched(make_chat: MakeChat) -> None:
    answer = 'Look: <img src="http://example.com/x.png"> <b>bold</b> ![pic](http://example.com/y.png) [site](https://example.com)'
    chat = make_chat(answer)
    chat.type_and_send("q")
    reply = chat.wait_reply_finished()
    segment = next(w for w in reply.answer.part_widgets() if isinstance(w, TextSegment))
    text = segment.toPlainText()
    assert '<img src="http://example.com/x.png">' in text and "<b>bold</b>" in text
    html = segment.toHtml()
    assert "<img" not in html  # no image element: nothing to load
    assert "[image: pic]" in text
    assert segment.loadResource(2, "http://example.com/y.png") is None
    assert not segment.openLinks() and not segment.openExternalLinks()


def test_view_follows_new_text_unless_scrolled_up(make_chat: MakeChat, qtbot: QtBot) -> None:
    lines = [f"line {i}\n\n" for i in range(120)]
    chat = make_chat(slow(*lines, delay_ms=10))
    bar = chat.window.conversation.verticalScrollBar()
    chat.type_and_send("long please")
    qtbot.waitUntil(lambda: bar.maximum() > 200, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=WAIT_MS)
    bar.setValue(0)  # the reader scrolls up
    assert not chat.window.conversation.following
    before = bar.maximum()
    qtbot.waitUntil(lambda: bar.maximum() > before + 100, timeout=WAIT_MS)
    assert bar.value() == 0
    chat.wait_reply_finished()


def test_shortcuts_new_conversation_and_focus(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("first")
    chat.type_and_send("one")
    chat.wait_reply_finished()
    chat.window.activateWindow()
    qtbot.keyClick(chat.window.composer.edit, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not chat.window.conversation.messages(), timeout=WAIT_MS)
    assert branch_messages(chat.controller.session.path()) == []
    chat.window.header.setFocus()
    qtbot.keyClick(chat.window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() is chat.window.composer.edit


def test_controls_have_accessible_names(make_chat: MakeChat) -> None:
    window = make_chat().window
    assert window.composer.edit.accessibleName() == "Message"
    assert window.composer.button.accessibleName() == "Send message"
    assert window.header.model_button.accessibleName() == "Model"
    assert window.header.new_chat.accessibleName() == "New conversation"


class _Failing(QObject):
    trigger = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.trigger.connect(self.boom)

    @asyncSlot()
    async def boom(self) -> None:
        raise RuntimeError("bug in an async slot")


def test_an_exception_in_an_async_slot_fails_the_test(qtbot: QtBot, aloop: object) -> None:
    # pytest-qt turns exceptions reaching sys.excepthook into test failures; prove that an
    # exception raised inside a qasync slot gets there (captured here so this test passes).
    failing = _Failing()
    with qtbot.captureExceptions() as exceptions:
        failing.trigger.emit()
        qtbot.waitUntil(lambda: bool(exceptions), timeout=WAIT_MS)
    assert isinstance(exceptions[0][1], RuntimeError)
