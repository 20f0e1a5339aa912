"""Structured replies in the window: the reply-format control, JSON replies, retries, the schema editor."""

from __future__ import annotations

import json
from collections.abc import Callable

from gui_helpers import WAIT_MS, Chat
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop.qt.answer.markdown_view import CodeBlock
from desktop.qt.chat.format_picker import ReplyFormatButton, SchemaDialog
from desktop.qt.history.sidebar import HistorySidebar
from engine.backends.base import Capabilities
from engine.backends.scripted import ScriptedBackend
from engine.events import fenced_json
from engine.session.reply_format import ReplyFormat, parse_schema_text

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def format_button(chat: Chat) -> ReplyFormatButton:
    button = chat.window.composer.findChild(ReplyFormatButton)
    assert button is not None
    return button


def choose(button: ReplyFormatButton, label: str) -> None:
    menu = button.menu()
    assert menu is not None
    action = next(a for a in menu.actions() if a.text() == label)
    action.trigger()


def code_blocks(chat: Chat) -> list[CodeBlock]:
    return [w for w in chat.reply().answer.part_widgets() if isinstance(w, CodeBlock)]


def test_json_replies_render_as_formatted_json_after_a_quiet_retry(make_chat: MakeChat, qtbot: QtBot) -> None:
    backend = ScriptedBackend.from_texts("Sure! Here it is: a=1", [{"text": '{"a": 1, "b": [1, 2]}', "delay_ms": 400}])
    chat = make_chat(backend=backend)
    button = format_button(chat)
    choose(button, "Any JSON object")
    assert button.text() == "JSON  ▾" and chat.controller.screen.reply_format == ReplyFormat("json")
    chat.type_and_send("give me json")
    qtbot.waitUntil(
        lambda: chat.window.last_reply() is not None and chat.reply().status.text() == "Retrying (attempt 2)…",
        timeout=WAIT_MS,
    )
    reply = chat.wait_reply_finished()
    assert reply.status.text() == ""  # the indicator goes once the reply is in
    blocks = code_blocks(chat)
    assert len(blocks) == 1 and blocks[0].code == json.dumps({"a": 1, "b": [1, 2]}, indent=2)
    assert reply.answer_text() == fenced_json({"a": 1, "b": [1, 2]})
    # The retry told the model what was wrong, in the same thread.
    assert "could not be parsed" in backend.requests[1].messages[-1]["content"]
    store = chat.controller.history
    assert store is not None and store.conversation_id is not None
    path = store.store.path(store.conversation_id)
    assert [(m.role, m.content) for m in path] == [("user", "give me json"), ("assistant", reply.answer_text())]
    assert chat.controller.session.settings.reply_format == ReplyFormat("json")


def test_exhausted_retries_show_the_last_error_and_try_again_reruns(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("nope", "still nope", '{"answer": 5}', '{"answer": "yes"}')
    chat.controller.screen.set_format(ReplyFormat("schema", ANSWER_SCHEMA))
    chat.type_and_send("answer in json")
    qtbot.waitUntil(lambda: chat.window.conversation.banner is not None, timeout=WAIT_MS)
    chat.wait_idle()
    banner = chat.window.conversation.banner
    assert banner is not None and banner.button is not None
    text = banner.message.text()
    assert text.startswith("The model did not return valid JSON after 3 attempts. Last error:")
    assert "5 is not of type 'string' at $.answer" in text
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    assert [m.role for m in history.store.path(history.conversation_id)] == ["user"]
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().finished, timeout=WAIT_MS)
    assert chat.reply().answer_text() == fenced_json({"answer": "yes"})


def test_stopping_a_structured_reply_keeps_no_answer(make_chat: MakeChat, qtbot: QtBot) -> None:
    slow = [{"text": "{", "delay_ms": 20}] + [{"text": " ", "delay_ms": 20} for _ in range(200)]
    chat = make_chat(slow)
    chat.controller.screen.set_format(ReplyFormat("json"))
    chat.type_and_send("json please")
    qtbot.waitUntil(lambda: chat.controller.busy and chat.window.last_reply() is not None, timeout=WAIT_MS)
    chat.controller.stop()
    reply = chat.wait_reply_finished()
    assert reply.status.text() == "Stopped before any answer"
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    assert [m.role for m in history.store.path(history.conversation_id)] == ["user"]
    assert history.store.turns(history.conversation_id)[0].outcome == "stopped"


