"""The window, third pass (offscreen): a waiting first message, a composer that keeps its room,
a sidebar over the chat when narrow, plain words, keyboard focus and the smaller states."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from gui_helpers import WAIT_MS, Chat
from PySide6.QtWidgets import QLabel, QWidget
from pytestqt.qtbot import QtBot

from desktop.qt.chat.composer import MIN_EDIT_SHARE, ComposerBar
from desktop.qt.chat.message_view import AssistantMessage
from engine.backends.scripted import ScriptedBackend

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]


def test_the_reply_waits_for_the_model_in_words_with_dots(qtbot: QtBot) -> None:
    reply = AssistantMessage("Assistant")
    qtbot.addWidget(reply)
    reply.start_waiting()
    reply.waiting_for_model("SmolLM2", 60)
    assert reply.waiting.text().startswith("Waiting for the model to load… 60 %") and "●" in reply.waiting.text()
    reply.model_arrived()
    assert "Waiting" not in reply.waiting.text()


def test_the_composer_moves_its_controls_below_when_the_row_is_short(qtbot: QtBot) -> None:
    bar = ComposerBar()
    qtbot.addWidget(bar)
    for name in ("meter", "clip"):
        tool = QLabel(f"a wide {name} control", bar)
        tool.setMinimumWidth(90)
        bar.add_tool(tool)
    bar.show()
    for width, stacked in ((1500, False), (420, True), (300, True), (1500, False)):
        bar.resize(width, 80)

        def laid_out(width: int = width, stacked: bool = stacked) -> None:  # retried until the bar has relaid
            assert bar.stacked is stacked, width

        qtbot.waitUntil(laid_out, timeout=WAIT_MS)
        row = bar.contentsRect().width()
        qtbot.waitUntil(lambda row=row: bar.edit.width() >= MIN_EDIT_SHARE * row, timeout=WAIT_MS)


def test_a_control_that_grows_moves_the_controls_below_without_a_resize(qtbot: QtBot) -> None:
    bar = ComposerBar()
    qtbot.addWidget(bar)
    tool = QLabel("1 file", bar)
    bar.add_tool(tool)
    bar.show()
    bar.resize(700, 80)
    qtbot.waitUntil(lambda: not bar.stacked, timeout=WAIT_MS)
    tool.setText("a much longer label that takes half of the row by itself")  # no resize
    qtbot.waitUntil(lambda: bar.stacked, timeout=WAIT_MS)
    tool.setText("1 file")
    qtbot.waitUntil(lambda: not bar.stacked, timeout=WAIT_MS)  # the same rule both ways


def test_the_count_keeps_its_width_while_a_reply_streams(make_chat: MakeChat, qtbot: QtBot) -> None:
    backend = ScriptedBackend.from_texts("ok")
    backend.n_ctx = 4096
    chat = make_chat(backend=backend)
    meter = chat.window.context_meter
    qtbot.waitUntil(lambda: meter.meter is not None, timeout=WAIT_MS)
    width = meter.minimumWidth()
    for tokens in (1, 9, 99, 999, 4000):  # "12 / 4,096" … "4,012 / 4,096": the layout must not jump
        meter.streaming(tokens)
        assert max(meter.sizeHint().width(), meter.minimumWidth()) == width


def test_under_880_px_the_sidebar_floats_over_the_chat(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("x")
    window = chat.window
    window.resize(800, 600)
    qtbot.waitUntil(lambda: not window.sidebar.isVisible(), timeout=WAIT_MS)  # folded by itself
    window.set_sidebar_visible(True)
    qtbot.waitUntil(lambda: window.sidebar.isVisible(), timeout=WAIT_MS)
    assert window.sidebar_overlay.floating and window.sidebar.parentWidget() is window
    qtbot.waitUntil(lambda: window.composer.width() > 0.8 * window.width() - 60, timeout=WAIT_MS)  # full width
    window.resize(1100, 700)
    qtbot.waitUntil(lambda: not window.sidebar_overlay.floating, timeout=WAIT_MS)
    assert window.splitter.widget(0) is window.sidebar and window.sidebar.isVisible()
    assert isinstance(window.sidebar, QWidget)


def test_every_sampling_field_has_help_and_a_reset_and_the_draft_model_a_browse(qtbot: QtBot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import gguf_factory as gf
    from PySide6.QtWidgets import QToolButton

    from desktop.qt.models.settings_dialog import ModelSettingsDialog
    from models.library.settings import ModelSettings

    model = gf.write_tiny_llama(tmp_path / "tiny.gguf")
    dialog = ModelSettingsDialog(
        None,
        model_file=model,
        label="tiny",
        settings=ModelSettings(temperature=1.5),
        n_ctx_train=2048,
        n_layers=2,
        gpu_supported=False,
    )
    qtbot.addWidget(dialog)
    for field in (
        dialog.temperature,
        dialog.top_p,
        dialog.top_k,
        dialog.min_p,
        dialog.repeat_penalty,
        dialog.seed,
        dialog.max_tokens,
        dialog.system_prompt,
    ):
        assert len(field.toolTip()) > 40, field.accessibleName()  # a sentence, not a label
    resets = {b.accessibleName(): b for b in dialog.findChildren(QToolButton) if b.objectName() == "ResetField"}
    assert set(resets) >= {"Reset Temperature", "Reset Repeat penalty", "Reset Seed", "Reset Top P"}
    dialog.repeat_penalty.setValue(2.0)
    resets["Reset Temperature"].click()
    assert dialog.temperature.value() == ModelSettings().temperature  # the model's default again
    assert dialog.repeat_penalty.value() == 2.0  # the others stay
    assert dialog.draft_browse.text() == "Browse…"


def test_file_dialogs_start_in_the_last_folder_used(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from desktop.qt.look.last_folder import last_folder, remember

    assert last_folder("models") == str(Path.home())
    (tmp_path / "m").mkdir()
    remember("models", tmp_path / "m" / "a.gguf")
    assert last_folder("models") == str(tmp_path / "m")
    assert last_folder("exports") == str(Path.home())
    (tmp_path / "m").rmdir()
    assert last_folder("models") == str(Path.home())  # gone: home again


def test_status_bar_words(qtbot: QtBot) -> None:
    from desktop.qt.frame.network_dialog import indicator_words
    from desktop.qt.frame.status_line import speed_text, speed_tip
    from engine.events import TurnStats

    stats = TurnStats(tokens=100, tokens_per_s=39.4, drafted=10, accepted=8)
    assert speed_text(stats) == "39 tok/s" and "kept 8 (80 %)" in speed_tip(stats)
    assert indicator_words(True, 0, 0, 0) == "No outgoing connections"
    assert indicator_words(True, 1, 2, 1) == "2 outgoing connections · 1 blocked"


def _region_of(chat: Chat, widget: QWidget) -> str:
    window = chat.window
    for name, part in (
        ("header", window.header),
        ("sidebar", window.sidebar),
        ("transcript", window.conversation),
        ("composer", window.composer),
    ):
        if widget is part or part.isAncestorOf(widget):
            return name
    return "other"


def test_tab_goes_header_list_transcript_composer_and_the_meter_is_no_stop(make_chat: MakeChat, qtbot: QtBot) -> None:
    from desktop.qt.frame.keyboard import tab_chain

    chat = make_chat("An answer.")
    chat.window.resize(1100, 780)
    chat.window.set_sidebar_visible(True)
    chat.type_and_send("a question")
    chat.wait_reply_finished()

    def in_order() -> None:  # retried until the window has settled after the reply
        order = [_region_of(chat, w) for w in tab_chain(chat.window)]
        collapsed = [r for i, r in enumerate(order) if i == 0 or order[i - 1] != r]
        assert collapsed == ["header", "sidebar", "transcript", "composer"], order

    qtbot.waitUntil(in_order, timeout=WAIT_MS)
    assert chat.window.context_meter not in tab_chain(chat.window)
    assert chat.window.composer.edit in tab_chain(chat.window)


def test_the_reply_shortcuts(make_chat: MakeChat, qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QApplication

    from desktop.qt.frame.keyboard import copy_last_reply, focus_search, regenerate_last

    chat = make_chat("First answer.", "Second answer.")
    chat.type_and_send("a question")
    chat.wait_reply_finished()
    qtbot.waitUntil(lambda: chat.reply().message_id is not None, timeout=WAIT_MS)
    assert copy_last_reply(chat.window) and QApplication.clipboard().text() == "First answer."
    assert regenerate_last(chat.window)
    qtbot.waitUntil(lambda: chat.reply().answer_text() == "Second answer.", timeout=WAIT_MS)
    chat.wait_idle()
    assert focus_search(chat.window) and chat.window.sidebar.isVisible()


def test_the_answer_shows_no_caret(make_chat: MakeChat) -> None:
    from desktop.qt.answer.markdown_view import TextSegment

    chat = make_chat("An answer.")
    chat.type_and_send("q")
    reply = chat.wait_reply_finished()
    segments = reply.findChildren(TextSegment)
    assert segments and all(s.cursorWidth() == 0 for s in segments)


def test_the_header_follows_a_rename_at_once(make_chat: MakeChat, qtbot: QtBot) -> None:
    from desktop.qt.history.sidebar import HistorySidebar

    chat = make_chat("An answer.")
    chat.type_and_send("Why is the sky blue")
    chat.wait_reply_finished()
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    sidebar = chat.window.sidebar
    assert isinstance(sidebar, HistorySidebar)
    sidebar.rename(history.conversation_id, "Sky colour (physics)")
    qtbot.waitUntil(lambda: chat.window.header.title.full_text() == "Sky colour (physics)", timeout=WAIT_MS)


@pytest.mark.slow
def test_stopped_before_any_answer_offers_regenerate(make_chat: MakeChat, qtbot: QtBot) -> None:
    slow = [{"text": "", "delay_ms": 3000}, "late"]
    chat = make_chat(slow, "Here it is.")
    chat.type_and_send("a question")
    qtbot.waitUntil(lambda: chat.controller.busy and chat.window.last_reply() is not None, timeout=WAIT_MS)
    chat.controller.stop()
    reply = chat.wait_reply_finished()
    assert reply.status.text() == "Stopped before any answer"
    qtbot.waitUntil(lambda: not reply.regenerate_button.isHidden(), timeout=WAIT_MS)
    reply.regenerate_button.click()
    qtbot.waitUntil(lambda: chat.reply().answer_text() == "Here it is.", timeout=WAIT_MS)


def test_a_jump_to_latest_button_floats_when_scrolled_up_during_a_reply(make_chat: MakeChat, qtbot: QtBot) -> None:
    slow = [{"text": f"line {i}\n\n", "delay_ms": 30} for i in range(150)]
    chat = make_chat(slow)
    chat.window.resize(900, 600)
    chat.type_and_send("many lines")
    bar = chat.window.conversation.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 400, timeout=WAIT_MS)
    bar.setValue(0)  # the reader scrolls up while it streams
    jump = chat.window.jump_latest
    qtbot.waitUntil(jump.isVisible, timeout=WAIT_MS)
    assert jump.text() == "↓ latest"
    jump.click()
    qtbot.waitUntil(lambda: bar.value() >= bar.maximum() - 40, timeout=WAIT_MS)
    assert chat.window.conversation.following
    chat.controller.stop()
    chat.wait_idle()


def test_the_token_count_moves_while_a_reply_streams(make_chat: MakeChat, qtbot: QtBot) -> None:
    slow = [{"text": f"w{i} ", "delay_ms": 25} for i in range(120)]
    backend = ScriptedBackend.from_texts("first.", slow)
    backend.n_ctx = 4096  # a context to count against
    chat = make_chat(backend=backend)
    chat.type_and_send("one")
    chat.wait_reply_finished()
    meter = chat.window.context_meter
    qtbot.waitUntil(lambda: meter.meter is not None, timeout=WAIT_MS)
    chat.type_and_send("two")
    seen: set[str] = set()
    qtbot.waitUntil(lambda: seen.add(meter.text()) or len(seen) >= 3, timeout=WAIT_MS)  # type: ignore[func-returns-value]
    assert not any(" / " in label.text() for label in chat.window.status.findChildren(QLabel))  # one count
    chat.controller.stop()
    chat.wait_idle()


def test_menu_groups_are_named_and_no_menu_opens_on_an_empty_row(make_chat: MakeChat) -> None:
    from PySide6.QtWidgets import QWidgetAction

    chat = make_chat("x")
    menus = [chat.window.composer.options_menu, chat.window.context_meter.menu()]
    headings: list[str] = []
    for menu in menus:
        assert menu is not None
        actions = menu.actions()
        assert actions and not actions[0].isSeparator()  # Fusion drew addSection as a bare line
        for action in actions:
            if isinstance(action, QWidgetAction) and isinstance(action.defaultWidget(), QLabel):
                assert not action.isEnabled()  # a heading is not a choice: the arrow keys pass over it
                headings.append(action.defaultWidget().text())  # type: ignore[union-attr]
    assert {"This conversation", "Tools", "When the conversation is full"} <= set(headings)


def test_dialog_buttons_carry_no_stock_icons(make_chat: MakeChat) -> None:
    from PySide6.QtWidgets import QApplication, QDialogButtonBox

    chat = make_chat("x")
    assert "dialogbuttonbox-buttons-have-icons" in QApplication.instance().styleSheet()  # type: ignore[union-attr]
    box = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Close, chat.window)
    assert [b.icon().isNull() for b in box.buttons()] == [True, True]  # no floppy disk, no red X