def test_an_invalid_schema_disables_save(qtbot: QtBot) -> None:
    dialog = SchemaDialog()
    qtbot.addWidget(dialog)
    assert dialog.save_button.isEnabled()  # the starting template is valid
    dialog.editor.setPlainText('{"type": "object",')
    assert not dialog.save_button.isEnabled()
    assert dialog.error.text().startswith("Not valid JSON")
    dialog.editor.setPlainText('{"type": 5}')
    assert not dialog.save_button.isEnabled()
    assert dialog.error.toolTip().startswith("Not a valid JSON Schema") and "\n" not in dialog.error.text()
    dialog.editor.setPlainText('["not", "an", "object"]')
    assert not dialog.save_button.isEnabled() and "must be a JSON object" in dialog.error.toolTip()
    dialog.editor.setPlainText(json.dumps(ANSWER_SCHEMA))
    assert dialog.save_button.isEnabled() and dialog.error.text() == ""
    assert dialog.schema() == ANSWER_SCHEMA


def test_a_saved_schema_is_the_conversations_format(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat('{"answer": "hi"}', "plain again")
    button = format_button(chat)
    choose(button, "JSON schema…")
    dialog = button.dialog
    assert dialog is not None and dialog.isVisible()
    dialog.editor.setPlainText(json.dumps(ANSWER_SCHEMA))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert button.text() == "Schema  ▾" and chat.controller.screen.reply_format.schema == ANSWER_SCHEMA
    chat.type_and_send("hello")
    assert chat.wait_reply_finished().answer_text() == fenced_json({"answer": "hi"})
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    first = history.conversation_id
    # A new conversation starts in plain text; opening the first one brings its schema back.
    qtbot.mouseClick(chat.window.header.new_chat, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.window.conversation.messages(), timeout=WAIT_MS)
    assert button.text() == "Text  ▾"
    sidebar = chat.window.sidebar
    assert isinstance(sidebar, HistorySidebar)
    sidebar.openRequested.emit(first, None)
    qtbot.waitUntil(lambda: button.text() == "Schema  ▾", timeout=WAIT_MS)
    assert chat.controller.screen.reply_format == ReplyFormat("schema", ANSWER_SCHEMA)


def test_cancelling_the_schema_editor_keeps_the_format(make_chat: MakeChat) -> None:
    chat = make_chat()
    button = format_button(chat)
    choose(button, "JSON schema…")
    assert button.dialog is not None
    button.dialog.reject()
    assert button.text() == "Text  ▾" and chat.controller.screen.reply_format == ReplyFormat()


def test_schema_text_checks() -> None:
    assert parse_schema_text("") == (None, "Type a JSON Schema.")
    assert parse_schema_text('{"type": "object"}') == ({"type": "object"}, "")
    schema, error = parse_schema_text("{")
    assert schema is None and error.startswith("Not valid JSON: ")
    assert ReplyFormat.from_settings({"reply_format": {"kind": "schema", "schema": {"type": 5}}}) == ReplyFormat()
    assert ReplyFormat.from_settings({"reply_format": ReplyFormat("json").to_settings()}) == ReplyFormat("json")


class _UnusableGrammar(ScriptedBackend):
    """Claims grammar support, but its decoder would not take the schema's grammar."""

    capabilities = Capabilities(grammar=True, device="Scripted")

    def check_grammar(self, gbnf: str) -> str | None:
        return "llama.cpp crashes on this grammar"


def test_an_unusable_grammar_is_said_under_the_reply(make_chat: MakeChat) -> None:
    backend = _UnusableGrammar([['{"a": 1}']])
    chat = make_chat(backend=backend)
    choose(format_button(chat), "Any JSON object")
    chat.type_and_send("give me json")
    reply = chat.wait_reply_finished()
    assert reply.answer_text() == fenced_json({"a": 1})
    assert "not constrained to the schema" in reply.status.text()
    assert "llama.cpp crashes on this grammar" in reply.status.toolTip()
    assert backend.requests[0].grammar is None
